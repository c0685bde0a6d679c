"""One whole cell with a hostile agent (issue #11, items 1, 2 and 6 end to end): the harness runs
it as it runs any agent (workspace, grader, sandbox, budget) on the tiny model. The agent tries
the host's kernel settings, a setuid file, a device node, its own log and the sealed split it
locates through /proc/self/mountinfo, then submits the base model like ``noop``. Every attack is
refused, the submission is scored, and the ledger, the log and the sealed split are intact."""

from __future__ import annotations

import json
import shutil
import stat
from pathlib import Path

import pytest
from hostile_sandbox import agent_command_override

from a2rl.common.files import read_json
from a2rl.config.compose import compose
from a2rl.grading.ledger import Ledger
from a2rl.pipeline import stages
from checkout import FIXTURE_DATA

pytestmark = [pytest.mark.attacks,
              pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")]

HOSTILE_AGENT = r'''
import errno, json, os, shutil, stat, subprocess, sys
print("hostile agent started", flush=True)
out = {}
def attempt(name, fn):
    try:
        fn(); out[name] = "ok"
    except OSError as err:
        out[name] = errno.errorcode.get(err.errno, type(err).__name__)
core = "/proc/sys/kernel/core_pattern"
attempt("core_pattern", lambda: open(core, "w").write(open(core).read()))
attempt("truncate_log", lambda: os.ftruncate(1, 0))
ws = os.environ["A2RL_WORKSPACE"]
shutil.copy(sys.executable, f"{ws}/output/suid")
attempt("setuid", lambda: os.chmod(f"{ws}/output/suid", 0o4755))
attempt("mknod", lambda: os.mknod(f"{ws}/output/mem", stat.S_IFCHR | 0o666, os.makedev(1, 1)))
# the workspace's host path, from the mount table, leads to the prepared task's sealed split
host = [line.split()[3] for line in open("/proc/self/mountinfo")
        if line.split()[4] == "/workspace"][0]
results = host.split("/runs/")[0]
task = os.environ["A2RL_TASK"]
sealed = f"{results}/prepared/{task}/sealed/test.jsonl"
attempt("read_sealed", lambda: open(sealed).read())
attempt("write_ledger", lambda: open(f"{host}/../ledger.jsonl", "a").write("{}"))
print(json.dumps(out), flush=True)
shutil.copytree(f"{ws}/base_model", f"{ws}/output/base")
sys.exit(subprocess.call(["a2rl", "submit", f"{ws}/output/base"]))
'''


def cell(root: Path, *extra: str):
    return compose(["grid=ci", "agent=noop", "agent.name=hostile", f"paths.root={root}",
                    f"paths.data={FIXTURE_DATA}", "task.params.test_size=6",
                    "task.params.train_size=16", "task.inference.max_new_tokens=8",
                    "budget.time_limit_s=120", *extra])


def test_hostile_agent_is_refused_and_its_submission_still_counts(tmp_path, tiny_model):
    cfg = cell(tmp_path, agent_command_override(HOSTILE_AGENT))
    shutil.copytree(tiny_model, stages.layout_of(cfg).model(cfg.task.model.name))
    prepared = stages.prepare_task(cfg)
    sealed_before = prepared.test.read_bytes()
    core_before = Path("/proc/sys/kernel/core_pattern").read_text()
    baseline = stages.measure_baseline(cfg)

    run = stages.run_agent(cfg)

    log = run.agent_log.read_text()
    assert log.startswith("hostile agent started\n"), log[:2000]
    report = json.loads(next(line for line in log.splitlines() if line.startswith("{")))
    assert report["core_pattern"] in ("EACCES", "EROFS"), report
    assert report["truncate_log"] == "EINVAL", report
    assert report["mknod"] == "EPERM", report
    assert report["read_sealed"] == "ENOENT" and report["write_ledger"] == "ENOENT", report
    assert Path("/proc/sys/kernel/core_pattern").read_text() == core_before
    assert prepared.test.read_bytes() == sealed_before
    suid = (run.workspace / "output" / "suid").stat()
    assert suid.st_uid != 0 or not suid.st_mode & stat.S_ISUID

    assert read_json(run.run_json)["status"] == "completed"
    entries = Ledger(run.ledger).entries
    assert len(entries) == 1 and entries[0].valid, entries
    assert entries[0].score == baseline["test"]["score"]  # the base model, scored as usual
    # the harness still reads what the agent's uid owns: its code is recorded, nothing failed
    events = [json.loads(line) for line in run.events.read_text().splitlines()]
    kinds = [e["kind"] for e in events]
    assert "error" not in kinds and kinds.count("code_snapshot") == 1, events
    assert entries[0].code_commit
