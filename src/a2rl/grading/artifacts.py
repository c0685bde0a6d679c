"""Taking a submitted folder out of the agent's reach: resolve the path the agent named inside
the workspace (its links followed by hand, as the sandbox would, never out of the workspace),
copy the folder through ``a2rl.common.beneath`` (no link followed while reading, regular files
only, capped in bytes, entries and seconds) and content-hash the copy; then score the stored
copy (``score_artifact``, for the grader and for the final grade alike); ``artifact_bytes``
sizes a stored one. Messages name the agent's own paths, never the host's.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import stat
import uuid
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Optional

from a2rl.common.beneath import (
    DIR_FLAGS,
    Limits,
    Refused,
    TreeReader,
    open_beneath,
    read_link,
    refusal,
    shown,
)
from a2rl.common.clock import BudgetClock
from a2rl.grading.answers import answer, log_detail
from a2rl.grading.limits import EvaluationTimedOut, call_with_deadline
from a2rl.grading.loading import load_limits, materialize_limited
from a2rl.models.hf_folder import content_hash
from a2rl.models.submission import InvalidSubmission
from a2rl.task.base import GradingUnavailable

MAX_LINK_HOPS = 40
LOAD_TIMEOUT_S = 900.0  # materialising one submission (a 7B adapter merge takes minutes)
# areas a link inside a submitted folder may point into (tokenizer files in base_model/...)
LINKABLE = ("output", "code", "base_model", "data")
# evaluate(model_dir) -> EvalResult-like object with .score .stderr .n (a2rl.task.base)
Evaluator = Callable[[Path], Any]


class SubmissionRejected(InvalidSubmission):
    """Refused before any model loading; ``status`` is the HTTP code to answer with."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def _rejected(refused: Refused) -> SubmissionRejected:
    return SubmissionRejected(str(refused), refused.status)


