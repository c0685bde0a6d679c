"""``a2rl status`` on run folders written by the harness's own writers (the event log, the
ledger, run.json and final.json records, the summary stage, the infra_failed record, a stage's
log with its traceback): every state a cell can be in, and the command's table and JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from a2rl.analysis.status import cell_status, grid_status, job_error, last_line, main
from a2rl.common.events import EventLog
from a2rl.common.files import write_json_atomic
from a2rl.common.layout import Layout, cell_path
from a2rl.common.records import FinalRecord, RunRecord
from a2rl.config.types import AgentConfig, PathsConfig, RunConfig, TaskConfig
from a2rl.grading.ledger import Ledger
from a2rl.pipeline.runner import infra_record
from a2rl.pipeline.stages import summarize_run
from checkout import child_env
from live_runs import started_run

TASK = "gsm8k_arith"
LIMIT = 480


def make_cfg(root: Path, agent: str, seed: int = 0) -> RunConfig:
    cfg = RunConfig(task=TaskConfig(id=TASK, package="gsm8k", level="L1"),
                    agent=AgentConfig(name=agent, command=["{python}", "x.py"]),
                    paths=PathsConfig(root=str(root), results="results/ci"), seed=seed)
    cfg.budget.time_limit_s = LIMIT
    return cfg


def start_agent(cfg: RunConfig) -> EventLog:
    return started_run(cfg)[1]


def submit(cfg: RunConfig, events: EventLog, score: float | None,
           eval_seconds: float | None = None) -> None:
    """A ledger entry and its submission event, as the grader writes them."""
    run = Layout.from_paths(cfg.paths).run(TASK, cfg.agent.name, "none", cfg.seed)
    fields = dict(elapsed_s=events.clock.elapsed(), model_path="output/ckpt", status_code=200,
                  valid=score is not None, error=None if score is not None else "no model")
    if score is not None:
        fields |= dict(score=score, best=score, baseline=10.0, improvement=score - 10.0,
                       cached=False, stderr=1.0, n=16, split="test", artifact_hash="ab" * 32,
                       equals_base=False, eval_seconds=eval_seconds)
    entry = Ledger(run.ledger).append(**fields)
    events.emit("submission", submission_id=entry.submission_id, valid=entry.valid,
                score=entry.score)


def finish(cfg: RunConfig, status: str, exit_code: int = 0, grade: bool = True) -> None:
    """run.json, then (``grade``) final.json and the summary, as the stages write them."""
    run = Layout.from_paths(cfg.paths).run(TASK, cfg.agent.name, "none", cfg.seed)
    RunRecord(task=TASK, agent=cfg.agent.name, driver="none", seed=cfg.seed,
              started="2026-12-04T10:00:00.000Z", ended="2026-12-04T10:08:00.000Z",
              agent_seconds=300.5, exit_code=exit_code, status=status, time_limit_s=LIMIT,
              sandbox="bwrap", submissions=2).save(run.run_json)
    if grade:
        FinalRecord(task=TASK, agent=cfg.agent.name, driver="none", seed=cfg.seed,
                    feedback="test", baseline=10.0, no_valid_submission=False, rescored=False,
                    selected_submission=1, artifact_hash="ab" * 32, test_score=30.0,
                    test_stderr=1.0, n=16, improvement=20.0).save(run.final)
        summarize_run(cfg)


@pytest.fixture
def results(tmp_path) -> Path:
    return tmp_path / "results" / "ci"


def status_of(results: Path, agent: str, seed: int = 0, **kwargs):
    return next(c for c in grid_status(results, **kwargs).cells
                if (c.agent, c.seed) == (agent, seed))


def test_a_half_finished_run_is_running_with_its_submissions_best_and_budget(tmp_path,
                                                                            results):
    cfg = make_cfg(tmp_path, "sft")
    events = start_agent(cfg)
    submit(cfg, events, 25.0)
    submit(cfg, events, None)
    submit(cfg, events, 31.5)
    later = datetime.now(UTC) + timedelta(seconds=30)
    cell = status_of(results, "sft", now=later)
    assert cell.state == "running" and cell.outcome is None
    assert (cell.valid, cell.invalid, cell.best) == (2, 1, 31.5)
    assert cell.budget_s == LIMIT and cell.last_event == "submission"
    assert 30 <= cell.elapsed_s < 60 and 30 <= cell.last_event_age_s < 60
    assert cell.cost_usd == 0.0


def test_a_run_whose_agent_ended_is_grading_then_done(tmp_path, results):
    cfg = make_cfg(tmp_path, "sft")
    events = start_agent(cfg)
    submit(cfg, events, 30.0)
    finish(cfg, "budget_exhausted", grade=False)
    cell = status_of(results, "sft")
    assert (cell.state, cell.outcome, cell.elapsed_s) == ("grading", "budget_exhausted", 300.5)
    finish(cfg, "budget_exhausted")
    cell = status_of(results, "sft")
    assert (cell.state, cell.outcome, cell.valid, cell.best) == (
        "done", "budget_exhausted", 1, 30.0)


def test_where_evaluations_do_not_count_the_elapsed_time_leaves_them_out(tmp_path, results):
    """budget.count_eval_time false: the clock gives the evaluations' seconds back, so the
    elapsed time shown against the budget is the run's seconds less the evaluations finished,
    while the agent runs and once it ended (run.json's agent_seconds are the run's)."""
    cfg = make_cfg(tmp_path, "sft")
    cfg.budget.count_eval_time = False
    events = start_agent(cfg)
    submit(cfg, events, 25.0, eval_seconds=20.0)
    cell = status_of(results, "sft", now=datetime.now(UTC) + timedelta(seconds=30))
    assert 10 <= cell.elapsed_s < 40  # 30 s and more of the run, less the 20-s evaluation
    finish(cfg, "completed", grade=False)
    assert status_of(results, "sft").elapsed_s == 280.5


def test_an_agent_that_failed_is_failed_with_its_exit_code(tmp_path, results):
    cfg = make_cfg(tmp_path, "sft")
    events = start_agent(cfg)
    submit(cfg, events, None)
    finish(cfg, "agent_failed", exit_code=3)
    cell = status_of(results, "sft")
    assert (cell.state, cell.outcome, cell.invalid) == ("failed", "agent_failed", 1)
    assert "exit code 3" in cell.detail


def test_an_infra_failed_run_says_so_with_its_reason(tmp_path, results):
    cfg = make_cfg(tmp_path, "sft")
    start_agent(cfg)
    run = Layout.from_paths(cfg.paths).run(TASK, "sft", "none", 0)
    infra_record(cfg, run, "2026-12-04T10:00:00.000Z",
                 "grader_died: GraderDied: gone").save(run.run_json)
    cell = status_of(results, "sft")
    assert (cell.state, cell.outcome) == ("infra_failed", "infra_failed")
    assert cell.detail.startswith("grader_died")


def test_a_stage_that_raised_fails_its_cell_with_the_error(tmp_path, results):
    """The harness died mid-run (no run.json): the job's log ends in a traceback."""
    cfg = make_cfg(tmp_path, "sft")
    start_agent(cfg)
    layout = Layout.from_paths(cfg.paths)
    log = layout.log("run_agent", cell_path(TASK, "sft", "none", 0))
    stage = ("import logging, sys\nfrom a2rl.pipeline.jobs import log_output\n"
             "with log_output(sys.argv[1]):\n"
             "    logging.getLogger('a2rl').info('stage run_agent: grid=ci')\n"
             "    raise RuntimeError('the sandbox could not start')\n")
    subprocess.run([sys.executable, "-c", stage, str(log)], env=child_env(), timeout=60,
                   capture_output=True, check=False)
    cell = status_of(results, "sft")
    assert cell.state == "failed"
    assert cell.detail == "RuntimeError: the sandbox could not start"
    assert job_error(log) == cell.detail


