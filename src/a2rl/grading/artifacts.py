"""Taking a submitted folder out of the agent's reach: resolve its path inside the workspace,
copy it (following only links that stay inside the workspace) and content-hash the copy; then
score the stored copy (``score_artifact``, for the grader and for the final grade alike);
``artifact_bytes`` sizes a stored one.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Optional

from a2rl.common.clock import BudgetClock
from a2rl.models.hf_folder import content_hash
from a2rl.models.submission import InvalidSubmission, materialize_submission
from a2rl.task.base import GradingUnavailable

MAX_LINK_HOPS = 40
# evaluate(model_dir) -> EvalResult-like object with .score .stderr .n (a2rl.task.base)
Evaluator = Callable[[Path], Any]


class SubmissionRejected(InvalidSubmission):
    """Refused before any model loading; ``status`` is the HTTP code to answer with."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


class WorkspaceResolver:
    """Maps paths the agent names (relative to the workspace, absolute in the sandbox's view
    ``alias``, or absolute on the host) to host paths, following symlinks by hand so that a link
    written inside the sandbox resolves the same way here."""

    def __init__(self, workspace: Path, alias: str = "/workspace"):
        self.workspace = Path(workspace).resolve()
        self.alias = PurePosixPath(alias)

    def to_host(self, name: str) -> Path:
        p = PurePosixPath(name)
        if not p.is_absolute():
            return self.workspace / p
        if p == self.alias or self.alias in p.parents:
            return self.workspace / p.relative_to(self.alias)
        return Path(p)

    def resolve(self, name: str) -> Path:
        """The real host path ``name`` points to, with every link resolved."""
        path = Path(os.path.normpath(self.to_host(name)))
        for _ in range(MAX_LINK_HOPS):
            link = self._first_link(path)
            if link is None:
                return path
            target = os.readlink(link)
            base = self.to_host(target) if PurePosixPath(target).is_absolute() \
                else link.parent / target
            path = Path(os.path.normpath(base / path.relative_to(link)))
        raise SubmissionRejected(f"too many symbolic links while resolving {name!r}")

    def _first_link(self, path: Path) -> Path | None:
        parts = path.parts
        for i in range(1, len(parts) + 1):
            candidate = Path(*parts[:i])
            if candidate.is_symlink():
                return candidate
        return None

    def inside(self, path: Path, *areas: str) -> bool:
        return any(path == self.workspace / a or (self.workspace / a) in path.parents
                   for a in areas)


def resolve_submission(resolver: WorkspaceResolver, model_path: object,
                       areas: tuple[str, ...] = ("output", "code")) -> Path:
    if not isinstance(model_path, str) or not model_path.strip():
        raise SubmissionRejected("model_path must be a non-empty string, e.g. \"output/ckpt-1\"")
    if "\x00" in model_path:
        raise SubmissionRejected("model_path contains a NUL byte")
    path = resolver.resolve(model_path.strip())
    if not resolver.inside(path, *areas):
        raise SubmissionRejected(
            f"model_path {model_path!r} resolves to {path}, outside the workspace's "
            f"{' or '.join(a + '/' for a in areas)}", status=403)
    if not path.exists():
        raise SubmissionRejected(f"model_path {model_path!r} does not exist", status=404)
    if not path.is_dir():
        raise SubmissionRejected(f"model_path {model_path!r} is not a folder (a model is a "
                                 "folder with config.json or adapter_config.json)")
    return path


def stored_artifact(store: Path, digest: str) -> Path:
    """Where the store keeps the artifact with content hash ``digest``."""
    return Path(store) / digest / "artifact"


def score_artifact(artifact: Path, base_model: Path, evaluate: Evaluator,
                   clock: Optional[BudgetClock] = None) -> tuple[Any, float]:
    """Materialize a stored artifact into a model folder beside it (an adapter merged into the
    base, a missing tokenizer taken from it) and evaluate that; returns the result and the
    seconds the evaluation alone took, booked on ``clock`` (the agent's budget) when given.
    A submission that cannot be used or evaluated raises InvalidSubmission (its time is the
    agent's); GradingUnavailable (a judge outage: not the submission's fault) passes through
    with its time given back; a missing base model (the harness's fault) raises
    FileNotFoundError."""
    model_dir = materialize_submission(artifact, base_model, Path(artifact).parent / "model")
    clock = clock or BudgetClock(0)
    clock.begin_eval()
    try:
        result = evaluate(model_dir)
    except GradingUnavailable:
        clock.end_eval("excused")
        raise
    except Exception as err:
        clock.end_eval("charged")
        raise InvalidSubmission(f"the model could not be evaluated: "
                                f"{type(err).__name__}: {err}") from err
    return result, clock.end_eval("eval")


def copy_artifact(resolver: WorkspaceResolver, src: Path, store: Path,
                  max_bytes: int) -> tuple[str, Path]:
    """Copy ``src`` into the store (``stored_artifact``) and return (hash, path). Identical
    content lands in the same place; the agent's later edits to ``src`` change nothing here."""
    incoming = store / f"incoming-{uuid.uuid4().hex}"
    try:
        total = _copy_tree(resolver, src, incoming, max_bytes)
        if total == 0 and not any(incoming.rglob("*")):
            raise SubmissionRejected(f"{src.name}/ is an empty folder")
        digest = content_hash(incoming)
        final = stored_artifact(store, digest)
        if final.exists():
            shutil.rmtree(incoming)
        else:
            final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(incoming, final)
        return digest, final
    except BaseException:
        shutil.rmtree(incoming, ignore_errors=True)
        raise


def _copy_tree(resolver: WorkspaceResolver, src: Path, dest: Path, max_bytes: int) -> int:
    dest.mkdir(parents=True)
    total = 0
    for entry in sorted(src.iterdir()):
        real = resolver.resolve(str(entry)) if entry.is_symlink() else entry
        if entry.is_symlink() and not resolver.inside(real, "output", "code", "base_model",
                                                      "data"):
            raise SubmissionRejected(
                f"{entry.relative_to(src.parent)} is a link to {real}, outside the workspace",
                status=403)
        if real.is_dir():
            total += _copy_tree(resolver, real, dest / entry.name, max_bytes - total)
        elif real.is_file():
            total += real.stat().st_size
            if total > max_bytes:
                raise SubmissionRejected(
                    f"artifact is larger than the limit of {max_bytes / 2**30:.1f} GiB", 413)
            shutil.copyfile(real, dest / entry.name)
        else:
            raise SubmissionRejected(
                f"{entry.relative_to(src.parent)} is neither a file nor a folder (broken link?)")
    return total


def artifact_bytes(folder: Path) -> Optional[int]:
    """The bytes of the regular files in ``folder`` (None when it is not a folder)."""
    folder = Path(folder)
    if not folder.is_dir():
        return None
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
