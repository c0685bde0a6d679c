"""a2rl.common.machine_load and the doctor's verdict on a busy machine."""

from __future__ import annotations

import subprocess
import sys

from a2rl.common.machine_load import Competitor, Load, sample
from a2rl.pipeline.doctor import timing_verdict


def test_sample_finds_another_process_using_cpu():
    """A process spinning on a core shows up with its pid, name and threads (no torch)."""
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        load = sample(seconds=0.5, min_cpu=0.05)  # low: the test machine may be shared
    finally:
        spinner.kill()
        spinner.wait()
    found = [c for c in load.competitors if c.pid == spinner.pid]
    assert found and found[0].cpu > 0.05 and found[0].threads >= 1 and not found[0].torch
    assert load.cores >= 1 and load.load1 >= 0
    assert f"pid {spinner.pid}" in load.describe() or len(load.competitors) > 4


def test_busy_machine_marks_timings_unreliable_and_says_why_plans_fail():
    idle = Load(0.2, 0.3, 2)
    loaded = Load(4.8, 4.1, 2)
    shared = Load(0.5, 0.5, 2, [Competitor(7, "python", 1.2, 3, True)])
    assert not idle.busy and loaded.busy and shared.busy  # by load, or by what others use
    assert "python (pid 7, 1.2 cores, 3 threads, torch)" in shared.describe()
    assert timing_verdict(idle, True, True) | {"load": None} == {
        "load": None, "timings_reliable": True, "verdict": "ready", "ok": True}
    busy_fit = timing_verdict(loaded, True, True)
    assert busy_fit["ok"] and not busy_fit["timings_reliable"]
    assert busy_fit["verdict"].startswith("ready; timings UNRELIABLE")
    busy_short = timing_verdict(loaded, True, False)
    assert not busy_short["ok"] and "may fit on idle cores" in busy_short["verdict"]
    assert busy_short["load"]["busy"] and "load 4.8" in busy_short["load"]["text"]
    assert timing_verdict(loaded, False, True)["verdict"] == "see FAIL lines above"
