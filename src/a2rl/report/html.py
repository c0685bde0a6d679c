"""The static HTML report: one folder that opens from disk, no server and no scripts.

results/report/
  index.html                 the leaderboard (95 % intervals), the level aggregates, a plot of
                             final scores and a table of every run, each linking to its page
  runs/<task>__<agent>__<driver>__seed<k>.html
                             one run: outcome, score-vs-time trajectory, process metrics,
                             route, submissions with lineage, code revisions with their diffs,
                             failures, integrity, LLM usage, timeline
  plots/*.svg                the figures (matplotlib)
  trajectories/<run>.csv     each run's valid submissions (elapsed_s, score, best_score), for
                             ``dvc plots show``

``build_report(run_roots, layout)`` writes it from the runs' summary.json files and code.git
repositories.
"""

from __future__ import annotations

import csv
import html
import io
import logging
import shutil
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from a2rl.analysis.leaderboard import (
    COLUMNS,
    LEVEL_COLUMNS,
    SCORE_COLUMNS,
    _plain,
    leaderboard_frame,
    level_frame,
    load_summaries,
)
from a2rl.common.files import write_text_atomic
from a2rl.common.layout import Layout, RunPaths
from a2rl.grading import recording
from a2rl.report.plots import leaderboard_svg, trajectory_points, trajectory_svg

log = logging.getLogger(__name__)

MAX_DIFF_CHARS = 200_000
CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 1200px; padding: 0 1.5em; color: #222; line-height: 1.4; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { margin-top: 1.8em; font-size: 1.25em;
  border-bottom: 1px solid #ddd; padding-bottom: 0.2em; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f3f5f7; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr:nth-child(even) td { background: #fafbfc; }
