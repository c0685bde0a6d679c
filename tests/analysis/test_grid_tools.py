"""The tools over a finished grid, through the ``a2rl`` command: ``a2rl timeline`` on a real
Snakemake log, ``a2rl compare`` on two results trees (the no-change check of a refactor)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from a2rl.analysis import grid_timeline
from a2rl.pipeline.cli import main as a2rl


def test_timeline_reads_a_real_snakemake_log(tmp_path, capsys):
    """A two-rule workflow run by Snakemake: the command finds both jobs in the log Snakemake
    kept, their wildcards, an order that respects the dependency, and the seconds they slept."""
    (tmp_path / "Snakefile").write_text(
        'rule all:\n    input: "b_x.txt"\n\n'
        'rule a:\n    output: "a_{name}.txt"\n    shell: "sleep 2 && touch {output}"\n\n'
        'rule b:\n    input: "a_{name}.txt"\n    output: "b_{name}.txt"\n'
        '    shell: "sleep 1 && touch {output}"\n')
    done = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    log = grid_timeline.newest_log(tmp_path)
    out = tmp_path / "timeline.json"
    assert a2rl(["timeline", str(log), "--out", str(out)]) == 0
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
    partial = grid_timeline.timeline(text[:text.index("Finished jobid", text.index("rule b:"))])
    assert [j["rule"] for j in partial["jobs"]] == ["a"]
    assert [(j["rule"], j["wildcards"]) for j in partial["unfinished"]] == [("b", "name=x")]
    # a dry run's log has no job that ran: a clear error, exit 2
    dry = tmp_path / "dry.log"
    dry.write_text("Building DAG of jobs...\nJob stats:\njob    count\n")
    capsys.readouterr()
    assert a2rl(["timeline", str(dry)]) == 2
    assert "a2rl timeline: no job both started and finished" in capsys.readouterr().err


def write_cell(root: Path, score: float, started: str, commit: str) -> Path:
    """A cell's run records as the pipeline files them, under a results tree at ``root``."""
    run = root / "runs" / "gsm8k_arith" / "sft" / "none" / "seed0"
    run.mkdir(parents=True)
    ledger = [{"submission": 1, "score": score, "time": started, "artifact_hash": commit,
               "path": f"{root}/runs/gsm8k_arith/sft/none/seed0/workspace/output/ckpt-1"}]
    (run / "ledger.jsonl").write_text("".join(json.dumps(row) + "\n" for row in ledger))
    (run / "final.json").write_text(json.dumps({"score": score, "elapsed_s": 3.5,
                                                "code_commit": commit}))
    return run


def test_compare_ignores_times_and_places_but_names_a_changed_score(tmp_path, capsys):
    # two trees in two places, run at other times by other commits: equal
    write_cell(tmp_path / "a" / "results" / "ci", 40.0, "2026-12-04T10:00:00", "abc1234")
    write_cell(tmp_path / "b" / "results" / "ci", 40.0, "2026-12-04T11:00:00", "def5678")
    before, after = tmp_path / "a" / "results" / "ci", tmp_path / "b" / "results" / "ci"
    assert a2rl(["compare", str(before), str(after)]) == 0
    assert "2 files" in capsys.readouterr().out
    # a changed score: exit 1, the file and field named with both values
    (after / "runs/gsm8k_arith/sft/none/seed0/final.json").write_text(
        json.dumps({"score": 41.0, "elapsed_s": 3.5, "code_commit": "def5678"}))
    assert a2rl(["compare", str(before), str(after)]) == 1
    out = capsys.readouterr().out
    assert "final.json: [0].score: 40.0 -> 41.0" in out and "ledger.jsonl" not in out
    assert "3 fields equal, 1 differ" in out  # the ledger's path is compared inside its tree
    # --only selects cells; nothing to compare is an error, never "no difference"
    assert a2rl(["compare", str(before), str(after), "--only", "household"]) == 2
    assert "no run records" in capsys.readouterr().err
    assert a2rl(["compare", str(tmp_path / "missing"), str(after)]) == 2
    assert "is not a folder" in capsys.readouterr().err
