"""Attacks on the machine's resources from inside the sandbox (issue #11, item 5's last part): a
fork bomb, a memory hog and a flood of /tmp and /dev/shm, each by a real hostile process in the
real sandbox under the budget's limits (a2rl.isolation.limits: a cgroup where the harness may
make one, rlimits otherwise). Each is stopped inside the sandbox; the harness and the grader
keep working; a memory hog is the agent's failure, never an infrastructure one."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import threading
import time

import pytest
from hostile_sandbox import attack, make_cell, run_hostile

from a2rl.common.files import read_json
from a2rl.grading.ledger import Ledger
from a2rl.isolation.limits import ResourceLimits
from a2rl.pipeline import stages

pytestmark = [pytest.mark.attacks,
              pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")]

MIB = 2**20
LIMITS = ResourceLimits(memory_bytes=384 * MIB, max_processes=48, tmpfs_bytes=8 * MIB)


def test_fork_bomb_is_stopped_and_the_grader_and_harness_keep_running(tmp_path, rig):
    """Every process of the bomb forks for ever; the limit stops them all at max_processes,
    while the grader answers and the harness starts processes as usual."""
    cell = make_cell(tmp_path / "cell", LIMITS)
    program = r'''
import time
top = os.getpid()
while True:
    try:
        os.fork()
    except OSError as err:
        if os.getpid() != top:
            time.sleep(0.05)  # a child holds its slot and tries again
            continue
        out["fork"] = errno.errorcode[err.errno]
        break
time.sleep(3)  # the bomb keeps pressing at the limit while the harness is checked
out["tasks"] = sum(int(open(f"/proc/{p}/status").read().split("Threads:")[1].split()[0])
                   for p in os.listdir("/proc") if p.isdigit() and os.path.exists(f"/proc/{p}"))
report()
os._exit(0)
'''
    done: dict = {}
    bomb = threading.Thread(target=lambda: done.update(run=attack(cell, program, timeout_s=50)))
    started = time.monotonic()
    bomb.start()
    time.sleep(1.5)  # the bomb is at its limit now
    while bomb.is_alive() and time.monotonic() - started < 4:
        rig.assert_serving()
        assert subprocess.run(["true"], timeout=10).returncode == 0  # the harness still forks
        time.sleep(0.3)
    bomb.join(timeout=60)
    result = done["run"].result
    assert result["fork"] == "EAGAIN", result
    assert result["tasks"] <= LIMITS.max_processes, result
    enforced = done["run"].outcome.resources["enforced_by"]["processes"]
    assert enforced in ("cgroup2", "cgroup1", "rlimit"), done["run"].outcome.resources
    rig.assert_serving()
    rig.model("after-the-bomb")
    code, body = rig.post("output/after-the-bomb")  # the grader still grades as before
    assert code == 200 and rig.ledger()[-1]["valid"] is True, body


def test_tmpfs_writes_past_the_size_fail_with_enospc(tmp_path):
    cell = make_cell(tmp_path, LIMITS)
    program = r'''
chunk = b"x" * (1 << 20)
def fill(path):
    with open(path, "wb") as f:
        for _ in range(64):  # 64 MiB into an 8 MiB tmpfs
            f.write(chunk)
            f.flush()
for area in ("/tmp", "/dev/shm"):
    attempt(area, lambda a=area: fill(a + "/flood"))
    st = os.statvfs(area)
    out[area + " size"] = st.f_blocks * st.f_frsize
    os.remove(area + "/flood")
report()
'''
    result = attack(cell, program).result
    for area in ("/tmp", "/dev/shm"):
        assert result[area] == "ENOSPC", result
        assert result[area + " size"] == LIMITS.tmpfs_bytes, result


def test_memory_hog_in_the_sandbox_is_killed_inside_it(tmp_path):
    """The hog touches 2 GiB against a 384 MiB limit: the kernel kills it (cgroup) or its
    allocation fails (RLIMIT_DATA); the harness survives either way."""
    cell = make_cell(tmp_path, LIMITS)
    program = r'''
print("hog started", flush=True)
hoard = []
for _ in range(32):
    hoard.append(b"\1" * (64 << 20))  # written, so the pages are really used
print("hog survived", flush=True)
'''
    outcome = run_hostile(cell, program, timeout_s=60)
    log = cell.log.read_text()
    assert "hog started" in log and "hog survived" not in log, log[-2000:]
    assert outcome.exit_code != 0 and not outcome.killed, outcome
    if outcome.resources["enforced_by"]["memory"].startswith("cgroup"):
        assert outcome.resources["oom_kills"] >= 1, outcome.resources
    else:
        assert "MemoryError" in log, log[-2000:]


HOG_AGENT = r'''
print("hog agent started", flush=True)
hoard = []
for _ in range(64):
    hoard.append(b"\1" * (64 << 20))
print("hog agent survived", flush=True)
'''


def test_memory_hog_agent_is_the_agents_failure_not_the_harness(tmp_path, tiny_model):
    """A whole cell whose agent goes past budget.memory_gb: run.json says agent_failed (not
    infra_failed, so no retry), records the limits and what enforced them, and the harness
    finishes the run as usual."""
    from test_hostile_agent_cell import cell as compose_cell

    code = base64.b64encode(HOG_AGENT.encode()).decode()
    command = "agent.command=" + json.dumps(
        ["{python}", "-c", f"import base64; exec(base64.b64decode('{code}'))"])
    cfg = compose_cell(tmp_path, command, "budget.memory_gb=0.5", "budget.max_processes=256",
                       "budget.tmpfs_gb=0.0625")
    shutil.copytree(tiny_model, stages.layout_of(cfg).model(cfg.task.model.name))
    stages.prepare_task(cfg)
    stages.measure_baseline(cfg)

    run = stages.run_agent(cfg)

    record = read_json(run.run_json)
    assert record["status"] == "agent_failed" and "reason" not in record, record
    resources = record["resources"]
    assert resources["memory_bytes"] == 2**29 and resources["max_processes"] == 256, resources
    assert resources["tmpfs_bytes"] == 2**26 and resources["enforced_by"]["tmpfs"] == "bwrap"
    events = [json.loads(line) for line in run.events.read_text().splitlines()]
    assert events[[e["kind"] for e in events].index("agent_start")]["resources"]["enforced_by"]
    if resources["enforced_by"]["memory"].startswith("cgroup"):
        assert resources["oom_kills"] >= 1 and "agent_oom" in [e["kind"] for e in events]
    assert "hog agent survived" not in run.agent_log.read_text()
    assert Ledger(run.ledger).entries == []
    description = (run.workspace / "description.md").read_text()
    assert "**0.5 GiB** of memory" in description and "**256** processes" in description
    assert "hold 0.1 GiB each" in description
