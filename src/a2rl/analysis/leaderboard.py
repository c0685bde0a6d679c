"""The leaderboard: one row per (grid, task, agent, driver), aggregated over seeds from each
run's summary.json (a ``RunSummary`` written by ``a2rl.analysis.summary.summarize_run``), and one
row per (grid, level, agent, driver) aggregated over the level's tasks. ``grid`` is the label of
the grid the run came from (``GridConfig.label``: its name, with a hash of the command line's
overrides when there were any), so runs of two grids are never aggregated together.

Columns: grid, task, level, agent, driver, n_seeds (runs scored), infra_failed (runs the harness
failed: run.json status infra_failed, left out of every score and of n_seeds), final_mean and
final_std (test score of the selected submission over seeds; std with ddof=1, empty for one
seed), ci_low and ci_high (95 % percentile-bootstrap interval of final_mean over seeds,
``BOOTSTRAP`` resamples with a fixed seed; empty for one seed), auc with auc_low and auc_high
(mean over seeds of the area under each run's best-so-far-against-budget curve, 0-100,
``a2rl.analysis.budget_curve``, with its interval computed the same way), baseline,
improvement_mean (final - baseline), final_best (the best seed's final score), cost_usd (mean
LLM cost per run; 0 without a driver), contaminated (runs whose integrity check flagged
contamination). Scores are on the 0-100 scale.
Rows are sorted by task, then final_mean, best first.

Level rows (level, agent, driver, n_tasks, n_runs, infra_failed, final_mean, improvement_mean,
ci_low, ci_high, cost_usd, contaminated): means over the level's tasks of the per-task means,
so every task weighs the same whatever its seed count; the interval is a stratified bootstrap
of improvement_mean (seeds resampled within each task); n_runs counts scored runs only.

The curves themselves, averaged over seeds on the budget grid with a pointwise bootstrap band
(``curves_frame``; seeds resampled together over the whole curve, the band empty for one seed),
go to results/budget_curves.csv, one row per (task, agent, driver, fraction): ``dvc plots
show`` draws it, and so does the report.

Written to results/leaderboard.csv, leaderboard_levels.csv, leaderboard.md and leaderboard.json
(nested ``{task: {agent: {driver: {column: value}}}}`` plus ``{"levels": {level: {agent:
{driver: ...}}}}`` so ``dvc metrics show`` can read it). In leaderboard.md each task links to
its deviations row (docs/deviations.md, ``a2rl.analysis.deviations``) when it has one.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from a2rl.analysis.budget_curve import GRID, budget_curve, run_auc
from a2rl.analysis.deviations import task_links
from a2rl.analysis.view import integrity_view
from a2rl.common.files import write_json_atomic, write_text_atomic
from a2rl.common.layout import Layout, RunPaths
from a2rl.common.records import RunSummary
from a2rl.config.types import RunConfig

log = logging.getLogger(__name__)

KEYS = ["grid", "task", "level", "agent", "driver"]
COLUMNS = [*KEYS, "n_seeds", "infra_failed", "final_mean", "final_std", "ci_low", "ci_high",
           "auc", "auc_low", "auc_high", "baseline", "improvement_mean", "final_best", "cost_usd",
           "contaminated"]
SCORE_COLUMNS = ["final_mean", "final_std", "ci_low", "ci_high", "auc", "auc_low", "auc_high",
                 "baseline", "improvement_mean", "final_best"]
CURVE_COLUMNS = ["grid", "task", "level", "agent", "driver", "series", "fraction", "n_seeds",
                 "best_mean", "band_low", "band_high"]
LEVEL_KEYS = ["grid", "level", "agent", "driver"]
LEVEL_COLUMNS = [*LEVEL_KEYS, "n_tasks", "n_runs", "infra_failed", "final_mean",
                 "improvement_mean", "ci_low", "ci_high", "cost_usd", "contaminated"]
BOOTSTRAP = 10_000
CONFIDENCE = 0.95
SEED = 0


def grid_run_roots(cfg: RunConfig) -> list[Path]:
    """Run directories of every cell of ``cfg.grid`` (whether or not they ran)."""
    from a2rl.config.compose import grid_cells

    layout = Layout.from_paths(cfg.paths)
    return [layout.run(c["task"], c["agent"], c["driver"], c["seed"]).root
            for c in grid_cells(cfg)]


def discover_run_roots(layout: Layout) -> list[Path]:
    """Run directories under results/runs/ that hold a summary.json, whatever grid made them."""
    pattern = RunPaths(Path("*/*/*/seed*")).summary_json
    return sorted(p.parent for p in (layout.results / "runs").glob(str(pattern)))


def load_summaries(run_roots: Iterable[Path]) -> list[RunSummary]:
    """summary.json of each run directory; runs without one are logged and left out."""
    summaries = []
    for root in run_roots:
        path = RunPaths(Path(root)).summary_json
        if not path.is_file():
            log.warning("no summary at %s; run left out of the leaderboard", path)
            continue
        summaries.append(RunSummary.load(path))
    return summaries


def bootstrap_band(rows: np.ndarray, resamples: int = BOOTSTRAP, confidence: float = CONFIDENCE,
                   seed: int = SEED) -> tuple[np.ndarray, np.ndarray]:
    """Percentile-bootstrap interval of the mean row of ``rows`` (one row per seed), column by
    column, resampling whole rows; NaN columns for fewer than two rows (no interval to give)."""
    rows = np.asarray(rows, dtype=float)
    if len(rows) < 2:
        return np.full(rows.shape[1], math.nan), np.full(rows.shape[1], math.nan)
    rng = np.random.default_rng(seed)
    means = rows[rng.integers(0, len(rows), size=(resamples, len(rows)))].mean(axis=1)
    tail = (1 - confidence) / 2
    return np.quantile(means, tail, axis=0), np.quantile(means, 1 - tail, axis=0)


def bootstrap_ci(values: Iterable[float], resamples: int = BOOTSTRAP,
                 confidence: float = CONFIDENCE, seed: int = SEED) -> tuple[float, float]:
    """Percentile-bootstrap interval of the mean of ``values`` (NaN, NaN for fewer than two)."""
    x = np.asarray([v for v in values if v is not None and not math.isnan(v)], dtype=float)
    low, high = bootstrap_band(x.reshape(-1, 1), resamples, confidence, seed)
    return float(low[0]), float(high[0])


def stratified_bootstrap_ci(groups: list[np.ndarray], resamples: int = BOOTSTRAP,
                            confidence: float = CONFIDENCE,
                            seed: int = SEED) -> tuple[float, float]:
    """Interval of the mean over groups of each group's mean, resampling within groups."""
    groups = [g[~np.isnan(g)] for g in groups]
    groups = [g for g in groups if len(g)]
    if not groups or all(len(g) < 2 for g in groups):
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    means = np.mean([g[rng.integers(0, len(g), size=(resamples, len(g)))].mean(axis=1)
                     for g in groups], axis=0)
    tail = (1 - confidence) / 2
    return float(np.quantile(means, tail)), float(np.quantile(means, 1 - tail))


