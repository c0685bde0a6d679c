"""The append-only record of every submission of a run (``ledger.jsonl``, outside the workspace).

The ledger is the source of truth: scores.json in the workspace is a read-only mirror rebuilt
from it, and a restarted grader resumes from it. Its entries are
``a2rl.common.records.LedgerEntry``.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, Optional

from a2rl.common.files import append_jsonl, utc_now, write_json_atomic
from a2rl.common.records import MIRROR, LedgerEntry, read_ledger


class Ledger:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.entries: list[LedgerEntry] = read_ledger(self.path)
        end_torn_line(self.path)

    def append(self, **fields: Any) -> LedgerEntry:
        """Number the entry, stamp it, write it durably (fsync) and return it."""
        with self._lock:
            entry = LedgerEntry(submission_id=self.next_id(), time=utc_now(), **fields)
            append_jsonl(self.path, entry.to_json(), fsync=True)
            self.entries.append(entry)
            return entry

    def next_id(self) -> int:
        return max((e.submission_id for e in self.entries), default=0) + 1

    @property
    def valid(self) -> list[LedgerEntry]:
        return [e for e in self.entries if e.valid]

    def evaluated_count(self) -> int:
        """Submissions that used one up: scored (not answered from the cache), or past the
        evaluation deadline (a submission can hang its evaluation; issue #28)."""
        return sum(1 for e in self.entries
                   if (e.valid and not e.cached) or e.status == "eval_timeout")

    def best(self) -> Optional[LedgerEntry]:
        """The valid entry with the highest score; the earliest wins a tie."""
        best = None
        for e in self.valid:
            if best is None or e.score > best.score:
                best = e
        return best

    def find_hash(self, artifact_hash: str) -> Optional[LedgerEntry]:
        for e in self.valid:
            if e.artifact_hash == artifact_hash:
                return e
        return None

    def write_mirror(self, path: Path, baseline: Optional[float]) -> None:
        """Rewrite the agent-visible scores.json (read-only, atomic)."""
        best = self.best()
        write_json_atomic(path, {"baseline": baseline,
                                 "best": best.score if best else None,
                                 "best_submission_id": best.submission_id if best else None,
                                 "submissions": [e.shown_in(MIRROR) for e in self.entries]},
                          mode=0o444)


def end_torn_line(path: Path) -> None:
    """End a line torn by a crash mid-write (a grader killed while appending), so that the
    next entry starts a line of its own instead of joining the torn one (and being lost with
    it); readers skip the torn line."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with path.open("rb+") as fh:
        fh.seek(-1, 2)
        if fh.read(1) != b"\n":
            fh.write(b"\n")
            fh.flush()
            os.fsync(fh.fileno())


def grading_totals(entries: list[LedgerEntry]) -> dict[str, Any]:
    """Sum of what grading cost (a judge's calls, tokens, USD) over the ledger, and how many
    submissions a grading failure (judge_failed, eval_timeout, interrupted) left unscored; {}
    when grading cost nothing countable (no judge)."""
    totals: dict[str, Any] = {}
    for entry in entries:
        for key, value in (entry.grading_usage or {}).items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                totals[key] = round(totals.get(key, 0) + value, 6)
    for status in ("judge_failed", "grading_budget_exhausted", "eval_timeout", "interrupted"):
        failed = sum(1 for e in entries if e.status == status)
        if failed:
            totals[f"{status}_submissions"] = failed
    return totals
