"""Contamination by behaviour (issue #28): the n-gram check (a2rl.analysis.integrity) finds sealed
items in the agent's files, but an agent that learnt them elsewhere (kept in memory, fed to a
model and deleted, or regenerated from a generator and a seed it found) leaves none. For a task
whose test split is drawn from a generator (gsm8k_arith, household, webshop's procedural shop,
deepsearchqa_world; docs/grading.md), the selected model is also scored, at final grading, on a
twin split: as many items from the same generator, from a seed drawn then (``draw_seed``), none
of them train's or test's (``Task.twin_split``). A model that learnt the task does about as well
on both; one that learnt the test items does far better on test. The run is flagged when the
test score passes the twin's by more than ``Z`` standard errors of the difference, plus the
winner's curse, and by at least ``MIN_GAP`` points.

The winner's curse: with test feedback the selected submission is the best of ``k`` scored on
test, so its test score is the largest of ``k`` noisy scores and an honest model's gap is
positive by about E[max of k standard normals] test standard errors (``selection_bias``). Left
out, honest runs with 10 submissions on 10-item splits were flagged 4 % of the time in
simulation (experiments/twin_false_positives/).
"""

from __future__ import annotations

import math
import secrets
from statistics import NormalDist
from typing import Any, Optional

Z = 3.0
MIN_GAP = 10.0  # points on the 0-100 scale: below it no run is flagged, whatever the errors
# twin seeds: far from every seed conf/ names (reasoning_gym builds item i from seed + i)
SEED_FROM, SEED_SPAN = 10**9, 10**9


def draw_seed() -> int:
    return SEED_FROM + secrets.randbelow(SEED_SPAN)


def selection_bias(k: int) -> float:
    """E[max of k standard normals] (Blom's approximation; 0 for k = 1, 1.03 for 4, 1.54 for
    10): how many test standard errors the best of k equally good submissions is expected to
    pass their common score by."""
    return NormalDist().inv_cdf((k - 0.375) / (k + 0.25)) if k > 1 else 0.0


def verdict(test_score: float, test_stderr: Optional[float], twin: dict[str, Any],
            selected_from: int = 1) -> dict[str, Any]:
    """``twin`` (its seed, score, stderr, n) with the gap to the test score and the flag;
    ``selected_from``: how many submissions scored on test the selected one was the best of
    (1 when it was selected on a validation split)."""
    error = math.hypot(test_stderr or 0.0, twin.get("stderr") or 0.0)
    gap = test_score - twin["score"]
    curse = selection_bias(selected_from) * (test_stderr or 0.0)
    threshold = max(MIN_GAP, Z * error + curse)
    return twin | {"checked": True, "gap": round(gap, 4), "threshold": round(threshold, 4),
                   "selected_from": selected_from, "flagged": gap > threshold}


def not_checked(reason: str) -> dict[str, Any]:
    return {"checked": False, "flagged": False, "reason": reason}