INFRA_FAILED = "infra_failed"  # a RunSummary.status the harness's failure left
RUN_SCORES = ["final", "auc", "baseline", "improvement", "cost"]  # NaN for an infra failure


def runs_frame(summaries: Iterable[RunSummary]) -> pd.DataFrame:
    """One row per run: the cell, final, AUC, baseline, improvement, cost, contamination flag
    and whether the harness failed it (``infra``: its scores are NaN, so no aggregate uses
    them)."""
    runs = pd.DataFrame([{"grid": s.grid, "task": s.task, "level": s.level, "agent": s.agent,
                          "driver": s.driver, "seed": s.seed, "final": s.final_score,
                          "auc": run_auc(s), "baseline": s.baseline,
                          "improvement": s.improvement,
                          "cost": s.cost_usd, "contaminated": integrity_view(s.integrity).flagged,
                          "infra": s.status == INFRA_FAILED}
                         for s in summaries],
                        columns=[*KEYS, "seed", *RUN_SCORES, "contaminated", "infra"])
    for column in RUN_SCORES:
        runs[column] = pd.to_numeric(runs[column], errors="coerce").astype(float)
    runs["infra"] = runs["infra"].astype(bool)
    runs.loc[runs["infra"], RUN_SCORES] = math.nan
    runs["contaminated"] = (runs["contaminated"].astype(bool) & ~runs["infra"]).astype(int)
    runs["scored"] = (~runs["infra"]).astype(int)
    return runs


