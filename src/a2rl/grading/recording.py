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

Commits are built with git's plumbing (hash-object, update-index on a private index, write-tree,
commit-tree), so the workspace is only read, never touched, and the author is fixed.
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

MAX_FILE_BYTES = 1_000_000
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


def select_files(workspace: Path, max_bytes: int = MAX_FILE_BYTES
                 ) -> tuple[list[tuple[str, Path]], list[dict[str, Any]]]:
    """(relative posix path, host path) of each file a snapshot records, and the files left out
    for size or kind (outside output/; its checkpoints are expected)."""
    workspace = Path(workspace)
    chosen: list[tuple[str, Path]] = []
    skipped: list[dict[str, Any]] = []
    for dirpath, dirnames, filenames in os.walk(workspace, followlinks=False):
        here = Path(dirpath)
        rel_dir = here.relative_to(workspace)
        top = rel_dir.parts[0] if rel_dir.parts else None
        if top is None:
            dirnames[:] = [d for d in dirnames if d not in HARNESS_ENTRIES]
            filenames = [f for f in filenames if f not in HARNESS_ENTRIES]
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        # links to folders are recorded as links (os.walk lists them among dirnames)
        links = [d for d in dirnames if (here / d).is_symlink()]
        dirnames[:] = [d for d in dirnames if d not in links]
        for name in sorted([*filenames, *links]):
            path = here / name
            rel = (rel_dir / name).as_posix()
            if "\n" in rel or "\x00" in rel:
                continue
            in_output = (top or name) == "output"
            try:
                info = path.lstat()
            except OSError:
                continue
            if stat.S_ISLNK(info.st_mode):
                chosen.append((rel, path))
                continue
            if not stat.S_ISREG(info.st_mode):
                continue
            suffix = path.suffix.lower()
            if in_output and suffix not in CODE_SUFFIXES:
                continue
            reason = ("data or weights" if suffix in DATA_SUFFIXES else
                      f"larger than {max_bytes} bytes" if info.st_size > max_bytes else
                      "unreadable" if not os.access(path, os.R_OK) else None)
            if reason:
                if not in_output:
                    skipped.append({"path": rel, "bytes": info.st_size, "reason": reason})
                continue
            chosen.append((rel, path))
    return chosen, skipped


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
                entries, total = self._blobs(files, env)
                records = b"".join(f"{mode} {sha}\t{rel}".encode() + b"\0"
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

    def _blobs(self, files: list[tuple[str, Path]], env: dict[str, str]
               ) -> tuple[list[tuple[str, str, str]], int]:
        """(path, mode, blob sha) of each file written to the object store, and their bytes."""
        regular = [(rel, p) for rel, p in files if not p.is_symlink()]
        entries: list[tuple[str, str, str]] = []
        total = 0
        shas: list[str] = []
        if regular:
            listing = "".join(f"{p}\n" for _, p in regular).encode()
            out = subprocess.run(["git", "hash-object", "-w", "--no-filters", "--stdin-paths"],
                                 input=listing, capture_output=True, env=env, check=False)
            if out.returncode == 0:
                shas = out.stdout.decode().split()
            else:  # a file vanished or became unreadable meanwhile: one by one, skipping it
                shas = [self._hash_one(p, env) for _, p in regular]
        for (rel, path), sha in zip(regular, shas):
            if not sha:
                continue
            try:
                info = path.stat()
            except OSError:
                continue
            total += info.st_size
            entries.append((rel, "100755" if info.st_mode & 0o111 else "100644", sha))
        for rel, path in files:
            if path.is_symlink():
                target = os.readlink(path).encode()
                sha = git(self.repo, "hash-object", "-w", "--stdin", input=target,
                          env=env).strip()
                entries.append((rel, "120000", sha))
        return sorted(entries), total

    def _hash_one(self, path: Path, env: dict[str, str]) -> str:
        out = subprocess.run(["git", "hash-object", "-w", "--no-filters", str(path)],
                             capture_output=True, env=env, check=False)
        return out.stdout.decode().strip() if out.returncode == 0 else ""


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