def test_cells_not_started_are_waiting_or_preparing_with_the_jobs_last_line(tmp_path,
                                                                            results):
    layout = Layout(results, tmp_path / "resources")
    write_json_atomic(layout.grid_plan, {"label": "ci", "cells": [
        {"task": TASK, "agent": a, "driver": "none", "seed": 0} for a in ("noop", "sft")] + [
        {"task": "household", "agent": "noop", "driver": "none", "seed": 0}]})
    # household's task is being prepared: a progress bar's line, rewritten with \r
    log = layout.log("prepare_task", "household")
    log.parent.mkdir(parents=True)
    log.write_text("starting\ngames:  10%|#   | 1/10\rgames:  50%|#####  | 5/10 [00:05<00:05]")
    # gsm8k_arith is prepared and measured; its sft cell's job started
    write_json_atomic(layout.prepared(TASK).manifest, {"task": TASK})
    write_json_atomic(layout.baseline(TASK), {"task": TASK})
    agent_log = layout.log("run_agent", cell_path(TASK, "sft", "none", 0))
    agent_log.parent.mkdir(parents=True)
    agent_log.write_text("INFO a2rl: stage run_agent: grid=ci\n")
    states = {(c.task, c.agent): (c.state, c.detail) for c in grid_status(results).cells}
    assert states[(TASK, "noop")] == ("waiting", "")
    assert states[(TASK, "sft")] == ("preparing", "INFO a2rl: stage run_agent: grid=ci")
    assert states[("household", "noop")] == (
        "preparing", "prepare_task: games:  50%|#####  | 5/10 [00:05<00:05]")
    assert last_line(log).endswith("[00:05<00:05]")


