"""Attacks on the host's disk through what an agent writes (issue #28, finding 9), each a whole
cell run as the harness runs one (workspace, real grader, bwrap sandbox, budget) on the tiny
model, with small limits so that each takes seconds: before, an agent wrote 3 GB into output/ in
11 s and 200 000 files in 3 s, 1 GB into agent.log in 0.8 s, and egress.jsonl grew 50 MB/s from
refused CONNECTs, all without bound.

The disk quota is enforced by a loop disk where the harness is root and may mount one, else by a
watchdog (a2rl.isolation.quota); the quota attacks run under each mechanism the machine allows.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from hostile_sandbox import agent_command_override

from a2rl.common.files import read_json
from a2rl.common.layout import RunPaths
from a2rl.config.compose import compose
from a2rl.grading.ledger import Ledger
from a2rl.isolation import quota
from a2rl.isolation.procs import TAIL_BYTES
from a2rl.pipeline import stages
from checkout import FIXTURE_DATA

pytestmark = [pytest.mark.attacks,
              pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")]

MIB = 2**20
QUOTA_MB = 64  # the disk quota of the quota attacks
QUOTA_FILES = 2000
# what the watchdog lets through past the quota before it stops the agent: a poll (20 ms) and
# the stop of writing. Measured on 2 cores writing 4 GB/s into the page cache: up to 82 MiB and
# 408 files past it (with 0.25 s polls it was up to 880 MiB, and CI once saw 1,048 MiB); the
# bound leaves room for a machine that writes several times as fast and for a slow walk; the
# floods are 4 GiB and 200 000 files
OVERSHOOT_BYTES = 1024 * MIB
OVERSHOOT_FILES = 50_000


@dataclass
class Ran:
    run: RunPaths
    record: dict
    events: list[dict]
    log: str
    baseline: dict

    def kinds(self) -> list[str]:
        return [e["kind"] for e in self.events]

    def event(self, kind: str) -> dict:
        return next(e for e in self.events if e["kind"] == kind)


def run_cell(root: Path, tiny_model: Path, program: str, *overrides: str) -> Ran:
    """The whole cell with ``program`` as its agent."""
    cfg = compose(["grid=ci", "agent=noop", "agent.name=hostile", f"paths.root={root}",
                   f"paths.data={FIXTURE_DATA}", "task.params.test_size=6",
                   "task.params.train_size=16", "task.inference.max_new_tokens=8",
                   "budget.time_limit_s=120", agent_command_override(program), *overrides])
    shutil.copytree(tiny_model, stages.layout_of(cfg).model(cfg.task.model.name))
    stages.prepare_task(cfg)
    baseline = stages.measure_baseline(cfg)
    run = stages.run_agent(cfg)
    events = [json.loads(line) for line in run.events.read_text().splitlines()]
    return Ran(run, read_json(run.run_json), events,
               run.agent_log.read_text(errors="replace"), baseline)


@pytest.fixture(params=["loop", "watchdog"])
def mechanism(request, monkeypatch) -> str:
    """The disk quota's mechanism under test; the loop disk only where the machine allows."""
    if request.param == "loop" and not loop_disk_works():
        pytest.skip("no loop disk here (not root, or no loop devices): the watchdog enforces")
    if request.param == "watchdog":
        monkeypatch.setattr(quota, "loop_possible", lambda: False)
    return request.param


def loop_disk_works() -> bool:
    if not quota.loop_possible():
        return False
    probe = subprocess.run(["losetup", "-f"], capture_output=True)
    return probe.returncode == 0


def quota_overrides() -> list[str]:
    return [f"budget.disk_gb={QUOTA_MB / 1024}", f"budget.disk_files={QUOTA_FILES}"]


def host_usage(folder: Path) -> tuple[int, int]:
    """Bytes allocated and entries below ``folder`` on the host, after the run."""
    usage, _ = quota.measure([folder])
    return usage.bytes, usage.files


def assert_no_disk_left_behind(run: RunPaths) -> None:
    """The loop disk is unmounted and its image removed; nothing is mounted in the run."""
    assert not (run.root / quota.IMAGE).exists()
    assert not (run.root / quota.MOUNT_POINT).exists()
    mounts = Path("/proc/self/mountinfo").read_text()
    assert str(run.root) not in mounts


# --------------------------------------------------------------------------- agent.log

LOG_FLOOD = r'''
import sys
print("flood starts", flush=True)
chunk = b"x" * (1 << 20)
for _ in range(64):
    sys.stdout.buffer.write(chunk)
sys.stdout.buffer.flush()
print("\nflood done", flush=True)
'''


