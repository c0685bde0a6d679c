"""The benchmark scripts of benchmarks/ end to end, on the tiny model or small inputs:
core.py (both phases run and report their ratios), codeexec.py (the sandbox against no sandbox,
the two-process runner against the single-interpreter one), planning.py (planning the ci grid,
this checkout against a commit), gpu_check.py, threads.py and peak.py; and the GRPO probe of
experiments/grpo_probe/ and the AlpacaEval judge agreement study of
experiments/alpacaeval_judge_agreement/."""

from __future__ import annotations

import importlib.util
import json
import math
import random
import sys
from pathlib import Path

import pytest

from checkout import REPO

BENCHMARKS = REPO / "benchmarks"
SCRIPT = BENCHMARKS / "core.py"


def load_script(path: Path = SCRIPT):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # a script's dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_bench_core_on_tiny_model(tmp_path, capsys):
    bench = load_script()
    out = tmp_path / "bench" / "core.json"
    bench.main(["--tiny", "--n", "8", "--batch-size", "4", "--max-new-tokens", "8",
                "--threads", "1", "--out", str(out)])
    result = json.loads(out.read_text())

    gen = result["generation"]
    assert gen["mismatches"] == 0, gen["mismatched_items"]
    assert gen["batched"]["batch_size"] == 4 and gen["single"]["batch_size"] == 1
    assert gen["batched"]["generate_calls"] == 2 and gen["single"]["generate_calls"] == 8
    assert gen["batched"]["new_tokens"] == gen["single"]["new_tokens"] > 0
    for key in ("speedup_tokens_per_s", "speedup_prompts_per_s"):
        assert math.isfinite(gen[key]) and gen[key] > 0
    assert isinstance(gen["meets_target"], bool)
    assert [r["prompts"] for r in gen["rounds"]] == [4, 4]
    assert all(r["speedup"] > 0 for r in gen["rounds"])

    sub = result["submission"]
    assert sub["n"] == 8 and sub["score"] is not None
    assert math.isfinite(sub["overhead_share"]) and sub["overhead_share"] > 0
    steps = sub["steps_s"]
    assert steps["evaluation"] > 0 and steps["copy_hash"] > 0 and steps["materialize"] > 0
    assert sum(steps.values()) == pytest.approx(sub["total_s"], abs=2e-3)
    assert math.isclose(sub["overhead_s"], sub["total_s"] - steps["evaluation"], abs_tol=2e-3)
    assert sub["cached_resubmit"]["cached"] is True

    table = capsys.readouterr().out
    assert "speedup" in table and "overhead" in table


def test_bench_codeexec_compares_bwrap_with_no_sandbox(tmp_path):
    bench = load_script(BENCHMARKS / "codeexec.py")
    out = tmp_path / "codeexec.json"
    bench.main(["--n", "4", "--design-problems", "4", "--out", str(out)])
    result = json.loads(out.read_text())
    per = result["per_program"]
    assert per["n"] == 4 and 0 < per["none_median_ms"] and 0 < per["bwrap_median_ms"]
    assert per["ratio_bwrap_over_none"] == pytest.approx(
        per["bwrap_median_ms"] / per["none_median_ms"], rel=0.01)
    # the canonical solutions of the sealed half pass both ways
    for isolation in ("bwrap", "none"):
        split = result["test_split"][isolation]
        assert split["passed"] == split["programs"] == 82 and split["seconds"] > 0
    # the two-process runner against the single-interpreter one it replaced (issue 12)
    design = result["design"]
    assert design["passed_one_at_a_time"] == {"single": 4, "two_process": 4}
    assert design["ratio_median"] == pytest.approx(
        design["two_process_median_ms"] / design["single_median_ms"], rel=0.01)
    assert design["two_process_parallel"]["passed"] == design["single_parallel"]["passed"] == 4


def test_bench_episode_tokens_counts_each_step_turn_on_the_same_episodes(tmp_path):
    """benchmarks/episode_tokens.py on the tiny model and a few household games: the append and
    rewrite paths on the same games, the token ratio on the same episodes, one at a time against
    lockstep with identical episodes, and what each step-turn action list would encode on the
    played episodes (listing them only in the first turn encodes the fewest)."""
    bench = load_script(BENCHMARKS / "episode_tokens.py")
    out = tmp_path / "episode_tokens.json"
    report = bench.main(["--tiny", "--n", "3", "--max-steps", "3", "--threads", "1",
                         "--skip-grpo", "--work", str(tmp_path / "work"), "--out", str(out)])
    assert json.loads(out.read_text())["targets"] == report["targets"]
    same = report["tokens"]["same_episodes"]
    listed = same["step_actions"]
    assert set(listed) == {"all", "changes", "first"} and same["steps"] > 0
    assert listed["all"]["append_per_step"] == same["append_per_step"]  # the played format
    assert listed["first"]["append_per_step"] < listed["all"]["append_per_step"]
    assert listed["first"]["append_per_step"] <= listed["changes"]["append_per_step"]
    assert report["targets"]["same_episodes_lockstep_sequential"] is True
    assert report["phases"]["eval_append"]["steps"] == same["steps"]


