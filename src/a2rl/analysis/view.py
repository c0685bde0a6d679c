"""What a run summary shows its readers, computed once for both renderers (summary.md by
``a2rl.report.markdown``, the run's page by ``a2rl.report.html``): the integrity verdict and
section, the network section, the route's and the final score's wording.

Text is plain. A ``Span``'s mark asks for emphasis that each format draws its own way: ``flag``
(a problem: bold in Markdown, red in HTML), ``ok`` (a clean result: plain in Markdown, green in
HTML) and ``code`` (literal text: plain in a Markdown table cell, <code> in HTML).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from a2rl.common.records import RunSummary

EVIDENCE_BRIEF = 10  # contaminated items a brief format (summary.md) lists
ATTEMPTS_BRIEF = 20  # tamper attempts it lists
DETAIL_BRIEF = 160  # characters of each attempt's cells it keeps
LEFT_OUT_BRIEF = 5  # files the checks could not read that it lists


@dataclass(frozen=True)
class Span:
    text: str
    mark: str | None = None  # flag | ok | code


Line = tuple[Span, ...]  # a paragraph, or a table cell with emphasis


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]  # cells: values or Spans; every row
    brief_rows: int | None = None  # a brief format lists only the first rows...
    brief_chars: int | None = None  # ...and cuts each cell to this many characters
    numeric: tuple[int, ...] = ()  # columns of numbers (aligned right in HTML)


@dataclass(frozen=True)
class IntegrityView:
    """The integrity checks of a run (``a2rl.analysis.integrity``) as shown: the facts, a
    one-line verdict (``headline``) and the section's paragraphs and tables in order."""

    checked: bool  # contamination was checked
    flagged: bool
    contaminated_items: Any
    tamper_count: int
    headline: Line
    section: tuple[Line | Table, ...]


def number(value: Any) -> float | None:
    """A JSON number as a float; None for anything else (booleans included)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def share(value: Any) -> str:
    """A fraction as a percentage ("35.0 %"); "–" for no number."""
    return "–" if number(value) is None else f"{100 * number(value):.1f} %"


def route_text(methods: list[str], techniques: list[str]) -> str:
    if not methods:
        return "–"
    return ", ".join(methods) + (f" ({', '.join(techniques)})" if techniques else "")


def final_note(summary: RunSummary) -> str:
    """What the final score is of: the base model, or the selected submission."""
    if summary.final_from == "baseline":
        return " (no valid submission: base model)"
    if summary.selected_submission is not None:
        return f" (submission {summary.selected_submission})"
    return ""


def status_text(summary: RunSummary) -> str:
    """The agent's status with how it ended: exit code, seconds of its budget used (and the
    run's seconds where evaluations did not count), and any processes killed at its memory
    limit (one wording for the Markdown and the HTML pages)."""
    details = []
    if summary.exit_code is not None:
        details.append(f"exit {summary.exit_code}")
    wall, limit = number(summary.agent_seconds), number(summary.budget.time_limit_s)
    used = number(summary.process.budget_s)
    if used is None:  # summaries before budget_s: from the share, good to about 0.1 s
        share = number(summary.process.budget_used)
        used = share * limit if share is not None and limit else wall
    if used is not None:
        details.append(f"{used:.1f} s" + (f" of {limit:.0f} s" if limit is not None else ""))
        if wall is not None and wall - used >= 1.0:
            details.append(f"{wall:.1f} s with the evaluations, which did not count")
    if note := memory_note(summary):
        details.append(note)
    return f"{summary.status} ({', '.join(details)})" if details else str(summary.status)


def memory_note(summary: RunSummary) -> str:
    """How many of the agent's processes were killed at its memory limit (the ``agent_oom``
    event), said beside its status: a training script killed this way shows only as exit -9 in
    the agent's log; empty when none was."""
    kills = [e for e in summary.timeline if e.get("kind") == "agent_oom"]
    if not kills:
        return ""
    limit = number(kills[-1].get("memory_bytes"))
    at = f" of {limit / 2**30:.1f} GiB" if limit else ""
    return f"{kills[-1].get('oom_kills', 1)} process(es) killed at its memory limit{at}"


def integrity_view(integrity: dict[str, Any] | None) -> IntegrityView:
    if not integrity:
        return IntegrityView(checked=False, flagged=False, contaminated_items=None,
                             tamper_count=0, headline=(Span("not checked"),),
                             section=((Span("Not checked."),),))
    c = integrity.get("contamination") or {}
    t = integrity.get("tamper") or {}
    b = integrity.get("behaviour") or {}
    count = t.get("count", 0)
    return IntegrityView(
        checked=bool(c.get("checked")), flagged=bool(c.get("flagged") or b.get("flagged")),
        contaminated_items=c.get("contaminated_items"), tamper_count=count,
        headline=(*_contamination_verdict(c), *_behaviour_verdict(b),
                  Span(f"; {count} tamper attempt(s)")),
        section=(*_contamination_section(c), _behaviour_line(b), *_tamper_section(t)))


def _behaviour_verdict(b: dict[str, Any]) -> Line:
    if not b.get("flagged"):
        return ()
    return (Span("; "), Span("TEST FAR ABOVE ITS TWIN", "flag"),
            Span(f" ({b['gap']:+.1f} points)"))