def test_agent_log_flood_is_cut_at_its_cap_and_the_cut_recorded(tmp_path, tiny_model):
    """64 MiB on stdout with max_agent_log_mb=1: agent.log keeps the first MiB, a harness line
    saying how many bytes were cut and the last 64 KiB (how the agent ended); the agent was
    never blocked (it finished), and run.json and an event record the cut."""
    ran = run_cell(tmp_path, tiny_model, LOG_FLOOD, "budget.max_agent_log_mb=1")

    size = ran.run.agent_log.stat().st_size
    assert size <= MIB + TAIL_BYTES + 512, size
    assert ran.log.startswith("flood starts\n")
    assert ran.log.endswith("flood done\n")
    said = len("flood starts\n") + 64 * MIB + len("\nflood done\n")
    cut = said - MIB - TAIL_BYTES
    assert f"{cut} bytes after them were cut" in ran.log, ran.log[MIB:MIB + 400]
    assert ran.record["status"] == "completed" and ran.record["log_cut_bytes"] == cut
    assert ran.event("agent_log_cut")["cut_bytes"] == cut


# --------------------------------------------------------------------------- egress.jsonl

CONNECT_FLOOD = r'''
import socket
def connect(target):
    s = socket.create_connection(("127.0.0.1", 3128), 10)
    s.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    answer = b""
    while chunk := s.recv(65536):
        answer += chunk
    s.close()
    return answer.split(b"\r\n")[0].decode()
answers = {connect("a" * 60000 + ".example:443")}
for _ in range(999):
    answers.add(connect("evil.example:443"))
print(sorted(answers), flush=True)
'''


def test_refused_connect_flood_is_logged_up_to_its_cap_then_counted(tmp_path, tiny_model):
    """1000 refused CONNECTs (the first naming a 60 kB host) with max_egress_log_lines=50:
    egress.jsonl has 50 lines, none longer than a few hundred bytes, and a last line counting
    the 950 others; run.json and an event say so too."""
    ran = run_cell(tmp_path, tiny_model, CONNECT_FLOOD, "agent.network=allowlist",
                   "+agent.allowlist=[pypi.org]", "budget.max_egress_log_lines=50")

    assert "['HTTP/1.1 403 Forbidden']" in ran.log, ran.log[-2000:]
    lines = ran.run.egress.read_text().splitlines()
    assert len(lines) == 51, len(lines)
    assert max(len(line) for line in lines) < 2000
    entries = [json.loads(line) for line in lines]
    assert all(e["outcome"] == "refused" for e in entries[:50])
    assert entries[-1]["outcome"] == "unlogged" and entries[-1]["connections"] == 950
    assert entries[-1]["by_outcome"] == {"refused": 950}
    assert ran.record["network"]["egress_unlogged"] == 950
    assert ran.event("egress_log_cut")["unlogged"] == {"refused": 950}


# --------------------------------------------------------------------------- output/ and code/

BYTES_FLOOD = r'''
import os, shutil, signal, subprocess, sys
ws = os.environ["A2RL_WORKSPACE"]
shutil.copytree(f"{ws}/base_model", f"{ws}/output/base")
print("submitted", subprocess.call(["a2rl", "submit", f"{ws}/output/base"]), flush=True)
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a grace period to stop in would be more disk
written = 0
chunk = b"\1" * (1 << 20)
try:
    with open(f"{ws}/output/flood.bin", "wb") as out:
        for _ in range(4096):
            out.write(chunk)
            out.flush()
            written += 1
except OSError as err:
    print("write failed:", err.strerror, flush=True)
print("written MiB", written, flush=True)
'''


