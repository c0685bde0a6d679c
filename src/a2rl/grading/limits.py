"""What bounds the grader's work for an agent that tries to make it endless: an evaluation
deadline (``call_with_deadline``), a count and rate limit on invalid submissions
(``InvalidLimiter``), and what a refused request may echo (``clipped``, ``scrub``).
"""

from __future__ import annotations

import ctypes
import json
import threading
import time
from typing import Any, Callable, Optional, TypeVar

T = TypeVar("T")
SHOWN_CHARS = 300  # of a refused model_path, in the ledger, the mirror and the answer


class EvaluationTimedOut(Exception):
    """The evaluation ran past its deadline; ``stopped`` says whether its thread ended."""

    def __init__(self, seconds: float, stopped: bool):
        super().__init__(f"the evaluation ran past its limit of {seconds:g} s and was abandoned")
        self.seconds = seconds
        self.stopped = stopped


def call_with_deadline(fn: Callable[[], T], seconds: Optional[float], grace_s: float = 5.0,
                       name: str = "a2rl-eval") -> T:
    """``fn()`` in a worker thread, waited for ``seconds`` (None: no limit). Past it, the
    worker is sent EvaluationTimedOut as an asynchronous exception (it stops Python-level
    loops, such as a chat template's, at their next bytecode), waited for ``grace_s`` more and
    abandoned if still running; the caller gets EvaluationTimedOut either way."""
    if seconds is None:
        return fn()
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["result"] = fn()
        except BaseException as err:  # noqa: BLE001 (handed to the caller's thread)
            box["error"] = err

    worker = threading.Thread(target=work, name=name, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(worker.ident),
                                                   ctypes.py_object(EvaluationTimedOut))
        worker.join(grace_s)
        raise EvaluationTimedOut(seconds, stopped=not worker.is_alive())
    if "error" in box:
        raise box["error"]
    return box["result"]


class InvalidLimiter:
    """Invalid submissions (refused requests that are the agent's doing): at most
    ``max_recorded`` go into the ledger in a run (``recorded`` are there already), and at most
    ``per_minute`` are accepted a minute (a bucket of as many, refilled evenly); past the
    rate every request is refused up front, before any reading."""

    def __init__(self, max_recorded: int, per_minute: float, recorded: int = 0):
        self.max_recorded = max_recorded
        self.per_minute = per_minute
        self.recorded = recorded
        self.unrecorded = 0  # refused past max_recorded: counted, not written
        self._tokens = float(per_minute)
        self._stamp = time.monotonic()

    def _refill(self) -> None:
        now = time.monotonic()
        self._tokens = min(self.per_minute,
                           self._tokens + (now - self._stamp) * self.per_minute / 60)
        self._stamp = now

    def wait_s(self) -> float:
        """Seconds until another request may be tried (0: now)."""
        self._refill()
        return 0.0 if self._tokens >= 1 else (1 - self._tokens) * 60 / self.per_minute

    def spend(self) -> None:
        """One invalid submission was processed."""
        self._refill()
        self._tokens = max(0.0, self._tokens - 1)

    def full(self) -> bool:
        return self.recorded >= self.max_recorded


def printable(text: str) -> str:
    """``text`` that encodes as UTF-8: lone surrogates (a file name that is not UTF-8, a JSON
    \\udXXX escape) written out as escapes."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def clipped(value: object) -> Any:
    """A refused request's model_path as the ledger keeps it: a short scalar as it is, a long
    string cut at SHOWN_CHARS with its length said, anything else as short JSON."""
    if isinstance(value, str):
        value = printable(value)
        if len(value) <= SHOWN_CHARS:
            return value
        return value[:SHOWN_CHARS] + f"... ({len(value)} characters)"
    if isinstance(value, (int, float, bool, type(None))):
        return value
    try:
        text = json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        text = f"<{type(value).__name__}>"
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "..."


def scrub(message: str, hidden: dict[str, str]) -> str:
    """``message`` with each host path in ``hidden`` replaced by what the agent may see
    (longest first, so a folder's subfolder goes before the folder)."""
    for host in sorted(hidden, key=len, reverse=True):
        if host:
            message = message.replace(host, hidden[host])
    return message
