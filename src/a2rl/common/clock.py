"""The budget's clock: wall time of the agent phase, optionally not counting evaluations."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Optional


class BudgetClock:
    def __init__(self, time_limit_s: float, count_eval_time: bool = True):
        self.time_limit_s = float(time_limit_s)
        self.count_eval_time = count_eval_time
        self._started: Optional[float] = None
        self._eval_s = 0.0
        self._excused_s = 0.0  # time lost to the harness (a judge outage): always given back
        self._lock = threading.Lock()

    def start(self) -> None:
        self._started = time.monotonic()

    @property
    def started(self) -> bool:
        return self._started is not None

    def elapsed(self) -> float:
        return 0.0 if self._started is None else time.monotonic() - self._started

    def add_eval_time(self, seconds: float) -> None:
        with self._lock:
            self._eval_s += seconds

    def excuse(self, seconds: float) -> None:
        """Give back time the harness lost (grading that failed for reasons outside the
        submission), whether or not evaluations count."""
        with self._lock:
            self._excused_s += seconds

    def allowance(self) -> float:
        """The limit, stretched by excused time, and by evaluation time when evaluations do
        not count."""
        return (self.time_limit_s + self._excused_s
                + (0.0 if self.count_eval_time else self._eval_s))

    def time_left(self) -> float:
        return max(0.0, self.allowance() - self.elapsed())

    def expired(self) -> bool:
        return self.started and self.time_left() <= 0

    def deadline_utc(self) -> str:
        at = datetime.now(timezone.utc) + timedelta(seconds=self.time_left())
        return at.strftime("%Y-%m-%dT%H:%M:%SZ")
