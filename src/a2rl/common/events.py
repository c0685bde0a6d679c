"""The run's timeline (``events.jsonl``): one line per thing that happened, UTC-stamped."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Optional

from a2rl.common.clock import BudgetClock
from a2rl.common.files import append_jsonl, utc_now


class EventLog:
    def __init__(self, path: Path, clock: Optional[BudgetClock] = None):
        self.path = Path(path)
        self.clock = clock
        self._lock = threading.Lock()

    def emit(self, kind: str, **details: Any) -> None:
        record = {"time": utc_now(), "kind": kind,
                  "elapsed_s": round(self.clock.elapsed(), 3) if self.clock else 0.0, **details}
        with self._lock:
            append_jsonl(self.path, record)
