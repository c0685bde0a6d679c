"""Which agent run a cell's job keeps (a2rl.pipeline.cell.finished_run): a finished one, still
newer than the job's inputs; the real retry through Snakemake is in test_workflow.py."""

from __future__ import annotations

import os

import pytest

from a2rl.common.records import RunRecord
from a2rl.pipeline.cell import finished_run

CELL = dict(task="gsm8k_arith", agent="noop", driver="none", seed=0, started="s", ended="e",
            agent_seconds=1.0, exit_code=0, time_limit_s=120, sandbox="bwrap")


def write_run(tmp_path, **fields):
    """run.json with ``fields``, and one input (the baseline) written a minute before it."""
    baseline = tmp_path / "baseline.json"
    baseline.write_text("{}")
    run_json = tmp_path / "run.json"
    RunRecord(**{**CELL, **fields}).save(run_json)
    written = run_json.stat().st_mtime
    os.utime(baseline, (written - 60, written - 60))
    return run_json, baseline


@pytest.mark.parametrize("status", ["completed", "agent_failed", "budget_exhausted"])
def test_a_finished_run_is_kept(tmp_path, status):
    run_json, baseline = write_run(tmp_path, status=status)
    kept = finished_run(run_json, [baseline])
    assert kept is not None and kept.status == status


def test_an_infra_failed_or_missing_run_is_run_again(tmp_path):
    run_json, baseline = write_run(tmp_path, status="infra_failed",
                                   reason="missing_key: DriverKeyMissing: no key")
    assert finished_run(run_json, [baseline]) is None
    assert finished_run(tmp_path / "none" / "run.json", [baseline]) is None


def test_a_run_older_than_an_input_is_run_again(tmp_path):
    """A new baseline (or base model, or prepared data) after the run: the run used the old."""
    run_json, baseline = write_run(tmp_path, status="completed")
    later = run_json.stat().st_mtime + 60
    os.utime(baseline, (later, later))
    assert finished_run(run_json, [baseline]) is None


def test_a_malformed_run_json_is_an_error(tmp_path):
    (tmp_path / "run.json").write_text('{"status": "completed"}')
    with pytest.raises(Exception, match="run.json"):
        finished_run(tmp_path / "run.json", [])
