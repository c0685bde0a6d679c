"""The agent's code as it was at each submission: recorded into ``code.git`` and read back.

Code revisions (``code.git`` in the run directory, outside the workspace and never mounted into
the sandbox). ``CodeRecorder.snapshot`` commits the agent's code as it is at that moment: every
file of the workspace except the harness-provided ``data/``, ``base_model/``, ``description.md``
and ``scores.json``, skipping caches, weight files and anything over ``MAX_FILE_BYTES``; from
``output/`` only source files are taken (checkpoints are the artifacts, hashed by the grader).
The grader snapshots at every accepted submission, before evaluating it, and tags the commit
``submission-<id>`` (the ledger entry names it as ``code_commit``); the runner snapshots once more
after the agent exits and tags that ``final``. What changed between two submissions is then

    git --git-dir results/runs/<task>/<agent>/<driver>/seed<k>/code.git \
        diff submission-1 submission-2

The workspace is the agent's: it is only read, through ``a2rl.common.beneath`` (below
descriptors, no link followed: a link is recorded as a link; only regular files read, FIFOs and
devices noted and left out; a snapshot capped in bytes, entries and seconds by
``SNAPSHOT_LIMITS``). Commits are built with git's plumbing (hash-object on staged copies that
the recorder wrote, update-index on a private index, write-tree, commit-tree), so git never
opens a path of the workspace, names that are not UTF-8 pass as bytes, and the author is
fixed.
``tags``, ``commits``, ``read_files`` and ``diff`` read the repository back.

Model lineage, the transcript and the export of the selected model are
``a2rl.analysis.lineage``'s.
"""

from __future__ import annotations

import os
import stat
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Optional

from a2rl.common.beneath import Limits, Refused, TreeReader, kind_of, read_link, shown
from a2rl.common.events import EventLog

MAX_FILE_BYTES = 1_000_000
# one snapshot reads at most this much of the workspace (then it records what it read, noted)
SNAPSHOT_LIMITS = Limits(max_bytes=64 * 2**20, max_file_bytes=MAX_FILE_BYTES, max_entries=50_000,
                         max_depth=32, seconds=120.0)
MAX_SKIPPED = 200  # entries of a snapshot's list of left-out files
LINK_MODE = "120000"
# top-level workspace entries the harness provides (not the agent's work)
HARNESS_ENTRIES = frozenset({"data", "base_model", "description.md", "scores.json"})
# folders never worth recording, wherever they are
SKIP_DIRS = frozenset({".git", "__pycache__", ".ipynb_checkpoints", "node_modules", ".cache",
                       "wandb", "mlruns", ".venv", "venv"})
# weights, tensors and datasets: artifacts or data, not code
DATA_SUFFIXES = frozenset({".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".onnx",
                           ".h5", ".npy", ".npz", ".pkl", ".pickle", ".arrow", ".parquet",
                           ".msgpack", ".model", ".zip", ".tar", ".gz"})
# from output/ (where checkpoints go) only files of these kinds are code
CODE_SUFFIXES = frozenset({".py", ".sh", ".bash", ".ipynb", ".yaml", ".yml", ".toml", ".cfg",
                           ".ini", ".r", ".jl", ".js", ".ts"})
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
BRANCH = "refs/heads/main"
GIT_IDENTITY = {"GIT_AUTHOR_NAME": "a2rl recorder", "GIT_AUTHOR_EMAIL": "recorder@a2rl.invalid",
                "GIT_COMMITTER_NAME": "a2rl recorder",
                "GIT_COMMITTER_EMAIL": "recorder@a2rl.invalid"}


class RecordingError(RuntimeError):
    """git failed while recording or reading code revisions; the message has git's stderr."""


