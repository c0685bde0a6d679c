"""summary.md: a run's ``RunSummary`` (``a2rl.analysis.summary``) as Markdown, the brief text
a person or the optional narrative (``a2rl.report.narrative``) reads. What the integrity
section and the outcome's verdicts say comes from ``a2rl.analysis.view``, as on the HTML page.

Much of a summary is the agent's text (submission errors, file names, matched code, log lines,
model names, hosts it asked for), and a Markdown viewer renders embedded HTML, links and
images. So every value goes through ``_cell`` (one line, HTML-escaped, Markdown's inline
punctuation backslash-escaped) and every excerpt through ``_code_block`` (a fence no line of it
can close); only the harness's own wording is written as Markdown.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

from a2rl.analysis.failures import EVENT_COLUMNS
from a2rl.analysis.view import (
    Line,
    Span,
    Table,
    final_note,
    integrity_view,
    network_view,
    number,
    route_text,
    share,
    status_text,
)
from a2rl.common.files import write_text_atomic
from a2rl.common.hardware import one_line
from a2rl.common.records import RunSummary

SHORT = 10  # characters of a commit hash shown to people


def _fmt(value: Any, digits: int = 2, signed: bool = False) -> str:
    x = number(value)
    if x is None:
        return "–" if value is None else _cell(value)
    return f"{x:+.{digits}f}" if signed else f"{x:.{digits}f}"


def _score(value: Any, stderr: Any = None) -> str:
    if number(value) is None:
        return "–"
    return _fmt(value) + (f" ± {_fmt(stderr)}" if number(stderr) is not None else "")


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.3f}".rstrip("0").rstrip(".")
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


# what opens an inline construct wherever it stands: emphasis (* ~), code spans, links and
# images ([ ]), a backslash (which would undo the escape after it) and a table's cell border
INLINE_PUNCTUATION = re.compile(r"([\\`*~\[\]|])")
# a run of underscores with a letter or digit on both sides never opens or closes emphasis
# (CommonMark's flanking rules), so ids like chain_sum-test-3 stay as they are. This matches the
# other runs, whole: one that starts the text or follows a non-word character, or one that
# follows a letter or digit and is not followed by one (possessive: never a run's tail)
UNDERSCORES = re.compile(r"(?<!\w)_+|(?<=[^\W_])_++(?![^\W_])")


def _cell(value: Any) -> str:
    """Text shown as it is, never as Markdown or HTML, in a table cell or a paragraph: one
    line (each run of whitespace one space, so a span's edge spaces stay), ``& < >`` as HTML
    entities, inline punctuation backslash-escaped."""
    text = html.escape(re.sub(r"\s+", " ", _text(value)), quote=False)
    text = INLINE_PUNCTUATION.sub(r"\\\1", text)
    return UNDERSCORES.sub(lambda run: run.group().replace("_", "\\_"), text)


def _code_block(text: str, indent: str = "") -> list[str]:
    """``text`` verbatim in a fenced code block whose fence is longer than any run of backticks
    in it, so that no line of the text can close the block early."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = indent + "`" * max(3, longest + 1)
    return [fence, *(indent + line for line in text.splitlines()), fence]


def _table(header: list[str] | tuple[str, ...], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _short(commit: Any) -> str:
    """A commit hash as code; anything but hex digits as plain text (a code span shows its
    content raw)."""
    if not isinstance(commit, str) or not commit:
        return "–"
    return f"`{commit[:SHORT]}`" if re.fullmatch(r"[0-9a-f]+", commit) else _cell(commit)


def _seconds(value: Any) -> str:
    return "–" if number(value) is None else f"{number(value):.1f} s"


def _line(spans: Line) -> str:
    """A paragraph (or a table cell): a flagged span in bold, the others plain; every span's
    text escaped, since the views quote the agent's files and logs."""
    return "".join(f"**{_cell(s.text)}**" if s.mark == "flag" else _cell(s.text)
                   for s in spans)


def _view_table(table: Table) -> list[str]:
    """A view's table in brief: its first ``brief_rows`` rows, cells cut to ``brief_chars``."""
    def cell(value: Any) -> str:
        value = value.text if isinstance(value, Span) else value
        if table.brief_chars is not None and isinstance(value, str):
            value = value[:table.brief_chars]
        return _cell(value)

    return _table(table.header, [[cell(v) for v in row]
                                 for row in table.rows[:table.brief_rows]])


def _blocks(blocks: tuple[Line | Table, ...]) -> list[str]:
    """Paragraphs and tables, a blank line between each."""
    lines: list[str] = []
    for block in blocks:
        if lines:
            lines.append("")
        lines += _view_table(block) if isinstance(block, Table) else [_line(block)]
    return lines


def render_markdown(s: RunSummary) -> str:
    """summary.md: header, outcome, process, route, submissions, code revisions, failures,
    integrity, LLM usage, grading usage, timeline."""
    integrity = integrity_view(s.integrity)
    lines = [f"# {s.task} · {s.agent} · {s.driver} · seed {s.seed}", "", _about(s), ""]
    lines += _outcome(s, _line(integrity.headline))
    lines += _process(s)
    lines += _route(s)
    lines += _submissions(s)
    lines += _code(s)
    lines += _failures(s)
    lines += ["", "## Integrity", ""] + _blocks(integrity.section)
    lines += _llm(s)
    lines += _grading(s) + _network(s)
    lines += _timeline(s)
    return "\n".join(lines) + "\n"


def write_markdown(summary: RunSummary, path: Path) -> Path:
    write_text_atomic(path, render_markdown(summary))
    return path


def _about(s: RunSummary) -> str:
    budget = s.budget
    about = (f"Task `{s.task}` ({s.task_name}, {s.level}), feedback on the "
             f"{s.feedback} split; base model `{s.model}`; budget `{budget.name}` "
             f"({_fmt(budget.time_limit_s, 0)} s, {budget.max_submissions} submissions); "
             f"sandbox `{s.sandbox}`.")
    if s.hardware:
        about += f" Machine: {one_line(s.hardware)}."
    return about


def _outcome(s: RunSummary, integrity: str) -> list[str]:
    subs = s.submissions
    cost = s.cost_usd
    return ["## Outcome", ""] + _table(["", "value"], [
        ["Agent status", _cell(status_text(s))],
        ["Baseline (test)", _score(s.baseline, s.baseline_stderr)],
        [f"Best feedback score ({s.feedback})", _fmt(s.best_feedback_score)],
        ["Final test score", _score(s.final_score, s.final_stderr) + final_note(s)],
        ["Improvement", _fmt(s.improvement, signed=True)],
        ["Submissions", f"{subs.total} ({subs.valid} valid, {subs.invalid} invalid)"],
        ["Route", _cell(route_text(s.route["methods"], s.route["techniques"]))],
        ["LLM cost", "–" if cost is None else f"${cost:.4f}"],
        ["Integrity", integrity],  # _line's: escaped already
    ])


def _process(s: RunSummary) -> list[str]:
    p = s.process
    return ["", "## Process", ""] + _table(["metric", "value"], [
        ["Valid-submission rate", share(p.valid_rate)],
        ["Time to first valid submission", _seconds(p.time_to_first_valid_s)],
        ["Time to first improvement", _seconds(p.time_to_first_improvement_s)],
        ["Time to best", _seconds(p.time_to_best_s)],
        ["Monotonic ratio of scores", _fmt(p.monotonic_ratio)],
        ["Share of budget used", share(p.budget_used)],
        ["Gap between last submission and deadline", _seconds(p.deadline_gap_s)],
        ["Copies of the base model submitted", _cell(p.copy_of_base)],
    ])


def _route(s: RunSummary) -> list[str]:
    route = s.route
    lines = ["", "## Route", ""]
    if route.get("per_submission"):
        lines.append(f"Methods used: **{route_text(route['methods'], route['techniques'])}**. "
                     "Per submission (code at its commit, transcript up to its time, artifact):")
        lines.append("")
        lines += _table(["#", "code commit", "route", "evidence"], [
            [_cell(r["id"]), _short(r.get("code_commit")),
             _cell(route_text(r["methods"], r["techniques"])) if r["valid"] else "(rejected)",
             _cell("; ".join(f"{e['where']}: {e['match']}" for e in r["evidence"][:3]))]
            for r in route["per_submission"]])
    else:
        final_code = route.get("final_code") or {}
        lines.append("No submissions; methods in the final code: "
                     f"{route_text(final_code.get('methods', []), [])}.")
    return lines


def _submissions(s: RunSummary) -> list[str]:
    lines = ["", "## Submissions", ""]
    if not s.submissions.items:
        return lines + ["No submissions."]
    return lines + _table(["#", "elapsed (s)", "valid", "score", "code commit", "parent",
                           "error"], [
        [_cell(i.id), _fmt(i.elapsed_s, 1), "yes" if i.valid else "no",
         _score(i.score, i.stderr), _short(i.code_commit), _cell(i.parent) or "–",
         _cell(i.error)] for i in s.submissions.items])


def _code(s: RunSummary) -> list[str]:
    revisions = s.code.get("revisions")
    if not revisions:
        return []
    repo = s.code["repo"]
    lines = ["", "## Code revisions", "",
             f"The agent's code is recorded in `{repo}` (a git repository; tags "
             "`submission-<id>` and `final`).", ""]
    lines += _table(["commit", "tags", "files", "message"], [
        [_short(r["commit"]), _cell(", ".join(r["tags"])), _cell(len(r["files"])),
         _cell(r["message"])] for r in revisions])
    tagged = [t for r in revisions for t in r["tags"] if t.startswith("submission-")]
    if len(tagged) >= 2:
        lines += ["", "What changed between the first two submissions:", "",
                  *_code_block(f"git --git-dir {repo} diff {tagged[0]} {tagged[1]}")]
    elif tagged:
        lines += ["", f"Code of {_cell(tagged[0])}:", "",
                  *_code_block(f"git --git-dir {repo} show --stat {tagged[0]}")]
    return lines


def _failures(s: RunSummary) -> list[str]:
    lines = ["", "## Failures", ""]
    if not s.failures:
        return lines + ["None."]
    for f in s.failures:
        when = f" at {_fmt(f['elapsed_s'], 1)} s" if number(f.get("elapsed_s")) else ""
        lines.append(f"- **{_cell(f['kind'])}**{when}: {_cell(f['message'])}")
        if f.get("excerpt"):
            lines += ["", *_code_block(str(f["excerpt"]), indent="  ")]
    return lines


def _llm(s: RunSummary) -> list[str]:
    llm = s.llm
    if not llm:
        return []
    return ["", "## LLM usage", ""] + _table(
        ["calls", "failed", "input tokens", "output tokens", "cost (USD)", "latency (s)",
         "models"],
        [[_cell(llm["calls"]), _cell(llm["failed_calls"]), _cell(llm["input_tokens"]),
          _cell(llm["output_tokens"]), f"{llm['cost_usd']:.4f}", _fmt(llm["latency_s"], 1),
          _cell(", ".join(llm["models"]))]])


def _grading(s: RunSummary) -> list[str]:
    usage = s.grading_usage
    if not usage:
        return []
    keys = [k for k in ("calls", "cache_hits", "retries", "input_tokens", "output_tokens",
                        "cost_usd", "judge_failed_submissions",
                        "grading_budget_exhausted_submissions") if k in usage]
    return ["", "## Grading usage (the judge; not the agent's cost)", ""] + _table(
        keys, [[_cell(usage[k]) for k in keys]])


def _network(s: RunSummary) -> list[str]:
    """The sandbox's network policy, what the task's public sources were to the agent, and the
    hosts the egress proxy saw (allowlist only)."""
    if not s.network:
        return []
    return ["", "## Network", ""] + _blocks(network_view(s.network))


def _timeline(s: RunSummary) -> list[str]:
    lines = ["", "## Timeline", ""]
    if not s.timeline:
        return lines + ["No events recorded."]
    return lines + _table(["elapsed (s)", "event", "details"], [
        [_fmt(e["elapsed_s"], 1), _cell(e["kind"]),
         _cell(", ".join(f"{k}={_text(v)}" for k, v in e.items() if k not in EVENT_COLUMNS))]
        for e in s.timeline])
