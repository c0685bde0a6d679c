"""The stage functions on the ci grid's tiny model: baseline caching, validation feedback,
the final grade's selection."""

import shutil
from pathlib import Path

import pytest

from a2rl.common.files import read_json
from a2rl.common.records import FinalRecord
from a2rl.config.compose import compose
from a2rl.grading.ledger import Ledger
from a2rl.pipeline import stages
from checkout import FIXTURE_DATA


def cell(tmp_path: Path, *extra: str):
    return compose(["grid=ci", "agent=noop", f"paths.root={tmp_path}",
                    f"paths.data={FIXTURE_DATA}", "task.params.test_size=6",
                    "task.params.train_size=16",
                    "task.inference.max_new_tokens=8", "budget.time_limit_s=120", *extra])


@pytest.fixture
def prepared(tmp_path, tiny_model):
    cfg = cell(tmp_path)
    model_dir = stages.layout_of(cfg).model(cfg.task.model.name)
    shutil.copytree(tiny_model, model_dir)
    stages.prepare_task(cfg)
    return tmp_path


def test_baseline_is_cached_and_failures_are_not(prepared):
    cfg = cell(prepared)
    first = stages.measure_baseline(cfg)
    again = stages.measure_baseline(cfg)
    assert not first["test"]["cached"] and again["test"]["cached"]
    assert again["test"]["score"] == first["test"]["score"] and first["test"]["n"] == 6
    layout = stages.layout_of(cfg)
    cache_files = list((layout.results / "cache" / "baseline").iterdir())
    broken = cell(prepared, "task.model.name=missing-model")
    with pytest.raises(Exception):
        stages.measure_baseline(broken)
    assert list((layout.results / "cache" / "baseline").iterdir()) == cache_files


def test_validation_feedback_scores_validation_and_final_grade_rescored_on_test(prepared):
    extra = ("task.feedback=validation", "task.params.validation_size=5")
    cfg = cell(prepared, *extra)
    stages.prepare_task(cfg)
    baseline = stages.measure_baseline(cfg)
    assert baseline["validation"]["n"] == 5 and baseline["test"]["n"] == 6
    run = stages.run_agent(cfg)
    entries = Ledger(run.ledger).valid
    assert entries and all(e.split == "validation" for e in entries)
    assert entries[0].score == baseline["validation"]["score"]  # noop submits the base
    final = stages.final_grade(cfg)
    assert final.rescored and final.feedback == "validation"
    assert final.test_score == pytest.approx(baseline["test"]["score"])
    assert final.improvement == pytest.approx(0.0) and final.n == 6
    assert read_json(run.final) == final.to_json()
    assert FinalRecord.load(run.final) == final


def test_final_grade_without_submissions_reports_the_base_model(prepared):
    cfg = cell(prepared, "agent.command=[true]")
    stages.measure_baseline(cfg)
    run = stages.run_agent(cfg)
    assert Ledger(run.ledger).entries == []
    final = stages.final_grade(cfg)
    assert final.no_valid_submission and final.selected_submission is None
    assert final.improvement == 0 and not final.rescored


def test_prepare_task_reuses_only_data_made_from_the_same_config(prepared):
    cfg = cell(prepared)
    manifest = stages.layout_of(cfg).prepared(cfg.task.id).manifest
    first, written = read_json(manifest), manifest.stat().st_mtime_ns
    stages.prepare_task(cfg, reuse=True)
    assert manifest.stat().st_mtime_ns == written  # untouched
    stages.prepare_task(cfg)  # without reuse: always made again
    assert manifest.stat().st_mtime_ns > written
    assert read_json(manifest)["fingerprint"] == first["fingerprint"]
    bigger = cell(prepared, "task.params.test_size=7")
    stages.prepare_task(bigger, reuse=True)
    changed = read_json(manifest)
    assert changed["fingerprint"] != first["fingerprint"] and changed["sizes"]["test"] == 7


def test_the_selected_submission_was_the_best_of_the_distinct_artifacts_scored_on_test(tmp_path):
    """final_grade's winner's-curse count (stages.selected_from) on a real ledger: its valid
    entries are a property (issue #30 found it called, which failed every test-feedback run)."""
    ledger = Ledger(tmp_path / "ledger.jsonl")
    for sid, digest, split in ((1, "a", "test"), (2, "b", "test"), (3, "a", "test"),
                               (4, "c", "validation")):
        ledger.append(score=10.0 * sid, elapsed_s=float(sid), cached=False, stderr=1.0, n=6,
                      split=split, artifact_hash=digest, equals_base=False, model_path="output/m",
                      valid=True, error=None, status_code=200)
    ledger.append(elapsed_s=5.0, model_path="output/x", valid=False, error="not a model",
                  status_code=422)
    best = ledger.valid[1]
    assert stages.selected_from(ledger, best) == 2  # a and b; the repeat and validation not
    assert stages.selected_from(ledger, ledger.valid[3]) == 1  # selected on validation


def test_a_twin_that_cannot_be_drawn_is_recorded_as_not_checked(tmp_path, monkeypatch):
    """A generator with too few unused items left (a small DeepSearchQA world) cannot draw a
    twin: the final grade records that, it does not fail."""
    class Exhausted:
        def twin_split(self, prepared, folder, seed):
            raise RuntimeError("only 7 of 60 twin questions could be drawn")

    monkeypatch.setattr(stages, "load_task_of", lambda cfg: Exhausted())
    cfg = cell(tmp_path)
    twin = stages._twin_check(cfg, stages.run_paths(cfg), "hash", {"score": 50.0, "stderr": 5.0})
    assert not twin["checked"] and not twin["flagged"] and "only 7 of 60" in twin["reason"]
