"""One run's page of the HTML report (runs/<task>__<agent>__<driver>__seed<k>.html), drawn
from its ``RunSummary``: outcome, score-vs-time trajectory, process metrics, route, submissions
with lineage, code revisions with their diffs, failures, integrity, network, LLM usage, an LLM
agent's transcript (a2rl.report.transcript_view), timeline."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from a2rl.analysis.failures import EVENT_COLUMNS
from a2rl.analysis.transcripts.timeline import load_stack, run_timeline
from a2rl.analysis.view import (
    IntegrityView,
    Line,
    Table,
    final_note,
    integrity_view,
    network_view,
    status_text,
)
from a2rl.common.layout import RunPaths
from a2rl.common.records import RunSummary
from a2rl.grading import recording
from a2rl.report.html_parts import (
    diff_html,
    esc,
    fmt,
    line_html,
    page,
    route_html,
    short_commit,
    table,
    view_table,
)
from a2rl.report.transcript_view import diff_anchor, transcript_section


def view_blocks(blocks: tuple[Line | Table, ...]) -> str:
    """A view's section (a2rl.analysis.view): paragraphs and tables."""
    return "\n".join(view_table(b) if isinstance(b, Table) else f"<p>{line_html(b)}</p>"
                     for b in blocks)


def code_revision_sections(s: RunSummary, repo: Path) -> str:
    """The revisions table and the diff between each pair of consecutive tagged revisions
    (submissions, then the final code)."""
    revisions = s.code.get("revisions") or []
    if not revisions:
        return "<p>No code revisions were recorded for this run.</p>"
    names = [t for r in revisions for t in r["tags"]]
    hint = (f"git --git-dir {repo} diff {names[0]} {names[1]}" if len(names) >= 2
            else f"git --git-dir {repo} log --stat")
    parts = [f"<p>Recorded in <code>{esc(repo)}</code> (tags <code>submission-&lt;id&gt;"
             f"</code> and <code>final</code>); for example <code>{esc(hint)}</code>.</p>",
             table(["commit", "tags", "time", "files", "message"],
                   [[short_commit(r["commit"]), esc(", ".join(r["tags"])), esc(r["time"]),
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
        number = name.removeprefix("submission-")
        anchor = f' id="{diff_anchor(int(number))}"' if number.isdigit() else ""
        opened = " open" if previous[1] is None else ""
        parts.append(f'<details class="revision"{anchor}{opened}>'
                     f"<summary>{esc(previous[0])} → <b>{esc(name)}</b>: "
                     f"{esc(summary_line)}</summary>"
                     f'<p class="muted"><code>{esc(command)}</code></p>{shown}</details>')
        previous = (name, commit, name)
    return "\n".join(parts)


def run_page(s: RunSummary, run: RunPaths, plot: str,
             live_transcript: Optional[tuple[str, Path]] = None) -> str:
    """The HTML of one run's page; ``plot`` is the trajectory's path relative to the page.
    ``live_transcript``: (stack, file) of a running LLM agent's transcript read so far
    (a2rl.report.live), in place of the run's collected one."""
    integrity = integrity_view(s.integrity)
    title = f"{s.task} · {s.agent} · {s.driver} · seed {s.seed}"
    body = [f"<h1>{esc(title)}</h1>",
            f"<p class=\"muted\">Task <code>{esc(s.task)}</code> ({esc(s.task_name)}, "
            f"{esc(s.level)}), feedback on the {esc(s.feedback)} split; base model "
            f"<code>{esc(s.model)}</code>; budget <code>{esc(s.budget.name)}</code> "
            f"({fmt(s.budget.time_limit_s, 0)} s, {esc(s.budget.max_submissions)} "
            f"submissions); sandbox <code>{esc(s.sandbox)}</code>.</p>",
            "<h2 id=\"outcome\">Outcome</h2>", _outcome(s, integrity),
            "<h2 id=\"trajectory\">Score over time</h2>",
            f'<figure><img src="{esc(plot)}" alt="score versus time of {esc(title)}">'
            f"<figcaption class=\"muted\">Feedback score of each submission, the best so far, "
            f"the baseline and the time limit.</figcaption></figure>",
            "<h2 id=\"process\">Process</h2>", _process(s),
            "<h2 id=\"route\">Route</h2>", *_route_section(s),
            *_transcript(run, live_transcript),
            "<h2 id=\"submissions\">Submissions</h2>", _submissions(s),
            "<h2 id=\"code\">Code revisions</h2>", code_revision_sections(s, run.code_repo),
            "<h2 id=\"failures\">Failures</h2>", _failures(s),
            "<h2 id=\"integrity\">Integrity</h2>", view_blocks(integrity.section)]
    if s.network:
        body += ["<h2 id=\"network\">Network</h2>", view_blocks(network_view(s.network))]
    if s.llm:
        llm = s.llm
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
    body += ["<h2 id=\"timeline\">Timeline</h2>", _timeline(s)]
    return page(title, "\n".join(body), depth=1)


def _transcript(run: RunPaths, live: Optional[tuple[str, Path]] = None) -> list[str]:
    """An LLM agent's transcript viewer (nothing for a script agent)."""
    entries = run_timeline(run, *live) if live else run_timeline(run, load_stack(run))
    if entries is None:
        return []
    return ["<h2 id=\"transcript\">Transcript</h2>", transcript_section(entries)]


def _outcome(s: RunSummary, integrity: IntegrityView) -> str:
    subs = s.submissions
    final = fmt(s.final_score) + (f" ± {fmt(s.final_stderr)}"
                                  if s.final_stderr is not None else "")
    return table(["", "value"], [
        ["Agent status", esc(status_text(s))],
        ["Baseline (test)", fmt(s.baseline)],
        [f"Best feedback score ({esc(s.feedback)})", fmt(s.best_feedback_score)],
        ["Final test score", final + esc(final_note(s))],
        ["Improvement", fmt(s.improvement, signed=True)],
        ["Submissions", f"{subs.total} ({subs.valid} valid, {subs.invalid} invalid)"],
        ["Route", route_html(s.route["methods"], s.route["techniques"])],
        ["LLM cost (USD)", fmt(s.cost_usd, 4)],
        ["Integrity", line_html(integrity.headline)]])


def _process(s: RunSummary) -> str:
    p = s.process
    return table(["metric", "value"], [
        ["Valid-submission rate", fmt(p.valid_rate)],
        ["Time to first valid submission (s)", fmt(p.time_to_first_valid_s, 1)],
        ["Time to first improvement (s)", fmt(p.time_to_first_improvement_s, 1)],
        ["Time to best (s)", fmt(p.time_to_best_s, 1)],
        ["Monotonic ratio of scores", fmt(p.monotonic_ratio)],
        ["Share of budget used", fmt(p.budget_used)],
        ["Gap between last submission and deadline (s)", fmt(p.deadline_gap_s, 1)],
        ["Copies of the base model submitted", fmt(p.copy_of_base, 0)]], [1])


def _route_section(s: RunSummary) -> list[str]:
    route = s.route
    parts = [f"<p>Methods used: <b>{route_html(route['methods'], route['techniques'])}</b></p>"]
    if route.get("per_submission"):
        parts.append(table(["#", "code commit", "route", "evidence"], [
            [esc(r["id"]), short_commit(r.get("code_commit")),
             route_html(r["methods"], r["techniques"]) if r["valid"] else "(rejected)",
             esc("; ".join(f"{e['where']}: {e['what']}" for e in r["evidence"][:3]))]
            for r in route["per_submission"]]))
    return parts


def _submissions(s: RunSummary) -> str:
    if not s.submissions.items:
        return "<p>No submissions.</p>"
    lineage = {a["artifact_hash"]: a for a in s.lineage}
    return table(
        ["#", "elapsed (s)", "valid", "score", "model path", "artifact", "size (MB)",
         "parent", "code", "error"],
        [[esc(i.id), fmt(i.elapsed_s, 1), "yes" if i.valid else "no", fmt(i.score),
          esc(i.model_path),
          f"<code>{esc((i.artifact_hash or '')[:12])}</code>"
          + (" (base copy)" if i.equals_base else ""),
          fmt(((lineage.get(i.artifact_hash) or {}).get("bytes") or 0) / 1e6, 1)
          if i.valid else "–",
          esc(i.parent or "–"), short_commit(i.code_commit), esc(i.error)]
         for i in s.submissions.items], [1, 3, 6])


def _failures(s: RunSummary) -> str:
    if not s.failures:
        return "<p>None.</p>"
    items = []
    for f in s.failures:
        excerpt = f"<pre>{esc(f['excerpt'])}</pre>" if f.get("excerpt") else ""
        items.append(f"<li><b>{esc(f['kind'])}</b>: {esc(f['message'])}{excerpt}</li>")
    return "<ul>" + "".join(items) + "</ul>"


def _timeline(s: RunSummary) -> str:
    if not s.timeline:
        return "<p>No events recorded.</p>"
    return table(["time (UTC)", "elapsed (s)", "event", "details"], [
        [esc(e.get("time")), fmt(e.get("elapsed_s"), 1), esc(e.get("kind")),
         esc(", ".join(f"{k}={v}" for k, v in e.items() if k not in EVENT_COLUMNS))[:400]]
        for e in s.timeline], [1])