def test_probe_grpo_scores_start_and_each_round_paired(tmp_path):
    """experiments/grpo_probe/probe.py on the tiny model and the ci grid's household games
    (prepared under its work folder, never over results/): the start and every round are scored
    on the same sealed games, and each round's gain is the paired difference from the start."""
    probe = load_script(REPO / "experiments" / "grpo_probe" / "probe.py")
    out = tmp_path / "probe.json"
    report = probe.main(["--tiny", "--rounds", "2", "--iterations", "1", "--games", "2",
                         "--group", "2", "--max-steps", "3", "--train-layers", "1",
                         "--work", str(tmp_path / "work"), "--out", str(out)])
    assert json.loads(out.read_text()) == report
    # options the probe does not know go to the GRPO script; the rest keep its defaults
    assert report["settings"]["iterations"] == 1 and report["settings"]["group"] == 2
    assert report["settings"]["lr"] == 1e-5 and report["settings"]["rounds"] == 2
    assert (tmp_path / "work" / "results" / "prepared" / "household" / "sealed").is_dir()
    rounds = report["rounds"]
    assert [r["round"] for r in rounds] == [0, 1, 2]
    assert report["test_games"] == len(rounds[0]["per_item"]) > 0
    for r in rounds[1:]:
        gain, _ = probe.paired_gain(rounds[0]["per_item"], r["per_item"])
        assert r["gain"] == gain == r["score"] - rounds[0]["score"]
        assert len(r["train_success"]) == 1 and r["train_s"] > 0
        assert r["newly_won"] - r["newly_lost"] == round(r["gain"] * len(r["per_item"]) / 100)
        # the agents' default KL anchor, to the probe's start in both rounds
        assert report["settings"]["kl"] == 0.05 and r["train_kl"][0] >= 0.0
    mean, se = probe.paired_gain([0.0, 1.0, 1.0], [1.0, 1.0, 0.0])  # +100, 0, -100 points
    assert mean == 0.0 and se == pytest.approx(100 * math.sqrt(1 / 3))
    assert probe.discordant([0.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 1.0]) == (2, 1)
    with pytest.raises(SystemExit):  # a changed task is never scored in the shared folder
        probe.main(["--start", "m", "--set", "task.params.test_games=200"])
    # the reports side by side, per round and goal type, paired with the start
    table = load_script(REPO / "experiments" / "grpo_probe" / "report.py").main([
        "--test", str(tmp_path / "work" / "results" / "prepared" / "household" / "sealed" /
                      "test.jsonl"), f"kl={out}"])
    assert [(r["round"], r["gain"], r["newly_won"]) for r in table] == \
        [(r["round"], r.get("gain", 0.0), r.get("newly_won", 0)) for r in rounds]
    games = len(rounds[0]["per_item"])
    goals = [json.loads(line)["goal_type"] for line in (
        tmp_path / "work" / "results" / "prepared" / "household" / "sealed" /
        "test.jsonl").read_text().splitlines()]
    for row, r in zip(table, rounds, strict=True):  # each goal type's share, weighted back
        total = sum(row["by_goal"][g] * goals.count(g) for g in set(goals)) / games
        assert total == pytest.approx(r["score"], abs=0.1 * len(set(goals)))
    # a probe stopped after training round 2 but before scoring it goes on (--resume): round 1
    # is kept, round 2's model is scored as it was, not trained again
    stopped = {**report, "rounds": rounds[:2]}
    out.write_text(json.dumps(stopped))
    (tmp_path / "first.json").write_text(json.dumps(report))
    trained = (tmp_path / "work" / "grpo-2" / "model.safetensors").stat().st_mtime_ns
    resumed = probe.main(["--tiny", "--rounds", "2", "--iterations", "1", "--games", "2",
                          "--group", "2", "--max-steps", "3", "--train-layers", "1",
                          "--work", str(tmp_path / "work"), "--out", str(out), "--resume",
                          "--no-prepare", "--start-report", str(tmp_path / "first.json")])
    assert (tmp_path / "work" / "grpo-2" / "model.safetensors").stat().st_mtime_ns == trained
    assert [r["per_item"] for r in resumed["rounds"]] == [r["per_item"] for r in rounds]
    assert resumed["rounds"][:2] == rounds[:2] and json.loads(out.read_text()) == resumed
    # probes of other settings from the same start share its evaluation (--start-report) ...
    again = probe.main(["--tiny", "--rounds", "0", "--work", str(tmp_path / "work"),
                        "--start-report", str(out)])
    assert again["rounds"] == rounds[:1] and again["test_sha256"] == report["test_sha256"]
    with pytest.raises(SystemExit, match="evaluate the start again"):  # ... not another start's
        probe.main(["--tiny", "--rounds", "0", "--work", str(tmp_path / "other"),
                    "--start-report", str(out)])


