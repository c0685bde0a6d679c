"""A run the harness failed is told apart from the agent's own failures: run.json says
infra_failed with a reason (missing key, agent CLI not installed, provider outage, grader
crash), and InfraFailed is raised so that the workflow retries it."""

from __future__ import annotations

import json

import pytest

from a2rl.common.layout import RunPaths
from a2rl.common.records import LedgerEntry, RecordError, RunRecord
from a2rl.config.compose import compose
from a2rl.llm.stacks import TOOLS_ENV
from a2rl.pipeline.runner import InfraFailed, execute, grader_crash, provider_outage

CELL = {"task": "gsm8k_arith", "agent": "claude_code", "driver": "replay", "seed": 0,
        "started": "2026-12-01T00:00:00Z", "ended": "2026-12-01T00:00:01Z",
        "agent_seconds": 0.0, "exit_code": None, "time_limit_s": 60, "sandbox": "bwrap"}


def run_failing(tmp_path, *overrides: str) -> tuple[RunPaths, InfraFailed]:
    cfg = compose([*overrides, f"paths.root={tmp_path}"])
    run = RunPaths(tmp_path / "run")
    with pytest.raises(InfraFailed) as caught:
        # the harness fails before the task, data or model are looked at
        execute(cfg, task=None, run=run, prepared=None, base_model=tmp_path, baseline={})
    return run, caught.value


def test_missing_driver_key_is_an_infra_failure(tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    run, err = run_failing(tmp_path, "agent=claude_code", "driver=claude_sonnet_4_5")
    record = RunRecord.load(run.run_json)
    assert (record.status, record.exit_code, record.submissions) == ("infra_failed", None, 0)
    assert record.reason.startswith("missing_key: DriverKeyMissing: ")
    assert "$ANTHROPIC_API_KEY" in record.reason and err.reason == record.reason


def test_agent_cli_not_installed_is_an_infra_failure(tmp_path, monkeypatch):
    monkeypatch.setenv(TOOLS_ENV, str(tmp_path / "no-tools"))
    run, _ = run_failing(tmp_path, "agent=codex", "driver=replay")
    record = json.loads(run.run_json.read_text())
    assert record["status"] == "infra_failed"
    assert record["reason"].startswith("agent_not_installed: AgentNotInstalled: agent codex")


def test_missing_agent_python_is_an_infra_failure(tmp_path, monkeypatch):
    monkeypatch.setenv("A2RL_AGENT_PYTHON", str(tmp_path / "no-agent-python"))
    run, _ = run_failing(tmp_path, "agent=sft")
    record = RunRecord.load(run.run_json)
    assert record.status == "infra_failed"
    assert record.reason.startswith("agent_not_installed: AgentPythonMissing: the agents' "
                                    f"Python environment {tmp_path / 'no-agent-python'} is ")
    assert "scripts/setup.sh" in record.reason


def test_provider_outage_reads_the_last_calls(tmp_path):
    run = RunPaths(tmp_path)
    calls = [{"call": 1, "outcome": "ok", "status": 200},
             {"call": 2, "outcome": "upstream_error", "status": 503, "error": "overloaded"},
             {"call": 3, "outcome": "connection_error", "status": 502, "error": "refused"},
             {"call": 4, "outcome": "upstream_error", "status": 529, "error": "overloaded"}]
    run.llm_calls.write_text("".join(json.dumps(c) + "\n" for c in calls))
    assert provider_outage(run).startswith("provider_outage: the last 3 LLM calls failed (529")
    # an agent's bad request (400) is the agent's failure, not an outage
    run.llm_calls.write_text("".join(json.dumps(c) + "\n" for c in calls[:3] + [
        {"call": 4, "outcome": "upstream_error", "status": 400, "error": "bad"}]))
    assert provider_outage(run) is None
    assert provider_outage(RunPaths(tmp_path / "none")) is None


def test_grader_crash_is_a_500_in_the_ledger():
    base = {"time": "t", "model_path": "output/x", "elapsed_s": 1.0}
    rejected = LedgerEntry(submission_id=1, valid=False, error="not a model folder",
                           status_code=422, **base)
    crashed = LedgerEntry(submission_id=2, valid=False, status_code=500,
                          error="internal grader error: KeyError: 'x'", **base)
    assert grader_crash([rejected]) is None
    assert grader_crash([rejected, crashed]) == (
        "grader_crash: submission 2: internal grader error: KeyError: 'x'")


def test_infra_failed_needs_a_known_reason_and_only_it_has_one():
    RunRecord(**CELL, status="infra_failed", reason="harness_oom: MemoryError: ")
    with pytest.raises(ValueError, match="needs a reason"):
        RunRecord(**CELL, status="infra_failed")
    with pytest.raises(ValueError, match="needs a reason"):
        RunRecord(**CELL, status="infra_failed", reason="it broke")
    with pytest.raises(ValueError, match="only an infra_failed run has a reason"):
        RunRecord(**CELL, status="agent_failed", reason="missing_key: x")
    with pytest.raises(RecordError, match="reason"):
        RunRecord.from_json({**CELL, "status": "infra_failed"}, "run.json")