def _behaviour_line(b: dict[str, Any]) -> Line:
    """The twin-split check (a2rl.grading.twin) in one line."""
    if not b.get("checked"):
        return (Span(f"Twin split: not checked ({b.get('reason', 'no record')})."),)
    verdict = Span("FLAGGED", "flag") if b["flagged"] else Span("not flagged", "ok")
    return (Span(f"Twin split (as many fresh items from the test split's generator, seed "
                 f"{b['seed']}): the selected model scored {b['score']:.1f} there, "
                 f"{b['gap']:+.1f} points from its test score; flagged past "
                 f"{b['threshold']:.1f}: "), verdict, Span("."))


def _contamination_verdict(c: dict[str, Any]) -> Line:
    if not c.get("checked"):
        return (Span("contamination not checked"),)
    if c.get("flagged"):
        return (Span("CONTAMINATION FLAGGED", "flag"),
                Span(f" ({c.get('contaminated_items')} sealed items found in the agent's "
                     "files)"))
    return (Span("no contamination found", "ok"),)


def _contamination_section(c: dict[str, Any]) -> list[Line | Table]:
    if not c.get("checked"):
        return [(Span(f"Contamination: not checked ({c.get('reason', 'no data')})."),)]
    splits = ", ".join(f"{name}: {v['contaminated']} of {v['judged']} items"
                       for name, v in c.get("splits", {}).items())
    verdict = Span("FLAGGED", "flag") if c.get("flagged") else Span("not flagged", "ok")
    blocks: list[Line | Table] = [(
        Span(f"Contamination ({c['n']}-gram overlap of the sealed splits with "
             f"{c['files_scanned']} files the agent wrote or fetched): "),
        verdict, Span(f"; {splits}."))]
    if c.get("evidence"):
        blocks.append(Table(
            ("split", "item", "coverage", "files", "matching text"),
            tuple((e["split"], e["id"], share(e["coverage"]), ", ".join(e["files"][:3]),
                   Span(e["example"], "code")) for e in c["evidence"]),
            brief_rows=EVIDENCE_BRIEF, numeric=(2,)))
    if c.get("left_out_count"):  # links, special and sparse files, walks cut by their limits
        blocks.append((Span(f"Not read for the checks: {c['left_out_count']} of the agent's "
                            "files or folders (links are not followed, only regular files "
                            "are read)."),))
        blocks.append(Table(("path", "why"), tuple(
            (Span(e["path"], "code"), e["reason"]) for e in c.get("left_out", [])),
            brief_rows=LEFT_OUT_BRIEF, brief_chars=DETAIL_BRIEF))
    return blocks


def _tamper_section(t: dict[str, Any]) -> list[Line | Table]:
    blocks: list[Line | Table] = [(
        Span(f"Tamper log: {t.get('count', 0)} attempt(s) to reach sealed paths or the ledger; "
             f"{t.get('rejected_count', 0)} rejected submission(s)."),)]
    if t.get("attempts"):
        blocks.append(Table(("kind", "where", "detail"),
                            tuple((a["kind"], a["source"], a["detail"]) for a in t["attempts"]),
                            brief_rows=ATTEMPTS_BRIEF, brief_chars=DETAIL_BRIEF))
    return blocks


# what each value of run.json's network.public_sources.access (a2rl.pipeline.network) meant
PUBLIC_SOURCES_ACCESS = {
    "withheld": ("withheld", "the egress proxy refused them, whatever agent.allowlist says"),
    "allowed": ("reachable", "the grid set agent.allow_public_sources, so the egress proxy let "
                "through those that agent.allowlist names"),
    "open": ("reachable", "the sandbox shared the host's network"),
}


def network_view(network: dict[str, Any]) -> tuple[Line | Table, ...]:
    """run.json's network policy as shown: the policy and its allowlist, what the task's public
    sources were to the agent, and the hosts the egress proxy saw (summary's ``network``)."""
    blocks: list[Line | Table] = [_policy_line(network)]
    if network.get("public_sources"):
        blocks.append(_public_sources_line(network["public_sources"]))
    if network.get("hosts"):
        blocks.append(Table(
            ("host", "port", "allowed", "connections", "bytes up", "bytes down"),
            tuple((h["host"], h["port"], "yes" if h["allowed"] else "refused",
                   h["connections"], h["bytes_up"], h["bytes_down"]) for h in network["hosts"]),
            numeric=(3, 4, 5)))
    return tuple(blocks)


def _policy_line(network: dict[str, Any]) -> Line:
    spans = [Span("Policy: "), Span(str(network.get("policy")), "code")]
    if network.get("allowlist") is not None:
        spans.append(Span(f" (allowlist: {', '.join(network['allowlist']) or 'empty'})"))
    if network.get("isolated") is False:
        spans.append(Span("; sandbox none: the host's network, whatever the policy"))
    return (*spans, Span("."))


def _public_sources_line(sources: dict[str, Any]) -> Line:
    """Whether the agent could fetch the public original of the task's sealed split."""
    state, why = PUBLIC_SOURCES_ACCESS.get(sources.get("access"),
                                           ("unknown", f"access {sources.get('access')!r}"))
    return (Span(f"The sealed split is public ({', '.join(sources.get('names', []))}: "
                 f"{', '.join(sources.get('hosts', []))}); these hosts were "),
            Span(state, "flag" if state == "reachable" else "ok"), Span(f": {why}."))
