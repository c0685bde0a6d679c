"""The grader's process SIGKILLed in a whole cell (issue #11, "Also required — Faults"): the
harness runs the grader in a process of its own (a2rl.pipeline.supervisor) and restarts it on
the same socket, ledger and store. The submission it was evaluating is recorded as
interrupted, the agent (told "retry") submits it again and goes on, and the run ends as usual;
the restart is in events.jsonl and run.json. A grader that keeps dying past
budget.grader_restarts ends the run as infra_failed (grader_died). The other way round, a
harness SIGKILLed mid-evaluation (a user's kill -9, a job past its wall time) leaves no grader
evaluating for no one: it exits when its order pipe ends."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from hostile_sandbox import agent_command_override

from a2rl.common.records import RunRecord, read_ledger
from a2rl.config.compose import compose
from a2rl.pipeline import stages
from a2rl.pipeline.runner import InfraFailed
from checkout import FIXTURE_DATA

pytestmark = [pytest.mark.attacks,
              pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")]

# three models that differ from the base (and from each other) by one file, each submitted
# until the grader answers (the client exits 75 while the grader restarts)
RESUBMITTING_AGENT = r'''
import os, shutil, subprocess, sys, time
ws = os.environ["A2RL_WORKSPACE"]
for name in ("m1", "m2", "m3"):
    target = f"{ws}/output/{name}"
    os.makedirs(target)  # writable, unlike the read-only base_model it is copied from
    for file in os.listdir(f"{ws}/base_model"):
        shutil.copyfile(f"{ws}/base_model/{file}", f"{target}/{file}")
    with open(f"{target}/note.txt", "w") as fh:
        fh.write(name)
    for attempt in range(int(os.environ.get("TRIES", "60"))):
        code = subprocess.call(["a2rl", "submit", target])
        print(f"{name} attempt {attempt}: exit {code}", flush=True)
        if code != 75:
            break
        time.sleep(1)
    else:
        sys.exit(3)
'''


def cell_overrides(root: Path, *extra: str) -> list[str]:
    return ["grid=ci", "agent=noop", "agent.name=resubmitter", f"paths.root={root}",
            f"paths.data={FIXTURE_DATA}", "task.params.test_size=6",
            "task.params.train_size=16", "task.inference.max_new_tokens=8",
            "budget.time_limit_s=900", agent_command_override(RESUBMITTING_AGENT), *extra]


def prepared_cell(root: Path, tiny: Path, *extra: str):
    """The cell, prepared and its baseline measured. Its budget only bounds a run on a loaded
    machine (a restarted grader loads its libraries again): the agent ends within a minute."""
    cfg = compose(cell_overrides(root, *extra))
    shutil.copytree(tiny, stages.layout_of(cfg).model(cfg.task.model.name))
    stages.prepare_task(cfg)
    stages.measure_baseline(cfg)
    return cfg


def events_of(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]


def grader_pids(events: Path) -> list[int]:
    return [e["pid"] for e in events_of(events) if e["kind"] == "grader_start"]


class Cell(threading.Thread):
    """stages.run_agent in a thread (as `a2rl run` calls it), so the test can watch the run."""

    def __init__(self, cfg):
        super().__init__(daemon=True)
        self.cfg, self.error = cfg, None

    def run(self) -> None:
        try:
            stages.run_agent(self.cfg)
        except BaseException as err:  # noqa: BLE001 - handed to the test
            self.error = err


def wait_for(condition, cell: Cell, what: str, timeout_s: float = 600.0):
    deadline = time.monotonic() + timeout_s
    while not (found := condition()):
        assert cell.is_alive(), f"the run ended before {what}: {cell.error!r}"
        assert time.monotonic() < deadline, f"no {what} within {timeout_s} s"
        time.sleep(0.02)
    return found


def test_grader_killed_mid_evaluation_is_restarted_and_the_run_completes(tmp_path, tiny_model):
    cfg = prepared_cell(tmp_path, tiny_model)
    run = stages.run_paths(cfg)
    inflight = run.root / "ledger.inflight.json"
    cell = Cell(cfg)
    cell.start()
    pending = json.loads(wait_for(lambda: inflight.exists() and inflight.read_text(), cell,
                                  "evaluation"))
    pid = grader_pids(run.events)[-1]
    assert pid != os.getpid()  # the grader is a process of its own
    os.kill(pid, signal.SIGKILL)
    cell.join(timeout=1200)
    assert not cell.is_alive() and cell.error is None, cell.error

    record = RunRecord.load(run.run_json)
    assert (record.status, record.grader_restarts) == ("completed", 1), record
    entries = read_ledger(run.ledger)
    cut = [e for e in entries if e.status == "interrupted"]
    assert len(cut) == 1 and cut[0].artifact_hash == pending["artifact_hash"], entries
    assert cut[0].model_path == pending["model_path"] and not cut[0].valid
    # the same model, submitted again, is scored; so is every other: nothing lost
    scored = [e for e in entries if e.valid]
    assert sorted(Path(e.model_path).name for e in scored) == ["m1", "m2", "m3"], entries
    assert any(e.artifact_hash == cut[0].artifact_hash for e in scored)
    assert all(e.score is not None and not e.cached for e in scored)
    assert [e.submission_id for e in entries] == list(range(1, len(entries) + 1))
    assert record.submissions == len(entries) == 4
    assert record.grading_usage == {"interrupted_submissions": 1}
    assert not inflight.exists()

    events = events_of(run.events)
    kinds = [e["kind"] for e in events]
    died = next(e for e in events if e["kind"] == "grader_died")
    assert died["how"] == "killed by SIGKILL" and died["restarts"] == 0
    assert kinds.count("grader_restart") == 1 and kinds.count("grader_recovered") == 1
    # the new grader records the cut-off submission before it answers
    assert kinds.index("grader_died") < kinds.index("grader_recovered") < \
        kinds.index("grader_restart")
    starts = [e for e in events if e["kind"] == "grader_start"]
    assert len(starts) == 2 and starts[0]["pid"] != starts[1]["pid"]
    # the same socket and port before and after: the agent's settings still hold
    assert starts[0]["socket"] == starts[1]["socket"] and starts[0]["port"] == starts[1]["port"]
    log = run.agent_log.read_text()
    assert "exit 75" in log and "retry" in log, log[-3000:]
    assert all(e.code_commit for e in scored)  # each accepted submission's code is recorded
    assert kinds.count("code_snapshot") == 1  # and the final code, after the grader stopped

    final = stages.final_grade(cfg)  # the selection reads the ledger as always
    assert final.selected_submission in {e.submission_id for e in scored}


def test_grader_dying_past_its_restarts_fails_the_run_as_infrastructure(tmp_path, tiny_model):
    cfg = prepared_cell(tmp_path, tiny_model, "budget.grader_restarts=1")
    run = stages.run_paths(cfg)
    cell = Cell(cfg)
    cell.start()
    for n in (1, 2):  # the first grader, then its one restart
        pid = wait_for(lambda: len(grader_pids(run.events)) >= n and grader_pids(run.events),
                       cell, f"grader {n}")[n - 1]
        wait_for(lambda: any(e["kind"] == "agent_start" for e in events_of(run.events)),
                 cell, "the agent")
        os.kill(pid, signal.SIGKILL)
    cell.join(timeout=1200)
    assert not cell.is_alive()
    assert isinstance(cell.error, InfraFailed), cell.error
    record = RunRecord.load(run.run_json)
    assert record.agent_seconds < 900  # the agent was stopped, not left to its budget
    assert record.status == "infra_failed" and record.grader_restarts == 1
    assert record.reason.startswith("grader_died: the grader's process died (killed by "
                                    "SIGKILL) after 1 restart(s); budget.grader_restarts=1")
    kinds = [e["kind"] for e in events_of(run.events)]
    assert kinds.count("grader_died") == 2 and kinds.count("grader_failed") == 1
    assert kinds.count("budget_kill") == 1


# the harness of one cell in a process of its own, as `a2rl run` or a Slurm job runs it
HARNESS = """
import json, sys
from a2rl.config.compose import compose
from a2rl.pipeline import stages
stages.run_agent(compose(json.loads(sys.argv[1])))
"""


def gone(pid: int) -> bool:
    """Whether ``pid`` has exited (a zombie has: an orphan waits for init to reap it)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_gone(pids: list[int], since: float, within_s: float, what: str) -> None:
    while left := [pid for pid in pids if not gone(pid)]:
        assert time.monotonic() - since < within_s, f"{what} outlived the harness: {left}"
        time.sleep(0.05)