def leaderboard_frame(summaries: Iterable[RunSummary]) -> pd.DataFrame:
    """Aggregate per-run summaries into leaderboard rows (see the module doc for columns)."""
    runs = runs_frame(summaries)
    if runs.empty:
        return pd.DataFrame(columns=COLUMNS)
    board = (runs.groupby(KEYS, sort=False, dropna=False)
             .agg(n_seeds=("scored", "sum"), infra_failed=("infra", "sum"),
                  final_mean=("final", "mean"),
                  final_std=("final", "std"), auc=("auc", "mean"),
                  baseline=("baseline", "mean"),
                  improvement_mean=("improvement", "mean"), final_best=("final", "max"),
                  cost_usd=("cost", "mean"), contaminated=("contaminated", "sum"))
             .reset_index())
    for score, low, high in (("final", "ci_low", "ci_high"), ("auc", "auc_low", "auc_high")):
        intervals = {key: bootstrap_ci(group[score].tolist())
                     for key, group in runs.groupby(KEYS, sort=False, dropna=False)}
        cells = list(board[KEYS].itertuples(index=False))
        board[low] = [intervals[tuple(r)][0] for r in cells]
        board[high] = [intervals[tuple(r)][1] for r in cells]
    board["n_seeds"] = board["n_seeds"].astype(int)
    board["infra_failed"] = board["infra_failed"].astype(int)
    board["contaminated"] = board["contaminated"].astype(int)
    board = board.sort_values(["grid", "task", "final_mean"], ascending=[True, True, False],
                              na_position="last", kind="stable")
    return board[COLUMNS].reset_index(drop=True)


def curves_frame(summaries: Iterable[RunSummary]) -> pd.DataFrame:
    """Best-so-far score against budget per (task, agent, driver): the mean over seeds of the
    runs' curves (``a2rl.analysis.budget_curve``) on its grid, with the 95 % bootstrap band
    (NaN for one seed); runs the harness failed and runs without a curve are left out."""
    curves: dict[tuple, list[np.ndarray]] = {}
    for s in summaries:
        curve = None if s.status == INFRA_FAILED else budget_curve(s)
        if curve is not None:
            curves.setdefault((s.grid, s.task, s.level, s.agent, s.driver), []).append(curve)
    parts = []
    for (grid, task, level, agent, driver), rows in sorted(curves.items()):
        low, high = bootstrap_band(np.stack(rows))
        parts.append(pd.DataFrame({
            "grid": grid, "task": task, "level": level, "agent": agent, "driver": driver,
            "series": f"{task}/{agent}/{driver}", "fraction": GRID, "n_seeds": len(rows),
            "best_mean": np.mean(rows, axis=0), "band_low": low, "band_high": high}))
    if not parts:
        return pd.DataFrame(columns=CURVE_COLUMNS)
    return pd.concat(parts, ignore_index=True)[CURVE_COLUMNS]


def level_frame(summaries: Iterable[RunSummary]) -> pd.DataFrame:
    """Aggregate per level (L1/L2/L3) and (agent, driver); see the module doc."""
    runs = runs_frame(summaries)
    if runs.empty:
        return pd.DataFrame(columns=LEVEL_COLUMNS)
    rows = []
    for (grid, level, agent, driver), part in runs.groupby(LEVEL_KEYS, sort=True,
                                                           dropna=False):
        tasks = part.groupby("task", sort=True)
        low, high = stratified_bootstrap_ci([g["improvement"].to_numpy(dtype=float)
                                             for _, g in tasks])
        rows.append({"grid": grid, "level": level, "agent": agent, "driver": driver,
                     "n_tasks": tasks.ngroups, "n_runs": int(part["scored"].sum()),
                     "infra_failed": int(part["infra"].sum()),
                     "final_mean": tasks["final"].mean().mean(),
                     "improvement_mean": tasks["improvement"].mean().mean(),
                     "ci_low": low, "ci_high": high, "cost_usd": part["cost"].mean(),
                     "contaminated": int(part["contaminated"].sum())})
    frame = pd.DataFrame(rows, columns=LEVEL_COLUMNS)
    return frame.sort_values(["grid", "level", "improvement_mean"],
                             ascending=[True, True, False],
                             na_position="last", kind="stable").reset_index(drop=True)


