"""The report's figures, drawn with matplotlib into SVG files (no server, no JavaScript)."""

from __future__ import annotations

import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np

from a2rl.analysis.budget_curve import best_so_far
from a2rl.common.records import RunSummary

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STYLE = {"svg.hashsalt": "a2rl", "svg.fonttype": "path", "font.size": 10,
         "axes.spines.top": False, "axes.spines.right": False}
COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"]


def _save(fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    return path


def trajectory_points(summary: RunSummary) -> list[dict[str, Any]]:
    """Valid submissions in time order with the running best: the trajectory's data."""
    return [asdict(p) for p in best_so_far(summary.submissions.items)]


def trajectory_svg(summary: RunSummary, path: Path) -> Path:
    """Feedback score against time: each submission, the running best, the baseline and the
    time limit; rejected submissions as red crosses on the time axis."""
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(7.5, 3.6))
        limit = summary.budget.time_limit_s or 0
        minutes = limit > 900
        scale = 60.0 if minutes else 1.0
        points = trajectory_points(summary)
        baseline = summary.baseline
        xs = [p["elapsed_s"] / scale for p in points]
        if points:
            ax.plot(xs, [p["score"] for p in points], "o", color=COLORS[0],
                    label=f"submission ({summary.feedback} score)", zorder=3)
            steps_x = [0.0, *xs, (summary.agent_seconds or limit or 0) / scale]
            first = baseline if baseline is not None else points[0]["score"]
            steps_y = [first, *[p["best_score"] for p in points], points[-1]["best_score"]]
            ax.step(steps_x, steps_y, where="post", color=COLORS[0], alpha=0.5,
                    label="best so far")
            for p, x in zip(points, xs):
                ax.annotate(str(p["submission_id"]), (x, p["score"]), textcoords="offset points",
                            xytext=(4, 4), fontsize=8, color="#555")
        if baseline is not None:
            ax.axhline(baseline, color="#777", linestyle="--", linewidth=1,
                       label=f"baseline {baseline:.1f}")
        if summary.final_score is not None and summary.final_from == "final":
            end = (limit or summary.agent_seconds or 0) / scale  # the outcome, at the end
            ax.plot([end], [summary.final_score], "*", color=COLORS[2], markersize=12,
                    label=f"final test {summary.final_score:.1f}", zorder=4, clip_on=False)
        rejected = [s.elapsed_s / scale for s in summary.submissions.items
                    if not s.valid and s.elapsed_s is not None]
        if rejected:
            ax.plot(rejected, [0] * len(rejected), "x", color=COLORS[3], clip_on=False,
                    label="rejected submission", zorder=3)
        if limit:
            ax.axvline(limit / scale, color=COLORS[3], linewidth=1, alpha=0.6,
                       label="time limit")
            ax.set_xlim(0, limit / scale * 1.03)
        ax.set_ylim(0, 100)
        ax.set_xlabel("time since the agent started (" + ("min" if minutes else "s") + ")")
        ax.set_ylabel("score (0-100)")
        ax.grid(alpha=0.3)
        if not points and not rejected:
            ax.text(0.5, 0.5, "no submissions", transform=ax.transAxes, ha="center",
                    color="#777")
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False, fontsize=8)
        return _save(fig, path)