class WorkspaceResolver:
    """Maps paths the agent names (relative to the workspace, absolute in the sandbox's view
    ``alias``, or absolute on the host) to paths relative to the workspace, following symlinks
    by hand (readlink below a descriptor of the workspace, never a host path) so that a link
    written inside the sandbox resolves the same way here."""

    def __init__(self, workspace: Path, alias: str = "/workspace"):
        self.workspace = Path(workspace).resolve()
        self.alias = PurePosixPath(alias)

    def root(self) -> int:
        """A descriptor of the workspace folder (the caller closes it)."""
        return os.open(self.workspace, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)

    def relative(self, name: str) -> Optional[PurePosixPath]:
        """``name`` relative to the workspace, normalised; None when it is outside."""
        p = PurePosixPath(name)
        if p.is_absolute():
            host = PurePosixPath(self.workspace)
            if p == self.alias or self.alias in p.parents:
                p = p.relative_to(self.alias)
            elif p == host or host in p.parents:
                p = p.relative_to(host)
            else:
                return None
        norm = posixpath.normpath(str(p))
        if norm == ".." or norm.startswith("../"):
            return None
        return PurePosixPath(norm)

    def resolve(self, name: str) -> PurePosixPath:
        """The workspace-relative path ``name`` points to, with every link resolved; a link
        leading out of the workspace is refused (403)."""
        rel = self.relative(name)
        root = self.root()
        try:
            for _ in range(MAX_LINK_HOPS):
                if rel is None:
                    raise SubmissionRejected(f"{name!r:.300} leads outside the workspace", 403)
                found = self._first_link(root, rel)
                if found is None:
                    return rel
                link, target, rest = found
                joined = target if PurePosixPath(target).is_absolute() \
                    else posixpath.join(str(link.parent), target)
                rel = self.relative(posixpath.join(joined, *rest.parts))
        finally:
            os.close(root)
        raise SubmissionRejected(f"too many symbolic links while resolving {name!r:.300}")

    def _first_link(self, root: int, rel: PurePosixPath
                    ) -> Optional[tuple[PurePosixPath, str, PurePosixPath]]:
        """(the first link on ``rel``, its target, the rest of ``rel`` after it), or None."""
        parts = [] if str(rel) == "." else list(rel.parts)
        current = os.dup(root)
        try:
            for i, part in enumerate(parts):
                try:
                    info = os.stat(part, dir_fd=current, follow_symlinks=False)
                except (FileNotFoundError, NotADirectoryError):
                    return None  # opening it says what is missing
                except OSError as err:
                    raise _rejected(refusal(err, "/".join(parts[:i + 1]))) from None
                if stat.S_ISLNK(info.st_mode):
                    try:
                        target = read_link(current, part, "/".join(parts[:i + 1]))
                    except Refused as err:
                        raise _rejected(err) from None
                    return (PurePosixPath(*parts[:i + 1]), target, PurePosixPath(*parts[i + 1:]))
                if not stat.S_ISDIR(info.st_mode) or i == len(parts) - 1:
                    return None
                try:
                    nxt = open_beneath(current, part, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
                except OSError as err:
                    raise _rejected(refusal(err, "/".join(parts[:i + 1]))) from None
                os.close(current)
                current = nxt
            return None
        finally:
            os.close(current)

    def inside(self, rel: PurePosixPath, *areas: str) -> bool:
        return bool(rel.parts) and rel.parts[0] in areas


def resolve_submission(resolver: WorkspaceResolver, model_path: object,
                       areas: tuple[str, ...] = ("output", "code")) -> PurePosixPath:
    """The submitted folder, relative to the workspace, links resolved."""
    if not isinstance(model_path, str) or not model_path.strip():
        raise SubmissionRejected("model_path must be a non-empty string, e.g. \"output/ckpt-1\"")
    if "\x00" in model_path:
        raise SubmissionRejected("model_path contains a NUL byte")
    try:
        os.fsencode(model_path)
    except UnicodeEncodeError:
        raise SubmissionRejected("model_path is not a path: it holds a lone surrogate") from None
    rel = resolver.resolve(model_path.strip())
    if not resolver.inside(rel, *areas):
        raise SubmissionRejected(
            f"model_path {model_path!r:.300} is outside the workspace's "
            f"{' or '.join(a + '/' for a in areas)}", status=403)
    return rel


def stored_artifact(store: Path, digest: str) -> Path:
    """Where the store keeps the artifact with content hash ``digest``."""
    return Path(store) / digest / "artifact"


def score_artifact(artifact: Path, base_model: Path, evaluate: Evaluator,
                   clock: Optional[BudgetClock] = None,
                   timeout_s: Optional[float] = None,
                   load_timeout_s: float = LOAD_TIMEOUT_S) -> tuple[Any, float]:
    """Materialize a stored artifact into a model folder beside it (an adapter merged into the
    base, a missing tokenizer taken from it; in a child process under a deadline,
    ``load_timeout_s``, and a memory cap: a2rl.grading.loading) and evaluate that; returns the
    result and the
    seconds the evaluation alone took, booked on ``clock`` (the agent's budget) when given.
    A submission that cannot be used or evaluated raises InvalidSubmission (its time is the
    agent's); GradingUnavailable (a judge outage: not the submission's fault; its time given
    back) and EvaluationTimedOut (past ``timeout_s``; the evaluation is abandoned and its time
    charged) pass through; a missing base model (the harness's fault) raises
    FileNotFoundError."""
    model_dir = materialize_limited(artifact, base_model, Path(artifact).parent / "model",
                                    load_limits(base_model, load_timeout_s))
    clock = clock or BudgetClock(0)
    clock.begin_eval()
    try:  # the template's probe too runs under the deadline: a template can loop forever
        result = call_with_deadline(lambda: check_chat_template(model_dir) or evaluate(model_dir),
                                    timeout_s)
    except GradingUnavailable:  # the judge's fault, not the submission's: time given back
        clock.end_eval("excused")
        raise
    except EvaluationTimedOut:  # a submission can hang its evaluation: its time is the agent's
        clock.end_eval("charged")
        raise
    except InvalidSubmission:  # the probe's answer, from the closed vocabulary
        clock.end_eval("charged")
        raise
    except Exception as err:
        clock.end_eval("charged")
        # the sealed split was in play: its items may be in the error (a2rl.grading.answers)
        log_detail("eval_failed", err, str(artifact))
        raise InvalidSubmission(answer("eval_failed")) from None
    return result, clock.end_eval("eval")


# what the template is first rendered with: harness text only, before any task data is near
PROBE_CONVERSATION = [{"role": "system", "content": "You are a helpful assistant."},
                      {"role": "user", "content": "What is 2 + 3?"}]


def check_chat_template(model_dir: Path) -> None:
    """Render the submission's chat template on PROBE_CONVERSATION, so that a template that
    fails at all fails here, with an answer from the closed vocabulary, before the sealed split
    is touched. A folder without a template is left to the task (plain prompts)."""
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        if getattr(tokenizer, "chat_template", None):
            tokenizer.apply_chat_template(PROBE_CONVERSATION, tokenize=False,
                                          add_generation_prompt=True)
    except Exception as err:
        log_detail("chat_template_failed", err, str(model_dir))
        raise InvalidSubmission(answer("chat_template_failed")) from None


def copy_artifact(resolver: WorkspaceResolver, src: PurePosixPath | Path, store: Path,
                  limits: Limits | int) -> tuple[str, Path]:
    """Copy the folder ``src`` (relative to the workspace, or a host path inside it) into the
    store (``stored_artifact``) and return (hash, path). Identical content lands in the same
    place; the agent's later edits to ``src`` change nothing here. ``limits`` (or a byte cap)
    bounds the copy; going over it, a link leading out or a special file is refused."""
    limits = limits if isinstance(limits, Limits) else Limits(max_bytes=limits)
    rel = resolver.relative(str(src)) if isinstance(src, Path) else src
    if rel is None:
        raise SubmissionRejected("the folder is outside the workspace", 403)
    incoming = store / f"incoming-{uuid.uuid4().hex}"
    root = resolver.root()
    try:
        _copy_folder(resolver, root, rel, incoming, limits)
        if not any(incoming.rglob("*")):
            raise SubmissionRejected(f"{shown(str(rel))}/ is an empty folder")
        digest = content_hash(incoming)
        final = stored_artifact(store, digest)
        if final.exists():
            shutil.rmtree(incoming)
        else:
            final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(incoming, final)
        return digest, final
    except Refused as err:
        raise _rejected(err) from None
    finally:
        os.close(root)
        shutil.rmtree(incoming, ignore_errors=True)


def _copy_folder(resolver: WorkspaceResolver, root: int, rel: PurePosixPath, dest: Path,
                 limits: Limits) -> None:
    try:
        fd = open_beneath(root, str(rel), DIR_FLAGS)
    except OSError as err:
        raise refusal(err, str(rel)) from None
    try:
        _TreeCopy(resolver, root, TreeReader(limits)).folder(fd, rel, dest, 0)
    finally:
        os.close(fd)


class _TreeCopy:
    """Copies an open folder entry by entry through one TreeReader; a link is resolved by
    hand and followed only into LINKABLE areas, and what it points to is opened like the rest
    (no link on the way)."""

    def __init__(self, resolver: WorkspaceResolver, root: int, reader: TreeReader):
        self.resolver, self.root, self.reader = resolver, root, reader

    def folder(self, fd: int, rel: PurePosixPath, dest: Path, depth: int) -> None:
        dest.mkdir(parents=True)
        for name, info in self.reader.listing(fd, str(rel), depth):
            entry = rel / name
            if stat.S_ISLNK(info.st_mode):
                self.link(fd, name, entry, dest / name, depth)
                continue
            child, opened = self.reader.open_entry(fd, name, str(entry), info.st_mode)
            self.use(child, opened, entry, dest / name, depth)

    def link(self, fd: int, name: str, entry: PurePosixPath, dest: Path, depth: int) -> None:
        target = read_link(fd, name, str(entry))
        joined = target if PurePosixPath(target).is_absolute() \
            else posixpath.join(str(entry.parent), target)
        try:
            real = self.resolver.resolve(joined)
        except SubmissionRejected:
            real = None  # its message would quote the link's target
        if real is None or not self.resolver.inside(real, *LINKABLE):
            raise SubmissionRejected(f"{shown(str(entry))} is a link that leads outside the "
                                     f"workspace's {', '.join(a + '/' for a in LINKABLE)}", 403)
        parent, leaf = real.parent, real.name
        try:
            parent_fd = open_beneath(self.root, str(parent), DIR_FLAGS) if str(parent) != "." \
                else os.dup(self.root)
            info = os.stat(leaf, dir_fd=parent_fd, follow_symlinks=False)
        except OSError as err:
            raise refusal(err, str(entry)) from None
        try:
            child, opened = self.reader.open_entry(parent_fd, leaf, str(entry), info.st_mode)
        finally:
            os.close(parent_fd)
        self.use(child, opened, entry, dest, depth)

    def use(self, fd: int, info: os.stat_result, entry: PurePosixPath, dest: Path,
            depth: int) -> None:
        try:
            if stat.S_ISDIR(info.st_mode):
                self.folder(fd, entry, dest, depth + 1)
            else:
                with open(dest, "xb") as out:
                    self.reader.copy(fd, info, str(entry), out)
        finally:
            os.close(fd)


def remove_stored(store: Path, digest: str) -> None:
    """Forget a stored artifact (a rejected one: nothing will read it again)."""
    shutil.rmtree(Path(store) / digest, ignore_errors=True)


def store_bytes(store: Path) -> int:
    """Bytes of the regular files in the store (the grader's own folder)."""
    total = 0
    for dirpath, _, filenames in os.walk(store):
        for name in filenames:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                continue
    return total


def artifact_bytes(folder: Path) -> Optional[int]:
    """The bytes of the regular files in ``folder`` (None when it is not a folder)."""
    folder = Path(folder)
    if not folder.is_dir():
        return None
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