def _git_env(repo: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env |= GIT_IDENTITY | {"GIT_DIR": str(repo), "GIT_CONFIG_NOSYSTEM": "1",
                           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_TERMINAL_PROMPT": "0",
                           "LC_ALL": "C"}
    return env | extra


def git(repo: Path, *args: str, input: bytes | None = None, env: dict[str, str] | None = None,
        check: bool = True) -> str:
    """Run ``git args`` on the repository ``repo`` (its GIT_DIR); returns stdout as text."""
    result = subprocess.run(["git", *args], input=input, capture_output=True,
                            env=env or _git_env(repo), check=False)
    if check and result.returncode != 0:
        raise RecordingError(f"git {' '.join(args[:3])} in {repo} failed "
                             f"({result.returncode}): {result.stderr.decode(errors='replace')}")
    return result.stdout.decode(errors="replace")


# ------------------------------------------------------------------------------- snapshots


@dataclass
class Snapshot:
    """One recorded revision: the commit, and what went into it or was left out."""

    commit: str
    tree: str
    files: int
    bytes: int
    changed: bool  # the tree differs from the previous snapshot's
    skipped: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"commit": self.commit, "tree": self.tree, "files": self.files,
                "bytes": self.bytes, "changed": self.changed, "skipped": self.skipped}


@dataclass(frozen=True)
class Picked:
    """A file a snapshot records: its workspace-relative path (bytes that are not UTF-8 kept
    as surrogate escapes), git mode, and content (a link's target for mode LINK_MODE), read
    through ``a2rl.common.beneath``: never by following a link, never from a special file."""

    rel: str
    mode: str
    data: bytes

    @property
    def is_link(self) -> bool:
        return self.mode == LINK_MODE


