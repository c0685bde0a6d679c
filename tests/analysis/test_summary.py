"""summarize_run and build_leaderboard on hand-written run directories: outcome, process
metrics, failures, route, cost, bootstrap intervals and level aggregates. The summary stage
(a2rl.pipeline.stages.summarize_run) writes summary.json and, through a2rl.report.markdown,
summary.md."""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from a2rl.analysis.deviations import task_links
from a2rl.analysis.leaderboard import (
    bootstrap_ci,
    build_leaderboard,
    discover_run_roots,
    grid_run_roots,
    level_frame,
)
from a2rl.analysis.summary import process_metrics
from a2rl.analysis.view import status_text
from a2rl.common.files import write_json_atomic
from a2rl.common.layout import Layout
from a2rl.common.records import LedgerEntry, RunSummary, SubmissionItem
from a2rl.config.types import AgentConfig, PathsConfig, RunConfig, TaskConfig
from a2rl.pipeline.stages import summarize_run

T0 = "2026-11-30T05:00:00.000Z"


def make_cfg(root: Path, agent: str = "sft", seed: int = 0) -> RunConfig:
    return RunConfig(task=TaskConfig(id="gsm8k_arith", package="gsm8k", level="L1"),
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
                                     "sandbox": "bwrap",
                                     **({"reason": "provider_outage: 503 three times"}
                                        if status == "infra_failed" else {})})
    write_jsonl(run.ledger, submissions, torn_tail='{"submission_id": 99, "val')
    write_jsonl(run.events, [
        {"time": T0, "elapsed_s": 0.0, "kind": "agent_start", "pid": 123},
        *({"time": T0, "elapsed_s": s["elapsed_s"], "kind": "submission",
           "submission_id": s["submission_id"], "valid": s["valid"]} for s in submissions),
        {"time": T0, "elapsed_s": 61.5, "kind": "agent_exit", "exit_code": 0}])
    valid = [s for s in submissions if s["valid"]]
    best = max(valid, key=lambda s: s["score"]) if valid else None
    final_score = 20.0 if final_score is None else final_score  # no valid one: the baseline
    write_json_atomic(run.final, {
        **cell, "feedback": "test", "selected_submission": best and best["submission_id"],
        "artifact_hash": best and "f00d", "test_score": final_score, "test_stderr": 4.9,
        "n": 100, "baseline": 20.0, "improvement": final_score - 20.0,
        "no_valid_submission": not valid, "rescored": True})


def submission(i: int, elapsed: float, score: float | None, error: str | None = None) -> dict:
    """A ledger line as the grader writes it, without the fields added later (equals_base,
    artifact_bytes, code_commit): those must read as unknown."""
    record = {"submission_id": i, "time": T0, "elapsed_s": elapsed,
              "model_path": f"output/ckpt-{i}", "valid": error is None, "error": error,
              "status_code": 200 if error is None else 400}
    if error is None:
        record.update(artifact_hash=f"h{i}", cached=False, split="test", score=score,
                      stderr=4.0, n=100, eval_seconds=2.0, best=score, baseline=20.0,
                      improvement=score - 20.0)
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

    assert summary.cell == ("gsm8k_arith", "sft", "none", 0)
    assert summary.baseline == 20.0 and summary.baseline_stderr == 2.0
    assert summary.best_feedback_score == 45.0
    assert summary.final_score == 44.0 and summary.final_from == "final"
    assert summary.improvement == pytest.approx(24.0)
    assert summary.selected_submission == 3
    subs = summary.submissions
    assert (subs.total, subs.valid, subs.invalid) == (3, 2, 1)  # torn line skipped
    assert [s.id for s in subs.items] == [1, 2, 3]
    assert subs.items[1].score is None and "no config.json" in subs.items[1].error
    assert subs.items[2].elapsed_s == 50.0 and subs.items[2].equals_base is None
    assert summary.status == "completed" and summary.agent_seconds == 61.5
    assert [e["kind"] for e in summary.timeline] == [
        "agent_start", "submission", "submission", "submission", "agent_exit"]
    assert summary.timeline[0]["pid"] == 123

    run = layout.run("gsm8k_arith", "sft", "none", 0)
    assert json.loads(run.summary_json.read_text()) == summary.to_json()
    assert RunSummary.load(run.summary_json) == summary
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

    assert summary.to_json()["submissions"] == {"total": 0, "valid": 0, "invalid": 0,
                                                "items": []}
    assert summary.best_feedback_score is None
    assert summary.final_score == 20.0 and summary.final_from == "baseline"
    assert summary.improvement == 0.0
    assert summary.status == "agent_failed"
    assert "No submissions." in run.summary_md.read_text()


