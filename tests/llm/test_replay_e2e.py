"""The replay driver, and real agent CLIs driven by it end to end.

The first half checks the replay server itself (script position read back from the
conversation, shell tools, the four wire protocols). The second half runs real agents: for each
installed stack, ``a2rl run`` on the ci grid with the replay driver, so the agent process, the
bubblewrap sandbox, the recording proxy, the grader and the ledger are all real. The agent
inspects the workspace, writes and runs a training script for the tiny model, and submits; the
ledger, the transcript and llm_calls.jsonl must show it.

Agents are installed by ``python scripts/install_agents.py mini_swe_agent claude_code`` (about
45 s and 2 min, 0.7 GB and 0.4 GB); a stack that is not installed is skipped with that command.
Each run takes 40-90 s on two CPU cores (the first one also builds the tiny model and baseline).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import httpx
import pytest
import yaml

from a2rl.analysis.transcripts import normalise
from a2rl.llm.proxy import llm_totals
from a2rl.llm.replay import (
    ReplayBackend,
    ReplayScript,
    ReplayScriptError,
    ReplayServer,
    pick_shell_tool,
    shell_arguments,
)
from a2rl.llm.wire import (
    ANTHROPIC,
    GEMINI,
    OPENAI_CHAT,
    OPENAI_RESPONSES,
    UsageTracker,
)
from agent_runs import HARNESS_SECRET, a2rl_run, jsonl, needs
from checkout import REPO

SCRIPT = ReplayScript.parse({"turns": [
    {"text": "look", "shell": "ls"},
    {"tool": {"name": "Read", "arguments": {"file_path": "/workspace/description.md"}}},
    {"text": "done"}]})
BASH = {"type": "object", "properties": {"command": {"type": "string"},
                                         "timeout": {"type": "number"},
                                         "description": {"type": "string"}},
        "required": ["command"]}


# ------------------------------------------------------------------------ the replay server

def chat_request(*assistant_texts: str, tools: bool = True) -> dict:
    messages = [{"role": "user", "content": "go"}]
    for text in assistant_texts:
        messages += [{"role": "assistant", "content": text},
                     {"role": "user", "content": "output"}]
    body = {"messages": messages}
    if tools:
        body["tools"] = [{"type": "function", "function": {"name": "bash", "parameters": BASH}},
                         {"type": "function", "function": {"name": "Read", "parameters": {}}}]
    return body


def test_position_is_read_back_from_the_conversation():
    backend = ReplayBackend(SCRIPT)
    first = backend.answer(OPENAI_CHAT, "/v1/chat/completions", chat_request())
    assert first.text == "[replay step 0] look"
    assert [(c.name, c.arguments) for c in first.tool_calls] == [
        ("bash", {"command": "ls", "timeout": 600_000})]
    again = backend.answer(OPENAI_CHAT, "/v1/chat/completions", chat_request())
    assert again.text == first.text  # stateless: the same conversation, the same answer
    second = backend.answer(OPENAI_CHAT, "/v1/chat/completions",
                            chat_request("[replay step 0] look"))
    assert [(c.name, c.arguments) for c in second.tool_calls] == [
        ("Read", {"file_path": "/workspace/description.md"})]
    assert second.tool_calls[0].id.startswith("call_replay1_")
    last = backend.answer(OPENAI_CHAT, "/v1/chat/completions",
                          chat_request("[replay step 0]", "[replay step 1]"))
    assert (last.text, last.tool_calls) == ("[replay step 2] done", [])
    beyond = backend.answer(OPENAI_CHAT, "/v1/chat/completions",
                            chat_request("[replay step 2]"))
    assert "no more steps" in beyond.text and not beyond.tool_calls
    side = backend.answer(OPENAI_CHAT, "/v1/chat/completions", chat_request(tools=False))
    assert (side.text, side.tool_calls) == ("OK.", [])
    assert [c.step for c in backend.served] == [0, 0, 1, 2, 3, None]
    assert first.input_tokens > 0 and first.output_tokens > 0


def test_tool_call_ids_also_carry_the_position():
    body = chat_request()
    body["messages"].append({"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_replay0_5", "type": "function",
         "function": {"name": "bash", "arguments": "{}"}}]})
    turn = ReplayBackend(SCRIPT).answer(OPENAI_CHAT, "/v1/chat/completions", body)
    assert turn.text.startswith("[replay step 1]")


@pytest.mark.parametrize(("tools", "picked", "arguments"), [
    ({"Bash": BASH, "Read": {}}, "Bash", {"command": "ls", "timeout": 600_000}),
    ({"shell": {"properties": {"command": {"type": "array"}, "timeout_ms": {"type": "integer"}},
                "required": ["command"]}},
     "shell", {"command": ["bash", "-lc", "ls"], "timeout_ms": 600_000}),
    ({"exec_command": {"properties": {"cmd": {"type": "string"},
                                      "yield_time_ms": {"type": "number"},
                                      "justification": {"type": "string"}},
                       "required": ["cmd", "justification"]}},
     "exec_command", {"cmd": "ls", "yield_time_ms": 600_000, "justification": "replay step"}),
    ({"run_shell_command": {"properties": {"command": {"type": "string"},
                                           "is_background": {"type": "boolean"}},
                            "required": ["command", "is_background"]}},
     "run_shell_command", {"command": "ls", "is_background": False}),
    ({"my_terminal": {"properties": {"command": {"type": "string"}}}},
     "my_terminal", {"command": "ls"}),
    # OpenHands' terminal: a required security_risk enum (a free string fails its validation)
    ({"terminal": {"properties": {"command": {"type": "string"},
                                  "security_risk": {"type": "string",
                                                    "enum": ["UNKNOWN", "LOW", "HIGH"]}},
                   "required": ["command", "security_risk"]}},
     "terminal", {"command": "ls", "security_risk": "UNKNOWN"}),
    ({"terminal": {"properties": {"command": {"type": "string"},
                                  "risk": {"$ref": "#/$defs/Risk"}},
                   "$defs": {"Risk": {"enum": ["LOW", "HIGH"]}},
                   "required": ["command", "risk"]}},
     "terminal", {"command": "ls", "risk": "LOW"}),
])
def test_shell_commands_use_the_agents_own_shell_tool(tools, picked, arguments):
    assert pick_shell_tool(tools) == picked
    assert shell_arguments(tools[picked], "ls") == arguments


def test_a_shell_step_without_a_shell_tool_is_an_error():
    body = {"messages": [], "tools": [{"type": "function",
                                       "function": {"name": "Read", "parameters": {}}}]}
    with pytest.raises(ReplayScriptError, match="no shell tool"):
        ReplayBackend(SCRIPT).answer(OPENAI_CHAT, "/v1/chat/completions", body)


@pytest.mark.parametrize(("raw", "message"), [
    ({}, "non-empty list"),
    ({"turns": []}, "non-empty list"),
    ({"turns": [{"shell": "ls", "tool": {"name": "x"}}]}, "both shell and tool"),
    ({"turns": [{"say": "hi"}]}, "expected a mapping"),
    ({"turns": [{"tool": {"arguments": {}}}]}, "name"),
])
def test_malformed_scripts_are_refused(raw, message):
    with pytest.raises(ReplayScriptError, match=message):
        ReplayScript.parse(raw)


def test_missing_script_file(tmp_path):
    with pytest.raises(ReplayScriptError, match="does not exist"):
        ReplayScript.load(tmp_path / "nope.yaml")


def test_the_server_speaks_all_four_protocols():
    tools_anthropic = [{"name": "Bash", "input_schema": BASH}]
    with ReplayServer(SCRIPT) as server:
        url = server.url
        chat = httpx.post(f"{url}/v1/chat/completions",
                          json=chat_request() | {"stream": True,
                                                 "stream_options": {"include_usage": True}})
        anthropic = httpx.post(f"{url}/v1/messages", json={
            "stream": True, "messages": [{"role": "user", "content": "go"}],
            "tools": tools_anthropic})
        anthropic_json = httpx.post(f"{url}/v1/messages", json={
            "messages": [{"role": "user", "content": "go"}], "tools": tools_anthropic})
        responses = httpx.post(f"{url}/v1/responses", json={
            "stream": True, "input": "go",
            "tools": [{"type": "function", "name": "shell", "parameters": BASH}]})
        gemini = httpx.post(f"{url}/v1beta/models/replay:streamGenerateContent?alt=sse", json={
            "contents": [{"role": "user", "parts": [{"text": "go"}]}],
            "tools": [{"functionDeclarations": [{"name": "run_shell_command",
                                                 "parameters": BASH}]}]})
        counted = httpx.post(f"{url}/v1/messages/count_tokens", json={"messages": []})
        unknown = httpx.post(f"{url}/v2/nothing", json={})
    for answer, protocol in ((chat, OPENAI_CHAT), (anthropic, ANTHROPIC),
                             (responses, OPENAI_RESPONSES), (gemini, GEMINI)):
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/event-stream")
        tracker = UsageTracker(protocol)
        tracker.feed(answer.content)
        assert tracker.usage.found and tracker.usage.output_tokens > 0, protocol
        assert b"replay step 0" in answer.content
    assert chat.content.endswith(b"data: [DONE]\n\n")
    block = anthropic_json.json()["content"][1]
    assert (block["type"], block["name"], block["id"][:13]) == ("tool_use", "Bash",
                                                                "toolu_call_re")
    assert anthropic_json.json()["stop_reason"] == "tool_use"
    assert b"response.function_call_arguments.done" in responses.content
    assert b'"functionCall"' in gemini.content
    assert counted.json()["input_tokens"] >= 1
    assert unknown.status_code == 404


# ------------------------------------------------------------------ real agents, end to end

E2E_STACKS = ("mini_swe_agent", "claude_code", "codex", "gemini_cli", "opencode", "openhands")
PROTOCOL_OF = {"mini_swe_agent": OPENAI_CHAT, "claude_code": ANTHROPIC, "codex": OPENAI_RESPONSES,
               "gemini_cli": GEMINI, "opencode": OPENAI_CHAT,
               "openhands": OPENAI_CHAT}


@pytest.fixture(scope="module")
def e2e_root(tmp_path_factory) -> Path:
    """One results root for the module: the tiny model, the prepared task and the baseline are
    made by the first run and reused by the others."""
    if shutil.which("bwrap") is None:
        pytest.skip("needs bubblewrap")
    root = tmp_path_factory.mktemp("agents")
    packaged = yaml.safe_load((REPO / "src/a2rl/templates/replay_train_and_submit.yaml")
                              .read_text())
    # after looking around, the agent also records its environment (no real key may be there)
    packaged["turns"].insert(1, {"text": "Noting my environment.",
                                 "shell": 'env | sort > "$A2RL_WORKSPACE/code/agent_env.txt"'})
    (root / "script.yaml").write_text(yaml.safe_dump(packaged, sort_keys=False))
    return root


def replay_run(root: Path, stack: str, *overrides: str) -> tuple[Path, str]:
    return a2rl_run(root, stack, "replay", f"driver.script={root / 'script.yaml'}",
                    "budget.time_limit_s=300", *overrides)


@pytest.mark.integration
@pytest.mark.parametrize("stack", [pytest.param(s, marks=needs(s)) for s in E2E_STACKS])
def test_agent_trains_and_submits_through_the_replay_driver(stack, e2e_root):
    from safetensors.torch import load_file

    run, log = replay_run(e2e_root, stack)
    record = json.loads((run / "run.json").read_text())
    assert (record["status"], record["exit_code"], record["stack"]) == ("completed", 0, stack), log
    assert record["transcript"] == "transcript.jsonl"
    # the CLI reached its LLM through the forwarded proxy socket only (network policy llm)
    assert record["network"] == {"policy": "llm"}
    # the agent wrote and ran a training script, and the weights moved
    workspace = run / "workspace"
    assert "AdamW" in (workspace / "code" / "train.py").read_text()
    trained = load_file(workspace / "output" / "ckpt-1" / "model.safetensors")
    base = load_file(workspace / "base_model" / "model.safetensors")
    assert any(not trained[k].equal(base[k]) for k in base)
    # the ledger has its submission
    [entry] = jsonl(run / "ledger.jsonl")
    assert entry["valid"] and entry["model_path"].endswith("output/ckpt-1")
    # the sandbox saw the dummy key only
    agent_env = (workspace / "code" / "agent_env.txt").read_text()
    assert HARNESS_SECRET not in agent_env and "a2rl-" in agent_env
    # every LLM call went through the proxy, in the agent's own protocol, and was recorded
    calls = jsonl(run / "llm_calls.jsonl")
    main_calls = [c for c in calls if c["protocol"] == PROTOCOL_OF[stack]]
    assert len(main_calls) >= 6 if stack != "mini_swe_agent" else len(main_calls) >= 5
    assert {c["outcome"] for c in calls} == {"ok"}
    assert all(c["model"] == "replay" and c["usage_reported"] for c in main_calls)
    totals = llm_totals(run)
    assert totals["calls"] == len(calls) and totals["input_tokens"] > 1000
    assert record["llm"] == totals
    # the transcript is the CLI's own, as JSON lines, and shows the submission
    transcript = (run / "transcript.jsonl").read_text()
    lines = [json.loads(line) for line in transcript.splitlines() if line.strip()]
    assert len(lines) >= 5
    assert "a2rl submit output/ckpt-1" in transcript and "replay step 3" in transcript
    kinds = [e["kind"] for e in jsonl(run / "events.jsonl")]
    assert {"replay_start", "proxy_start", "proxy_stop", "agent_exit", "submission"} <= set(kinds)
    assert kinds.count("llm_call") == len(calls)  # each call is also an event
    # the normalised transcript ran the script's shell commands, each linked to its call
    script = yaml.safe_load((e2e_root / "script.yaml").read_text())
    normalised = normalise(stack, run / "transcript.jsonl", calls)
    assert len(normalised.commands) == sum(1 for t in script["turns"] if "shell" in t)
    assert all(t.llm_call for t in normalised.turns if t.role == "assistant")
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["network"] == {"policy": "llm"}


@pytest.mark.integration
@needs("claude_code")
def test_llm_token_budget_stops_the_agent(e2e_root):
    run, log = replay_run(e2e_root, "claude_code", "budget.llm_max_tokens=100")
    record = json.loads((run / "run.json").read_text())
    assert record["status"] == "llm_budget_exhausted", log
    assert record["agent_seconds"] < 60
    assert record["submissions"] == 0
    calls = jsonl(run / "llm_calls.jsonl")
    assert calls[0]["outcome"] == "ok"
    assert all(c["outcome"] in ("ok", "budget_exhausted") for c in calls)
    events = jsonl(run / "events.jsonl")
    assert any(e["kind"] == "llm_budget_exhausted" for e in events)