def select_files(workspace: Path, max_bytes: int = MAX_FILE_BYTES,
                 limits: Limits = SNAPSHOT_LIMITS) -> tuple[list[Picked], list[dict[str, Any]]]:
    """Each file a snapshot records, read now, and the files left out for size or kind
    (outside output/; its checkpoints are expected) or because the walk reached ``limits``
    (then what was read so far is kept)."""
    walk = _Walk(max_bytes, TreeReader(replace(limits, max_file_bytes=max_bytes)))
    root = os.open(Path(workspace), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        walk.folder(root, "", 0)
    finally:
        os.close(root)
    if walk.dropped:
        walk.skipped.append({"path": ".", "bytes": 0,
                             "reason": f"{walk.dropped} more left out (list cut)"})
    return walk.picked, walk.skipped


class _Walk:
    """select_files' walk: folder by folder below descriptors, reading what it picks."""

    def __init__(self, max_bytes: int, reader: TreeReader):
        self.max_bytes, self.reader = max_bytes, reader
        self.picked: list[Picked] = []
        self.skipped: list[dict[str, Any]] = []
        self.dropped = 0

    def skip(self, rel: str, size: int, reason: str) -> None:
        if len(self.skipped) < MAX_SKIPPED:
            self.skipped.append({"path": shown(rel), "bytes": size, "reason": reason})
        else:
            self.dropped += 1

    def folder(self, fd: int, rel_dir: str, depth: int) -> None:
        top = rel_dir.split("/", 1)[0] or None
        try:
            for name, info in self.reader.listing(fd, rel_dir or ".", depth):
                if (top is None and name in HARNESS_ENTRIES) or "\n" in name:
                    continue
                rel = f"{rel_dir}/{name}" if rel_dir else name
                self.entry(fd, name, rel, info, (top or name) == "output", depth)
        except Refused as err:  # the walk's own limits: keep what was read so far
            self.skip(rel_dir or ".", 0, str(err))

    def entry(self, fd: int, name: str, rel: str, info: os.stat_result, in_output: bool,
              depth: int) -> None:
        mode = info.st_mode
        if stat.S_ISLNK(mode):  # recorded as a link: its target's text, never followed
            try:
                self.picked.append(Picked(rel, LINK_MODE, os.fsencode(read_link(fd, name, rel))))
            except Refused as err:
                self.skip(rel, 0, str(err))
            return
        if stat.S_ISDIR(mode):
            if name not in SKIP_DIRS:
                self.open_and(fd, name, rel, mode, lambda child, _: self.folder(
                    child, rel, depth + 1))
            return
        suffix = os.path.splitext(name)[1].lower()
        if in_output and (suffix not in CODE_SUFFIXES or not stat.S_ISREG(mode)):
            return
        reason = (f"a {kind_of(mode)}" if not stat.S_ISREG(mode) else
                  "data or weights" if suffix in DATA_SUFFIXES else
                  f"larger than {self.max_bytes} bytes" if info.st_size > self.max_bytes else
                  None)
        if reason:
            self.skip(rel, info.st_size, reason)
            return
        self.open_and(fd, name, rel, mode, lambda child, opened: self.picked.append(Picked(
            rel, "100755" if opened.st_mode & 0o111 else "100644",
            self.reader.read(child, opened, rel))))

    def open_and(self, fd: int, name: str, rel: str, mode: int, use) -> None:
        """Open ``name`` (no link followed, no blocking) and hand it to ``use``; a refusal
        (swapped for a link, unreadable, over a limit) leaves the entry out, noted."""
        try:
            child, opened = self.reader.open_entry(fd, name, rel, mode)
        except Refused as err:
            self.skip(rel, 0, "unreadable" if err.status == 403 and "permission" in str(err)
                      else str(err))
            return
        try:
            use(child, opened)
        except Refused as err:
            self.skip(rel, 0, str(err))
        finally:
            os.close(child)


class CodeRecorder:
    """Commits snapshots of ``workspace`` to the git repository ``repo`` (created on first use).
    Thread-safe; the workspace is only read."""

    def __init__(self, repo: Path, workspace: Path, max_file_bytes: int = MAX_FILE_BYTES):
        self.repo = Path(repo)
        self.workspace = Path(workspace)
        self.max_file_bytes = max_file_bytes
        self._lock = threading.Lock()

    def _init(self) -> None:
        if (self.repo / "HEAD").exists():
            return
        self.repo.mkdir(parents=True, exist_ok=True)
        result = subprocess.run(["git", "init", "-q", "--bare", "--initial-branch=main",
                                 str(self.repo)], capture_output=True,
                                env=_git_env(self.repo), check=False)
        if result.returncode != 0:
            raise RecordingError(f"git init {self.repo} failed: {result.stderr.decode()}")
        (self.repo / "description").write_text(
            f"The agent's code revisions of the run in {self.repo.parent}.\n")

    def head(self) -> Optional[str]:
        if not (self.repo / "HEAD").exists():
            return None
        out = git(self.repo, "rev-parse", "-q", "--verify", f"{BRANCH}^{{commit}}", check=False)
        return out.strip() or None

    def snapshot(self, message: str, tag: Optional[str] = None) -> Snapshot:
        """Commit the workspace's code now (a commit even when nothing changed, so every
        submission has its own); ``tag`` names it (moved if it existed)."""
        with self._lock:
            self._init()
            files, skipped = select_files(self.workspace, self.max_file_bytes)
            with tempfile.TemporaryDirectory(prefix="index-", dir=self.repo) as tmp:
                env = _git_env(self.repo, GIT_INDEX_FILE=str(Path(tmp) / "index"))
                entries, total = self._blobs(files, Path(tmp), env)
                records = b"".join(f"{mode} {sha}\t".encode() + os.fsencode(rel) + b"\0"
                                   for rel, mode, sha in entries)
                git(self.repo, "update-index", "-z", "--index-info", input=records, env=env)
                tree = git(self.repo, "write-tree", env=env).strip()
            parent = self.head()
            parent_tree = git(self.repo, "rev-parse", f"{parent}^{{tree}}").strip() \
                if parent else EMPTY_TREE
            args = ["commit-tree", tree, "-m", message] + (["-p", parent] if parent else [])
            commit = git(self.repo, *args).strip()
            git(self.repo, "update-ref", BRANCH, commit)
            if tag:
                self._tag(commit, tag)
            return Snapshot(commit=commit, tree=tree, files=len(entries), bytes=total,
                            changed=tree != parent_tree, skipped=skipped)

    def tag(self, commit: str, name: str) -> None:
        with self._lock:
            self._tag(commit, name)

    def _tag(self, commit: str, name: str) -> None:
        git(self.repo, "update-ref", f"refs/tags/{name}", commit)

    def _blobs(self, files: list[Picked], staging: Path, env: dict[str, str]
               ) -> tuple[list[tuple[str, str, str]], int]:
        """(path, mode, blob sha) of each picked file written to the object store, and their
        bytes. The contents are staged under numbered names (git reads only files the
        recorder wrote itself; a name git could not take never reaches it)."""
        if not files:
            return [], 0
        blobs = staging / "blobs"
        blobs.mkdir()
        for i, picked in enumerate(files):
            (blobs / str(i)).write_bytes(picked.data)
        listing = "".join(f"{blobs / str(i)}\n" for i in range(len(files))).encode()
        out = subprocess.run(["git", "hash-object", "-w", "--no-filters", "--stdin-paths"],
                             input=listing, capture_output=True, env=env, check=False)
        if out.returncode != 0:
            raise RecordingError(f"git hash-object failed ({out.returncode}): "
                                 f"{out.stderr.decode(errors='replace')}")
        shas = out.stdout.decode().split()
        entries = sorted((p.rel, p.mode, sha) for p, sha in zip(files, shas))
        return entries, sum(len(p.data) for p in files if not p.is_link)


# ------------------------------------------------------------------------------ reading back


def has_history(repo: Path) -> bool:
    return (Path(repo) / "HEAD").exists() and bool(
        git(Path(repo), "rev-parse", "-q", "--verify", f"{BRANCH}^{{commit}}",
            check=False).strip())


def tags(repo: Path) -> dict[str, str]:
    """{tag name: commit}."""
    if not has_history(repo):
        return {}
    out = git(Path(repo), "for-each-ref", "--format=%(refname:short) %(objectname)",
              "refs/tags")
    return dict(line.split(" ", 1) for line in out.splitlines() if " " in line)


def commits(repo: Path) -> list[dict[str, Any]]:
    """Every recorded revision, oldest first: commit, time (UTC), message, tags, files."""
    repo = Path(repo)
    if not has_history(repo):
        return []
    by_commit: dict[str, list[str]] = {}
    for name, commit in tags(repo).items():
        by_commit.setdefault(commit, []).append(name)
    out = git(repo, "log", "--reverse", "--format=%H%x1f%cI%x1f%s%x1e", BRANCH)
    found = []
    for record in out.split("\x1e"):
        record = record.strip()
        if not record:
            continue
        commit, when, subject = record.split("\x1f", 2)
        found.append({"commit": commit, "time": when, "message": subject,
                      "tags": sorted(by_commit.get(commit, []), key=_tag_order),
                      "files": tree_files(repo, commit)})
    return found


def _tag_order(name: str) -> tuple[int, str]:
    head, _, number = name.rpartition("-")
    return (int(number), head) if number.isdigit() else (10**9, name)


def tree_files(repo: Path, commit: str) -> list[str]:
    out = git(Path(repo), "ls-tree", "-r", "-z", "--name-only", commit)
    return [p for p in out.split("\0") if p]


def read_files(repo: Path, commit: str, paths: Iterable[str],
               max_bytes: int = MAX_FILE_BYTES) -> dict[str, str]:
    """Text of ``paths`` at ``commit`` (undecodable bytes replaced)."""
    paths = [p for p in paths if "\n" not in p]
    if not paths:
        return {}
    listing = "".join(f"{commit}:{p}\n" for p in paths).encode()
    result = subprocess.run(["git", "cat-file", "--batch"], input=listing, capture_output=True,
                            env=_git_env(Path(repo)), check=False)
    data, texts, pos = result.stdout, {}, 0
    for path in paths:
        end = data.index(b"\n", pos)
        header = data[pos:end].split()
        pos = end + 1
        if len(header) < 3 or header[1] != b"blob":
            continue
        size = int(header[2])
        if size <= max_bytes:
            texts[path] = data[pos:pos + size].decode(errors="replace")
        pos += size + 1
    return texts


def diff(repo: Path, old: Optional[str], new: str, stat_only: bool = False) -> str:
    """``git diff old new`` (``old`` None: everything in ``new`` is shown as added)."""
    args = ["diff", "--no-color", "--no-ext-diff"] + (["--stat"] if stat_only else [])
    return git(Path(repo), *args, old or EMPTY_TREE, new)


def diff_command(repo: Path, old: Optional[str], new: str) -> str:
    """The shell command a person runs to see ``diff(repo, old, new)``."""
    return f"git --git-dir {repo} diff {old or EMPTY_TREE} {new}"


def record_final_code(recorder: CodeRecorder, events: EventLog, exit_code) -> None:
    """Commit the agent's code as it left it (tag ``final``); a failure is logged, not raised."""
    try:
        snap = recorder.snapshot(f"final: agent exited ({exit_code})", tag="final")
        events.emit("code_snapshot", commit=snap.commit, files=snap.files, tag="final",
                    changed=snap.changed)
    except Exception as err:
        events.emit("error", message=f"final code snapshot failed: {type(err).__name__}: {err}")
