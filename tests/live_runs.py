"""Run folders as the runner leaves them while an agent runs, written with the harness's own
writers, for the tests of ``a2rl status`` and ``a2rl view`` (tests/analysis/test_status.py,
tests/report/test_live_view.py, tests/attacks/test_live_view_attacks.py)."""

from __future__ import annotations

from a2rl.common.clock import BudgetClock
from a2rl.common.events import EventLog
from a2rl.common.files import write_json_atomic
from a2rl.common.layout import Layout, RunPaths
from a2rl.config.types import RunConfig, config_record


def started_run(cfg: RunConfig) -> tuple[RunPaths, EventLog]:
    """The run folder of ``cfg`` once its agent started: config.json, the grader's and the
    agent's start (with the budget) on a started budget clock; returns it and its event log."""
    run = Layout.from_paths(cfg.paths).run(cfg.task.id, cfg.agent.name, cfg.driver.name,
                                           cfg.seed)
    run.agent_files.mkdir(parents=True)
    write_json_atomic(run.config, config_record(cfg))
    clock = BudgetClock(cfg.budget.time_limit_s, cfg.budget.count_eval_time)
    events = EventLog(run.events, clock)
    events.emit("grader_start", pid=1)
    clock.start()
    events.emit("agent_start", agent=cfg.agent.name, time_limit_s=cfg.budget.time_limit_s,
                count_eval_time=cfg.budget.count_eval_time,
                max_submissions=cfg.budget.max_submissions)
    return run, events
