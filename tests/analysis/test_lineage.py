"""What became of a run's artifacts (a2rl.analysis.lineage): lineage from the grader's store on
the tiny model, transcripts, and the selected models of real sandboxed runs exported for DVC
(tests/ci_runs.py)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

import ci_runs
from a2rl.analysis import lineage
from a2rl.common.files import read_json
from a2rl.common.records import LedgerEntry
from a2rl.grading.artifacts import WorkspaceResolver, artifact_bytes, copy_artifact
from a2rl.models.hf_folder import content_hash


def perturb(model_dir: Path, scale: float, seed: int) -> None:
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * scale)
    model.save_pretrained(model_dir)


def submit_all(ws: Path, store: Path, base_hash: str, names: list[str]) -> list[LedgerEntry]:
    """Copy each output/<name> into the store as the grader does; the ledger entries it writes,
    plus one rejected submission."""
    resolver = WorkspaceResolver(ws)
    ledger = []
    for i, name in enumerate(names, start=1):
        digest, _ = copy_artifact(resolver, ws / "output" / name, store, 2**30)
        ledger.append(LedgerEntry(
            submission_id=i, score=0.0, elapsed_s=float(i), artifact_hash=digest,
            equals_base=digest == base_hash, time="2026-01-01T00:00:00Z",
            model_path=f"output/{name}", valid=True, error=None, status_code=200))
    ledger.append(LedgerEntry(submission_id=len(names) + 1, elapsed_s=9.0,
                              time="2026-01-01T00:00:09Z", model_path="output/missing",
                              valid=False, error="missing", status_code=404))
    return ledger


def test_lineage_finds_each_artifacts_parent(tmp_path, tiny_model):
    out = tmp_path / "workspace" / "output"
    out.mkdir(parents=True)
    shutil.copytree(tiny_model, out / "a")
    perturb(out / "a", 0.02, seed=1)
    shutil.copytree(out / "a", out / "b")
    perturb(out / "b", 0.01, seed=2)  # trained further from a
    shutil.copytree(tiny_model, out / "copy")
    shutil.copytree(tiny_model, out / "prompt")
    config = json.loads((out / "prompt" / "generation_config.json").read_text())
    (out / "prompt" / "generation_config.json").write_text(json.dumps(config | {
        "temperature": 0.7, "do_sample": True}))
    base_hash = content_hash(tiny_model)
    store = tmp_path / "store"
    ledger = submit_all(out.parent, store, base_hash, ["a", "b", "copy", "prompt", "a"])

    records = lineage.artifact_lineage(ledger, store, tiny_model, base_hash)
    assert len(records) == 4  # one per distinct artifact; a's resubmission joins the first
    by_id = {r["submissions"][0]: r for r in records}
    assert by_id[1]["submissions"] == [1, 5] and by_id[1]["kind"] == "full"
    assert by_id[1]["parent"] == "base" and not by_id[1]["weights_equal_base"]
    assert by_id[2]["parent"] == "submission-1"
    assert by_id[2]["distances"]["submission-1"] < by_id[2]["distances"]["base"]
    assert by_id[3]["equals_base"] and by_id[3]["parent"] == "base"
    assert not by_id[4]["equals_base"] and by_id[4]["weights_equal_base"]
    assert by_id[4]["parent"] == "base" and by_id[4]["parent_distance"] == 0.0
    assert by_id[1]["bytes"] == artifact_bytes(out / "a")


def test_sketches_of_different_models_share_no_distance(tmp_path, tiny_model):
    sketch = lineage.weight_sketch(tiny_model)
    assert lineage.sketch_distance(sketch, sketch) == 0.0
    assert lineage.sketch_distance(sketch, {"other.weight": (3, sketch[next(iter(sketch))][1])}) \
        is None
    assert lineage.weight_sketch(tmp_path) is None  # no safetensors weights


def test_transcript_records_are_read(tmp_path):
    path = tmp_path / "transcript.jsonl"
    path.write_text('{"type": "tool_use", "input": "python code/train.py"}\n[1, 2]\n{"torn')
    assert lineage.read_transcript(path) == [{"type": "tool_use",
                                              "input": "python code/train.py"}]
    assert lineage.read_transcript(tmp_path / "missing.jsonl") == []


@pytest.mark.integration
def test_selected_models_are_exported_for_dvc(runs):
    layout = runs["layout"]
    for agent, run in runs["runs"].items():
        final = read_json(run.final)
        dest = layout.selected_model(ci_runs.TASK, agent, "none", 0)
        selected = read_json(dest / "selected.json")
        assert selected["artifact_hash"] == final["artifact_hash"]
        if final["artifact_hash"]:
            assert content_hash(dest / "model") == final["artifact_hash"]
        else:  # the cheater never had a valid submission: its model is the base
            assert selected["no_valid_submission"] and not (dest / "model").exists()
    noop = read_json(layout.selected_model(ci_runs.TASK, "noop", "none", 0) / "selected.json")
    assert noop["selected_submission"] == 1 and os.path.isdir(
        layout.selected_model(ci_runs.TASK, "noop", "none", 0) / "model")
