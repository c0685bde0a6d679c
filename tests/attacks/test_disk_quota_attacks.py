"""Attacks on the host's disk through what an agent writes (issue #28, finding 9), each a whole
cell run as the harness runs one (workspace, real grader, bwrap sandbox, budget) on the tiny
model, with small limits so that each takes seconds: before, an agent wrote 3 GB into output/ in
11 s and 200 000 files in 3 s, 1 GB into agent.log in 0.8 s, and egress.jsonl grew 50 MB/s from
refused CONNECTs, all without bound.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from hostile_sandbox import agent_command_override

from a2rl.common.files import read_json
from a2rl.common.layout import RunPaths
from a2rl.config.compose import compose
from a2rl.isolation.procs import TAIL_BYTES
from a2rl.pipeline import stages
from checkout import FIXTURE_DATA

pytestmark = [pytest.mark.attacks,
              pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")]

MIB = 2**20


@dataclass
class Ran:
    run: RunPaths
    record: dict
    events: list[dict]
    log: str
    baseline: dict

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

