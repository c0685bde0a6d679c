"""The benchmark scripts end to end: scripts/bench_core.py on the tiny model (both phases run and
report their ratios), scripts/bench_codeexec.py (the sandbox against no sandbox, the
two-process runner against the single-interpreter one) and scripts/bench_planning.py (planning
the ci grid, this checkout against a commit)."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest

from checkout import REPO

SCRIPT = REPO / "scripts" / "bench_core.py"


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
    bench = load_script(SCRIPT.with_name("bench_codeexec.py"))
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


def test_probe_grpo_scores_start_and_each_round_paired(tmp_path):
    """scripts/probe_grpo.py on the tiny model and the ci grid's household games (prepared
    under its work folder, never over results/): the start and every round are scored on the
    same sealed games, and each round's gain is the paired difference from the start."""
    probe = load_script(SCRIPT.with_name("probe_grpo.py"))
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


def test_bench_planning_times_the_ci_plan_against_a_commit(tmp_path):
    """scripts/bench_planning.py plans the ci grid with HEAD's workflow and the work tree's,
    cold then cached: one run_cell job per cell, CPU seconds measured."""
    from a2rl.config.compose import compose, grid_cells, grid_overrides

    bench = load_script(SCRIPT.with_name("bench_planning.py"))
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
    check = load_script(REPO / "scripts" / "gpu_check.py")
    assert check.main(["--out", str(tmp_path / "g.json")]) == check.NO_GPU
    assert "no CUDA GPU" in capsys.readouterr().err
    assert not (tmp_path / "g.json").exists()


def test_bench_threads_runs_jobs_alone_and_side_by_side(tmp_path):
    """scripts/bench_threads.py on the tiny model and two made household games: one job alone,
    two at once with the given threads and two at once with one thread each; every job
    generates the same batch (greedy, so the same tokens) and the ratios are reported."""
    from a2rl_tasks.alfworld.games import Difficulty, make_games

    make_games(tmp_path / "games", "bt", 2, 5, Difficulty(rooms=(2, 3), objects=(4, 5)),
               ["put_on"])
    bench = load_script(REPO / "scripts" / "bench_threads.py")
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


def test_grid_timeline_reads_a_real_snakemake_log(tmp_path, capsys):
    """A two-rule workflow run by Snakemake: the script finds both jobs in the log Snakemake
    kept, their wildcards, an order that respects the dependency, and the seconds they slept."""
    import subprocess

    (tmp_path / "Snakefile").write_text(
        'rule all:\n    input: "b_x.txt"\n\n'
        'rule a:\n    output: "a_{name}.txt"\n    shell: "sleep 2 && touch {output}"\n\n'
        'rule b:\n    input: "a_{name}.txt"\n    output: "b_{name}.txt"\n'
        '    shell: "sleep 1 && touch {output}"\n')
    done = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    timeline = load_script(REPO / "scripts" / "grid_timeline.py")
    log = timeline.newest_log(tmp_path)
    out = tmp_path / "timeline.json"
    assert timeline.main([str(log), "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    jobs = {j["rule"]: j for j in report["jobs"]}
    assert set(jobs) == {"a", "b", "all"}
    assert report["unfinished"] == [] and report["finished_without_start"] == []
    assert jobs["a"]["wildcards"] == "name=x" and jobs["a"]["start_s"] == 0
    assert jobs["a"]["end_s"] <= jobs["b"]["start_s"]
    assert 2 <= jobs["a"]["seconds"] <= 4 and 1 <= jobs["b"]["seconds"] <= 3
    assert report["wall_s"] >= 3 and report["seconds_per_rule"]["a"] == jobs["a"]["seconds"]
    # a log cut while b runs (a grid still going, or killed): b is listed as unfinished
    text = log.read_text()
    partial = timeline.timeline(text[:text.index("Finished jobid", text.index("rule b:"))])
    assert [j["rule"] for j in partial["jobs"]] == ["a"]
    assert [(j["rule"], j["wildcards"]) for j in partial["unfinished"]] == [("b", "name=x")]
    # a dry run's log has no job that ran: a clear error, exit 2
    dry = tmp_path / "dry.log"
    dry.write_text("Building DAG of jobs...\nJob stats:\njob    count\n")
    assert timeline.main([str(dry)]) == 2
    assert "no job both started and finished" in capsys.readouterr().err


def test_bench_peak_compares_the_prompt_pass_with_bare_matmuls(tmp_path):
    """Both precisions report the matmul rate on the model's shapes, the prompt pass's rate and
    the share; the prompt pass's FLOPs are counted from the config as the docstring says."""
    from types import SimpleNamespace

    bench = load_script(REPO / "scripts" / "bench_peak.py")
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
