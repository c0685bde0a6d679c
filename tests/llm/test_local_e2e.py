"""Real, unscripted runs: an agent CLI driven by an open-weight model the harness serves itself.

``a2rl run grid=ci task=gsm8k_arith driver=local`` with mini-SWE-agent and with OpenCode: the
harness starts the local driver's CPU server (a2rl.llm.local_server) for SmolLM2-135M-Instruct,
outside the sandbox, and the agent reaches it through the recording proxy only. Nothing is
scripted: what the agent does is what the model writes. The model is far too small to call
tools or to train anything, so the test asserts the honest outcome, not a score: the proxy
recorded the model's own completions (priced at zero), the transcript is read and normalised,
the run ends with a status the agent earned (completed, budget exhausted or the agent's own
failure, never an infrastructure failure), the server is gone afterwards, and no key reached
the agent.

Each run is short (a 150 s budget; the server reads at most 1,024 tokens and writes 64 a reply,
on one thread), a few minutes with the run's set-up on two CPU cores.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from a2rl.analysis.transcripts import normalise
from a2rl.llm.proxy import llm_totals
from a2rl.models.hf_folder import is_complete_model
from agent_runs import HARNESS_SECRET, a2rl_run, jsonl, needs
from checkout import REPO

MODEL = "smollm2-135m-instruct"
SHORT = ("budget.time_limit_s=150", "driver.serve.threads=1", "driver.serve.max_context=1024",
         "driver.serve.max_new_tokens=64")
EARNED = ("completed", "budget_exhausted", "agent_failed")


@pytest.fixture(scope="module")
def local_root(tmp_path_factory) -> Path:
    """One results root: the tiny task model, the prepared task and the baseline are made by the
    first run; SmolLM2 is the checkout's converted copy when there is one (else the run converts
    it from its wheel)."""
    if shutil.which("bwrap") is None:
        pytest.skip("needs bubblewrap")
    root = tmp_path_factory.mktemp("local")
    converted = REPO / "resources" / "models" / MODEL
    if is_complete_model(converted):
        (root / "resources" / "models").mkdir(parents=True)
        (root / "resources" / "models" / MODEL).symlink_to(converted)
    return root


def texts_under(folder: Path) -> str:
    """Every readable text file below ``folder`` (the agent's side of the run), joined."""
    parts = []
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink() and path.stat().st_size < 5_000_000:
            parts.append(path.read_text(errors="replace"))
    return "\n".join(parts)


@pytest.mark.integration
@pytest.mark.parametrize("stack", [pytest.param(s, marks=needs(s))
                                   for s in ("mini_swe_agent", "opencode")])
def test_an_agent_runs_on_a_model_the_harness_serves(stack, local_root):
    run, log = a2rl_run(local_root, stack, "local", *SHORT)
    record = json.loads((run / "run.json").read_text())
    assert record["status"] in EARNED, (record, log)
    assert record["driver_model"] == MODEL and record["network"] == {"policy": "llm"}
    # the server: started for the run on CPU, outside the sandbox, and gone after it
    events = jsonl(run / "events.jsonl")
    [started] = [e for e in events if e["kind"] == "local_server_start"]
    assert started["engine"] == "transformers"
    assert any(e["kind"] == "local_server_stop" for e in events)
    assert not Path(f"/proc/{started['pid']}").exists()
    assert not any(e["kind"] == "replay_start" for e in events)  # nothing scripted
    # the proxy recorded the model's own completions, at no cost
    calls = jsonl(run / "llm_calls.jsonl")
    answered = [c for c in calls if c["outcome"] == "ok"]
    assert answered, calls
    # a call still being answered when the run ended is cut by the run's end, nothing else
    assert {c["outcome"] for c in calls} <= {"ok", "client_closed"}, calls
    for call in answered:
        assert (call["protocol"], call["route"], call["model"]) == ("openai_chat", "native",
                                                                    MODEL)
        assert call["usage_reported"] and call["output_tokens"] >= 1
        assert 1 <= call["input_tokens"] <= 1024 - 64
        assert call["cost_usd"] == 0.0
    assert record["llm"] == llm_totals(run) and record["llm"]["cost_usd"] == 0.0
    # the transcript: the CLI's own, read and normalised; the model's words are in it
    assert record["transcript"] == "transcript.jsonl", log
    normalised = normalise(stack, run / "transcript.jsonl", calls)
    said = [t for t in normalised.turns if t.role == "assistant" and t.text.strip()]
    # mini-SWE-agent keeps no reply that calls no tool: what it keeps is its note to the model,
    # one for each such reply; OpenCode keeps the model's words
    noted = [t for t in normalised.turns if "No tool calls found" in t.text]
    assert len(said) + len(noted) >= 1, normalised.turns
    assert len(noted) <= len(answered)
    # nothing leaked: no key of the harness's in anything the agent could read or write
    agent_side = texts_under(run / "workspace") + texts_under(run / "agent") + log
    assert HARNESS_SECRET not in agent_side and "a2rl-local-" not in agent_side
    assert os.environ.get("A2RL_LOCAL_SERVER_KEY") is None
