"""The grader's own process: ``python -m a2rl.pipeline.grader_process``, started (and restarted
when it dies) by the harness (a2rl.pipeline.supervisor).

Its settings come as one line on stdin (a ``GraderSpec``, pickled: typed, and the token never in
argv or the environment, where other processes could read it); later lines are the harness's
orders (``{"start": <monotonic>}``: the agent's clock started; ``{"stop": true}``: finish the
running evaluation and exit). End of stdin without a stop (the harness is gone) makes it exit at
once, the running evaluation abandoned, since no one is left to book it. It serves on
the sockets the harness holds (inherited file descriptors), so a restarted grader answers on the
same socket path and port. It reports on its own pipe, one JSON object a line: ``ready`` once it
answers, and each evaluation's start and end, which the harness books on the agent's clock.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import pickle
import socket
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from a2rl.common.clock import BudgetClock
from a2rl.common.events import EventLog
from a2rl.common.layout import RunPaths
from a2rl.config.types import RunConfig
from a2rl.grading.grader import GraderSettings, GradingServer, GradingService
from a2rl.grading.ledger import Ledger
from a2rl.grading.recording import CodeRecorder
from a2rl.pipeline.harness import load_task_of
from a2rl.task.base import Task


@dataclass
class GraderSpec:
    """Everything one grader process needs; the same for each of its restarts but the clock."""

    cfg: RunConfig
    run_root: Path
    split_name: str  # what feedback scores are computed on
    split: Path
    base_model: Path
    baseline: dict[str, Any]
    alias: str  # the workspace as the agent sees it
    token: str
    socket_path: Path
    unix_fd: int  # the listening sockets, inherited from the harness
    tcp_fd: int
    report_fd: int  # the write end of the pipe the harness reads
    clock: dict[str, Optional[float]]  # the agent's clock (BudgetClock.state) at the start

    def encode(self) -> bytes:
        return base64.b64encode(pickle.dumps(self)) + b"\n"


class ReportingClock(BudgetClock):
    """The agent's clock as this process keeps it: each evaluation's start and end is also
    reported to the harness, whose clock decides when the agent is stopped."""

    def __init__(self, time_limit_s: float, count_eval_time: bool,
                 report: Callable[[dict[str, Any]], None]):
        super().__init__(time_limit_s, count_eval_time)
        self.report = report

    def begin_eval(self) -> None:
        super().begin_eval()
        self.report({"clock": "begin_eval"})

    def end_eval(self, account: str = "eval") -> float:
        seconds = super().end_eval(account)
        self.report({"clock": "end_eval", "account": account})
        return seconds


class Reporter:
    """Writes one JSON object a line to the harness's pipe; thread-safe."""

    def __init__(self, fd: int):
        self._file = os.fdopen(fd, "w", buffering=1)
        self._lock = threading.Lock()

    def send(self, message: dict[str, Any]) -> None:
        with self._lock:
            self._file.write(json.dumps(message) + "\n")
            self._file.flush()


def grading_service(spec: GraderSpec, task: Task, clock: BudgetClock,
                    events: EventLog) -> GradingService:
    """The run's grader: feedback on the spec's split, an unchanged base answered with its
    baseline. Made on the run's ledger, it records a submission a previous grader process
    was evaluating when it died as interrupted."""
    cfg, run = spec.cfg, RunPaths(spec.run_root)
    base_scored = spec.baseline.get(spec.split_name) or {}
    settings = GraderSettings(
        task=cfg.task.id, split=spec.split_name, baseline=base_scored.get("score"),
        max_submissions=cfg.budget.max_submissions, workspace=run.workspace, store=run.store,
        base_model=spec.base_model, base_hash=spec.baseline.get("model_hash"),
        base_scored=base_scored or None, alias=spec.alias,
        mirror=run.scores_mirror, evals=run.evals, eval_timeout_s=cfg.budget.eval_timeout_s,
        max_store_bytes=None if cfg.budget.max_store_gb is None
        else int(cfg.budget.max_store_gb * 2**30),
        max_invalid_submissions=cfg.budget.max_invalid_submissions,
        invalid_per_minute=cfg.budget.invalid_per_minute)
    split, inference = spec.split, cfg.task.inference
    return GradingService(
        settings, evaluate=lambda model_dir: task.evaluate(model_dir, split, inference),
        ledger=Ledger(run.ledger), clock=clock, events=events,
        recorder=CodeRecorder(run.code_repo, run.workspace))


def read_spec(stream) -> GraderSpec:
    line = stream.readline()
    if not line:
        raise SystemExit("grader process: no settings on stdin (it is started by the harness)")
    spec = pickle.loads(base64.b64decode(line))
    if not isinstance(spec, GraderSpec):
        raise SystemExit(f"grader process: expected a GraderSpec on stdin, got {type(spec)}")
    return spec


def follow_orders(orders, clock: BudgetClock) -> bool:
    """Carry out the harness's orders (one JSON object a line) until it says stop (True) or
    the lines end without it (False: the harness is gone)."""
    for line in orders:
        order = json.loads(line)
        if order.get("start") is not None:
            clock.start(order["start"])
        if order.get("stop"):
            return True
    return False


def serve(spec: GraderSpec, orders) -> None:
    """Serve until the harness says stop, then finish the running evaluation; exit at once if
    the harness is gone."""
    reporter = Reporter(spec.report_fd)
    cfg, run = spec.cfg, RunPaths(spec.run_root)
    clock = ReportingClock(cfg.budget.time_limit_s, cfg.budget.count_eval_time, reporter.send)
    clock.restore(spec.clock)
    events = EventLog(run.events, clock)
    task = load_task_of(cfg)
    task.grading_calls = run.judge_calls  # an API judge logs here, apart from llm_calls
    service = grading_service(spec, task, clock, events)
    listening = [socket.socket(fileno=spec.unix_fd), socket.socket(fileno=spec.tcp_fd)]
    server = GradingServer(service, spec.token, spec.socket_path, listening)
    server.start()
    reporter.send({"ready": True, "pid": os.getpid()})
    if not follow_orders(orders, clock):
        # the harness is gone (killed, or its job ended): no one will book the running
        # evaluation, and waiting for it would keep a CPU busy for up to eval_timeout_s; a
        # grader later started on this ledger records it as interrupted
        logging.getLogger(__name__).warning("the harness is gone: exiting without finishing "
                                            "the running evaluation")
        os._exit(3)
    service.wait_idle()
    server.stop()
    reporter.send({"stopped": True})


def main() -> int:
    # stderr is the run's grader.log: the private log of what the agent is not told
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    spec = read_spec(sys.stdin)
    serve(spec, sys.stdin)
    return 0


if __name__ == "__main__":
    # run as -m this file is __main__: the spec's class is the package module's
    from a2rl.pipeline.grader_process import main as package_main
    sys.exit(package_main())
