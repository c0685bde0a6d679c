"""One run's route as a single ordered list: the agent's messages and commands (its normalised
transcript), its submissions with their scores (the ledger) and what the harness saw
(events.jsonl: failed LLM calls, errors, budget warnings, the agent's exit), for the report's
transcript viewer (a2rl.report.transcript_view).

Each ``Entry`` has a ``kind`` (message, command, submission, event), a UTC ``time`` and
``elapsed_s`` since the first entry, and ``error`` when something failed there. Turns without a
time (Codex writes none) take their LLM call's, else the entry's before them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from a2rl.analysis.transcripts import TranscriptError, normalise
from a2rl.common.files import iter_jsonl
from a2rl.common.layout import RunPaths
from a2rl.common.records import LedgerEntry, read_ledger
from a2rl.llm.transcript_schema import Transcript, seconds

# events shown in the timeline (others are the harness's bookkeeping)
SHOWN_EVENTS = ("error", "budget_warning", "budget_kill", "agent_exit",
                "llm_budget_exhausted", "disk_quota_exceeded", "disk_full", "code_snapshot")


@dataclass
class Entry:
    kind: str  # message | command | submission | event
    time: Optional[str]
    text: str = ""
    error: bool = False
    elapsed_s: Optional[float] = None
    details: dict[str, Any] = field(default_factory=dict)


def transcript_entries(transcript: Transcript, calls: dict[int, dict]) -> list[Entry]:
    """Messages and commands (each with its result) of a normalised transcript."""
    entries: list[Entry] = []
    results = {r.call_id: r for t in transcript.turns for r in t.tool_results}
    last_time: Optional[str] = None
    for turn in transcript.turns:
        call = calls.get(turn.llm_call or -1, {})
        time = turn.time or call.get("time") or last_time
        last_time = time
        if turn.role == "assistant":
            if turn.text.strip():
                entries.append(Entry("message", time, turn.text, details={
                    "role": "assistant", "llm_call": turn.llm_call,
                    "input_tokens": turn.input_tokens, "output_tokens": turn.output_tokens,
                    "latency_s": call.get("latency_s")}))
            for tool in turn.tool_calls:
                found = results.get(tool.id) if tool.id is not None else None
                entries.append(Entry(
                    "command", time, tool.command if tool.command is not None else
                    f"{tool.name} {tool.arguments}", error=bool(found and found.error),
                    details={"tool": tool.name, "shell": tool.command is not None,
                             "output": found.output if found else None,
                             "exit_code": found.exit_code if found else None,
                             "truncated": bool(found and found.truncated)}))
        elif turn.role in ("user", "system") and turn.text.strip():
            entries.append(Entry("message", time, turn.text, details={"role": turn.role}))
    unmatched = [r for t in transcript.turns for r in t.tool_results if r.call_id is None]
    commands = [e for e in entries if e.kind == "command" and e.details["output"] is None]
    for entry, found in zip(commands, unmatched):  # results a CLI left without a call id
        entry.details |= {"output": found.output, "exit_code": found.exit_code}
        entry.error = found.error
    return entries


def submission_entry(entry: LedgerEntry) -> Entry:
    return Entry("submission", entry.time, str(entry.model_path),
                 error=not entry.valid,
                 details={"submission_id": entry.submission_id, "valid": entry.valid,
                          "score": entry.score, "best": entry.best, "split": entry.split,
                          "status": entry.status, "message": entry.error,
                          "code_commit": entry.code_commit,
                          "agent_elapsed_s": entry.elapsed_s})


def event_entry(event: dict[str, Any]) -> Optional[Entry]:
    kind = event.get("kind")
    details = {k: v for k, v in event.items() if k not in ("time", "kind", "elapsed_s")}
    if kind == "llm_call":
        if event.get("outcome") == "ok":
            return None  # a successful call is shown with its message
        return Entry("event", event.get("time"), f"LLM call {event.get('call')} failed: "
                     f"{event.get('outcome')} ({event.get('status')})", error=True,
                     details=details)
    if kind not in SHOWN_EVENTS:
        return None
    failed = kind in ("error", "budget_kill", "llm_budget_exhausted",
                      "disk_quota_exceeded") or (
        kind == "agent_exit" and event.get("exit_code") not in (0, None))
    text = event.get("message") or ", ".join(f"{k}={v}" for k, v in details.items())
    return Entry("event", event.get("time"), f"{kind}: {text}", error=failed, details=details)


def run_timeline(run: RunPaths, stack: Optional[str],
                 transcript_file: Optional[Path] = None) -> Optional[list[Entry]]:
    """The run's entries in time order; None when the run has no transcript this module can
    read (a script agent, a CLI that wrote none). ``transcript_file``: the transcript to read
    instead of the run's (a running agent's, read so far: a2rl.report.live)."""
    path = transcript_file or run.transcript
    if not stack or not path.exists():
        return None
    calls_list = list(iter_jsonl(run.llm_calls)) if run.llm_calls.exists() else []
    try:
        transcript = normalise(stack, path, calls_list)
    except TranscriptError:
        return None
    calls = {c.get("call"): c for c in calls_list}
    entries = transcript_entries(transcript, calls)
    entries += [submission_entry(e) for e in read_ledger(run.ledger)]
    events = list(iter_jsonl(run.events)) if run.events.exists() else []
    entries += [e for e in map(event_entry, events) if e is not None]
    return order(entries)


def order(entries: list[Entry]) -> list[Entry]:
    """Entries sorted by time (stable: the transcript's own order among equal or missing
    times), with elapsed_s since the first."""
    keyed, last = [], None
    for entry in entries:
        at = seconds(entry.time)
        last = at if at is not None else last
        keyed.append((last if last is not None else 0.0, entry))
    keyed.sort(key=lambda pair: pair[0])
    start = keyed[0][0] if keyed else 0.0
    for at, entry in keyed:
        entry.elapsed_s = round(at - start, 3)
    return [entry for _, entry in keyed]


def load_stack(run: RunPaths) -> Optional[str]:
    """The run's agent stack from run.json (None: a script agent, or no run.json)."""
    try:
        from a2rl.common.records import RunRecord

        record = RunRecord.load_if_present(Path(run.run_json))
    except ValueError:
        return None
    return record.stack if record else None
