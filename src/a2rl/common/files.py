"""Small file helpers shared by every writer: atomic writes, JSON and JSON lines.

The records a run leaves (ledger.jsonl, run.json, final.json, summary.json) are defined, written
and read in ``a2rl.common.records``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def write_text_atomic(path: Path, text: str, mode: int = 0o644) -> None:
    """Write a file so readers see the old or the new one, never half of one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def held_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if missing) while the block runs, so that
    processes writing the same files take turns. fcntl's lock, released by the kernel if the
    holder dies, so a killed writer never leaves a stale lock behind."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def print_report(report: dict, out: str | Path | None, indent: int = 1) -> None:
    """Print a benchmark's report as JSON and, with ``out``, write it there too."""
    text = json.dumps(report, indent=indent)
    print(text)
    if out:
        write_text_atomic(Path(out), text + "\n")


def write_json_atomic(path: Path, data: Any, mode: int = 0o644) -> None:
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=True) + "\n", mode)


def write_jsonl_atomic(path: Path, rows: list[dict[str, Any]], mode: int = 0o644) -> None:
    """A whole jsonl file at once (ASCII-escaped, so line separators in text stay escaped)."""
    write_text_atomic(path, "".join(json.dumps(row) + "\n" for row in rows), mode)


def read_json(path: Path) -> Any:
    return json.loads(Path(path).read_text())


def iter_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Records of a jsonl file; a torn last line (crash mid-write) is skipped."""
    for _, record in iter_jsonl_lines(path):
        yield record


def iter_jsonl_lines(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, record) of each line of a jsonl file (none when there is no file);
    blank lines and a torn line (crash mid-write) are skipped."""
    path = Path(path)
    if not path.exists():
        return
    with path.open() as fh:
        for number, line in enumerate(fh, start=1):
            line = line.strip()
            if not line:
                continue
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError:
                continue


def append_jsonl(path: Path, record: dict[str, Any], fsync: bool = False) -> None:
    with Path(path).open("a") as fh:
        fh.write(json.dumps(record, sort_keys=True) + "\n")
        fh.flush()
        if fsync:
            os.fsync(fh.fileno())
