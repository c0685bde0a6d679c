"""Score against budget: a run's best-so-far score as a function of the share of its time
limit used, and the area under that curve.

The curve is what the benchmark would credit the run with had it been stopped at that point:
the baseline (the base model's test score; the run's final score when it never submits a valid
model) until the first valid submission, then the best feedback score of the valid submissions
so far. Rejected and ungraded (judge_failed, eval_timeout) submissions do not move it. It is
sampled on ``GRID``, fractions 0, 0.01, ..., 1 of the run's ``budget.time_limit_s``, from the
agent's budget clock (``elapsed_s`` of each ledger entry); a submission past the limit counts
at 1.

``auc`` is the curve's mean over the budget (trapezoid over fractions 0..1), on the same 0-100
scale as the scores: an agent that reaches a score early gets a larger area than one that
reaches it at the deadline, and a run without a valid submission gets its baseline. As a mean
of grid values it is linear, so the mean of seeds' AUCs is the AUC of their mean curve.

``best_so_far`` is the one definition of the running best; the report's per-run trajectory
(``a2rl.report.plots``) draws it too. ``a2rl.analysis.leaderboard`` averages the curves over
seeds with a bootstrap band and puts ``auc`` beside the final score.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from a2rl.analysis.view import number
from a2rl.common.records import RunSummary, SubmissionItem

GRID = np.linspace(0.0, 1.0, 101)  # shares of the time limit: every 1 %


@dataclass(frozen=True)
class BestPoint:
    """A valid submission and the best score up to and including it."""

    submission_id: int
    elapsed_s: float
    score: float
    best_score: float


def best_so_far(items: list[SubmissionItem]) -> list[BestPoint]:
    """Valid, scored submissions in time order (the ledger's order on ties), each with the
    running best."""
    valid = sorted((s for s in items if s.valid and number(s.score) is not None),
                   key=lambda s: s.elapsed_s)
    points, best = [], -math.inf
    for s in valid:
        best = max(best, s.score)
        points.append(BestPoint(s.id, s.elapsed_s, s.score, best))
    return points


def budget_curve(summary: RunSummary, grid: np.ndarray = GRID) -> np.ndarray | None:
    """The run's best-so-far score at each fraction of ``grid``; None when the run has no
    baseline (nothing to credit before its first submission) or no positive time limit."""
    limit = number(summary.budget.time_limit_s)
    start = number(summary.baseline)
    if not limit or limit <= 0 or start is None:
        return None
    points = best_so_far(summary.submissions.items)
    fractions = np.minimum([p.elapsed_s / limit for p in points], 1.0)
    # how many submissions were in at each grid fraction (one at exactly f counts at f)
    seen = np.searchsorted(fractions, grid, side="right")
    return np.asarray([start, *(p.best_score for p in points)], dtype=float)[seen]


def auc(curve: np.ndarray, grid: np.ndarray = GRID) -> float:
    """The curve's mean over the budget, trapezoid over ``grid`` (0..1): 0-100 like scores."""
    return float(np.trapezoid(curve, grid) / (grid[-1] - grid[0]))


def run_auc(summary: RunSummary) -> float | None:
    """``auc`` of the run's curve, None when it has none (see ``budget_curve``)."""
    curve = budget_curve(summary)
    return None if curve is None else auc(curve)
