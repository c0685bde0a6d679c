"""The Snakemake workflow plans every cell of every grid and lints clean. Snakemake runs in a
scratch working directory so the repository's results/ and .snakemake/ are never touched."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from a2rl.common.layout import Layout
from a2rl.config.compose import compose, grid_cells, grid_overrides
from checkout import REPO, child_env, grid_results

PLANNED_OUTPUTS = re.compile(r"^ +output: (.*)$", re.MULTILINE)
CELL_JOB = re.compile(
    r"^rule run_cell:\n(?:^ +.*\n)*?^ +output: results/[^/\s]+/runs/(?P<task>[^/\s]+)"
    r"/(?P<agent>[^/\s]+)"
    r"/(?P<driver>[^/\s]+)/seed(?P<seed>\d+)/final\.json", re.MULTILINE)


def snakemake(*args: str, workdir: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
         "--directory", str(workdir), *args],
        capture_output=True, text=True, env=child_env(), timeout=timeout, check=False)


def cell_key(cell: dict) -> tuple:
    return cell["task"], cell["agent"], cell["driver"], cell["seed"]


def planned_cells(output: str) -> list[dict]:
    return [{**m.groupdict(), "seed": int(m["seed"])} for m in CELL_JOB.finditer(output)]


def cell_outputs(cell: dict, grid: str) -> set[str]:
    """What the workflow declares for one cell of ``grid``, relative to its working directory
    (run.json too is written, but not declared: a2rl.pipeline.cell)."""
    layout = Layout(results=grid_results(grid), resources=Path("resources"))
    run = layout.run(**cell)
    paths = (run.final, run.summary_json, run.summary_md, run.integrity,
             layout.selected_model(**cell))
    return {str(path) for path in paths}


@pytest.mark.parametrize("grid", ["ci", "quick", "smoke", "alfworld_cpu", "paper"])
def test_dry_run_plans_every_cell(grid, tmp_path):
    result = snakemake("-n", "--config", f"grid={grid}", workdir=tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    expected = grid_cells(compose(grid_overrides(grid)))
    planned = planned_cells(output)
    assert sorted(map(cell_key, planned)) == sorted(map(cell_key, expected))
    # every cell's outputs are planned, in one job per cell (run_cell)
    outputs = {path for line in PLANNED_OUTPUTS.findall(output) for path in line.split(", ")}
    for cell in expected:
        assert cell_outputs(cell, grid) <= outputs, cell
    assert output.count("rule run_cell:") == len(expected)
    assert "run.json" not in " ".join(outputs)  # kept when the job fails (a2rl.pipeline.cell)
    assert "rule build_leaderboard:" in output
    assert not (tmp_path / "results").exists()  # planning writes nothing
    if grid == "paper":  # configured-but-unimplemented tasks are planned like the others
        tasks = {c["task"] for c in planned}
        assert {"humaneval", "alpacaeval", "alfworld", "webshop", "deepsearchqa"} <= tasks
        # 6 tasks x (6 LLM agents x 6 drivers + noop and sft with driver none) x 3 seeds,
        # sft_grpo on ALFWorld, dpo on GSM8K, HumanEval and AlpacaEval
        assert len(planned) == 6 * (6 * 6 + 2) * 3 + 3 + 3 * 3


def planned_jobs(output: str) -> list[tuple[str, str | None, int]]:
    """Each planned job's rule, task wildcard (None without one) and threads (a dry run prints
    ``threads:`` above 1)."""
    jobs = []
    for rule, body in re.findall(r"^rule (\w+):\n((?:^ +.*\n)*)", output, re.MULTILINE):
        threads = re.search(r"^ +threads: (\d+)$", body, re.MULTILINE)
        task = re.search(r"wildcards: (?:.*, )?task=([^,\s]+)", body)
        jobs.append((rule, task[1] if task else None, int(threads[1]) if threads else 1))
    return jobs


def test_jobs_declare_the_torch_threads_they_run(tmp_path):
    """Run here, a baseline evaluation declares the torch threads its task evaluates with (0:
    every core), so that Snakemake never runs two jobs' torch threads on the same cores (each
    stalls the other: benchmarks/threads.py); a cell takes every core; preparing a task's
    data does not compute with torch and takes one."""
    result = snakemake("-n", "--cores", "3", "--config", "grid=ci", workdir=tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    jobs = planned_jobs(output)
    threads: dict[str, set[int]] = {}
    for rule, _, n in jobs:
        threads.setdefault(rule, set()).add(n)
    assert threads["run_cell"] == {3} and threads["prepare_task"] == {1}, threads
    baselines = {task: n for rule, task, n in jobs if rule == "measure_baseline"}
    assert baselines.keys() == {"gsm8k_arith", "household", "alpacaeval_local"}
    for task, declared in baselines.items():
        torch_threads = compose([*grid_overrides("ci"), f"task={task}"]).task.inference
        assert declared == (torch_threads.torch_threads or 3), task


def test_extra_overrides_and_bad_grid(tmp_path):
    ok = snakemake("-n", "--config", "grid=ci", 'overrides=["task.inference.batch_size=4"]',
                   workdir=tmp_path)
    assert ok.returncode == 0, ok.stderr
    bad = snakemake("-n", "--config", "grid=no_such_grid", workdir=tmp_path)
    assert bad.returncode != 0
    assert "no_such_grid" in bad.stdout + bad.stderr
    axis = snakemake("-n", "--config", "grid=ci", "overrides=seed=4", workdir=tmp_path)
    assert axis.returncode != 0 and "grid decides" in axis.stdout + axis.stderr
    # a reference agent's settings are checked while planning, before any job runs
    setting = snakemake("-n", "--config", "grid=ci", 'overrides=["++agent.settings.sft.stepz=3"]',
                        workdir=tmp_path)
    assert setting.returncode != 0 and "stepz" in setting.stdout + setting.stderr


def test_lint_is_clean(tmp_path):
    result = snakemake("--lint", workdir=tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "Lints for" not in output, output


def test_unimplemented_task_fails_when_run(tmp_path):
    """The task's job fails. Before any job, the grid (one run, to spare the test suite a second
    one) files its planned cells in grid.json and says where to watch it."""
    results = grid_results("paper", ["task.implemented=false"])
    result = snakemake("--cores", "1", "--config", "grid=paper",
                       'overrides=["task.implemented=false"]', "--",
                       f"{results}/prepared/webshop/prepared.json", workdir=tmp_path)
    assert result.returncode != 0
    log = tmp_path / results / "logs" / "prepare_task" / "webshop.log"
    assert "TaskNotImplemented" in log.read_text()
    assert "not implemented yet" in result.stdout + result.stderr
    plan = json.loads((tmp_path / results / "grid.json").read_text())
    cfg = compose(grid_overrides("paper", ["task.implemented=false"]))
    assert plan["label"] == results.name and plan["cells"] == grid_cells(cfg)
    assert f"a2rl status {results} --watch" in result.stderr
    assert f"a2rl view {results}" in result.stderr


@pytest.mark.integration
def test_only_infra_failures_are_retried(tmp_path):
    """A run whose harness fails (here: an LLM agent without a driver, a missing key) is run
    again infra_retries times; the last attempt keeps its infra_failed run.json and finishes
    the cell with it. (The noop agent made an LLM agent by overrides; prepare and baseline run
    for real on the tiny model.)"""
    overrides = ["agent.kind=llm", "agent.network=llm", "+agent.stack=codex",
                 "+agent.version=0.0.0", "agent.command=[]"]
    results = grid_results("ci", overrides)
    cell = f"{results}/runs/gsm8k_arith/noop/none/seed0/run.json"
    # the cell's job runs the stages after the run too (final grade, export, summary)
    result = snakemake("--cores", "1", "--config", "grid=ci", "infra_retries=1",
                       f"overrides={json.dumps(overrides)}", "--",
                       cell.replace("run.json", "summary.json"),
                       workdir=tmp_path, timeout=900)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    record = json.loads((tmp_path / cell).read_text())
    assert record["status"] == "infra_failed", record
    assert record["reason"].startswith("missing_key: DriverKeyMissing")
    assert output.count("Trying to restart job") == 1, output[-4000:]
    log = (tmp_path / results / "logs/run_agent/gsm8k_arith/noop/none/seed0.log").read_text()
    assert log.count("InfraFailed") >= 1


@pytest.mark.integration
def test_a_failed_finish_keeps_the_finished_agent_run(tmp_path):
    """The cell's job dies after its agent's run finished (killed as soon as run.json is
    written, as a lost node or a crash in the final grade would end it): Snakemake deletes the
    job's declared outputs and retries it, and the retry keeps the run (one agent start, the
    same run.json) and only runs the stages after it."""
    run = tmp_path / grid_results("ci") / "runs/gsm8k_arith/noop/none/seed0"
    command = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
               "--directory", str(tmp_path), "--cores", "1", "--config", "grid=ci",
               "infra_retries=1", "--", str((run / "summary.json").relative_to(tmp_path))]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=child_env()) as job:
        first = wait_for(run / "run.json", job, timeout=900)
        killed = kill_cell_job(job.pid)
        output, _ = job.communicate(timeout=900)
    assert killed, "no run_cell process to kill"
    assert job.returncode == 0, output[-4000:]
    assert output.count("Trying to restart job") == 1, output[-4000:]
    assert "kept the finished agent run" in output, output[-4000:]
    assert (run / "run.json").read_text() == first
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    assert [e["kind"] for e in events].count("agent_start") == 1
    summary = json.loads((run / "summary.json").read_text())
    assert summary["final_score"] == json.loads((run / "final.json").read_text())["test_score"]


def wait_for(path: Path, job: subprocess.Popen, timeout: float) -> str:
    """The text of ``path`` once it exists (polled fast: the job goes on to its final grade)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return path.read_text()
        assert job.poll() is None, job.stdout.read()[-4000:]
        time.sleep(0.02)
    pytest.fail(f"{path} never appeared")


def kill_cell_job(snakemake_pid: int) -> bool:
    """SIGKILL the run_cell script process Snakemake started; False when there is none."""
    for child in psutil.Process(snakemake_pid).children(recursive=True):
        try:
            if any("run_cell" in part for part in child.cmdline()):
                child.kill()
                return True
        except psutil.NoSuchProcess:
            continue
    return False
