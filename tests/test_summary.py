"""summarize_run and build_leaderboard on hand-written run directories."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from a2rl.config import AgentConfig, PathsConfig, RunConfig, TaskConfig
from a2rl.layout import Layout
from a2rl.leaderboard import build_leaderboard, discover_run_roots, grid_run_roots
from a2rl.records import write_json_atomic
from a2rl.summary import summarize_run

T0 = "2026-11-30T05:00:00.000Z"


def make_cfg(root: Path, agent: str = "sft", seed: int = 0) -> RunConfig:
    return RunConfig(task=TaskConfig(id="gsm8k_arith", name="gsm8k", level="L1"),
                     agent=AgentConfig(name=agent, command=["{python}", f"{{agents}}/{agent}.py"]),
                     paths=PathsConfig(root=str(root)), seed=seed)


def write_jsonl(path: Path, records: list[dict], torn_tail: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + torn_tail)


def write_baseline(layout: Layout, score: float = 20.0) -> None:
    write_json_atomic(layout.baseline("gsm8k_arith"), {
        "task": "gsm8k_arith", "model": "tiny-qwen2", "model_hash": "abc",
        "test": {"score": score, "stderr": 2.0, "n": 100, "seconds": 3.0}, "validation": None})


def write_run(cfg: RunConfig, final_score: float | None, submissions: list[dict],
              status: str = "completed") -> None:
    layout = Layout.from_paths(cfg.paths)
    run = layout.run(cfg.task.id, cfg.agent.name, cfg.driver.name, cfg.seed)
    cell = {"task": cfg.task.id, "agent": cfg.agent.name, "driver": cfg.driver.name,
            "seed": cfg.seed}
    write_json_atomic(run.run_json, {**cell, "started": T0, "ended": T0, "agent_seconds": 61.5,
                                     "exit_code": 0, "status": status, "time_limit_s": 480,
                                     "sandbox": "bwrap"})
    write_jsonl(run.ledger, submissions, torn_tail='{"submission_id": 99, "val')
    write_jsonl(run.events, [
        {"time": T0, "elapsed_s": 0.0, "kind": "agent_start", "pid": 123},
        *({"time": T0, "elapsed_s": s["elapsed_s"], "kind": "submission",
           "submission_id": s["submission_id"], "valid": s["valid"]} for s in submissions),
        {"time": T0, "elapsed_s": 61.5, "kind": "agent_exit", "exit_code": 0}])
    valid = [s for s in submissions if s["valid"]]
    best = max(valid, key=lambda s: s["score"]) if valid else None
    write_json_atomic(run.final, {
        **cell, "feedback": "test", "selected_submission": best and best["submission_id"],
        "artifact_hash": best and "f00d", "test_score": final_score, "test_stderr": 4.9,
        "n": 100, "baseline": 20.0,
        "improvement": None if final_score is None else final_score - 20.0,
        "no_valid_submission": not valid, "rescored": True})


def submission(i: int, elapsed: float, score: float | None, error: str | None = None) -> dict:
    record = {"submission_id": i, "time": T0, "elapsed_s": elapsed,
              "model_path": f"output/ckpt-{i}", "valid": error is None, "error": error,
              "status_code": 200 if error is None else 400, "artifact_hash": f"h{i}",
              "cached": False, "split": "test"}
    if error is None:
        record.update(score=score, stderr=4.0, n=100, eval_seconds=2.0, best=score,
                      baseline=20.0, improvement=score - 20.0)
    return record


SUBMISSIONS = [submission(1, 10.0, 30.0),
               submission(2, 25.5, None, error="no config.json in output/x | not a model"),
               submission(3, 50.0, 45.0)]


def test_summary_of_a_run_with_valid_and_invalid_submissions(tmp_path):
    cfg = make_cfg(tmp_path)
    layout = Layout.from_paths(cfg.paths)
    write_baseline(layout)
    write_run(cfg, 44.0, SUBMISSIONS)

    summary = summarize_run(cfg)

    assert (summary["task"], summary["agent"], summary["driver"], summary["seed"]) == (
        "gsm8k_arith", "sft", "none", 0)
    assert summary["baseline"] == 20.0 and summary["baseline_stderr"] == 2.0
    assert summary["best_feedback_score"] == 45.0
    assert summary["final_score"] == 44.0 and summary["final_from"] == "final"
    assert summary["improvement"] == pytest.approx(24.0)
    assert summary["selected_submission"] == 3
    subs = summary["submissions"]
    assert (subs["total"], subs["valid"], subs["invalid"]) == (3, 2, 1)  # torn line skipped
    assert [s["id"] for s in subs["items"]] == [1, 2, 3]
    assert subs["items"][1]["score"] is None and "no config.json" in subs["items"][1]["error"]
    assert subs["items"][2]["elapsed_s"] == 50.0
    assert summary["status"] == "completed" and summary["agent_seconds"] == 61.5
    assert [e["kind"] for e in summary["timeline"]] == [
        "agent_start", "submission", "submission", "submission", "agent_exit"]
    assert summary["timeline"][0]["pid"] == 123

    run = layout.run("gsm8k_arith", "sft", "none", 0)
    assert json.loads(run.summary_json.read_text()) == summary
    md = run.summary_md.read_text()
    for heading in ("# gsm8k_arith · sft · none · seed 0", "## Outcome", "## Submissions",
                    "## Timeline"):
        assert heading in md
    assert "44.00 ± 4.90 (submission 3)" in md and "+24.00" in md
    assert "output/x \\| not a model" in md  # pipes escaped inside table cells


def test_summary_when_the_agent_never_submitted(tmp_path):
    cfg = make_cfg(tmp_path, agent="noop")
    write_baseline(Layout.from_paths(cfg.paths))
    write_run(cfg, None, [], status="agent_failed")
    run = Layout.from_paths(cfg.paths).run("gsm8k_arith", "noop", "none", 0)
    run.ledger.write_text("")  # empty ledger

    summary = summarize_run(cfg)

    assert summary["submissions"] == {"total": 0, "valid": 0, "invalid": 0, "items": []}
    assert summary["best_feedback_score"] is None
    assert summary["final_score"] == 20.0 and summary["final_from"] == "baseline"
    assert summary["improvement"] == 0.0
    assert summary["status"] == "agent_failed"
    assert "No submissions." in run.summary_md.read_text()


def test_summary_of_a_run_that_left_nothing(tmp_path):
    cfg = make_cfg(tmp_path)
    summary = summarize_run(cfg)
    assert summary["status"] == "not_run"
    assert summary["baseline"] is None and summary["final_score"] is None
    assert summary["improvement"] is None and summary["submissions"]["total"] == 0
    assert "No events recorded." in (
        Layout.from_paths(cfg.paths).run("gsm8k_arith", "sft", "none", 0).summary_md.read_text())


def test_leaderboard_aggregates_seeds(tmp_path):
    layout = Layout.from_paths(PathsConfig(root=str(tmp_path)))
    write_baseline(layout)
    roots = []
    for agent, seed, final in (("sft", 0, 44.0), ("sft", 1, 40.0), ("noop", 0, 20.0)):
        cfg = make_cfg(tmp_path, agent=agent, seed=seed)
        write_run(cfg, final, SUBMISSIONS if agent == "sft" else [submission(1, 5.0, 20.0)])
        summarize_run(cfg)
        roots.append(layout.run("gsm8k_arith", agent, "none", seed).root)
    roots.append(layout.run("gsm8k_arith", "sft", "none", 7).root)  # never ran: left out

    board = build_leaderboard(roots, layout)

    assert list(board["agent"]) == ["sft", "noop"]  # best mean first
    sft, noop = board.iloc[0], board.iloc[1]
    assert (sft["task"], sft["level"], sft["driver"], sft["n_seeds"]) == (
        "gsm8k_arith", "L1", "none", 2)
    assert sft["final_mean"] == pytest.approx(42.0)
    assert sft["final_std"] == pytest.approx(math.sqrt(8.0))
    assert sft["final_best"] == 44.0 and sft["baseline"] == 20.0
    assert sft["improvement_mean"] == pytest.approx(22.0)
    assert noop["n_seeds"] == 1 and math.isnan(noop["final_std"])
    assert noop["improvement_mean"] == 0.0

    csv = pd.read_csv(layout.leaderboard_csv)
    assert list(csv.columns) == ["task", "level", "agent", "driver", "n_seeds", "final_mean",
                                 "final_std", "baseline", "improvement_mean", "final_best"]
    assert csv["final_mean"].tolist() == pytest.approx([42.0, 20.0])
    metrics = json.loads(layout.leaderboard_json.read_text())
    assert metrics["gsm8k_arith"]["sft"]["none"]["final_mean"] == pytest.approx(42.0)
    assert metrics["gsm8k_arith"]["noop"]["none"]["final_std"] is None
    md = layout.leaderboard_md.read_text()
    assert "| gsm8k_arith | L1 | sft | none | 2 | 42.00 | 2.83 | 20.00 | +22.00 | 44.00 |" in md
    assert "| gsm8k_arith | L1 | noop | none | 1 | 20.00 | – |" in md

    assert discover_run_roots(layout) == sorted(roots[:3])


def test_leaderboard_of_no_runs(tmp_path):
    layout = Layout.from_paths(PathsConfig(root=str(tmp_path)))
    board = build_leaderboard([], layout)
    assert board.empty
    assert pd.read_csv(layout.leaderboard_csv).empty
    assert json.loads(layout.leaderboard_json.read_text()) == {}
    assert "No summarized runs yet." in layout.leaderboard_md.read_text()


def test_grid_run_roots_follow_the_layout(tmp_path):
    cfg = make_cfg(tmp_path)
    roots = grid_run_roots(cfg)
    layout = Layout.from_paths(cfg.paths)
    assert roots == [layout.run(t, a, "none", 0).root
                     for t in cfg.grid.tasks for a in cfg.grid.agents]