def _plain(value: Any) -> Any:
    """A JSON-safe scalar: NaN becomes None, numpy scalars become Python ones."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def to_metrics(board: pd.DataFrame, levels: pd.DataFrame | None = None) -> dict[str, Any]:
    """``{task: {agent: {driver: {column: value}}}}`` (and ``levels``) for leaderboard.json."""
    metrics: dict[str, Any] = {}
    for row in board.to_dict("records"):
        cell = metrics.setdefault(str(row["task"]), {}).setdefault(str(row["agent"]), {})
        cell[str(row["driver"])] = {k: _plain(row[k]) for k in COLUMNS
                                    if k not in ("task", "agent", "driver")}
    if levels is not None and not levels.empty:
        out = metrics.setdefault("levels", {})
        for row in levels.to_dict("records"):
            cell = out.setdefault(str(row["level"]), {}).setdefault(str(row["agent"]), {})
            cell[str(row["driver"])] = {k: _plain(row[k]) for k in LEVEL_COLUMNS
                                        if k not in LEVEL_KEYS}
    return metrics


def _text(column: str, value: Any, links: dict[str, str] | None = None) -> str:
    value = _plain(value)
    if value is None:
        return "–"
    if column == "cost_usd":
        return f"{value:.4f}"
    if column in SCORE_COLUMNS:
        return f"{value:+.2f}" if column == "improvement_mean" else f"{value:.2f}"
    text = str(value).replace("|", "\\|")
    if column == "task" and links and value in links:
        return f"[{text}]({links[value]})"
    return text


def _md_table(frame: pd.DataFrame, columns: list[str],
              links: dict[str, str] | None = None) -> list[str]:
    numeric = set(SCORE_COLUMNS) | {"n_seeds", "n_tasks", "n_runs", "cost_usd", "contaminated",
                                    "infra_failed"}
    lines = ["| " + " | ".join(columns) + " |",
             "|" + "|".join("---:" if c in numeric else "---" for c in columns) + "|"]
    for row in frame.to_dict("records"):
        lines.append("| " + " | ".join(_text(c, row[c], links) for c in columns) + " |")
    return lines


def to_markdown(board: pd.DataFrame, levels: pd.DataFrame | None = None,
                links: dict[str, str] | None = None) -> str:
    """Markdown tables of the leaderboard and the level aggregates (scores to two decimals,
    blanks as '–'); ``links`` maps a task id to its deviations row's href
    (``a2rl.analysis.deviations.task_links``), and tasks without one stay plain."""
    lines = ["# Leaderboard", "",
             "Test score of each run's selected submission (0-100), mean over seeds with a 95 % "
             "bootstrap interval (ci_low, ci_high). auc: the mean over the time budget of the "
             "best score so far (the baseline before the first valid submission), 0-100, with "
             "its interval (auc_low, auc_high); higher when the score came earlier. Runs the "
             "harness failed (infra_failed) are counted, not scored."
             + (" A linked task leads to how it differs from its benchmark's standard and the "
                "paper's reference code (docs/deviations.md)." if links else ""), "",
             *_md_table(board, COLUMNS, links)]
    if board.empty:
        lines += ["", "No summarized runs yet."]
    if levels is not None and not levels.empty:
        lines += ["", "## By level", "",
                  "Means over each level's tasks; interval of improvement_mean (stratified "
                  "bootstrap over seeds).", "", *_md_table(levels, LEVEL_COLUMNS)]
    return "\n".join(lines) + "\n"


def build_leaderboard(run_roots: Iterable[Path], layout: Layout) -> pd.DataFrame:
    """Aggregate the runs' summaries and write results/leaderboard.{csv,md,json},
    leaderboard_levels.csv and budget_curves.csv."""
    summaries = load_summaries(run_roots)
    board = leaderboard_frame(summaries)
    levels = level_frame(summaries)
    write_text_atomic(layout.leaderboard_csv, board.to_csv(index=False, float_format="%.4f"))
    write_text_atomic(layout.leaderboard_levels_csv,
                      levels.to_csv(index=False, float_format="%.4f"))
    links = task_links(set(board["task"]) if not board.empty else set(),
                       layout.leaderboard_md.parent)
    write_text_atomic(layout.leaderboard_md, to_markdown(board, levels, links))
    write_text_atomic(layout.budget_curves_csv,
                      curves_frame(summaries).to_csv(index=False, float_format="%.4f"))
    write_json_atomic(layout.leaderboard_json, to_metrics(board, levels))
    return board