def test_summary_of_a_run_that_left_nothing(tmp_path):
    cfg = make_cfg(tmp_path)
    summary = summarize_run(cfg)
    assert summary.status == "not_run"
    assert summary.baseline is None and summary.final_score is None
    assert summary.improvement is None and summary.submissions.total == 0
    assert "No events recorded." in (
        Layout.from_paths(cfg.paths).run("gsm8k_arith", "sft", "none", 0).summary_md.read_text())


def test_leaderboard_aggregates_seeds(tmp_path):
    layout = Layout.from_paths(PathsConfig(root=str(tmp_path)))
    write_baseline(layout)
    roots = []
    # sft seed 2: the harness failed it (infra_failed); counted, never scored
    for agent, seed, final, status in (("sft", 0, 44.0, "completed"),
                                       ("sft", 1, 40.0, "agent_failed"),
                                       ("noop", 0, 20.0, "completed"),
                                       ("sft", 2, 99.0, "infra_failed")):
        cfg = make_cfg(tmp_path, agent=agent, seed=seed)
        write_run(cfg, final, SUBMISSIONS if agent == "sft" else [submission(1, 5.0, 20.0)],
                  status=status)
        summarize_run(cfg)
        roots.append(layout.run("gsm8k_arith", agent, "none", seed).root)
    roots.append(layout.run("gsm8k_arith", "sft", "none", 7).root)  # never ran: left out

    board = build_leaderboard(roots, layout)

    assert list(board["agent"]) == ["sft", "noop"]  # best mean first
    sft, noop = board.iloc[0], board.iloc[1]
    assert (sft["task"], sft["level"], sft["driver"], sft["n_seeds"], sft["infra_failed"]) == (
        "gsm8k_arith", "L1", "none", 2, 1)
    assert noop["infra_failed"] == 0
    assert sft["final_mean"] == pytest.approx(42.0)
    assert sft["final_std"] == pytest.approx(math.sqrt(8.0))
    assert sft["final_best"] == 44.0 and sft["baseline"] == 20.0
    assert sft["improvement_mean"] == pytest.approx(22.0)
    assert noop["n_seeds"] == 1 and math.isnan(noop["final_std"])
    assert noop["improvement_mean"] == 0.0

    # the bootstrap interval of two seeds spans their values; one seed has none
    assert sft["ci_low"] == pytest.approx(40.0) and sft["ci_high"] == pytest.approx(44.0)
    assert math.isnan(noop["ci_low"]) and math.isnan(noop["ci_high"])
    assert sft["cost_usd"] == 0.0 and sft["contaminated"] == 0
    # both scored sft seeds left 30 at 10 s and 45 at 50 s of 480 s (baseline 20 before): the
    # area is about 20 * 10/480 + 30 * 40/480 + 45 * 430/480 = 43.23 (trapezoid on a 1 % grid)
    assert sft["auc"] == pytest.approx(43.175)
    assert sft["auc_low"] == sft["auc_high"] == pytest.approx(43.175)
    assert noop["auc"] == pytest.approx(20.0) and math.isnan(noop["auc_low"])

    csv = pd.read_csv(layout.leaderboard_csv)
    assert list(csv.columns) == ["grid", "task", "level", "agent", "driver", "n_seeds",
                                 "infra_failed",
                                 "final_mean",
                                 "final_std", "ci_low", "ci_high", "auc", "auc_low",
                                 "auc_high", "baseline",
                                 "improvement_mean", "final_best", "cost_usd", "contaminated"]
    assert csv["final_mean"].tolist() == pytest.approx([42.0, 20.0])
    metrics = json.loads(layout.leaderboard_json.read_text())
    assert metrics["gsm8k_arith"]["sft"]["none"]["final_mean"] == pytest.approx(42.0)
    assert metrics["gsm8k_arith"]["noop"]["none"]["final_std"] is None
    assert metrics["levels"]["L1"]["sft"]["none"]["n_runs"] == 2
    assert metrics["levels"]["L1"]["sft"]["none"]["infra_failed"] == 1
    md = layout.leaderboard_md.read_text()
    # the task links to its deviations row (tests/analysis/test_deviations.py)
    href = task_links({"gsm8k_arith"}, layout.leaderboard_md.parent)["gsm8k_arith"]
    task = f"[gsm8k_arith]({href})"
    assert (f"| {task} | L1 | sft | none | 2 | 1 | 42.00 | 2.83 | 40.00 | 44.00 | 43.17 | "
            "43.17 | 43.17 | 20.00 | +22.00 | 44.00 | 0.0000 | 0 |") in md
    assert f"| {task} | L1 | noop | none | 1 | 0 | 20.00 | – | – | – | 20.00 | – | – |" in md
    assert "## By level" in md
    levels = pd.read_csv(layout.leaderboard_levels_csv)
    assert list(levels["agent"]) == ["sft", "noop"]
    assert levels["improvement_mean"].tolist() == pytest.approx([22.0, 0.0])

    curves = pd.read_csv(layout.budget_curves_csv)  # dvc.yaml's plot of it
    assert set(curves["series"]) == {"gsm8k_arith/sft/none", "gsm8k_arith/noop/none"}
    sft_curve = curves[curves["agent"] == "sft"]
    assert (sft_curve["n_seeds"] == 2).all() and len(sft_curve) == 101
    assert sft_curve["best_mean"].iloc[[0, -1]].tolist() == [20.0, 45.0]

    assert discover_run_roots(layout) == sorted(roots[:4])