def test_bench_planning_times_the_ci_plan_against_a_commit(tmp_path):
    """benchmarks/planning.py plans the ci grid with HEAD's workflow and the work tree's,
    cold then cached: one run_cell job per cell, CPU seconds measured."""
    from a2rl.config.compose import compose, grid_cells, grid_overrides

    bench = load_script(BENCHMARKS / "planning.py")
    out = tmp_path / "planning.json"
    summary = bench.main(["--grid", "ci", "--repeats", "1", "--before", "HEAD",
                          "--out", str(out)])
    cells = len(grid_cells(compose(grid_overrides("ci"))))
    assert set(summary) == {"before", "after"}
    for row in summary.values():
        assert row["jobs_per_rule"]["run_cell"] == cells
        assert row["cold_cpu_s"] > 0 and row["cached_cpu_s_median"] > 0
    report = json.loads(out.read_text())
    assert [(p["variant"], p["cache"]) for p in report["plans"]] == [
        ("before", "cold"), ("after", "cold"), ("before", "cached"), ("after", "cached")]


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
def test_gpu_check_without_gpu_says_so_and_fails(tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    check = load_script(BENCHMARKS / "gpu_check.py")
    assert check.main(["--out", str(tmp_path / "g.json")]) == check.NO_GPU
    assert "no CUDA GPU" in capsys.readouterr().err
    assert not (tmp_path / "g.json").exists()


def test_bench_threads_runs_jobs_alone_and_side_by_side(tmp_path):
    """benchmarks/threads.py on the tiny model and two made household games: one job alone,
    two at once with the given threads and two at once with one thread each; every job
    generates the same batch (greedy, so the same tokens) and the ratios are reported."""
    from a2rl_tasks.alfworld.games import Difficulty, make_games

    make_games(tmp_path / "games", "bt", 2, 5, Difficulty(rooms=(2, 3), objects=(4, 5)),
               ["put_on"])
    bench = load_script(BENCHMARKS / "threads.py")
    out = tmp_path / "threads.json"
    report = bench.main(["--tiny", "--games", str(tmp_path / "games"), "--n", "4",
                         "--threads", "1", "--max-new-tokens", "4", "--out", str(out)])
    assert json.loads(out.read_text()) == report
    phases = report["phases"]
    assert [len(phases[k]["jobs"]) for k in ("alone", "two_at_once", "two_at_once_1_thread")] \
        == [1, 2, 2]
    jobs = [j for p in phases.values() for j in p["jobs"]]
    assert len({j["new_tokens"] for j in jobs}) == 1 and jobs[0]["new_tokens"] > 0
    assert all(j["seconds"] > 0 and j["prefill_s"] > 0 for j in jobs)
    for key in ("slowdown_two_at_once", "slowdown_two_at_once_1_thread"):
        assert math.isfinite(report[key]) and report[key] > 0


def test_bench_peak_compares_the_prompt_pass_with_bare_matmuls(tmp_path):
    """Both precisions report the matmul rate on the model's shapes, the prompt pass's rate and
    the share; the prompt pass's FLOPs are counted from the config as the docstring says."""
    from types import SimpleNamespace

    bench = load_script(BENCHMARKS / "peak.py")
    config = SimpleNamespace(hidden_size=8, intermediate_size=16, num_attention_heads=4,
                             num_key_value_heads=2, num_hidden_layers=3)
    # q, o: 8x8; k, v: 8x4; gate, up, down: 8x16 -> 64+64+32+32+384 = 576 weights a layer
    linear = 2 * 576 * 2 * 5
    attention = 2 * 2 * 8 * 2 * 5 * 6 / 2
    assert bench.prompt_pass_flops(config, batch=2, length=5) == 3 * (linear + attention)
    out = tmp_path / "peak.json"
    bench.main(["--tiny", "--tokens", "32", "--batch", "2", "--repeats", "1", "--threads", "1",
                "--out", str(out)])
    report = json.loads(out.read_text())
    assert set(report["precisions"]) == {"fp32", "bf16"}
    for row in report["precisions"].values():
        assert row["matmul_gflops"] > 0 and row["prompt_pass_gflops"] > 0
        assert math.isclose(row["share_of_matmul"],
                            row["prompt_pass_gflops"] / row["matmul_gflops"], abs_tol=0.05)
    assert report["hardware"]["cpu_cores"] >= 1


def test_grid_cells_tabulates_each_finished_runs_twin_verdict(tmp_path, capsys):
    """experiments/twin_false_positives/grid_cells.py reads every final.json of a grid and
    counts the flagged runs per task and agent; a run with no twin check is listed, not
    counted."""
    cells = load_script(REPO / "experiments" / "twin_false_positives" / "grid_cells.py")
    verdicts = {("sft", 0): {"checked": True, "flagged": True, "score": 20.0, "gap": 30.0},
                ("sft", 1): {"checked": True, "flagged": False, "score": 45.0, "gap": 5.0},
                ("noop", 0): {"checked": False, "reason": "fixed pool"}}
    for (agent, seed), twin in verdicts.items():
        run = tmp_path / "runs" / "gsm8k_arith" / agent / "none" / f"seed{seed}"
        run.mkdir(parents=True)
        (run / "final.json").write_text(json.dumps({
            "task": "gsm8k_arith", "agent": agent, "seed": seed, "test_score": 50.0,
            "test_stderr": 3.5, "twin": {"threshold": 10.0, "stderr": 3.0, **twin}}))
    out = tmp_path / "cells.json"
    assert cells.main([str(tmp_path), "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["flagged"] == {"gsm8k_arith/sft": "1 of 2"}
    assert [(c["agent"], c["seed"], c["flagged"]) for c in report["cells"]] == [
        ("noop", 0, False), ("sft", 0, True), ("sft", 1, False)]
    assert "| gsm8k_arith | sft | 0 | 50.0 ± 3.5 | 20.0 ± 3.0 | 30.0 | 10.0 | **yes** |" \
        in capsys.readouterr().out
    assert cells.main([str(tmp_path / "empty")]) == 1


def _published_annotations(root: Path) -> dict[str, tuple[str, str]]:
    """Annotations shaped like alpaca_eval's for the study's three models: GPT-4 Turbo gives one
    item to the (longer) model reply and one to the (longer) reference; a tie, an unjudged item
    and an empty reply, which no sample may hold. Returns instruction -> (reference, reply)."""
    replies = {}
    for model in ("alpaca-7b", "falcon-7b-instruct", "gpt4_gamed"):
        rows = [{"instruction": f"Name a colour ({model}).", "output_1": "Red.",
                 "output_2": "Blue, the colour of a clear sky.", "preference": 1.8},
                {"instruction": f"Name a fruit ({model}).",
                 "output_1": "An apple, crisp and sweet.", "output_2": "Pear", "preference": 1.1},
                {"instruction": f"Tie ({model}).", "output_1": "a", "output_2": "b",
                 "preference": 1.5},
                {"instruction": f"Unjudged ({model}).", "output_1": "a", "output_2": "bb",
                 "preference": None},
                {"instruction": f"Empty ({model}).", "output_1": "a", "output_2": " ",
                 "preference": 1.9}]
        path = root / "results" / model / "weighted_alpaca_eval_gpt4_turbo" / "annotations.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(rows))
        replies |= {r["instruction"]: (r["output_1"], r["output_2"]) for r in rows[:2]}
    return replies


def test_judge_agreement_study_measures_each_judge_on_the_same_balanced_sample(
        tmp_path, tiny_model):
    """experiments/alpacaeval_judge_agreement/measure.py: every judge kind sees the same sample
    of GPT-4 Turbo's two verdicts; the pairwise judge's preference is the task's over both
    orders; the length judge follows length; a pointwise score is the reply's own, read from
    the logits of the right positions (checked against a full forward pass)."""
    import torch
    from a2rl_tasks.alpacaeval.sources import instruction_key
    from a2rl_tasks.alpacaeval.task import preference_of

    from a2rl.task import encode_prompt

    study = load_script(REPO / "experiments" / "alpacaeval_judge_agreement" / "measure.py")
    replies = _published_annotations(tmp_path / "alpacaeval")
    reports = {}
    for kind in study.KINDS:
        out = tmp_path / f"{kind}.json"
        study.main(["--data", str(tmp_path / "alpacaeval"), "--judge", str(tiny_model),
                    "--judge-kind", kind, "--per-class", "2", "--out", str(out)])
        reports[kind] = json.loads(out.read_text())
    # GPT-4 Turbo's side of each item, found again under --data by the row's model and item
    side = {(x["model"], instruction_key(x["instruction"])): x["gpt4_preference"] > 1.5
            for x in study.annotated_items(tmp_path / "alpacaeval")}
    samples = [[(r["item"], side[r["model"], r["item"]]) for r in report["rows"]]
               for report in reports.values()]
    assert samples[0] == samples[1] == samples[2]
    assert sorted(w for _, w in samples[0]) == [False, False, True, True]
    by_item = {instruction_key(i): i for i in replies}
    assert {i for i, _ in samples[0]} <= set(by_item)  # no tie, unjudged item or empty reply
    assert not any("instruction" in r for report in reports.values() for r in report["rows"])
    # nor a value copied from the published annotations (the repository keeps no copy of them)
    assert not any(field in r for report in reports.values() for r in report["rows"]
                   for field in study.ANNOTATION_FIELDS)

    length = reports["length"]["summary"]["length"]
    assert length["agreement"]["value"] == 100.0 and length["auc"]["value"] == 1.0
    assert length["length_spearman"] == 1.0
    # length separates GPT-4's verdicts here: no finite fit of what a judge adds to it
    assert reports["pairwise"]["summary"]["pairwise"]["beyond_length"] is None
    rng = random.Random(0)  # a judge that sees what length does not: it adds to length
    rows = [{"gpt4_model_wins": (w := i % 2 == 0), "log_length_ratio": rng.gauss(0, 1),
             "pref": w + rng.gauss(0, 0.7)} for i in range(60)]
    fit = study.beyond_length(rows, "pref")
    assert fit["coef"] > 0 and fit["z"] > 2
    blind = study.beyond_length([r | {"pref": rng.gauss(0, 1)} for r in rows], "pref")
    assert abs(blind["z"]) < abs(fit["z"])

    pairwise = reports["pairwise"]["summary"]["pairwise"]
    for r in reports["pairwise"]["rows"]:
        assert r["local_preference"] == pytest.approx(
            preference_of(r["p_ref_first"], r["p_model_first"]), abs=1e-5)
    assert pairwise["order_consistency"]["n"] == 4 and 0 <= pairwise["mean_p_first"] <= 1

    summary = reports["pointwise"]["summary"]
    assert set(summary) == {"yes_no", "mean_loglik"}
    assert "order_consistency" not in summary["yes_no"]  # order-free: no order to check
    scorer = study.PointwiseScorer(tiny_model)
    for r in reports["pointwise"]["rows"]:
        instruction = by_item[r["item"]]
        for side, reply in zip(("reference", "model"), replies[instruction], strict=True):
            before, after = scorer._texts(instruction, reply)
            head = encode_prompt(scorer.tokenizer, before)
            body = scorer.tokenizer.encode(reply, add_special_tokens=False)
            ids = head + body + scorer.tokenizer.encode(after, add_special_tokens=False)
            with torch.inference_mode():
                logprobs = scorer.model(input_ids=torch.tensor([ids])).logits[0].log_softmax(-1)
            mean = sum(logprobs[len(head) - 1 + j, t] for j, t in enumerate(body)) / len(body)
            yes_no = logprobs[-1, scorer.yes] - logprobs[-1, scorer.no]
            assert r[f"mean_loglik_{side}"] == pytest.approx(float(mean), abs=1e-4)
            assert r[f"yes_no_{side}"] == pytest.approx(float(yes_no), abs=1e-4)
        assert r["yes_no_preference"] == pytest.approx(r["yes_no_model"] - r["yes_no_reference"],
                                                       abs=2e-6)
    # a stopped run: what it judged is summarized as such
    out = tmp_path / "pointwise.json"
    out.with_suffix(".partial.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in reports["pointwise"]["rows"][1:3]))
    study.main(["--data", str(tmp_path / "alpacaeval"), "--judge-kind", "pointwise",
                "--per-class", "2", "--out", str(out), "--from-partial"])
    partial = json.loads(out.read_text())
    assert partial["items_judged"] == 2 and partial["complete"] is False
    assert partial["rows"] == reports["pointwise"]["rows"][1:3]
    assert reports["pointwise"]["complete"] is True
