"""Code revisions (code.git): on real workspaces and the grading service, on the tiny model, and
on real sandboxed runs (tests/ci_runs.py). Lineage, transcripts and the export of the selected
model are tests/analysis/test_lineage.py's."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from a2rl.common.clock import BudgetClock
from a2rl.common.events import EventLog
from a2rl.common.files import iter_jsonl
from a2rl.common.records import read_ledger
from a2rl.grading import recording
from a2rl.grading.artifacts import artifact_bytes
from a2rl.grading.grader import GraderSettings, GradingService
from a2rl.grading.ledger import Ledger
from a2rl.models.hf_folder import content_hash
from a2rl.task.base import EvalResult

PROBE_IDS = torch.arange(3, 43).view(4, 10)


def evaluate(model_dir: Path) -> EvalResult:
    """A real evaluation: share of positions whose greedy next token is even."""
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    with torch.inference_mode():
        nxt = model(PROBE_IDS).logits.argmax(-1).flatten()
    return EvalResult(per_item=[float(t % 2 == 0) for t in nxt.tolist()])


def git_out(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(repo), *args], capture_output=True,
                          text=True, check=True).stdout


def test_snapshot_records_the_agents_code_only(tmp_path):
    ws = tmp_path / "workspace"
    for area in ("code", "output/ckpt-1", "data", "base_model"):
        (ws / area).mkdir(parents=True)
    (ws / "code" / "train.py").write_text("print('v1')\n")
    (ws / "code" / "run.sh").write_text("#!/bin/sh\npython train.py\n")
    (ws / "code" / "run.sh").chmod(0o755)
    (ws / "code" / "big.txt").write_bytes(b"x" * (recording.MAX_FILE_BYTES + 1))
    (ws / "code" / "cache.pt").write_bytes(b"\0" * 10)
    (ws / "code" / "__pycache__").mkdir()
    (ws / "code" / "__pycache__" / "train.cpython-311.pyc").write_bytes(b"\0")
    (ws / "code" / "latest").symlink_to("train.py")
    (ws / "output" / "ckpt-1" / "model.safetensors").write_bytes(b"\0" * 100)
    (ws / "output" / "ckpt-1" / "config.json").write_text("{}")
    (ws / "output" / "sweep.py").write_text("print('sweep')\n")
    (ws / "data" / "train.jsonl").write_text("{}\n")
    (ws / "base_model" / "config.json").write_text("{}")
    (ws / "description.md").write_text("task")
    (ws / "scores.json").write_text("{}")
    before = sorted(p.relative_to(ws) for p in ws.rglob("*"))

    repo = tmp_path / "code.git"
    recorder = recording.CodeRecorder(repo, ws)
    first = recorder.snapshot("submission 1", tag="submission-1")
    (ws / "code" / "train.py").write_text("print('v2')\n")
    second = recorder.snapshot("submission 2", tag="submission-2")
    final = recorder.snapshot("final", tag="final")

    files = recording.tree_files(repo, first.commit)
    assert files == ["code/latest", "code/run.sh", "code/train.py", "output/sweep.py"]
    assert [s["path"] for s in first.skipped] == ["code/big.txt", "code/cache.pt"]
    assert first.changed and second.changed and not final.changed
    assert recording.tags(repo) == {"submission-1": first.commit,
                                    "submission-2": second.commit, "final": final.commit}
    listing = git_out(repo, "ls-tree", "-r", "final")
    assert "100755 blob" in listing.split("code/run.sh")[0].splitlines()[-1]
    assert "120000 blob" in listing.split("code/latest")[0].splitlines()[-1]
    # a diff between consecutive submissions is one command away
    shown = subprocess.run(recording.diff_command(repo, "submission-1", "submission-2").split(),
                           capture_output=True, text=True, check=True).stdout
    assert "-print('v1')" in shown and "+print('v2')" in shown
    assert recording.diff(repo, "submission-2", "final") == ""
    assert recording.read_files(repo, "submission-1", ["code/train.py"]) == {
        "code/train.py": "print('v1')\n"}
    history = recording.commits(repo)
    assert [c["tags"] for c in history] == [["submission-1"], ["submission-2"], ["final"]]
    assert git_out(repo, "log", "-1", "--format=%an <%ae>", "final").strip() == \
        "a2rl recorder <recorder@a2rl.invalid>"
    # the workspace is read, never written
    assert sorted(p.relative_to(ws) for p in ws.rglob("*")) == before


def make_service(tmp_path: Path, ws: Path, base: Path) -> GradingService:
    run = tmp_path / "run"
    clock = BudgetClock(600)
    clock.start()
    base_hash = content_hash(base)
    return GradingService(
        GraderSettings(task="t", split="test", baseline=25.0, max_submissions=10,
                       workspace=ws, store=run / "store", base_model=base,
                       base_hash=base_hash, base_scored={"score": 25.0, "stderr": 1.0, "n": 40}),
        evaluate=evaluate, ledger=Ledger(run / "ledger.jsonl"), clock=clock,
        events=EventLog(run / "events.jsonl", clock),
        recorder=recording.CodeRecorder(run / "code.git", ws))


def test_grader_commits_code_at_each_submission(tmp_path, tiny_model):
    ws = tmp_path / "run" / "workspace"
    for area in ("code", "output"):
        (ws / area).mkdir(parents=True)
    service = make_service(tmp_path, ws, tiny_model)
    out = ws / "output"

    (ws / "code" / "train.py").write_text("step = 1\n")
    shutil.copytree(tiny_model, out / "copy")  # the base itself: answered with its baseline
    code_c, copy = service.submit("output/copy")
    (ws / "code" / "train.py").write_text("step = 2\n")
    shutil.copytree(tiny_model, out / "prompt")  # other files: evaluated
    config = json.loads((out / "prompt" / "generation_config.json").read_text())
    (out / "prompt" / "generation_config.json").write_text(json.dumps(config | {
        "temperature": 0.7, "do_sample": True}))
    code_p, prompt = service.submit("output/prompt")
    bad_code, bad = service.submit("output/missing")
    assert (code_c, code_p, bad_code) == (200, 200, 404)
    assert copy["cached"] and not prompt["cached"]

    ledger = read_ledger(service.ledger.path)
    repo = tmp_path / "run" / "code.git"
    tags = recording.tags(repo)
    for entry in ledger[:2]:
        assert entry.code_commit == tags[f"submission-{entry.submission_id}"]
    # rejected before anything was accepted: no commit, and none written
    assert ledger[2].code_commit is None
    assert "code_commit" not in list(iter_jsonl(service.ledger.path))[2]
    assert recording.read_files(repo, tags["submission-1"], ["code/train.py"]) == {
        "code/train.py": "step = 1\n"}
    assert "+step = 2" in recording.diff(repo, tags["submission-1"], tags["submission-2"])
    events = [e for e in iter_jsonl(tmp_path / "run" / "events.jsonl")
              if e["kind"] == "submission" and e["valid"]]
    assert [e["code_commit"] for e in events] == [e.code_commit for e in ledger[:2]]
    assert ledger[1].artifact_bytes == artifact_bytes(out / "prompt") > 0


@pytest.mark.integration
def test_real_runs_record_code_at_every_submission_and_at_the_end(runs):
    sft = runs["runs"]["sft"]
    ledger = [e for e in iter_jsonl(sft.ledger) if e["valid"]]
    assert len(ledger) >= 1
    tags = recording.tags(sft.code_repo)
    for entry in ledger:
        assert entry["code_commit"] == tags[f"submission-{entry['submission_id']}"]
        code = recording.read_files(sft.code_repo, entry["code_commit"], ["code/train.py"])
        assert "SFTTrainer" in code["code/train.py"]
    assert "final" in tags
    # the SFT script and the shared trainer options it imports: what the agent left in code/
    assert recording.tree_files(sft.code_repo, "final") == ["code/train.py", "code/trainer_args.py"]
    events = list(iter_jsonl(sft.events))
    assert any(e["kind"] == "code_snapshot" and e["commit"] == tags["final"] for e in events)
    # the repository lives outside the workspace: the agent never saw it
    assert not (sft.workspace / "code.git").exists() and sft.code_repo.parent == sft.root
    assert not any(p.name == ".git" for p in sft.workspace.rglob(".git"))
