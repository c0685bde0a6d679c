"""Score against budget: each run's best-so-far curve over the share of its time limit, its area
(the leaderboard's auc) and the mean over seeds with a bootstrap band (curves_frame), on
hand-made summaries whose areas can be worked out by hand."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from a2rl.analysis.budget_curve import GRID, auc, best_so_far, budget_curve, run_auc
from a2rl.analysis.leaderboard import (
    bootstrap_ci,
    build_leaderboard,
    curves_frame,
    leaderboard_frame,
)
from a2rl.common.layout import Layout, RunPaths
from a2rl.common.records import SubmissionItem, Submissions
from a2rl.config.types import PathsConfig
from checkout import REPO, child_env

LIMIT = 100.0  # seconds: an elapsed_s of 25 is 25 % of the budget
BASELINE = 20.0


def item(i: int, elapsed: float, score: float | None, valid: bool = True,
         status: str | None = None) -> SubmissionItem:
    return SubmissionItem(
        id=i, elapsed_s=elapsed, valid=valid, score=score if valid else None, stderr=None,
        error=None if valid else "rejected", status_code=200 if valid else 400, cached=None,
        model_path=f"output/{i}", split="test", artifact_hash=f"h{i}" if valid else None,
        artifact_bytes=None, equals_base=None, code_commit=None, status=status, parent=None,
        methods=[])


@pytest.fixture
def run_of(blank_summary):
    def make(items: list[SubmissionItem], seed: int = 0, agent: str = "sft",
             status: str = "completed", baseline: float | None = BASELINE,
             limit: float = LIMIT):
        valid = [s for s in items if s.valid]
        return replace(blank_summary, agent=agent, seed=seed, status=status, baseline=baseline,
                       budget=replace(blank_summary.budget, time_limit_s=limit),
                       final_score=max((s.score for s in valid), default=baseline),
                       final_from="final" if valid else "baseline",
                       submissions=Submissions(total=len(items), valid=len(valid),
                                               invalid=len(items) - len(valid), items=items))
    return make


def test_curve_is_the_baseline_until_the_first_valid_submission_then_the_running_best(run_of):
    run = run_of([item(1, 10.0, 15.0), item(2, 20.0, None, valid=False),
                  item(3, 30.0, 50.0), item(4, 60.0, 40.0)])
    curve = budget_curve(run)
    at = dict(zip(np.round(GRID, 2), curve))
    assert at[0.0] == at[0.09] == BASELINE
    # a first submission below the baseline is what the benchmark would select
    assert at[0.1] == at[0.29] == 15.0
    assert at[0.3] == at[0.6] == at[1.0] == 50.0  # a worse later one does not lower it
    assert [p.best_score for p in best_so_far(run.submissions.items)] == [15.0, 50.0, 50.0]


def test_reaching_a_score_early_earns_more_area_than_at_the_deadline(run_of):
    early = run_of([item(1, 10.0, 80.0)])
    late = run_of([item(1, 100.0, 80.0)])
    never = run_of([])
    assert run_auc(early) > run_auc(late) > run_auc(never)
    # 10 % of the budget at the baseline, then 80: 0.1 * 20 + 0.9 * 80 = 74, up to the grid's
    # trapezoid (half a 1 % step at the jump)
    assert run_auc(early) == pytest.approx(74.0, abs=0.31)
    # reached at the deadline: the baseline all along but for the last half step
    assert run_auc(late) == pytest.approx(BASELINE + 0.005 * (80.0 - BASELINE))


def test_a_run_without_a_valid_submission_scores_its_baseline(run_of):
    run = run_of([item(1, 5.0, None, valid=False), item(2, 8.0, None, valid=False,
                                                         status="judge_failed")])
    assert run_auc(run) == pytest.approx(BASELINE)
    assert run.final_score == BASELINE  # what the benchmark credits it, and so its AUC


def test_submissions_past_the_limit_count_at_the_end_and_no_baseline_means_no_curve(run_of):
    assert budget_curve(run_of([item(1, 130.0, 60.0)]))[-1] == 60.0
    assert budget_curve(run_of([item(1, 1.0, 60.0)], baseline=None)) is None
    assert run_auc(run_of([item(1, 1.0, 60.0)], baseline=None)) is None


def test_auc_of_a_constant_is_the_constant_and_is_linear():
    assert auc(np.full(len(GRID), 37.5)) == pytest.approx(37.5)
    a, b = GRID * 100, np.where(GRID < 0.5, 10.0, 90.0)
    assert auc((a + b) / 2) == pytest.approx((auc(a) + auc(b)) / 2)
    assert auc(a) == pytest.approx(50.0)


def seeds(run_of, agent: str, times: list[float], score: float = 80.0, **kw):
    return [run_of([item(1, t, score)], seed=k, agent=agent, **kw) for k, t in enumerate(times)]


def test_mean_curve_over_seeds_with_a_band_that_holds_the_mean(run_of):
    runs = seeds(run_of, "sft", [10.0, 40.0, 70.0, 90.0])
    curves = curves_frame(runs)
    assert set(curves["series"]) == {"a/sft/none"}
    assert curves["fraction"].tolist() == pytest.approx(GRID.tolist())
    assert (curves["n_seeds"] == 4).all()
    stacked = np.stack([budget_curve(r) for r in runs])
    assert curves["best_mean"].to_numpy() == pytest.approx(stacked.mean(axis=0))
    assert (curves["band_low"] <= curves["best_mean"] + 1e-9).all()
    assert (curves["best_mean"] <= curves["band_high"] + 1e-9).all()
    # where the seeds disagree (some at 80, some still at the baseline) the band has width
    middle = curves[np.isclose(curves["fraction"], 0.5)].iloc[0]
    assert middle["band_low"] < middle["best_mean"] < middle["band_high"]
    assert middle["best_mean"] == pytest.approx((80 + 80 + 20 + 20) / 4)
    # where they agree it has none
    end = curves.iloc[-1]
    assert end["band_low"] == end["best_mean"] == end["band_high"] == 80.0
    # the mean curve's area is the mean of the runs' areas, the leaderboard's auc
    board = leaderboard_frame(runs).iloc[0]
    assert auc(curves["best_mean"].to_numpy()) == pytest.approx(board["auc"])
    assert (board["auc_low"], board["auc_high"]) == pytest.approx(
        bootstrap_ci([run_auc(r) for r in runs]))
    assert board["auc_low"] < board["auc"] < board["auc_high"]


def test_one_seed_has_no_band_rather_than_a_made_up_one(run_of):
    curves = curves_frame(seeds(run_of, "sft", [10.0]))
    assert (curves["n_seeds"] == 1).all()
    assert curves["band_low"].isna().all() and curves["band_high"].isna().all()
    board = leaderboard_frame(seeds(run_of, "sft", [10.0])).iloc[0]
    assert not math.isnan(board["auc"])
    assert math.isnan(board["auc_low"]) and math.isnan(board["auc_high"])


def test_infra_failed_runs_are_left_out_of_curves_and_auc(run_of):
    runs = seeds(run_of, "sft", [10.0, 10.0])
    # the harness failed this one; its perfect early score must not count
    runs.append(run_of([item(1, 1.0, 100.0)], seed=2, status="infra_failed"))
    board = leaderboard_frame(runs).iloc[0]
    assert board["infra_failed"] == 1 and board["n_seeds"] == 2
    assert board["auc"] == pytest.approx(run_auc(runs[0]))
    curves = curves_frame(runs)
    assert (curves["n_seeds"] == 2).all()
    assert curves["best_mean"].iloc[-1] == 80.0
    only_infra = curves_frame([run_of([item(1, 1.0, 100.0)], status="infra_failed")])
    assert only_infra.empty and "best_mean" in only_infra.columns


def test_early_agent_ranks_above_late_one_on_auc_with_equal_final_scores(run_of):
    runs = seeds(run_of, "early", [5.0, 10.0, 15.0]) + seeds(run_of, "late", [85.0, 90.0, 99.0])
    board = leaderboard_frame(runs).set_index("agent")
    assert board.loc["early", "final_mean"] == board.loc["late", "final_mean"] == 80.0
    assert board.loc["early", "auc_low"] > board.loc["late", "auc_high"]
    curves = curves_frame(runs)
    assert set(curves["series"]) == {"a/early/none", "a/late/none"}


def test_dvc_draws_budget_curves_csv_with_the_band_template(run_of, tmp_path):
    """dvc.yaml's plot of results/budget_curves.csv, as build_leaderboard writes it, renders
    through the repository's template (.dvc/plots/budget_band.json) without errors."""
    # where dvc.yaml's stage, the ci grid, files its results
    layout = Layout.from_paths(PathsConfig(root=str(tmp_path), results="results/ci"))
    runs = seeds(run_of, "sft", [10.0, 40.0]) + seeds(run_of, "noop", [90.0])
    roots = []
    for run in runs:
        root = layout.run(run.task, run.agent, run.driver, run.seed).root
        run.save(RunPaths(root).summary_json)
        roots.append(root)
    build_leaderboard(roots, layout)
    shutil.copy(REPO / "dvc.yaml", tmp_path / "dvc.yaml")
    subprocess.run([sys.executable, "-m", "dvc", "init", "--no-scm", "-q"], cwd=tmp_path,
                   check=True, env=child_env())
    shutil.copytree(REPO / ".dvc" / "plots", tmp_path / ".dvc" / "plots")
    shown = subprocess.run([sys.executable, "-m", "dvc", "plots", "show", "--json"],
                           cwd=tmp_path, capture_output=True, text=True, env=child_env())
    plots = json.loads(shown.stdout)
    path = str(layout.budget_curves_csv.relative_to(tmp_path))
    assert [e for e in plots.get("errors", []) if e["name"] == path] == []
    spec = plots["data"][path][0]["content"]
    assert "<DVC_METRIC" not in json.dumps(spec)  # every anchor of the template filled
    values = spec["data"]["values"]
    assert {v["series"] for v in values} == {"a/sft/none", "a/noop/none"}
    assert len(values) == 2 * len(GRID)
    layers = spec["spec"]["layer"]
    assert layers[0]["encoding"]["y2"]["field"] == "band_high"
    assert layers[1]["encoding"]["y"]["field"] == "best_mean"
