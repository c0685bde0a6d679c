"""The static HTML report: one folder that opens from disk, no server; the only script is the
inline filter of a run page's transcript viewer (the page reads without it).

results/report/
  index.html                 the leaderboard (95 % intervals; each task linked to its row of
                             docs/deviations.md when it has one, a2rl.analysis.deviations),
                             the level aggregates, a plot of
                             final scores, the best score so far against the budget (mean
                             over seeds with a bootstrap band) and a table of every run, each
                             linking to its page
  runs/<task>__<agent>__<driver>__seed<k>.html
                             one run: outcome, score-vs-time trajectory, process metrics,
                             route, submissions with lineage, code revisions with their diffs,
                             failures, integrity, LLM usage, an LLM agent's transcript,
                             timeline
  plots/*.svg                the figures (matplotlib)
  trajectories/<run>.csv     each run's valid submissions (elapsed_s, score, best_score), for
                             ``dvc plots show``

``build_report(run_roots, layout)`` writes it from the runs' summary.json files (each a
``RunSummary``) and code.git repositories: the index here, each run's page in
``a2rl.report.run_page``, both from the pieces in ``a2rl.report.html_parts``. What the
integrity section and the outcome's verdicts say comes from ``a2rl.analysis.view``, as in
summary.md.
"""

from __future__ import annotations

import csv
import io
import logging
import shutil
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from a2rl.analysis.deviations import task_links
from a2rl.analysis.leaderboard import (
    COLUMNS,
    LEVEL_COLUMNS,
    LEVEL_KEYS,
    SCORE_COLUMNS,
    _plain,
    curves_frame,
    leaderboard_frame,
    level_frame,
    load_summaries,
)
from a2rl.analysis.view import integrity_view
from a2rl.common.files import write_text_atomic
from a2rl.common.layout import Layout, RunPaths
from a2rl.common.records import RunSummary
from a2rl.report.html_parts import esc, fmt, integrity_badge, page, route_html, table
from a2rl.report.plots import (
    budget_curves_svg,
    leaderboard_svg,
    trajectory_points,
    trajectory_svg,
)
from a2rl.report.run_page import run_page

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------- index


def _board_rows(board: pd.DataFrame, links: dict[tuple, list[tuple[int, str]]],
                deviations: dict[str, str] | None = None) -> list[list]:
    rows = []
    for r in board.to_dict("records"):
        cells = []
        for c in COLUMNS:
            value = _plain(r[c])
            if c == "task" and deviations and value in deviations:
                cells.append(f'<a href="{esc(deviations[value])}" title="how {esc(value)} '
                             f'differs from its benchmark">{esc(value)}</a>')
            elif c == "improvement_mean":
                cells.append(fmt(value, signed=True))
            elif c == "cost_usd":
                cells.append(fmt(value, 4))
            elif c in SCORE_COLUMNS:
                cells.append(fmt(value))
            elif c == "contaminated" and value:
                cells.append(f'<span class="flag">{esc(value)}</span>')
            else:
                cells.append(esc(value) if value is not None else "–")
        seeds = links.get((r["grid"], r["task"], r["agent"], r["driver"]), [])
        cells.append(" ".join(f'<a href="runs/{esc(name)}.html">seed {seed}</a>'
                              for seed, name in seeds))
        rows.append(cells)
    return rows


