"""Each agent stack's native transcript (transcript.jsonl, a2rl.llm.stacks) as one schema.

A ``Transcript`` is a list of ``Turn``s in the order they happened:

* ``assistant``: one model response: its ``text`` and the ``tool_calls`` it made (``name``,
  ``arguments``, and ``command`` when the tool runs a shell command), the native ``usage``
  (input/output tokens) when the CLI reports it, and ``llm_call``: the number of the
  llm_calls.jsonl record (a2rl.llm.proxy) that produced it (``link_llm_calls``);
* ``tool``: the ``tool_results`` of those calls (``output`` cut to ``MAX_OUTPUT`` characters,
  ``exit_code`` where the CLI reports one, ``error``);
* ``user`` / ``system``: the prompt and what the CLI says about itself (text only).

``time`` is ISO 8601 UTC where the CLI stamps its lines (Codex does not). Each stack reads its
own native format from a list of parsed JSON lines (``AgentStack.read_transcript`` in the
stack's module, a2rl.llm.stacks.<name> for the built-ins): Claude Code stream-json, Codex
``exec --json``, Gemini CLI stream-json, OpenCode ``run --format json``, mini-swe-agent's
trajectory (as JSON lines) and OpenHands ``--headless --json`` (its agent-SDK events, one JSON
object per line).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from a2rl.common.beneath import Refused, read_file
from a2rl.llm.stacks import UnknownStack, stack_of
from a2rl.llm.transcript_files import MAX_TRANSCRIPT_BYTES
from a2rl.llm.transcript_schema import (
    MAX_OUTPUT,
    ToolCall,
    ToolResult,
    Transcript,
    TranscriptError,
    Turn,
    seconds,
)

__all__ = ["MAX_OUTPUT", "ToolCall", "ToolResult", "Transcript",
           "TranscriptError", "Turn", "link_llm_calls", "normalise", "read_lines"]

def read_lines(path: Path) -> list[dict]:
    """The JSON objects of a transcript file; lines that are not JSON objects (a CLI's plain
    messages between them) are skipped. The file is read as ``a2rl.common.beneath`` reads the
    agent's files (a link, a special file or one over ``MAX_TRANSCRIPT_BYTES``: a
    TranscriptError naming only the file)."""
    path = Path(path)
    try:
        text = read_file(path.parent, path.name, MAX_TRANSCRIPT_BYTES).decode(errors="replace")
    except Refused as err:
        raise TranscriptError(f"transcript not read: {err}") from None
    lines = []
    for raw in text.splitlines():
        try:
            value = json.loads(raw)
        except ValueError:
            continue
        if isinstance(value, dict):
            lines.append(value)
    return lines


def normalise(stack: str, path: Path, calls: Optional[list[dict]] = None) -> Transcript:
    """The transcript at ``path`` of agent stack ``stack`` in the common schema, its model
    responses linked to ``calls`` (llm_calls.jsonl records) when given. A stack that is not
    installed (or cannot be loaded) is a TranscriptError, as a malformed transcript is."""
    try:
        reader = stack_of(stack)
    except UnknownStack as err:
        raise TranscriptError(f"no transcript reader: {err}") from None
    lines = read_lines(path)
    if not lines:
        raise TranscriptError(f"{Path(path).name}: no JSON events of a {stack} transcript")
    transcript = Transcript(stack, reader.read_transcript(lines))
    if calls:
        link_llm_calls(transcript.turns, calls)
    return transcript


def link_llm_calls(turns: list[Turn], calls: list[dict], slack_s: float = 0.0) -> None:
    """Set each assistant turn's ``llm_call`` to the proxy record that answered it, in order:
    the next successful call with the same input tokens when the CLI reports them, else the
    last call that started (``time - latency_s``) before the turn was written, else the next
    call. A turn's missing token counts are taken from its call."""
    ok = [c for c in calls if c.get("outcome") == "ok" and c.get("output_tokens")]
    cursor = 0
    for turn in (t for t in turns if t.role == "assistant"):
        rest = ok[cursor:]
        if not rest:
            return
        chosen = None
        if turn.input_tokens is not None:
            chosen = next((i for i, c in enumerate(rest)
                           if c.get("input_tokens") == turn.input_tokens), None)
        at = seconds(turn.time)
        if chosen is None and at is not None:
            started = [i for i, c in enumerate(rest)
                       if (seconds(c.get("time")) or 0) - (c.get("latency_s") or 0)
                       <= at + slack_s]
            chosen = started[-1] if started else None
        chosen = 0 if chosen is None else chosen
        record = rest[chosen]
        turn.llm_call = record.get("call")
        if turn.input_tokens is None:
            turn.input_tokens = record.get("input_tokens")
        turn.output_tokens = record.get("output_tokens") if turn.output_tokens is None \
            or turn.output_tokens <= 1 else turn.output_tokens
        cursor += chosen + 1