def test_bootstrap_interval_and_level_aggregates(blank_summary):
    rng = np.random.default_rng(1)
    values = rng.normal(50, 10, size=30).tolist()
    low, high = bootstrap_ci(values)
    mean = float(np.mean(values))
    half = 1.96 * float(np.std(values, ddof=1)) / math.sqrt(len(values))
    assert low < mean < high
    assert (high - low) == pytest.approx(2 * half, rel=0.15)  # the normal interval, roughly
    assert bootstrap_ci(values) == (low, high)  # a fixed seed: the same interval every time
    assert all(math.isnan(x) for x in bootstrap_ci([3.0]))

    def run(task, level, seed, final):
        return replace(blank_summary, task=task, level=level, seed=seed, final_score=final,
                       baseline=10.0, improvement=final - 10.0, cost_usd=0.5,
                       integrity={"contamination": {"flagged": seed == 2}})

    # task a has three seeds, task b one: each task weighs the same in the level's mean
    summaries = [run("a", "L1", s, f) for s, f in ((0, 20.0), (1, 30.0), (2, 40.0))]
    summaries += [run("b", "L1", 0, 70.0), run("c", "L2", 0, 15.0)]
    levels = level_frame(summaries)
    l1 = levels[levels["level"] == "L1"].iloc[0]
    assert (l1["n_tasks"], l1["n_runs"], l1["contaminated"]) == (2, 4, 1)
    assert l1["final_mean"] == pytest.approx((30.0 + 70.0) / 2)
    assert l1["improvement_mean"] == pytest.approx((20.0 + 60.0) / 2)
    assert l1["ci_low"] <= l1["improvement_mean"] <= l1["ci_high"]
    assert l1["cost_usd"] == pytest.approx(0.5)
    assert list(levels["level"]) == ["L1", "L2"]


