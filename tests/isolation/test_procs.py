"""At the deadline the agent and everything it started are ended: no process survives."""

import os
import shutil
import sys
import time

import psutil
import pytest

from a2rl.isolation.procs import run_until
from a2rl.isolation.sandbox import Sandbox
from checkout import SANDBOX_PYTHON

# Starts a detached daemon (double fork + setsid) and a plain child, records their pids in the
# log, then sleeps far past any deadline.
AGENT = r'''
import os, subprocess, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        print("daemon", os.getpid(), flush=True)
        signal_proof = True
        import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(3600)
    os._exit(0)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
print("child", child.pid, flush=True)
time.sleep(3600)
'''


def deadline_in(seconds: float):
    end = time.monotonic() + seconds
    return lambda: end - time.monotonic()


def assert_no_sleepers_left(marker: str) -> None:
    left = [p for p in psutil.process_iter(["cmdline"])
            if marker in " ".join(p.info["cmdline"] or [])]
    assert left == [], [p.info["cmdline"] for p in left]


def test_deadline_kills_agent_and_detached_daemon(tmp_path):
    script = tmp_path / "agent_hostile_sleeper.py"
    script.write_text(AGENT)
    log = tmp_path / "agent.log"
    started = time.monotonic()
    outcome = run_until([sys.executable, str(script)], dict(os.environ), tmp_path, log,
                        deadline_in(2.0), grace_s=1.0)
    assert outcome.killed
    assert time.monotonic() - started < 15
    assert outcome.survivors_killed >= 2  # the plain child and the daemon
    pids = [int(line.split()[1]) for line in log.read_text().splitlines()
            if line.startswith(("daemon", "child"))]
    assert len(pids) == 2
    for pid in pids:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"
    assert_no_sleepers_left("agent_hostile_sleeper")


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_deadline_kills_everything_inside_the_sandbox(tmp_path):
    ws = tmp_path / "ws"
    for sub in ("ws/code", "ws/output", "tools", "grader"):
        (tmp_path / sub).mkdir(parents=True)
    (ws / "code" / "agent_sandboxed_sleeper.py").write_text(AGENT)
    sandbox = Sandbox("bwrap", ws, tmp_path / "tools", tmp_path / "grader")
    argv = sandbox.command([SANDBOX_PYTHON, "/workspace/code/agent_sandboxed_sleeper.py"],
                           {"PATH": "/usr/bin"})
    outcome = run_until(argv, sandbox.host_env({}), ws, tmp_path / "agent.log",
                        deadline_in(2.0), grace_s=1.0)
    assert outcome.killed
    time.sleep(0.5)
    assert_no_sleepers_left("agent_sandboxed_sleeper")


def test_agent_that_exits_on_time_is_not_killed(tmp_path):
    outcome = run_until([sys.executable, "-c", "print('done')"], dict(os.environ), tmp_path,
                        tmp_path / "log", deadline_in(30))
    assert not outcome.killed and outcome.exit_code == 0
    assert (tmp_path / "log").read_text().strip() == "done"


def test_an_agent_past_its_disk_quota_gets_no_grace_period(tmp_path):
    """Past the quota the agent is killed at once: a grace period to stop in, SIGTERM
    ignored, would be more disk written (the deadline's grace stays for a slow shutdown)."""
    script = tmp_path / "agent_quota_sleeper.py"
    script.write_text(AGENT)
    log = tmp_path / "agent.log"
    started = time.monotonic()
    outcome = run_until([sys.executable, str(script)], dict(os.environ), tmp_path, log,
                        deadline_in(60.0), grace_s=30.0,
                        over_quota=lambda pid: "daemon" in log.read_text())
    assert outcome.quota_exceeded and not outcome.killed
    assert time.monotonic() - started < 15  # not the 30 s grace
    assert outcome.survivors_killed >= 2
    assert_no_sleepers_left("agent_quota_sleeper")