def test_a_running_llm_agent_counts_its_cost_and_the_judges(tmp_path, results):
    cfg = make_cfg(tmp_path, "sft")
    events = start_agent(cfg)
    run = Layout.from_paths(cfg.paths).run(TASK, "sft", "none", 0)
    run.llm_calls.write_text("".join(json.dumps({"call": i, "cost_usd": 0.25, "outcome": "ok"})
                                     + "\n" for i in range(3)) + '{"call": 4, "cost_')
    Ledger(run.ledger).append(elapsed_s=1.0, model_path="m", status_code=200, valid=True,
                              error=None, score=5.0, best=5.0, baseline=1.0, improvement=4.0,
                              cached=False, stderr=0.1, n=4, split="test",
                              artifact_hash="cd" * 32, equals_base=False,
                              grading_usage={"calls": 2, "cost_usd": 0.125})
    events.emit("llm_call", call=3)
    cell = cell_status(Layout(results, results), TASK, "sft", "none", 0)
    assert cell.cost_usd == 0.875 and cell.last_event == "llm_call"


def test_the_command_prints_a_table_and_json(tmp_path, results, capsys):
    cfg = make_cfg(tmp_path, "sft")
    events = start_agent(cfg)
    submit(cfg, events, 12.0)
    assert main([str(results), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["counts"] == {"running": 1}
    assert data["cells"][0]["slug"] == f"{TASK}__sft__none__seed0"
    assert main([str(results)]) == 0
    table = capsys.readouterr().out
    assert f"{TASK}/sft/none/seed0" in table and "running" in table and "12.00" in table
    with pytest.raises(SystemExit):
        main([str(tmp_path / "nowhere")])


def test_inside_a_workspace_status_asks_the_grader_and_on_the_host_it_reads_files(tmp_path):
    """The one command: with A2RL_GRADER_URL set (an agent's environment) it is the grader
    client (no grader at that address: the client says so), without it the host's table."""
    from checkout import REPO

    (tmp_path / "results").mkdir()
    cli = [sys.executable, "-m", "a2rl.pipeline.cli", "status"]
    host = subprocess.run([*cli, str(tmp_path / "results"), "--json"], cwd=REPO,
                          env=child_env(), capture_output=True, text=True, timeout=60)
    assert host.returncode == 0 and json.loads(host.stdout)["cells"] == [], host.stderr
    sock = tmp_path / "no.sock"
    inside = subprocess.run(cli, cwd=REPO, env=child_env(A2RL_GRADER_URL=f"unix:{sock}",
                                                         A2RL_TOKEN="t"),
                            capture_output=True, text=True, timeout=60)
    assert inside.returncode != 0
    assert "cells" not in inside.stdout and "the grader is not answering" in inside.stderr
