"""The append-only record of every submission of a run (``ledger.jsonl``, outside the workspace).

The ledger is the source of truth: scores.json in the workspace is a read-only mirror rebuilt
from it, and a restarted grader resumes from it.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Optional

from a2rl.common.files import append_jsonl, iter_jsonl, utc_now, write_json_atomic


class Ledger:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.entries: list[dict[str, Any]] = list(iter_jsonl(self.path))

    def append(self, record: dict[str, Any]) -> dict[str, Any]:
        """Number the record, stamp it, write it durably (fsync) and return it."""
        with self._lock:
            entry = {"submission_id": self.next_id(), "time": utc_now(), **record}
            append_jsonl(self.path, entry, fsync=True)
            self.entries.append(entry)
            return entry

    def next_id(self) -> int:
        return max((e["submission_id"] for e in self.entries), default=0) + 1

    @property
    def valid(self) -> list[dict[str, Any]]:
        return [e for e in self.entries if e.get("valid")]

    def evaluated_count(self) -> int:
        """Submissions that cost an evaluation (valid, not answered from the cache)."""
        return sum(1 for e in self.valid if not e.get("cached"))

    def best(self) -> Optional[dict[str, Any]]:
        """The valid entry with the highest score; the earliest wins a tie."""
        best = None
        for e in self.valid:
            if best is None or e["score"] > best["score"]:
                best = e
        return best

    def find_hash(self, artifact_hash: str) -> Optional[dict[str, Any]]:
        for e in self.valid:
            if e.get("artifact_hash") == artifact_hash:
                return e
        return None

    def write_mirror(self, path: Path, baseline: Optional[float]) -> None:
        """Rewrite the agent-visible scores.json (read-only, atomic)."""
        best = self.best()
        subs = [{k: e.get(k) for k in ("submission_id", "time", "elapsed_s", "model_path",
                                       "valid", "score", "error", "cached")}
                for e in self.entries]
        write_json_atomic(path, {"baseline": baseline,
                                 "best": best["score"] if best else None,
                                 "best_submission_id": best["submission_id"] if best else None,
                                 "submissions": subs}, mode=0o444)