def leaderboard_svg(board, path: Path) -> Path:
    """Final test score per (agent, driver) and task: mean over seeds with its 95 % interval,
    the baseline as a dashed line."""
    with plt.rc_context(STYLE):
        tasks = list(dict.fromkeys(board["task"])) if len(board) else []
        # one colour per (agent, driver) in every panel, as in the budget curves
        pairs = sorted(set(zip(board["agent"], board["driver"]))) if len(board) else []
        colors = {pair: COLORS[i % len(COLORS)] for i, pair in enumerate(pairs)}
        fig, axes = plt.subplots(1, max(1, len(tasks)), figsize=(max(4.5, 3.6 * len(tasks)), 3.2),
                                 squeeze=False)
        for ax, task in zip(axes[0], tasks or [None]):
            if task is None:
                ax.text(0.5, 0.5, "no summarized runs", ha="center", transform=ax.transAxes)
                ax.set_axis_off()
                continue
            rows = bar_rows(board, task)
            labels = [f"{a}\n{d}" if d != "none" else a for a, d in zip(rows["agent"],
                                                                        rows["driver"])]
            means = rows["final_mean"].astype(float).tolist()
            low = [m - lo if not math.isnan(lo) else 0 for m, lo in zip(means, rows["ci_low"])]
            high = [hi - m if not math.isnan(hi) else 0 for m, hi in zip(means, rows["ci_high"])]
            ax.bar(range(len(rows)), means,
                   color=[colors[p] for p in zip(rows["agent"], rows["driver"])],
                   yerr=[low, high], capsize=4, alpha=0.85)
            base = rows["baseline"].astype(float)
            if base.notna().any():
                ax.axhline(float(base.mean()), color="#555", linestyle="--", linewidth=1,
                           label="baseline")
                ax.legend(frameon=False, fontsize=8, loc="upper right")
            for i, m in enumerate(means):
                if not math.isnan(m):
                    ax.text(i, m + 1.5, f"{m:.1f}", ha="center", fontsize=8)
            ax.set_xticks(range(len(rows)), labels)
            ax.set_ylim(0, 100)
            ax.set_title(task, fontsize=10)
            ax.set_ylabel("final test score")
            ax.grid(axis="y", alpha=0.3)
        return _save(fig, path)


def bar_rows(board, task: str):
    """The leaderboard's rows of ``task`` in the bar chart's order: by agent, then driver, the
    same in every task's panel (the leaderboard itself is in score order)."""
    rows = board[board["task"] == task]
    return rows.sort_values(["agent", "driver"], kind="stable").reset_index(drop=True)


def budget_curves_svg(curves, path: Path) -> Path:
    """Best score so far against the share of the time budget used, one panel per task and a
    line per (agent, driver): the mean over seeds with its 95 % bootstrap band (no band for a
    single seed, which has no spread to show)."""
    with plt.rc_context(STYLE):
        tasks = list(dict.fromkeys(curves["task"])) if len(curves) else []
        # one colour per (agent, driver) in every panel
        pairs = sorted(set(zip(curves["agent"], curves["driver"])))
        colors = {pair: COLORS[i % len(COLORS)] for i, pair in enumerate(pairs)}
        fig, axes = plt.subplots(1, max(1, len(tasks)), figsize=(max(5.0, 4.2 * len(tasks)), 3.4),
                                 squeeze=False)
        for ax, task in zip(axes[0], tasks or [None]):
            if task is None:
                ax.text(0.5, 0.5, "no runs with a budget curve", ha="center",
                        transform=ax.transAxes)
                ax.set_axis_off()
                continue
            rows = curves[curves["task"] == task]
            for (agent, driver), line in rows.groupby(["agent", "driver"], sort=True):
                color = colors[(agent, driver)]
                n = int(line["n_seeds"].iloc[0])
                name = agent if driver == "none" else f"{agent} / {driver}"
                label = f"{name} ({n} seeds)" if n > 1 else f"{name} (1 seed, no band)"
                x = line["fraction"].to_numpy(dtype=float) * 100
                ax.step(x, line["best_mean"], where="post", color=color, label=label)
                low = line["band_low"].to_numpy(dtype=float)
                high = line["band_high"].to_numpy(dtype=float)
                band = ~(np.isnan(low) | np.isnan(high))
                if band.any():
                    ax.fill_between(x, low, high, where=band, step="post", color=color,
                                    alpha=0.2, linewidth=0)
            ax.set_xlim(0, 100)
            ax.set_ylim(0, 100)
            ax.set_title(task, fontsize=10)
            ax.set_xlabel("share of the time budget used (%)")
            ax.set_ylabel("best score so far")
            ax.grid(alpha=0.3)
            ax.legend(frameon=False, fontsize=7, loc="lower right")
        return _save(fig, path)
