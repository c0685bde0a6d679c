"""Pausing an agent while its submission is evaluated (a2rl.isolation.limits.Confinement.pause):
every process of it stops, those it forks while being paused included, and all run on after
``resume``; by a cgroup freezer where the harness can make one, by signals otherwise."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from a2rl.isolation.limits import Confinement, ResourceLimits, confine
from a2rl.isolation.sandbox import Sandbox

# a parent that keeps forking short-lived children and holds one long-lived one: a pause must
# catch both the tree as it is and what it forks meanwhile
FORKER = r'''
import subprocess, sys, time
keep = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
while True:
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    time.sleep(0.02)
'''
LIMITS = ResourceLimits(memory_bytes=2**30, max_processes=512, tmpfs_bytes=2**26)
PLAIN = Sandbox("none", Path("/tmp"), Path("/tmp"), Path("/tmp"))  # confine() reads its kind


def states(root: psutil.Process) -> set[str]:
    procs = [root, *root.children(recursive=True)]
    found = set()
    for proc in procs:
        try:
            found.add(proc.status())
        except psutil.NoSuchProcess:
            pass
    return found


def stopped(root: psutil.Process) -> bool:
    """Each process stopped (signals) or frozen (a v2 freezer shows them sleeping, so count
    their CPU time instead)."""
    before = sum(p.cpu_times().user + p.cpu_times().system for p in [root, *root.children()])
    n = len(root.children(recursive=True))
    time.sleep(0.5)
    after = sum(p.cpu_times().user + p.cpu_times().system for p in [root, *root.children()])
    return len(root.children(recursive=True)) == n and after - before < 0.02


def started(conf: Confinement) -> subprocess.Popen:
    proc = subprocess.Popen(conf.wrap([sys.executable, "-c", FORKER]))
    conf.root_pid = proc.pid
    time.sleep(1.0)
    return proc


@pytest.mark.parametrize("mechanism", ["signals", "freezer"])
def test_pause_stops_the_whole_tree_and_resume_runs_it_on(mechanism):
    conf = confine(LIMITS, PLAIN) if mechanism == "freezer" else Confinement(LIMITS)
    if mechanism == "freezer" and conf.freezer is None:
        conf.release()
        pytest.skip("no cgroup freezer can be made here")
    proc = started(conf)
    root = psutil.Process(proc.pid)
    try:
        conf.pause()
        assert stopped(root), states(root)
        if mechanism == "signals":
            assert states(root) == {psutil.STATUS_STOPPED}
        conf.resume()
        count = len(root.children(recursive=True))
        time.sleep(0.5)
        assert len(root.children(recursive=True)) > count  # forking again
        assert psutil.STATUS_STOPPED not in states(root)
    finally:
        conf.resume()
        for p in [*root.children(recursive=True), root]:
            p.kill()
        proc.wait()
        conf.release()


def test_release_ends_a_paused_agent():
    """A frozen process does not die of SIGKILL until it thaws (v1): release thaws first."""
    conf = confine(LIMITS, PLAIN)
    proc = started(conf)
    children = psutil.Process(proc.pid).children(recursive=True)
    conf.pause()
    conf.release()
    proc.kill()
    proc.wait(timeout=10)
    gone, alive = psutil.wait_procs(children, timeout=10)
    assert not alive
