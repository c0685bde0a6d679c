"""Eight runs at once on one machine (issue #11, "Also required"): eight ``a2rl run`` cells
(different seeds, one results folder) started together, each with its own grader process,
socket, port, token, store, ledger and code repository, and none answering another's token.
The agent is the lightest there is: it leaves its grader settings where the test reads them,
waits for the test's go, and submits the base model (answered from the baseline)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hostile_sandbox import agent_command_override

from a2rl.common.records import RunRecord, read_ledger
from a2rl.config.compose import compose
from a2rl.grading import client
from a2rl.pipeline import stages
from checkout import FIXTURE_DATA, child_env

pytestmark = [pytest.mark.attacks,
              pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")]

RUNS = 8
CELL = ["grid=ci", "task=gsm8k_arith", "agent=noop", "agent.name=parallel",
        "task.params.test_size=6", "task.params.train_size=16",
        "task.inference.max_new_tokens=8", "budget.time_limit_s=400"]

# the agent's grader settings, left for the test; then, on the test's go, the base model
AGENT = r'''
import json, os, shutil, subprocess, sys, time
ws = os.environ["A2RL_WORKSPACE"]
with open(f"{ws}/output/grader.tmp", "w") as fh:
    json.dump({k: os.environ[k] for k in ("A2RL_TOKEN", "A2RL_GRADER_URL", "A2RL_GRADER_HTTP",
                                          "HOME", "HF_HOME")}, fh)
os.rename(f"{ws}/output/grader.tmp", f"{ws}/output/grader.json")
deadline = time.time() + 300
while not os.path.exists(f"{ws}/output/go") and time.time() < deadline:
    time.sleep(0.2)
shutil.copytree(f"{ws}/base_model", f"{ws}/output/base")
sys.exit(subprocess.call(["a2rl", "submit", f"{ws}/output/base"]))
'''


def start_cell(root: Path, seed: int) -> subprocess.Popen:
    """``a2rl run`` of one cell, as a user starts it."""
    args = [*CELL, f"seed={seed}", f"paths.root={root}", f"paths.data={FIXTURE_DATA}",
            agent_command_override(AGENT), f"hydra.run.dir={root}/hydra/{seed}"]
    return subprocess.Popen([sys.executable, "-m", "a2rl.pipeline.cli", "run", *args],
                            env=child_env(), cwd=root, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def grader_start(events: Path) -> dict:
    return next(json.loads(line) for line in events.read_text().splitlines()
                if '"grader_start"' in line)


def test_eight_runs_at_once_do_not_cross(tmp_path, tiny_model):
    cfg = compose([*CELL, f"paths.root={tmp_path}", f"paths.data={FIXTURE_DATA}"])
    shutil.copytree(tiny_model, stages.layout_of(cfg).model(cfg.task.model.name))
    stages.prepare_task(cfg)  # shared by the cells, as a sweep's are
    stages.measure_baseline(cfg)
    runs = [stages.run_paths(compose([*CELL, f"seed={seed}", f"paths.root={tmp_path}",
                                      f"paths.data={FIXTURE_DATA}"])) for seed in range(RUNS)]
    started = time.monotonic()
    cells = [start_cell(tmp_path, seed) for seed in range(RUNS)]
    try:
        settings = wait_for_agents(runs, cells)
        graders = [grader_start(run.events) for run in runs]
        check_graders_apart(settings, graders)
        for run in runs:
            (run.workspace / "output" / "go").write_text("go")
        outputs = [cell.communicate(timeout=600)[0] for cell in cells]
    finally:
        for cell in cells:
            if cell.poll() is None:
                cell.kill()
    wall = time.monotonic() - started
    print(f"{RUNS} runs at once: {wall:.0f} s")
    for cell, output in zip(cells, outputs):
        assert cell.returncode == 0, output[-4000:]

    base_hash = json.loads(stages.layout_of(cfg).baseline(cfg.task.id).read_text())["model_hash"]
    for seed, run in enumerate(runs):
        record = RunRecord.load(run.run_json)
        assert (record.status, record.seed, record.grader_restarts) == ("completed", seed, 0)
        entries = read_ledger(run.ledger)  # its own submission only
        assert [(e.valid, e.artifact_hash) for e in entries] == [(True, base_hash)], entries
        assert [p.name for p in run.store.iterdir()] == [base_hash]
        assert not (run.root / "ledger.inflight.json").exists()
        # the venv views staged for the sandbox are gone: their links dangle on the host
        dangling = [p for p in run.root.rglob("*") if p.is_symlink() and not p.exists()]
        assert not dangling, dangling[:3]
        # the test's one try with the next run's token: in the grader's own log only
        kinds = {e["kind"] for e in map(json.loads, run.events.read_text().splitlines())}
        assert "grader_denied" not in kinds, kinds
        assert "refused 1 request without the run's token" in run.grader_log.read_text()
    assert len({run.code_repo for run in runs}) == RUNS
    for grader in graders:
        assert not Path(grader["socket"]).exists()  # removed with the run's grader folder


def wait_for_agents(runs, cells, timeout_s: float = 900.0) -> list[dict]:
    """Each agent's grader settings, once all eight agents run."""
    deadline = time.monotonic() + timeout_s
    left = set(range(len(runs)))
    while left:
        for i in list(left):
            assert cells[i].poll() is None, cells[i].communicate()[0][-4000:]
            if (runs[i].workspace / "output" / "grader.json").exists():
                left.discard(i)
        assert time.monotonic() < deadline, f"agents {sorted(left)} did not start"
        time.sleep(0.2)
    return [json.loads((run.workspace / "output" / "grader.json").read_text()) for run in runs]


def check_graders_apart(settings: list[dict], graders: list[dict]) -> None:
    """Eight grader processes, sockets, ports and tokens; a token opens its own grader only."""
    for key in ("pid", "socket", "port"):
        assert len({g[key] for g in graders}) == RUNS, (key, graders)
    assert len({s["A2RL_TOKEN"] for s in settings}) == RUNS
    assert len({s["A2RL_GRADER_HTTP"] for s in settings}) == RUNS
    for i, grader in enumerate(graders):
        assert settings[i]["A2RL_GRADER_HTTP"] == f"http://127.0.0.1:{grader['port']}"
        own = settings[i]["A2RL_TOKEN"]
        other = settings[(i + 1) % RUNS]["A2RL_TOKEN"]
        for url in (f"unix:{grader['socket']}", settings[i]["A2RL_GRADER_HTTP"]):
            code, body = client.status(url=url, token=own, timeout=60)
            assert code == 200 and body["submissions_used"] == 0, body
        code, body = client.status(url=f"unix:{grader['socket']}", token=other, timeout=60)
        assert code == 401, body