def test_process_metrics_of_hand_written_ledgers():
    def entry(i, elapsed, score, valid=True, equals_base=False):
        record = submission(i, elapsed, score, error=None if valid else "bad")
        return LedgerEntry.from_json(record | ({"equals_base": equals_base} if valid else {}),
                                     f"entry {i}")

    ledger = [entry(1, 10.0, 20.0, equals_base=True), entry(2, 20.0, None, valid=False),
              entry(3, 30.0, 35.0), entry(4, 40.0, 30.0), entry(5, 50.0, 35.0),
              entry(6, 60.0, 50.0)]
    items = [SubmissionItem.of(e, parent=None, methods=[]) for e in ledger]
    p = process_metrics(items, ledger, baseline=20.0, agent_seconds=70.0, time_limit_s=100)
    assert p.to_json() == {"valid_rate": round(5 / 6, 4), "time_to_first_valid_s": 10.0,
                           "time_to_first_improvement_s": 30.0, "time_to_best_s": 60.0,
                           "monotonic_ratio": 0.75, "budget_used": 0.7, "deadline_gap_s": 40.0,
                           "copy_of_base": 1, "budget_s": 70.0}
    empty = process_metrics([], [], baseline=20.0, agent_seconds=None, time_limit_s=100)
    assert empty.valid_rate is None and empty.deadline_gap_s is None
    assert empty.copy_of_base == 0 and empty.monotonic_ratio is None


def test_process_times_are_on_the_budget_clock_where_evaluations_do_not_count(blank_summary):
    """The sft_grpo cell of real ALFWorld (budget.count_eval_time false): its warm-up was
    answered 2,963.4 s into the run after a 2,530.9-s evaluation, when the grader told the agent
    1,067.5 s were left of its 1,500; the agent was killed 3,589.8 s in. On the budget clock the
    submission came at 432.5 s, and the agent used 1,058.9 s, not 239 % of its budget."""
    record = submission(1, 2963.425, 2.0) | {"eval_seconds": 2530.918, "equals_base": False}
    ledger = [LedgerEntry.from_json(record, "entry 1")]
    items = [SubmissionItem.of(e, parent=None, methods=[]) for e in ledger]
    p = process_metrics(items, ledger, baseline=0.0, agent_seconds=3589.778, time_limit_s=1500,
                        count_eval_time=False)
    assert p.time_to_first_valid_s == p.time_to_best_s == pytest.approx(432.507)
    assert p.deadline_gap_s == pytest.approx(1067.5, abs=0.01)  # the grader's time_left_s
    assert p.budget_used == pytest.approx((3589.778 - 2530.918) / 1500, abs=1e-4)
    assert p.budget_s == pytest.approx(3589.778 - 2530.918)
    counted = process_metrics(items, ledger, baseline=0.0, agent_seconds=3589.778,
                              time_limit_s=1500)  # evaluations counted: the run's seconds
    assert (counted.time_to_first_valid_s, counted.budget_used) == (2963.425, 2.3932)
    summary = replace(blank_summary, exit_code=1, agent_seconds=3589.778, process=p,
                      budget=replace(blank_summary.budget, time_limit_s=1500))
    assert status_text(summary) == ("completed (exit 1, 1058.9 s of 1500 s, 3589.8 s with the "
                                    "evaluations, which did not count)")
    # a summary written before budget_s: from the share, kept to 4 decimals (to 0.1 s or so)
    older = replace(summary, process=replace(p, budget_s=None))
    assert re.fullmatch(r"completed \(exit 1, 105[89]\.\d s of 1500 s, 3589\.8 s with the "
                        r"evaluations, which did not count\)", status_text(older))


