"""Each stack's native transcript, from the replay end-to-end runs (tests/fixtures/transcripts,
see PROVENANCE.md there), read into the common schema and linked to the proxy's call records.
The replayed script ran six shell commands; the normalised transcript must show the same six,
in order, whatever the CLI's own format."""

from __future__ import annotations

import json

import pytest
import yaml

from a2rl.analysis.transcripts import (
    MAX_OUTPUT,
    TranscriptError,
    Turn,
    link_llm_calls,
    normalise,
)
from a2rl.common.plugins import usable
from checkout import REPO

FIXTURES = REPO / "tests" / "fixtures" / "transcripts"
SCRIPT = yaml.safe_load((FIXTURES / "script.yaml").read_text())
SCRIPT_COMMANDS = [t["shell"] for t in SCRIPT["turns"] if "shell" in t]
# a replayed run of each built-in stack (a2rl.llm.stacks.<name>)
STACKS = sorted(p.name for p in FIXTURES.iterdir() if (p / "transcript.jsonl").is_file())
# stacks whose results carry the command's exit status
EXIT_CODES = {"codex", "opencode", "mini_swe_agent", "openhands"}


def calls_of(stack: str) -> list[dict]:
    path = FIXTURES / stack / "llm_calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.parametrize("stack", STACKS)
def test_transcript_has_the_scripts_commands_in_order(stack):
    transcript = normalise(stack, FIXTURES / stack / "transcript.jsonl", calls_of(stack))
    assert len(transcript.commands) == len(SCRIPT_COMMANDS) == 6
    assert [c.strip() for c in transcript.commands] == [c.strip() for c in SCRIPT_COMMANDS]
    texts = [t.text for t in transcript.turns if t.role == "assistant"]
    assert "[replay step 0]" in texts[0] and "submitted" in texts[-1]  # mini stops a turn early
    results = [r for t in transcript.turns for r in t.tool_results]
    assert len(results) == 6
    assert any('"submission_id": 1' in r.output for r in results)  # the submission's answer
    if stack in EXIT_CODES:
        assert [r.exit_code for r in results][:5] == [0] * 5


@pytest.mark.parametrize("stack", STACKS)
def test_model_responses_are_linked_to_the_proxys_calls(stack):
    calls = calls_of(stack)
    transcript = normalise(stack, FIXTURES / stack / "transcript.jsonl", calls)
    responses = [t for t in transcript.turns if t.role == "assistant"]
    linked = [t.llm_call for t in responses]
    assert None not in linked and linked == sorted(set(linked))  # each its own call, in order
    by_number = {c["call"]: c for c in calls}
    for turn in responses:
        record = by_number[turn.llm_call]
        assert record["outcome"] == "ok"
        assert turn.input_tokens == record["input_tokens"] > 0
        assert turn.output_tokens == record["output_tokens"] > 0
    # the shell step that writes train.py is the long answer of the script (456 tokens or so)
    writing = next(t for t in responses if any("train.py <<" in c.command
                                                for c in t.tool_calls if c.command))
    assert writing.output_tokens == max(t.output_tokens for t in responses)


def test_long_outputs_are_cut_and_errors_kept(tmp_path):
    path = tmp_path / "transcript.jsonl"
    items = [{"id": "1", "type": "command_execution", "command": "/bin/bash -lc 'yes | head'",
              "aggregated_output": "y\n" * 10_000, "exit_code": 0, "status": "completed"},
             {"id": "2", "type": "command_execution", "command": "/bin/bash -lc false",
              "aggregated_output": "", "exit_code": 1, "status": "failed"}]
    path.write_text("".join(json.dumps({"type": "item.completed", "item": i}) + "\n"
                            for i in items) + "not json\n")
    transcript = normalise("codex", path)
    first, second = [r for t in transcript.turns for r in t.tool_results]
    assert first.truncated and len(first.output) < MAX_OUTPUT + 100 and not first.error
    assert "characters cut" in first.output
    assert (second.exit_code, second.error) == (1, True)
    assert transcript.commands == ["yes | head", "false"]


def test_unknown_stack_and_empty_transcript_are_refused(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text("plain text only\n")
    with pytest.raises(TranscriptError, match="no transcript reader: no stack plugin 'aider'"):
        normalise("aider", path)
    with pytest.raises(TranscriptError, match="no JSON events"):
        normalise("claude_code", path)


def test_every_built_in_stack_has_a_replayed_transcript():
    assert STACKS == sorted(name for name, plugin in usable("stacks").items()
                            if plugin.built_in)


def test_linking_without_tokens_or_times_goes_in_order():
    turns = [Turn("assistant"), Turn("tool"), Turn("assistant")]
    calls = [{"call": 1, "outcome": "ok", "input_tokens": 5, "output_tokens": 2},
             {"call": 2, "outcome": "budget_exhausted", "input_tokens": 0, "output_tokens": 0},
             {"call": 3, "outcome": "ok", "input_tokens": 9, "output_tokens": 4}]
    link_llm_calls(turns, calls)
    assert [(t.llm_call, t.input_tokens) for t in turns] == [(1, 5), (None, None), (3, 9)]
