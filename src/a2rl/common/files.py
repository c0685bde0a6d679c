"""Small file helpers shared by every writer, and the shapes of the records a run leaves.

ledger.jsonl (one line per submission, appended and fsync'd by ``a2rl.grading.ledger.Ledger``):
  {"submission_id": 3, "time": "2026-11-30T05:40:00.123Z", "elapsed_s": 61.2,
   "model_path": "output/ckpt-1", "valid": true, "error": null, "status_code": 200,
   "artifact_hash": "<sha256>", "cached": false, "split": "test",
   "score": 45.0, "stderr": 4.9, "n": 100, "eval_seconds": 20.1,
   "best": 45.0, "baseline": 20.0, "improvement": 25.0}
  An invalid submission has "valid": false, "error": "<message>", "status_code": 4xx, no score.

events.jsonl (one timeline, ``a2rl.common.events.EventLog``):
  {"time": "...Z", "elapsed_s": 0.0, "kind": "agent_start" | "agent_exit" | "submission" |
   "budget_warning" | "budget_kill" | "grader_start" | "grader_stop" | "error", ...details}

baseline.json: {"task", "model", "model_hash", "test": {"score", "stderr", "n", "seconds"},
   "validation": {...} | null}
run.json:      {"task", "agent", "driver", "seed", "started", "ended", "agent_seconds",
   "exit_code", "status": "completed" | "budget_exhausted" | "agent_failed",
   "time_limit_s", "sandbox"}
final.json:    {"task", "agent", "driver", "seed", "feedback", "selected_submission",
   "artifact_hash", "test_score", "test_stderr", "n", "baseline", "improvement",
   "no_valid_submission", "rescored"}
"""

from __future__ import annotations

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


def write_json_atomic(path: Path, data: Any, mode: int = 0o644) -> None:
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=True) + "\n", mode)


def write_jsonl_atomic(path: Path, rows: list[dict[str, Any]], mode: int = 0o644) -> None:
    """A whole jsonl file at once (ASCII-escaped, so line separators in text stay escaped)."""
    write_text_atomic(path, "".join(json.dumps(row) + "\n" for row in rows), mode)


def read_json(path: Path) -> Any:
    return json.loads(Path(path).read_text())


def iter_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Records of a jsonl file; a torn last line (crash mid-write) is skipped."""
    path = Path(path)
    if not path.exists():
        return
    with path.open() as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue


def append_jsonl(path: Path, record: dict[str, Any], fsync: bool = False) -> None:
    with Path(path).open("a") as fh:
        fh.write(json.dumps(record, sort_keys=True) + "\n")
        fh.flush()
        if fsync:
            os.fsync(fh.fileno())
