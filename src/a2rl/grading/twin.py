"""Contamination by behaviour (issue #28): the n-gram check (a2rl.analysis.integrity) finds
sealed items in the agent's files, but an agent that learnt them elsewhere (kept in memory, fed
to a model and deleted, or regenerated from a generator and a seed it found) leaves none. For a
task whose test split is drawn from a generator (gsm8k_arith, household), the selected model is
also scored, at final grading, on a twin split: as many items from the same generator, from a
seed drawn then (``draw_seed``), none of them train's or test's (``Task.twin_split``). A model
that learnt the task does about as well on both; one that learnt the test items does far better
on test. The run is flagged when the test score passes the twin's by more than ``Z`` standard
errors of the difference and at least ``MIN_GAP`` points.
"""

from __future__ import annotations

import math
import secrets
from typing import Any, Optional

Z = 3.0
MIN_GAP = 10.0  # points on the 0-100 scale: below it no run is flagged, whatever the errors
# twin seeds: far from every seed conf/ names (reasoning_gym builds item i from seed + i)
SEED_FROM, SEED_SPAN = 10**9, 10**9


def draw_seed() -> int:
    return SEED_FROM + secrets.randbelow(SEED_SPAN)


def verdict(test_score: float, test_stderr: Optional[float], twin: dict[str, Any]
            ) -> dict[str, Any]:
    """``twin`` (its seed, score, stderr, n) with the gap to the test score and the flag."""
    error = math.hypot(test_stderr or 0.0, twin.get("stderr") or 0.0)
    gap = test_score - twin["score"]
    threshold = max(MIN_GAP, Z * error)
    return twin | {"checked": True, "gap": round(gap, 4), "threshold": round(threshold, 4),
                   "flagged": gap > threshold}


def not_checked(reason: str) -> dict[str, Any]:
    return {"checked": False, "flagged": False, "reason": reason}