def test_grader_of_a_harness_killed_mid_evaluation_exits_without_finishing_it(tmp_path,
                                                                                tiny_model):
    # no loop disk: a SIGKILLed harness cannot unmount it, and the grader is what is tested
    extra = ("budget.disk_gb=null", "task.inference.max_new_tokens=64")
    cfg = prepared_cell(tmp_path, tiny_model, *extra)
    run = stages.run_paths(cfg)
    inflight = run.root / "ledger.inflight.json"
    harness = subprocess.Popen([sys.executable, "-c", HARNESS,
                                json.dumps(cell_overrides(tmp_path, *extra))])
    try:
        deadline = time.monotonic() + 600
        while not (inflight.exists() and inflight.read_text()):
            assert harness.poll() is None, "the harness ended before an evaluation"
            assert time.monotonic() < deadline, "no evaluation within 600 s"
            time.sleep(0.02)
        pending = json.loads(inflight.read_text())
        grader = grader_pids(run.events)[-1]
        # the grader, its loader, the agent's sandbox and what runs in it
        run_pids = [p.pid for p in psutil.Process(harness.pid).children(recursive=True)]
        assert grader in run_pids
        harness.kill()
        killed = time.monotonic()
        harness.wait()
        wait_gone([grader], killed, 30, "the grader")
        wait_gone(run_pids, killed, 60, "a process of the run")
    finally:
        harness.kill()
        harness.wait()
    # the evaluation was not finished for no one: nothing booked, and the submission stays
    # in flight for a grader later started on this ledger to record as interrupted
    assert all(e.artifact_hash != pending["artifact_hash"] for e in read_ledger(run.ledger))
    assert json.loads(inflight.read_text()) == pending
    assert not any(e["kind"] == "submission" for e in events_of(run.events))