.muted { color: #666; font-size: 0.9em; } .flag { color: #b00020; font-weight: bold; }
.ok { color: #1b7f3b; } code { background: #f3f5f7; padding: 0 3px; border-radius: 3px; }
pre { background: #f6f8fa; padding: 0.8em; overflow-x: auto; font-size: 0.82em;
      border: 1px solid #e1e4e8; border-radius: 4px; }
pre.diff .add { color: #1b7f3b; } pre.diff .del { color: #b00020; }
pre.diff .hunk { color: #6f42c1; } pre.diff .file { font-weight: bold; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
td a { white-space: nowrap; } nav a { margin-right: 1em; }
details { margin: 0.4em 0; } summary { cursor: pointer; }
"""


def slug(summary: dict[str, Any]) -> str:
    return f"{summary['task']}__{summary['agent']}__{summary['driver']}__seed{summary['seed']}"


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def fmt(value: Any, digits: int = 2, signed: bool = False) -> str:
    value = _plain(value)
    if value is None:
        return "–"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return esc(value)
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def page(title: str, body: str, depth: int = 0) -> str:
    home = "../" * depth + "index.html"
    nav = f'<nav><a href="{home}">Leaderboard</a></nav>' if depth else ""
    return (f"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{esc(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n{nav}\n"
            f"{body}\n</body>\n</html>\n")


def table(header: list[str], rows: list[list[str]], numeric: Iterable[int] = (),
          cls: str = "") -> str:
    """An HTML table; cells are HTML already (escape text before)."""
    numeric = set(numeric)
    head = "".join(f"<th>{h}</th>" for h in header)
    body = "".join("<tr>" + "".join(
        f'<td class="num">{c}</td>' if i in numeric else f"<td>{c}</td>"
        for i, c in enumerate(row)) + "</tr>\n" for row in rows)
    attr = f' class="{cls}"' if cls else ""
    return f"<table{attr}>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}</tbody>\n</table>"


def diff_html(text: str) -> str:
    if len(text) > MAX_DIFF_CHARS:
        text = text[:MAX_DIFF_CHARS] + "\n... (diff cut at 200,000 characters)\n"
    out = []
    for line in text.splitlines():
        cls = ("file" if line.startswith(("diff --git", "+++", "---", "index ")) else
               "add" if line.startswith("+") else "del" if line.startswith("-") else
               "hunk" if line.startswith("@@") else "")
        out.append(f'<span class="{cls}">{esc(line)}</span>' if cls else esc(line))
    return '<pre class="diff">' + "\n".join(out) + "</pre>"


# ------------------------------------------------------------------------------- run pages


def _route(methods: list[str], techniques: list[str]) -> str:
    if not methods:
        return "–"
    return esc(", ".join(methods)) + (f" ({esc(', '.join(techniques))})" if techniques else "")


def _short(commit: str | None) -> str:
    return f"<code>{esc(commit[:10])}</code>" if commit else "–"


def _integrity_badge(s: dict[str, Any]) -> str:
    integrity = s.get("integrity") or {}
    c = integrity.get("contamination") or {}
    tamper = (integrity.get("tamper") or {}).get("count", 0)
    parts = []
    if c.get("flagged"):
        parts.append(f'<span class="flag">contaminated ({c.get("contaminated_items")})</span>')
    elif c.get("checked"):
        parts.append('<span class="ok">clean</span>')
    else:
        parts.append('<span class="muted">not checked</span>')
    if tamper:
        parts.append(f'<span class="flag">{tamper} tamper</span>')
    return ", ".join(parts)


def code_revision_sections(s: dict[str, Any], repo: Path) -> str:
    """The revisions table and the diff between each pair of consecutive tagged revisions
    (submissions, then the final code)."""
    revisions = (s.get("code") or {}).get("revisions") or []
    if not revisions:
        return "<p>No code revisions were recorded for this run.</p>"
    names = [t for r in revisions for t in r["tags"]]
    hint = (f"git --git-dir {repo} diff {names[0]} {names[1]}" if len(names) >= 2
            else f"git --git-dir {repo} log --stat")
    parts = [f"<p>Recorded in <code>{esc(repo)}</code> (tags <code>submission-&lt;id&gt;"
             f"</code> and <code>final</code>); for example <code>{esc(hint)}</code>.</p>",
             table(["commit", "tags", "time", "files", "message"],
                   [[_short(r["commit"]), esc(", ".join(r["tags"])), esc(r["time"]),
                     str(len(r["files"])), esc(r["message"])] for r in revisions], [3])]
    tagged = [(r["tags"][0], r["commit"]) for r in revisions if r["tags"]]
    # (label, commit, the name git knows it by)
    previous: tuple[str, str | None, str | None] = ("(empty)", None, None)
    for name, commit in tagged:
        try:
            text = recording.diff(repo, previous[1], commit)
            stat = recording.diff(repo, previous[1], commit, stat_only=True).strip()
        except recording.RecordingError as err:
            text, stat = f"(diff unavailable: {err})", ""
        summary_line = stat.splitlines()[-1].strip() if stat else "no changes"
        shown = diff_html(text) if text.strip() else "<p>No changes.</p>"
        command = recording.diff_command(repo, previous[2], name)
        parts.append(f'<details class="revision"{" open" if previous[1] is None else ""}>'
                     f"<summary>{esc(previous[0])} → <b>{esc(name)}</b>: "
                     f"{esc(summary_line)}</summary>"
                     f'<p class="muted"><code>{esc(command)}</code></p>{shown}</details>')
        previous = (name, commit, name)
    return "\n".join(parts)


def run_page(s: dict[str, Any], run: RunPaths, plot: str) -> str:
    """The HTML of one run's page; ``plot`` is the trajectory's path relative to the page."""
    budget = s["budget"]
    subs = s["submissions"]
    route = s.get("route") or {"methods": [], "techniques": [], "per_submission": []}
    p = s.get("process") or {}
    title = f"{s['task']} · {s['agent']} · {s['driver']} · seed {s['seed']}"
    final = fmt(s["final_score"]) + (f" ± {fmt(s['final_stderr'])}"
                                     if s.get("final_stderr") is not None else "")
    if s["final_from"] == "baseline":
        final += " (no valid submission: base model)"
    elif s.get("selected_submission") is not None:
        final += f" (submission {esc(s['selected_submission'])})"
    body = [f"<h1>{esc(title)}</h1>",
            f"<p class=\"muted\">Task <code>{esc(s['task'])}</code> ({esc(s['task_name'])}, "
            f"{esc(s['level'])}), feedback on the {esc(s['feedback'])} split; base model "
            f"<code>{esc(s['model'])}</code>; budget <code>{esc(budget['name'])}</code> "
            f"({fmt(budget['time_limit_s'], 0)} s, {esc(budget['max_submissions'])} "
            f"submissions); sandbox <code>{esc(s['sandbox'])}</code>.</p>",
            "<h2 id=\"outcome\">Outcome</h2>",
            table(["", "value"], [
                ["Agent status", esc(f"{s['status']} (exit {s['exit_code']}, "
                                     f"{fmt(s['agent_seconds'], 1)} s)")],
                ["Baseline (test)", fmt(s["baseline"])],
                [f"Best feedback score ({esc(s['feedback'])})", fmt(s["best_feedback_score"])],
                ["Final test score", final],
                ["Improvement", fmt(s["improvement"], signed=True)],
                ["Submissions", f"{subs['total']} ({subs['valid']} valid, "
                                f"{subs['invalid']} invalid)"],
                ["Route", _route(route["methods"], route["techniques"])],
                ["LLM cost (USD)", fmt(s.get("cost_usd"), 4)],
                ["Integrity", _integrity_badge(s)]]),
            "<h2 id=\"trajectory\">Score over time</h2>",
            f'<figure><img src="{esc(plot)}" alt="score versus time of {esc(title)}">'
            f"<figcaption class=\"muted\">Feedback score of each submission, the best so far, "
            f"the baseline and the time limit.</figcaption></figure>",
            "<h2 id=\"process\">Process</h2>",
            table(["metric", "value"], [
                ["Valid-submission rate", fmt(p.get("valid_rate"))],
                ["Time to first valid submission (s)", fmt(p.get("time_to_first_valid_s"), 1)],
                ["Time to first improvement (s)", fmt(p.get("time_to_first_improvement_s"), 1)],
                ["Time to best (s)", fmt(p.get("time_to_best_s"), 1)],
                ["Monotonic ratio of scores", fmt(p.get("monotonic_ratio"))],
                ["Share of budget used", fmt(p.get("budget_used"))],
                ["Gap between last submission and deadline (s)",
                 fmt(p.get("deadline_gap_s"), 1)],
                ["Copies of the base model submitted", fmt(p.get("copy_of_base"), 0)]], [1]),
            "<h2 id=\"route\">Route</h2>",
            f"<p>Methods used: <b>{_route(route['methods'], route['techniques'])}</b></p>"]
    if route.get("per_submission"):
        body.append(table(["#", "code commit", "route", "evidence"], [
            [esc(r["id"]), _short(r.get("code_commit")),
             _route(r["methods"], r["techniques"]) if r["valid"] else "(rejected)",
             esc("; ".join(f"{e['where']}: {e['what']}" for e in r["evidence"][:3]))]
            for r in route["per_submission"]]))
    lineage = {a["artifact_hash"]: a for a in s.get("lineage") or []}
    body.append("<h2 id=\"submissions\">Submissions</h2>")
    if subs["items"]:
        body.append(table(
            ["#", "elapsed (s)", "valid", "score", "model path", "artifact", "size (MB)",
             "parent", "code", "error"],
            [[esc(i["id"]), fmt(i["elapsed_s"], 1), "yes" if i["valid"] else "no",
              fmt(i["score"]), esc(i.get("model_path")),
              f"<code>{esc((i.get('artifact_hash') or '')[:12])}</code>"
              + (" (base copy)" if i.get("equals_base") else ""),
              fmt(((lineage.get(i.get("artifact_hash")) or {}).get("bytes") or 0) / 1e6, 1)
              if i["valid"] else "–",
              esc(i.get("parent") or "–"), _short(i.get("code_commit")), esc(i.get("error"))]
             for i in subs["items"]], [1, 3, 6]))
    else:
        body.append("<p>No submissions.</p>")
    body += ["<h2 id=\"code\">Code revisions</h2>", code_revision_sections(s, run.code_repo)]
    body.append("<h2 id=\"failures\">Failures</h2>")
    failures = s.get("failures") or []
    if failures:
        items = []
        for f in failures:
            excerpt = f"<pre>{esc(f['excerpt'])}</pre>" if f.get("excerpt") else ""
            items.append(f"<li><b>{esc(f['kind'])}</b>: {esc(f['message'])}{excerpt}</li>")
        body.append("<ul>" + "".join(items) + "</ul>")
    else:
        body.append("<p>None.</p>")
    body += ["<h2 id=\"integrity\">Integrity</h2>", integrity_section(s.get("integrity"))]
    if s.get("llm"):
        llm = s["llm"]
        body += ["<h2 id=\"llm\">LLM usage</h2>", table(
            ["calls", "failed", "input tokens", "output tokens", "cost (USD)", "latency (s)",
             "models"],
            [[str(llm["calls"]), str(llm["failed_calls"]), str(llm["input_tokens"]),
              str(llm["output_tokens"]), fmt(llm["cost_usd"], 4), fmt(llm["latency_s"], 1),
              esc(", ".join(llm["models"]))]], [0, 1, 2, 3, 4, 5])]
    narrative = run.root / "narrative.md"
    if narrative.exists():
        body += ["<h2 id=\"narrative\">Narrative (LLM-written)</h2>",
                 f"<pre>{esc(narrative.read_text(errors='replace'))}</pre>"]
    body.append("<h2 id=\"timeline\">Timeline</h2>")
    if s["timeline"]:
        body.append(table(["time (UTC)", "elapsed (s)", "event", "details"], [
            [esc(e.get("time")), fmt(e.get("elapsed_s"), 1), esc(e.get("kind")),
             esc(", ".join(f"{k}={v}" for k, v in e.items()
                           if k not in ("time", "elapsed_s", "kind")))[:400]]
            for e in s["timeline"]], [1]))
    else:
        body.append("<p>No events recorded.</p>")
    return page(title, "\n".join(body), depth=1)


def integrity_section(integrity: dict[str, Any] | None) -> str:
    if not integrity:
        return "<p>Not checked.</p>"
    c = integrity.get("contamination") or {}
    t = integrity.get("tamper") or {}
    parts = []
    if not c.get("checked"):
        parts.append(f"<p>Contamination: not checked ({esc(c.get('reason'))}).</p>")
    else:
        verdict = ('<span class="flag">FLAGGED</span>' if c.get("flagged")
                   else '<span class="ok">not flagged</span>')
        splits = ", ".join(f"{esc(k)}: {v['contaminated']} of {v['judged']} items"
                           for k, v in c.get("splits", {}).items())
        parts.append(f"<p>Contamination ({c['n']}-gram overlap of the sealed splits with "
                     f"{c['files_scanned']} files the agent wrote or fetched): {verdict}; "
                     f"{splits}.</p>")
        if c.get("evidence"):
            parts.append(table(["split", "item", "coverage", "files", "matching text"], [
                [esc(e["split"]), esc(e["id"]), fmt(e["coverage"]),
                 esc(", ".join(e["files"][:3])), f"<code>{esc(e['example'])}</code>"]
                for e in c["evidence"]], [2]))
    parts.append(f"<p>Tamper log: {t.get('count', 0)} attempt(s) to reach sealed paths or the "
                 f"ledger; {t.get('rejected_count', 0)} rejected submission(s).</p>")
    if t.get("attempts"):
        parts.append(table(["kind", "where", "detail"], [
            [esc(a["kind"]), esc(a["source"]), esc(a["detail"])] for a in t["attempts"]]))
    return "\n".join(parts)


# ---------------------------------------------------------------------------------- index


def _board_rows(board: pd.DataFrame, links: dict[tuple, list[tuple[int, str]]]) -> list[list]:
    rows = []
    for r in board.to_dict("records"):
        cells = []
        for c in COLUMNS:
            value = _plain(r[c])
            if c == "improvement_mean":
                cells.append(fmt(value, signed=True))
            elif c == "cost_usd":
                cells.append(fmt(value, 4))
            elif c in SCORE_COLUMNS:
                cells.append(fmt(value))
            elif c == "contaminated" and value:
                cells.append(f'<span class="flag">{value}</span>')
            else:
                cells.append(esc(value) if value is not None else "–")
        seeds = links.get((r["task"], r["agent"], r["driver"]), [])
        cells.append(" ".join(f'<a href="runs/{esc(name)}.html">seed {seed}</a>'
                              for seed, name in seeds))
        rows.append(cells)
    return rows


def index_page(board: pd.DataFrame, levels: pd.DataFrame, summaries: list[dict[str, Any]],
               generated: str) -> str:
    links: dict[tuple, list[tuple[int, str]]] = {}
    for s in summaries:
        links.setdefault((s["task"], s["agent"], s["driver"]), []).append((s["seed"], slug(s)))
    for seeds in links.values():
        seeds.sort()
    numeric_board = [i for i, c in enumerate(COLUMNS)
                     if c in SCORE_COLUMNS or c in ("n_seeds", "cost_usd", "contaminated")]
    body = ["<h1>Agent² RL-Bench report</h1>",
            f"<p class=\"muted\">{len(summaries)} runs; generated {esc(generated)}. Scores are "
            "test scores of each run's selected submission (0-100); intervals are 95 % "
            "bootstrap intervals over seeds.</p>",
            "<h2 id=\"leaderboard\">Leaderboard</h2>"]
    if board.empty:
        body.append("<p>No summarized runs yet.</p>")
    else:
        body += [table([*COLUMNS, "runs"], _board_rows(board, links), numeric_board,
                       cls="leaderboard"),
                 '<figure><img src="plots/leaderboard.svg" alt="final test score by agent">'
                 "<figcaption class=\"muted\">Mean final test score with its 95 % interval; "
                 "dashed: baseline.</figcaption></figure>"]
    if not levels.empty:
        numeric_levels = [i for i, c in enumerate(LEVEL_COLUMNS) if i >= 3]
        body += ["<h2 id=\"levels\">By level</h2>", table(LEVEL_COLUMNS, [
            [fmt(_plain(r[c]), signed=c == "improvement_mean") if c in SCORE_COLUMNS
             else fmt(_plain(r[c]), 4) if c == "cost_usd" else esc(_plain(r[c]))
             for c in LEVEL_COLUMNS] for r in levels.to_dict("records")], numeric_levels,
            cls="levels")]
    body.append("<h2 id=\"runs\">Runs</h2>")
    rows = []
    for s in sorted(summaries, key=lambda s: (s["task"], s["agent"], s["driver"], s["seed"])):
        route = s.get("route") or {}
        rows.append([f'<a href="runs/{esc(slug(s))}.html">{esc(slug(s))}</a>', esc(s["status"]),
                     fmt(s["baseline"]), fmt(s["final_score"]),
                     fmt(s["improvement"], signed=True),
                     f"{s['submissions']['valid']}/{s['submissions']['total']}",
                     _route(route.get("methods", []), route.get("techniques", [])),
                     _integrity_badge(s)])
    body.append(table(["run", "status", "baseline", "final", "improvement", "valid/total",
                       "route", "integrity"], rows, [2, 3, 4, 5], cls="runs")
                if rows else "<p>No runs.</p>")
    return page("Agent² RL-Bench report", "\n".join(body))


def trajectory_csv(summary: dict[str, Any]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, ["submission_id", "elapsed_s", "score", "best_score"],
                            lineterminator="\n")
    writer.writeheader()
    writer.writerows(trajectory_points(summary))
    return out.getvalue()


def build_report(run_roots: Iterable[Path], layout: Layout,
                 out: Path | None = None) -> Path:
    """Write the report of ``run_roots`` to ``out`` (default results/report); returns
    index.html."""
    out = Path(out or layout.report)
    present = [Path(r) for r in run_roots if RunPaths(Path(r)).summary_json.is_file()]
    summaries = load_summaries(present)
    roots = {slug(s): root for s, root in zip(summaries, present)}
    for sub in ("runs", "plots", "trajectories"):
        shutil.rmtree(out / sub, ignore_errors=True)
        (out / sub).mkdir(parents=True, exist_ok=True)
    board = leaderboard_frame(summaries)
    levels = level_frame(summaries)
    leaderboard_svg(board, out / "plots" / "leaderboard.svg")
    for s in summaries:
        name = slug(s)
        trajectory_svg(s, out / "plots" / f"{name}.svg")
        write_text_atomic(out / "trajectories" / f"{name}.csv", trajectory_csv(s))
        write_text_atomic(out / "runs" / f"{name}.html",
                          run_page(s, RunPaths(roots[name]), f"../plots/{name}.svg"))
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    index = out / "index.html"
    write_text_atomic(index, index_page(board, levels, summaries, generated))
    log.info("report of %d runs at %s", len(summaries), index)
    return index
