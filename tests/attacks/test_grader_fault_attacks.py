"""Faults of the grader itself (issue #11, "Also required"): a real grader process SIGKILLed in
the middle of an evaluation and restarted on the same ledger and store. The agent's client gets
a clear retryable error while it is down; the restarted grader records the interrupted
submission as ``interrupted`` (not counted, its artifact hash kept); the ledger stays whole and
the same model, submitted again, is scored."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from grader_rig import TOKEN

from a2rl.common.records import read_ledger
from a2rl.grading import client
from a2rl.grading.ledger import Ledger
from checkout import REPO, child_env

pytestmark = pytest.mark.attacks

HERE = Path(__file__).parent
CLIENT = REPO / "src" / "a2rl" / "grading" / "client.py"


def start_grader(tmp: Path, tiny: Path, mode: str) -> subprocess.Popen:
    """The grader process over ``tmp``; returns once it serves."""
    (tmp / "ready").unlink(missing_ok=True)
    env = child_env()
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env["PYTHONPATH"]])
    proc = subprocess.Popen([sys.executable, str(HERE / "grader_process.py"), str(tmp),
                             str(tiny), mode], env=env, stdout=subprocess.DEVNULL,
                            stderr=open(tmp / f"grader-{mode}.log", "ab"))
    deadline = time.monotonic() + 90
    while not (tmp / "ready").exists():
        assert proc.poll() is None, (tmp / f"grader-{mode}.log").read_text()[-3000:]
        assert time.monotonic() < deadline, "the grader did not start"
        time.sleep(0.1)
    return proc


def agent_client(tmp: Path, *args: str) -> subprocess.Popen:
    """The agent's ``a2rl`` client, as the sandbox runs it (standard library only)."""
    env = {"PATH": os.environ["PATH"], "A2RL_TOKEN": TOKEN,
           "A2RL_GRADER_URL": f"unix:{tmp / 'sock' / 'grader.sock'}"}
    return subprocess.Popen([sys.executable, str(CLIENT), *args], env=env,
                            cwd=tmp / "run" / "workspace", stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_grader_killed_mid_evaluation_restarts_and_marks_the_submission(tmp_path, tiny_model):
    ws = tmp_path / "run" / "workspace"
    grader = start_grader(tmp_path, tiny_model, "slow")
    try:
        shutil.copytree(tiny_model, ws / "output" / "m")
        submitting = agent_client(tmp_path, "submit", "output/m")
        deadline = time.monotonic() + 60
        while not (tmp_path / "evaluating").exists():
            assert time.monotonic() < deadline and submitting.poll() is None
            time.sleep(0.05)
        inflight = tmp_path / "run" / "ledger.inflight.json"
        assert json.loads(inflight.read_text())["model_path"] == str(ws / "output" / "m")
        grader.send_signal(signal.SIGKILL)
        grader.wait(timeout=30)
    finally:
        if grader.poll() is None:
            grader.kill()
    out, err = submitting.communicate(timeout=30)
    assert submitting.returncode == client.RETRY_EXIT, (out, err)
    assert "retry" in err and "interrupted" in err
    # while it is down the client says so, and does not hang
    status = agent_client(tmp_path, "status")
    assert status.wait(timeout=30) == client.RETRY_EXIT and "restarting" in status.stderr.read()
    status.stdout.close()
    status.stderr.close()

    grader = start_grader(tmp_path, tiny_model, "fast")
    try:
        entries = read_ledger(tmp_path / "run" / "ledger.jsonl")
        assert len(entries) == 1 and not inflight.exists()
        first = entries[0]
        assert (first.status, first.valid, first.status_code) == ("interrupted", False, 503)
        assert first.artifact_hash and (tmp_path / "run" / "store" / first.artifact_hash).is_dir()
        mirror = json.loads((ws / "scores.json").read_text())
        assert mirror["submissions"][0]["error"].startswith("the grader stopped")

        again = agent_client(tmp_path, "submit", "output/m")
        out, err = again.communicate(timeout=60)
        assert again.returncode == 0, (out, err)
        answer = json.loads(out)
        assert answer["submission_id"] == 2 and answer["score"] is not None
        assert answer["submissions_left"] == 9  # the interrupted one did not count
    finally:
        grader.kill()
        grader.wait(timeout=30)
    ledger = tmp_path / "run" / "ledger.jsonl"
    lines = ledger.read_text().splitlines()
    assert [json.loads(line)["submission_id"] for line in lines] == [1, 2]
    assert Ledger(ledger).entries[1].artifact_hash == first.artifact_hash
    events = [json.loads(line) for line in (tmp_path / "run" / "events.jsonl").open()]
    assert [e["submission_id"] for e in events if e["kind"] == "grader_recovered"] == [1]


def test_a_torn_ledger_line_does_not_swallow_the_next_entry(tmp_path):
    """A grader killed in the middle of appending leaves a line without its end; the next
    grader on that ledger starts a new line, so its first entry is kept."""
    path = tmp_path / "ledger.jsonl"
    first = Ledger(path).append(model_path="output/a", valid=False, error="x",
                                status_code=422, elapsed_s=1.0)
    with path.open("a") as fh:
        fh.write('{"submission_id": 2, "model_pa')  # killed mid-write
    ledger = Ledger(path)
    second = ledger.append(model_path="output/b", valid=False, error="y", status_code=422,
                           elapsed_s=2.0)
    assert [e.model_path for e in Ledger(path).entries] == ["output/a", "output/b"]
    assert (first.submission_id, second.submission_id) == (1, 2)