def test_output_flood_stops_at_the_disk_quota(tmp_path, tiny_model, mechanism):
    """4 GiB into output/ with a 64 MiB quota, after a submission from output/: the loop disk
    fails the write at the quota (the agent goes on and finishes), the watchdog stops the agent
    (disk_quota_exceeded); either way output/ on the host holds about the quota, the submission
    was scored, run.json records the quota, what enforced it and that it was reached, and
    description.md told the agent the quota."""
    ran = run_cell(tmp_path, tiny_model, BYTES_FLOOD, *quota_overrides())

    resources = ran.record["resources"]
    assert resources["enforced_by"]["disk"] == mechanism, resources
    assert resources["disk_bytes"] == QUOTA_MB * MIB and resources["disk_exceeded"] == "bytes"
    used, _ = host_usage(ran.run.workspace / "output")
    entries = Ledger(ran.run.ledger).entries
    assert len(entries) == 1 and entries[0].valid, entries
    assert entries[0].score == ran.baseline["test"]["score"]
    assert (ran.run.workspace / "output" / "base" / "config.json").is_file()  # copied back
    if mechanism == "loop":
        assert "write failed: No space left on device" in ran.log, ran.log[-2000:]
        assert ran.record["status"] == "completed"
        assert used <= QUOTA_MB * MIB, used
        assert "disk_full" in ran.kinds()
    else:
        assert "written MiB" not in ran.log, ran.log[-2000:]
        assert ran.record["status"] == "disk_quota_exceeded", ran.record
        assert used <= QUOTA_MB * MIB + OVERSHOOT_BYTES, used
        assert ran.event("disk_quota_exceeded")["limit"] == "bytes"
    print(f"{mechanism}: output/ holds {used / MIB:.0f} MiB for a {QUOTA_MB} MiB quota")
    assert_no_disk_left_behind(ran.run)
    description = (ran.run.workspace / "description.md").read_text()
    assert "may hold **0.1 GiB** in **2000** files and folders" in description


FILES_FLOOD = r'''
import os
ws = os.environ["A2RL_WORKSPACE"]
made = 0
try:
    for i in range(200_000):
        open(f"{ws}/code/f{i}", "w").close()
        made += 1
except OSError as err:
    print("create failed:", err.strerror, flush=True)
print("files made", made, flush=True)
'''


def test_file_flood_in_code_stops_at_the_file_quota(tmp_path, tiny_model, mechanism):
    """200 000 empty files into code/ with a 2000-file quota: the loop disk runs out of inodes
    (ENOSPC), the watchdog stops the agent; code/ on the host holds about the quota."""
    ran = run_cell(tmp_path, tiny_model, FILES_FLOOD, *quota_overrides())

    resources = ran.record["resources"]
    assert resources["enforced_by"]["disk"] == mechanism, resources
    assert resources["disk_files"] == QUOTA_FILES and resources["disk_exceeded"] == "files"
    _, files = host_usage(ran.run.workspace / "code")
    if mechanism == "loop":
        assert "create failed: No space left on device" in ran.log, ran.log[-2000:]
        assert ran.record["status"] == "completed"
        assert files <= QUOTA_FILES + 64, files  # ext4 rounds inodes up to whole blocks
    else:
        assert "files made" not in ran.log, ran.log[-2000:]
        assert ran.record["status"] == "disk_quota_exceeded", ran.record
        assert files <= QUOTA_FILES + OVERSHOOT_FILES, files
    print(f"{mechanism}: code/ holds {files} files for a {QUOTA_FILES}-file quota")
    assert_no_disk_left_behind(ran.run)


HIDDEN_FLOOD = r'''
import os, time
ws = os.environ["A2RL_WORKSPACE"]
out = open(f"{ws}/output/hidden.bin", "wb")
os.unlink(f"{ws}/output/hidden.bin")  # no walk finds it now; it takes the disk all the same
written = 0
try:
    for _ in range(4096):
        out.write(b"\1" * (1 << 20))
        out.flush()
        written += 1
except OSError as err:
    print("write failed:", err.strerror, flush=True)
print("written MiB", written, flush=True)
time.sleep(3)
'''


def test_deleted_but_open_file_counts_against_the_disk_quota(tmp_path, tiny_model, mechanism):
    """4 GiB into a file the agent deleted but holds open, with a 64 MiB quota: the loop disk
    fills as with any file; the watchdog finds the file through /proc and stops the agent."""
    ran = run_cell(tmp_path, tiny_model, HIDDEN_FLOOD, *quota_overrides())

    assert ran.record["resources"]["disk_exceeded"] == "bytes", ran.record["resources"]
    if mechanism == "loop":
        assert "write failed: No space left on device" in ran.log, ran.log[-2000:]
    else:
        assert "written MiB" not in ran.log, ran.log[-2000:]
        assert ran.record["status"] == "disk_quota_exceeded", ran.record
    used = ran.record["resources"]["disk_used"]["bytes"]
    assert used <= QUOTA_MB * MIB + OVERSHOOT_BYTES, used
    print(f"{mechanism}: the deleted file took {used / MIB:.0f} MiB for a {QUOTA_MB} MiB quota")
    assert_no_disk_left_behind(ran.run)

