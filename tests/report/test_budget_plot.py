"""The report's score-against-budget figure: a panel per task, a line per agent and driver, a
band only where there are seeds to spread (a single seed draws none rather than a fake one)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd

from a2rl.analysis.budget_curve import GRID
from a2rl.analysis.leaderboard import CURVE_COLUMNS
from a2rl.report.plots import budget_curves_svg

SVG = "{http://www.w3.org/2000/svg}"


def curve(task: str, agent: str, seeds: int, reach: float) -> pd.DataFrame:
    mean = np.where(GRID < reach, 20.0, 70.0)
    spread = 5.0 if seeds > 1 else np.nan
    return pd.DataFrame({"grid": "ci", "task": task, "level": "L1", "agent": agent,
                         "driver": "none",
                         "series": f"{task}/{agent}/none", "fraction": GRID,
                         "n_seeds": seeds, "best_mean": mean, "band_low": mean - spread,
                         "band_high": mean + spread})[CURVE_COLUMNS]


def groups(path, prefix: str) -> list[str]:
    root = ET.parse(path).getroot()
    return [g.get("id") for g in root.iter(f"{SVG}g") if g.get("id", "").startswith(prefix)]


def test_one_band_per_multi_seed_line_and_none_for_a_single_seed(tmp_path):
    frame = pd.concat([curve("gsm8k", "sft", 3, 0.2), curve("gsm8k", "noop", 1, 0.9),
                       curve("household", "sft", 1, 0.5)], ignore_index=True)
    path = budget_curves_svg(frame, tmp_path / "budget.svg")
    axes = groups(path, "axes_")
    assert len(axes) == 2  # a panel per task
    assert len(groups(path, "FillBetweenPolyCollection_") + groups(path, "PolyCollection_")) == 1
    assert len(groups(path, "line2d_")) >= 3  # the three lines (and the axes' ticks)


def test_no_curves_draws_a_note_not_an_error(tmp_path):
    path = budget_curves_svg(pd.DataFrame(columns=CURVE_COLUMNS), tmp_path / "none.svg")
    assert ET.parse(path).getroot().tag == f"{SVG}svg"
