"""The budget's clock: wall time of the agent phase, optionally not counting evaluations.

One invariant holds whatever the agent submits (issue #28): the wall time in which the agent's
processes can run never exceeds ``time_limit_s`` plus the time given back for the harness's own
failures (a judge outage, a grader that died: at most ``grader_restarts + 1`` evaluations).
When evaluations count, their time is the agent's like any other; when they do not, the agent is
paused while one runs (``pause_agent_with``: its cgroup frozen, or its processes stopped), so
the allowance stretched by an evaluation gives it no time to work in. An evaluation that fails or
runs past its deadline is always charged: the agent can make an evaluation fail or hang.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Callable, Optional


class BudgetClock:
    def __init__(self, time_limit_s: float, count_eval_time: bool = True):
        self.time_limit_s = float(time_limit_s)
        self.count_eval_time = count_eval_time
        self._started: Optional[float] = None
        self._eval_s = 0.0
        self._excused_s = 0.0  # time lost to the harness (a judge outage): always given back
        self._eval_since: Optional[float] = None  # the running evaluation's start
        self._lock = threading.Lock()
        self._pause: Optional[Callable[[], None]] = None
        self._resume: Optional[Callable[[], None]] = None

    def pause_agent_with(self, pause: Callable[[], None], resume: Callable[[], None]) -> None:
        """While an evaluation runs and evaluations do not count, the agent is paused with
        ``pause`` and resumed with ``resume`` (the harness's clock; the grader's has none)."""
        self._pause, self._resume = pause, resume

    def start(self, at: Optional[float] = None) -> None:
        """Start now, or at ``at`` (a time.monotonic() of this machine: another process's
        start, as the grader's process learns it from the harness)."""
        self._started = time.monotonic() if at is None else at

    def state(self) -> dict[str, Optional[float]]:
        """What a clock in another process needs to agree with this one (``restore``):
        time.monotonic() is the machine's, the same in all its processes."""
        with self._lock:
            return {"started": self._started, "eval_s": self._eval_s,
                    "excused_s": self._excused_s}

    def restore(self, state: dict[str, Optional[float]]) -> None:
        with self._lock:
            self._started = state["started"]
            self._eval_s = float(state["eval_s"])
            self._excused_s = float(state["excused_s"])

    @property
    def evaluating(self) -> bool:
        return self._eval_since is not None

    @property
    def started(self) -> bool:
        return self._started is not None

    def elapsed(self) -> float:
        return 0.0 if self._started is None else time.monotonic() - self._started

    def begin_eval(self) -> None:
        """An evaluation starts. While it runs it stretches the allowance as a finished one
        does when evaluations do not count: an agent waiting for its score is not stopped at
        the nominal limit meanwhile; it is paused instead, when the clock has a way to."""
        with self._lock:
            self._eval_since = time.monotonic()
        if not self.count_eval_time and self._pause is not None:
            self._pause()

    def end_eval(self, account: str = "eval") -> float:
        """The running evaluation ended; its seconds become evaluation time (``eval``), are
        given back whether or not evaluations count (``excused``: grading failed for reasons
        outside the submission) or are the agent's (``charged``). Returns them."""
        if account not in ("eval", "excused", "charged"):
            raise ValueError(f"account={account!r}; expected eval, excused or charged")
        with self._lock:
            seconds = time.monotonic() - self._eval_since
            self._eval_since = None
            if account == "eval":
                self._eval_s += seconds
            elif account == "excused":
                self._excused_s += seconds
        if self._resume is not None:
            self._resume()
        return seconds

    def allowance(self) -> float:
        """The limit, stretched by excused time, and by evaluation time (the running one too)
        when evaluations do not count."""
        with self._lock:
            running = 0.0 if self._eval_since is None else time.monotonic() - self._eval_since
            evaluations = 0.0 if self.count_eval_time else self._eval_s + running
            return self.time_limit_s + self._excused_s + evaluations

    def time_left(self) -> float:
        return max(0.0, self.allowance() - self.elapsed())

    def expired(self) -> bool:
        return self.started and self.time_left() <= 0

    def deadline_utc(self) -> str:
        at = datetime.now(timezone.utc) + timedelta(seconds=self.time_left())
        return at.strftime("%Y-%m-%dT%H:%M:%SZ")

