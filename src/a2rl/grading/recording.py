"""What a run records besides its ledger and timeline, and how to read it back.

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

Model lineage (``artifact_lineage``, post hoc from the grader's store): each submitted artifact's
size, whether it is the base model byte for byte, whether its weights equal the base's (only
configuration or prompt files changed), and its parent: the base model or the earlier submission
whose weights are nearest to its own (relative L2 distance on a fixed sample of every tensor).

The agent CLI's transcript (``read_transcript``): ``transcript.jsonl`` in the run directory,
when an LLM agent's stack left one (``a2rl.llm.stacks``), read for the route and the integrity
checks. Token and cost totals of the LLM calls come from ``a2rl.llm.proxy.llm_totals``.

``export_selected`` puts the final grade's selected artifact under results/models/ so DVC can
track it (dvc.yaml's ``results/models`` output).
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import stat
import subprocess
import tempfile
import threading
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

from a2rl.common.files import iter_jsonl, read_json, utc_now, write_json_atomic

log = logging.getLogger(__name__)

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


# --------------------------------------------------------------------------------- lineage

SKETCH_PER_TENSOR = 4096


def artifact_bytes(folder: Path) -> Optional[int]:
    folder = Path(folder)
    if not folder.is_dir():
        return None
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def artifact_kind(folder: Path) -> str:
    folder = Path(folder)
    if (folder / "adapter_config.json").is_file():
        return "adapter"
    if (folder / "config.json").is_file():
        return "full"
    return "unknown"


def weight_sketch(folder: Path) -> Optional[dict[str, Any]]:
    """A fixed sample of every tensor of the safetensors weights in ``folder`` (the same
    positions for the same tensor name and shape in any model), or None without such weights."""
    import numpy as np
    import torch
    from safetensors import safe_open

    files = sorted(Path(folder).glob("*.safetensors"))
    if not files:
        return None
    sketch: dict[str, Any] = {}
    for path in files:
        with safe_open(str(path), framework="pt") as fh:
            for name in fh.keys():
                tensor = fh.get_tensor(name).reshape(-1)
                if not (tensor.is_floating_point() and tensor.numel()):
                    continue
                n = tensor.numel()
                if n > SKETCH_PER_TENSOR:
                    rng = np.random.default_rng(zlib.crc32(f"{name}:{n}".encode()))
                    index = torch.from_numpy(rng.choice(n, SKETCH_PER_TENSOR, replace=False))
                    tensor = tensor[index]
                sketch[name.removeprefix("base_model.model.")] = (
                    n, tensor.to(torch.float64).numpy())
    return sketch


def sketch_distance(a: Optional[dict], b: Optional[dict]) -> Optional[float]:
    """Relative L2 distance ||a - b|| / ||b|| over the tensors both share (same name, same
    size); None when they share none (different architectures, adapters vs full models)."""
    if not a or not b:
        return None
    num = den = 0.0
    shared = 0
    for name, (n, values) in a.items():
        other = b.get(name)
        if other is None or other[0] != n:
            continue
        shared += 1
        num += float(((values - other[1]) ** 2).sum())
        den += float((other[1] ** 2).sum())
    if not shared or shared < 0.5 * max(len(a), len(b)):
        return None
    return math.sqrt(num / den) if den > 0 else (0.0 if num == 0 else math.inf)


def artifact_lineage(ledger: list[dict[str, Any]], store: Path, base_model: Optional[Path],
                     base_hash: Optional[str]) -> list[dict[str, Any]]:
    """One record per distinct valid artifact, in order of first submission: hash, submission
    ids, bytes, kind, equals_base (same bytes as the base), weights_equal_base (same weights,
    other files changed), parent ("base", "submission-<id>" or None) and parent_distance."""
    seen: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    for entry in ledger:
        digest = entry.get("artifact_hash")
        if not entry.get("valid") or not digest:
            continue
        if digest in seen:
            seen[digest]["submissions"].append(entry.get("submission_id"))
            continue
        folder = Path(store) / digest / "artifact"
        seen[digest] = {"artifact_hash": digest, "submissions": [entry.get("submission_id")],
                        "model_path": entry.get("model_path"),
                        "bytes": entry.get("artifact_bytes") or artifact_bytes(folder),
                        "kind": artifact_kind(folder) if folder.is_dir() else "missing",
                        "equals_base": bool(entry.get("equals_base"))
                        or (base_hash is not None and digest == base_hash),
                        "weights_equal_base": None, "parent": None, "parent_distance": None,
                        "distances": {}}
        order.append(digest)
    if not order:
        return []
    base_sketch = _safe_sketch(base_model) if base_model else None
    sketches: dict[str, Optional[dict]] = {}
    for i, digest in enumerate(order):
        record = seen[digest]
        if record["equals_base"]:
            record |= {"weights_equal_base": True, "parent": "base", "parent_distance": 0.0,
                       "distances": {"base": 0.0}}
            sketches[digest] = base_sketch
            continue
        folder = Path(store) / digest / "artifact"
        mine = _safe_sketch(folder) if record["kind"] == "full" else None
        sketches[digest] = mine
        candidates = {"base": sketch_distance(mine, base_sketch)}
        for earlier in order[:i]:
            label = f"submission-{seen[earlier]['submissions'][0]}"
            candidates[label] = sketch_distance(mine, sketches.get(earlier))
        known = {k: round(v, 6) for k, v in candidates.items() if v is not None}
        record["distances"] = known
        record["weights_equal_base"] = known.get("base") == 0.0 if "base" in known else None
        if record["kind"] == "adapter":
            record["parent"] = "base"
        elif known:
            parent = min(known, key=lambda k: (known[k], k != "base"))
            record["parent"], record["parent_distance"] = parent, known[parent]
    return [seen[d] for d in order]


def _safe_sketch(folder: Path) -> Optional[dict]:
    try:
        return weight_sketch(folder)
    except Exception as err:  # unreadable weights: lineage unknown, never a failed summary
        log.warning("cannot read weights of %s: %s", folder, err)
        return None


# ------------------------------------------------------------------------------ transcript


def read_transcript(path: Path) -> list[dict[str, Any]]:
    """The records of an agent CLI's transcript.jsonl (none when there is no such file)."""
    return [r for r in iter_jsonl(path) if isinstance(r, dict)]


# ------------------------------------------------------------------- selected model for DVC


def export_selected(final: Path, store: Path, dest: Path) -> dict[str, Any]:
    """Put the selected artifact of a run (final.json's ``artifact_hash``) in ``dest/model``
    (hard links where possible) with ``dest/selected.json`` describing it; a run without a
    valid submission gets only selected.json (its model is the base). Returns selected.json."""
    record = read_json(final)
    digest = record.get("artifact_hash")
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    info = {key: record.get(key) for key in ("task", "agent", "driver", "seed",
                                             "selected_submission", "artifact_hash",
                                             "test_score", "baseline", "improvement",
                                             "no_valid_submission")}
    info["exported"] = utc_now()
    if digest:
        src = Path(store) / digest / "artifact"
        if not src.is_dir():
            raise FileNotFoundError(f"selected artifact {digest} is not in {store}")
        shutil.copytree(src, dest / "model", copy_function=_link_or_copy)
        info["bytes"] = artifact_bytes(dest / "model")
    write_json_atomic(dest / "selected.json", info)
    return info


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
