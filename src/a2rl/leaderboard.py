"""The leaderboard: one row per (task, agent, driver), aggregated over seeds from each run's
summary.json (written by ``a2rl.summary.summarize_run``).

Columns: task, level, agent, driver, n_seeds (runs summarized), final_mean and final_std (test
score of the selected submission over seeds; std with ddof=1, empty for one seed), baseline,
improvement_mean (final - baseline), final_best (the best seed's final score). Scores are on
the 0-100 scale. Rows are sorted by task, then final_mean, best first.

Written to results/leaderboard.csv, leaderboard.md and leaderboard.json (nested
``{task: {agent: {driver: {column: value}}}}`` so ``dvc metrics show`` can read it).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from a2rl.config import RunConfig
from a2rl.layout import Layout, RunPaths
from a2rl.records import read_json, write_json_atomic
from a2rl.summary import write_text_atomic

log = logging.getLogger(__name__)

KEYS = ["task", "level", "agent", "driver"]
COLUMNS = [*KEYS, "n_seeds", "final_mean", "final_std", "baseline", "improvement_mean",
           "final_best"]
SCORE_COLUMNS = ["final_mean", "final_std", "baseline", "improvement_mean", "final_best"]


def grid_run_roots(cfg: RunConfig) -> list[Path]:
    """Run directories of every cell of ``cfg.grid`` (whether or not they ran)."""
    from a2rl.compose import grid_cells

    layout = Layout.from_paths(cfg.paths)
    return [layout.run(c["task"], c["agent"], c["driver"], c["seed"]).root
            for c in grid_cells(cfg)]


def discover_run_roots(layout: Layout) -> list[Path]:
    """Run directories under results/runs/ that hold a summary.json, whatever grid made them."""
    pattern = RunPaths(Path("*/*/*/seed*")).summary_json
    return sorted(p.parent for p in (layout.results / "runs").glob(str(pattern)))


def load_summaries(run_roots: Iterable[Path]) -> list[dict[str, Any]]:
    """summary.json of each run directory; runs without one are logged and left out."""
    summaries = []
    for root in run_roots:
        path = RunPaths(Path(root)).summary_json
        if not path.is_file():
            log.warning("no summary at %s; run left out of the leaderboard", path)
            continue
        summaries.append(read_json(path))
    return summaries


def leaderboard_frame(summaries: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """Aggregate per-run summaries into leaderboard rows (see the module doc for columns)."""
    runs = pd.DataFrame([{"task": s.get("task"), "level": s.get("level"),
                          "agent": s.get("agent"), "driver": s.get("driver"),
                          "seed": s.get("seed"), "final": s.get("final_score"),
                          "baseline": s.get("baseline"), "improvement": s.get("improvement")}
                         for s in summaries],
                        columns=[*KEYS, "seed", "final", "baseline", "improvement"])
    if runs.empty:
        return pd.DataFrame(columns=COLUMNS)
    for column in ("final", "baseline", "improvement"):
        runs[column] = pd.to_numeric(runs[column], errors="coerce").astype(float)
    board = (runs.groupby(KEYS, sort=False, dropna=False)
             .agg(n_seeds=("seed", "size"), final_mean=("final", "mean"),
                  final_std=("final", "std"), baseline=("baseline", "mean"),
                  improvement_mean=("improvement", "mean"), final_best=("final", "max"))
             .reset_index())
    board["n_seeds"] = board["n_seeds"].astype(int)
    board = board.sort_values(["task", "final_mean"], ascending=[True, False],
                              na_position="last", kind="stable")
    return board[COLUMNS].reset_index(drop=True)


def _plain(value: Any) -> Any:
    """A JSON-safe scalar: NaN becomes None, numpy scalars become Python ones."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def to_metrics(board: pd.DataFrame) -> dict[str, Any]:
    """``{task: {agent: {driver: {column: value}}}}`` for leaderboard.json."""
    metrics: dict[str, Any] = {}
    for row in board.to_dict("records"):
        cell = metrics.setdefault(str(row["task"]), {}).setdefault(str(row["agent"]), {})
        cell[str(row["driver"])] = {k: _plain(row[k]) for k in COLUMNS
                                    if k not in ("task", "agent", "driver")}
    return metrics


def to_markdown(board: pd.DataFrame) -> str:
    """A Markdown table of the leaderboard (scores to two decimals, blanks as '–')."""
    def text(column: str, value: Any) -> str:
        value = _plain(value)
        if value is None:
            return "–"
        if column in SCORE_COLUMNS:
            return f"{value:+.2f}" if column == "improvement_mean" else f"{value:.2f}"
        return str(value).replace("|", "\\|")

    lines = ["# Leaderboard", "",
             "Test score of each run's selected submission (0-100), mean over seeds.", "",
             "| " + " | ".join(COLUMNS) + " |",
             "|" + "|".join("---:" if c in SCORE_COLUMNS or c == "n_seeds" else "---"
                            for c in COLUMNS) + "|"]
    for row in board.to_dict("records"):
        lines.append("| " + " | ".join(text(c, row[c]) for c in COLUMNS) + " |")
    if board.empty:
        lines += ["", "No summarized runs yet."]
    return "\n".join(lines) + "\n"


def build_leaderboard(run_roots: Iterable[Path], layout: Layout) -> pd.DataFrame:
    """Aggregate the runs' summaries and write results/leaderboard.{csv,md,json}."""
    board = leaderboard_frame(load_summaries(run_roots))
    write_text_atomic(layout.leaderboard_csv, board.to_csv(index=False, float_format="%.4f"))
    write_text_atomic(layout.leaderboard_md, to_markdown(board))
    write_json_atomic(layout.leaderboard_json, to_metrics(board))
    return board