def index_page(board: pd.DataFrame, levels: pd.DataFrame, summaries: list[RunSummary],
               generated: str, deviations: dict[str, str] | None = None,
               before: str = "") -> str:
    """The index; ``deviations`` maps a task id to its deviations row's href
    (``a2rl.analysis.deviations.task_links``), and tasks without one stay plain text.
    ``before``: HTML put ahead of the leaderboard (the live view's table of every cell)."""
    links: dict[tuple, list[tuple[int, str]]] = {}
    for s in summaries:
        links.setdefault((s.grid, s.task, s.agent, s.driver), []).append((s.seed, s.slug))
    for seeds in links.values():
        seeds.sort()
    numeric_board = [i for i, c in enumerate(COLUMNS)
                     if c in SCORE_COLUMNS
                     or c in ("n_seeds", "infra_failed", "cost_usd", "contaminated")]
    body = ["<h1>Agent² RL-Bench report</h1>",
            f"<p class=\"muted\">{len(summaries)} runs of grid "
            f"{esc(', '.join(sorted({s.grid for s in summaries})) or '–')}; generated "
            f"{esc(generated)}. Scores are "
            "test scores of each run's selected submission (0-100); intervals are 95 % "
            "bootstrap intervals over seeds.</p>", before,
            "<h2 id=\"leaderboard\">Leaderboard</h2>"]
    if board.empty:
        body.append("<p>No summarized runs yet.</p>")
    else:
        if deviations:
            body.append("<p class=\"muted\">A linked task leads to how it differs from its "
                        "benchmark's standard and the paper's reference code "
                        "(docs/deviations.md).</p>")
        body += [table([*COLUMNS, "runs"], _board_rows(board, links, deviations), numeric_board,
                       cls="leaderboard"),
                 '<figure><img src="plots/leaderboard.svg" alt="final test score by agent">'
                 "<figcaption class=\"muted\">Mean final test score with its 95 % interval; "
                 "dashed: baseline.</figcaption></figure>",
                 "<h2 id=\"budget\">Score against budget</h2>",
                 '<figure><img src="plots/budget_curves.svg" alt="best score so far against '
                 'the share of the time budget used">'
                 "<figcaption class=\"muted\">Best score so far (feedback split; the baseline "
                 "until the first valid submission) against the share of each run's time limit "
                 "used: mean over seeds with its 95 % bootstrap band over seeds (none for a "
                 "single seed). The auc column is the mean of each run's curve over the budget."
                 "</figcaption></figure>"]
    if not levels.empty:
        numeric_levels = [i for i, c in enumerate(LEVEL_COLUMNS) if c not in LEVEL_KEYS]
        body += ["<h2 id=\"levels\">By level</h2>", table(LEVEL_COLUMNS, [
            [fmt(_plain(r[c]), signed=c == "improvement_mean") if c in SCORE_COLUMNS
             else fmt(_plain(r[c]), 4) if c == "cost_usd" else esc(_plain(r[c]))
             for c in LEVEL_COLUMNS] for r in levels.to_dict("records")], numeric_levels,
            cls="levels")]
    body.append("<h2 id=\"runs\">Runs</h2>")
    rows = []
    for s in sorted(summaries, key=lambda s: s.cell):
        rows.append([f'<a href="runs/{esc(s.slug)}.html">{esc(s.slug)}</a>', esc(s.status),
                     fmt(s.baseline), fmt(s.final_score), fmt(s.improvement, signed=True),
                     f"{s.submissions.valid}/{s.submissions.total}",
                     route_html(s.route.get("methods", []), s.route.get("techniques", [])),
                     integrity_badge(integrity_view(s.integrity))])
    body.append(table(["run", "status", "baseline", "final", "improvement", "valid/total",
                       "route", "integrity"], rows, [2, 3, 4, 5], cls="runs")
                if rows else "<p>No runs.</p>")
    return page("Agent² RL-Bench report", "\n".join(body))


def trajectory_csv(summary: RunSummary) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, ["submission_id", "elapsed_s", "score", "best_score"],
                            lineterminator="\n")
    writer.writeheader()
    writer.writerows(trajectory_points(summary))
    return out.getvalue()


def index_figures(board: pd.DataFrame, summaries: list[RunSummary], plots: Path) -> None:
    """The index's two figures (``board``: the leaderboard of ``summaries``) drawn into
    ``plots``."""
    leaderboard_svg(board, plots / "leaderboard.svg")
    budget_curves_svg(curves_frame(summaries), plots / "budget_curves.svg")


def build_report(run_roots: Iterable[Path], layout: Layout,
                 out: Path | None = None) -> Path:
    """Write the report of ``run_roots`` to ``out`` (default results/report); returns
    index.html."""
    out = Path(out or layout.report)
    present = [Path(r) for r in run_roots if RunPaths(Path(r)).summary_json.is_file()]
    summaries = load_summaries(present)
    roots = {s.slug: root for s, root in zip(summaries, present)}
    for sub in ("runs", "plots", "trajectories"):
        shutil.rmtree(out / sub, ignore_errors=True)
        (out / sub).mkdir(parents=True, exist_ok=True)
    board, levels = leaderboard_frame(summaries), level_frame(summaries)
    index_figures(board, summaries, out / "plots")
    for s in summaries:
        name = s.slug
        trajectory_svg(s, out / "plots" / f"{name}.svg")
        write_text_atomic(out / "trajectories" / f"{name}.csv", trajectory_csv(s))
        write_text_atomic(out / "runs" / f"{name}.html",
                          run_page(s, RunPaths(roots[name]), f"../plots/{name}.svg"))
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    index = out / "index.html"
    deviations = task_links(set(board["task"]) if not board.empty else set(), out)
    write_text_atomic(index, index_page(board, levels, summaries, generated, deviations))
    log.info("report of %d runs at %s", len(summaries), index)
    return index