def test_summary_reports_failures_route_and_cost(tmp_path):
    cfg = make_cfg(tmp_path)
    layout = Layout.from_paths(cfg.paths)
    write_baseline(layout)
    write_run(cfg, 44.0, SUBMISSIONS, status="agent_failed")
    run = layout.run("gsm8k_arith", "sft", "none", 0)
    run.agent_log.write_text("round 1\nTraceback (most recent call last):\n  File \"x.py\", "
                             "line 1\nValueError: bad learning rate\n")
    # a run recorded without code.git: the route comes from the workspace as left
    (run.workspace / "code").mkdir(parents=True)
    (run.workspace / "code" / "dpo.py").write_text(
        "from trl import DPOConfig, DPOTrainer  # preference tuning\n")
    # what an LLM agent's proxy and stack leave (a2rl.llm.proxy, a2rl.llm.stacks)
    calls = [{"call": 1, "time": T0, "model": "m", "outcome": "ok", "input_tokens": 10,
              "output_tokens": 2, "cached_input_tokens": 0, "usage_reported": True,
              "latency_s": 1.0, "cost_usd": 0.25},
             {"call": 2, "time": T0, "model": "m", "outcome": "upstream_error",
              "input_tokens": 0, "output_tokens": 0, "latency_s": 0.5, "cost_usd": 0.0}]
    run.llm_calls.write_text("".join(json.dumps(c) + "\n" for c in calls))
    run.transcript.write_text(json.dumps({"type": "tool_use", "name": "bash", "input": {
        "command": "python -c 'from trl import GRPOTrainer'"}}) + "\n")

    summary = summarize_run(cfg)

    assert summary.route["methods"] == ["DPO", "GRPO"]  # code and transcript
    llm = summary.llm
    assert (llm["calls"], llm["failed_calls"], llm["input_tokens"]) == (2, 1, 10)
    assert llm["latency_s"] == 1.5 and summary.cost_usd == 0.25
    kinds = [f["kind"] for f in summary.failures]
    assert kinds == ["submission", "agent"]
    assert "ValueError: bad learning rate" in summary.failures[1]["excerpt"]
    assert summary.integrity["contamination"]["checked"] is False  # no sealed split here
    md = run.summary_md.read_text()
    assert "## Failures" in md and "ValueError: bad learning rate" in md
    assert "| Route | DPO, GRPO |" in md and "| LLM cost | $0.2500 |" in md
    assert "## LLM usage" in md


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


def test_routes_are_read_from_code_and_artifacts():
    from a2rl.analysis.routes import detect, run_route, submission_route

    sft_code = detect([("code/train.py", "from trl import SFTConfig, SFTTrainer\n"
                                         "from peft import LoraConfig\n")])
    assert sft_code["methods"] == ["SFT"] and sft_code["techniques"] == ["LoRA"]
    assert sft_code["evidence"][0]["where"] == "code/train.py:1"
    # comments do not count; a hand-written loop is recognised by what it computes
    assert detect([("code/a.py", "# TODO: try DPOTrainer\nx = 1\n")])["methods"] == []
    loop = "logp = out.logits.log_softmax(-1)\nloss = -(reward * logp).mean()\nloss.backward()\n"
    assert detect([("code/rl.py", loop)])["methods"] == ["custom RL"]
    grouped = loop.replace("reward", "advantage") + "adv = (r - group.mean()) / group.std()\n"
    assert detect([("code/rl.py", grouped)])["methods"] == ["GRPO"]
    assert detect([("code/p.py", "from trl import PPOTrainer\n")])["methods"] == ["PPO"]
    assert detect([("notes.bin", "SFTTrainer")])["methods"] == []  # not code

    # the artifact decides first; LoRA in code counts only when the artifact is an adapter
    assert submission_route({"equals_base": True}, sft_code)["methods"] == ["copy"]
    assert submission_route({"weights_equal_base": True}, sft_code)["methods"] == ["prompt-only"]
    assert submission_route({"kind": "full"}, sft_code)["techniques"] == []
    assert submission_route({"kind": "adapter"}, sft_code)["techniques"] == ["LoRA"]
    nothing = detect([])
    assert submission_route({"kind": "full"}, nothing)["methods"] == ["unknown"]
    assert run_route([{"valid": True, "methods": ["copy"]},
                      {"valid": True, "methods": ["SFT"]},
                      {"valid": False, "methods": ["GRPO"]},
                      {"valid": True, "methods": ["unknown"]}]) == ["SFT", "copy"]
