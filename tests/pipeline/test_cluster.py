"""The ci grid on a real Slurm: the single-node cluster of scripts/slurm_up.sh on localhost.

``snakemake --profile profiles/slurm`` runs the grid with every rule a Slurm job; the test reads
Slurm's own record of the jobs (jobcomp.log, one line per finished job) and the executor
plugin's per-job logs, then compares every record with a run of the same grid through
``profiles/local`` (``a2rl compare``: same ledger fields, same scores). A second test
cancels a cell's job while its agent trains and checks that Snakemake's retry leaves a complete,
consistent run directory. Training is fixed (two rounds of three steps, well within the budget)
so that the records do not depend on the machine's speed.

Needs root and Slurm (scripts/setup_cluster.sh); the cluster is started here when it is not
running (scripts/slurm_up.sh, left running for the next test). Under CI a missing Slurm fails
the test instead of skipping it. About ten minutes on two loaded cores.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_integration import (
    read_json,
    read_jsonl,
    repo_copy_at,
    run,
    tool_env,
)

from a2rl.common.layout import cell_path
from a2rl.config.compose import compose, grid_cells, grid_overrides
from checkout import grid_results

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

REPO = Path(__file__).resolve().parents[2]
# fixed training (two rounds of three steps) and a budget far above what it takes, so that no
# deadline cuts a round or warns on a loaded machine: the records depend on the code alone
FIXED = ["++agent.settings.sft.max_rounds=2", "++agent.settings.sft.steps=3",
         "budget.time_limit_s=900"]
GRID = grid_cells(compose(grid_overrides("ci")))
RESULTS = grid_results("ci", FIXED)  # the cluster override is where, not what: not in the label
CELLS = [cell_path(**cell) for cell in GRID]
# the plugin checks job states with squeue (no accounting database here), every few seconds
SLURM_FLAGS = ["--slurm-status-command", "squeue",
               "--slurm-init-seconds-before-status-checks", "2"]
TIMEOUT_S = 1800


def overrides(*extra: str) -> str:
    return "overrides=" + json.dumps([*FIXED, *extra])


# ------------------------------------------------------------------------------------ slurm


def slurm_env() -> dict[str, str]:
    """The environment pointing Slurm's commands at the cluster of scripts/slurm_up.sh, which
    is started if it is not running."""
    if shutil.which("slurmctld") is None or shutil.which("sbatch") is None:
        if os.environ.get("CI"):
            pytest.fail("Slurm is not installed: .ci/run must run scripts/setup_cluster.sh")
        pytest.skip("needs Slurm: bash scripts/setup_cluster.sh")
    if os.geteuid() != 0:
        pytest.skip("the single-node Slurm runs as root")
    started = subprocess.run(["bash", str(REPO / "scripts" / "slurm_up.sh")],
                             capture_output=True, text=True, timeout=120, check=False)
    assert started.returncode == 0, started.stderr
    conf = re.search(r"SLURM_CONF=(\S+)", started.stdout)[1]
    return {"SLURM_CONF": conf}


@pytest.fixture(scope="module")
def slurm() -> dict[str, str]:
    return slurm_env()


def jobcomp(conf: str, root: Path) -> dict[str, dict[str, str]]:
    """Slurm's record of the finished jobs that ran in ``root`` (JobCompType=jobcomp/filetxt):
    job id -> its fields. A restarted cluster numbers jobs from 1 again; the latest line wins."""
    jobs = {}
    for line in (Path(conf).parent / "jobcomp.log").read_text().splitlines():
        job = dict(re.findall(r"(\w+)=(\S*)", line))
        if job.get("WorkDir") == str(root):
            jobs[job["JobId"]] = job
    return jobs


def slurm_jobs_of(root: Path) -> dict[str, tuple[str, str]]:
    """Slurm job id -> (rule, wildcards) of every job the executor plugin submitted from
    ``root``: its logs are .snakemake/slurm_logs/rule_<rule>/<wildcards>/<jobid>.log."""
    jobs = {}
    for log in (root / ".snakemake" / "slurm_logs").rglob("*.log"):
        parts = log.relative_to(root / ".snakemake" / "slurm_logs").parts
        jobs[log.stem] = (parts[0].removeprefix("rule_"), "/".join(parts[1:-1]))
    return jobs


def rule_jobs(root: Path) -> set[tuple[str, str]]:
    """(rule, wildcards) of every job the workflow ran in ``root``, from the rules' own logs
    (results/logs/<rule>/<wildcards>.log; a cell's job logs its agent's run and the stages
    after it apart), in the plugin's naming of wildcards."""
    jobs = set()
    for log in (root / RESULTS / "logs").rglob("*.log"):
        folder, *rest = log.relative_to(root / RESULTS / "logs").with_suffix("").parts
        rule = "run_cell" if folder in ("run_agent", "finish_run") else folder
        if rule in ("build_leaderboard", "build_report"):  # no wildcards
            jobs.add((rule, ""))
        else:
            jobs.add((rule, "_".join(rest).replace("seed", "")))
    return jobs


def compare_runs(before: Path, after: Path, *only: str) -> str:
    """a2rl compare over two results/ trees; fails the test on a difference."""
    args = [sys.executable, "-m", "a2rl.pipeline.cli", "compare", str(before / RESULTS),
            str(after / RESULTS), *only]
    result = subprocess.run(args, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    return result.stdout


# ---------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def local_grid(tmp_path_factory, slurm_grid) -> Path:
    """The ci grid through profiles/local, from the Slurm run's prepared tasks and model: the
    household games are generated afresh by each preparation and differ in order (a property of
    the task, not of where it runs), so both runs start from the same ones."""
    root = repo_copy_at(tmp_path_factory.mktemp("local") / "repo")
    for prepared in (RESULTS / "prepared", "resources/models"):
        shutil.copytree(slurm_grid / prepared, root / prepared, symlinks=True)
    run([sys.executable, "-m", "snakemake", "--profile", "profiles/local", "--config",
         "grid=ci", overrides()], root, timeout=TIMEOUT_S)
    return root


@pytest.fixture(scope="module")
def slurm_grid(tmp_path_factory, slurm) -> Path:
    """The ci grid through profiles/slurm, on the localhost cluster's partition."""
    root = repo_copy_at(tmp_path_factory.mktemp("slurm") / "repo")
    run([sys.executable, "-m", "snakemake", "--profile", "profiles/slurm", *SLURM_FLAGS,
         "--config", "grid=ci", overrides("cluster=localhost")], root, timeout=TIMEOUT_S,
        env=slurm)
    return root


# ------------------------------------------------------------------------------------- tests


def test_every_rule_ran_as_a_slurm_job(slurm_grid, slurm):
    """Each job of the workflow (one per rule log) was submitted to Slurm, ran in this copy,
    in the cluster config's partition, and Slurm recorded it COMPLETED; none ran locally."""
    submitted = slurm_jobs_of(slurm_grid)
    finished = jobcomp(slurm["SLURM_CONF"], slurm_grid)
    ran = rule_jobs(slurm_grid)
    assert {rule for rule, _ in ran} == {
        "prepare_model", "prepare_task", "measure_baseline", "run_cell", "build_leaderboard",
        "build_report"}
    tasks = len({cell["task"] for cell in GRID})
    assert len(ran) == 1 + 2 * tasks + len(GRID) + 2
    assert set(submitted.values()) == ran
    for job_id, (rule, wildcards) in submitted.items():
        record = finished[job_id]
        assert record["JobState"] == "COMPLETED", (rule, wildcards, record)
        assert record["Partition"] == "a2rl"  # conf/cluster/localhost.yaml
    # a cell's job had the agent's CPUs and memory (conf/grid/ci.yaml: 2 CPUs, 6000 MB) and a
    # time limit of its budget + kill grace + an evaluation + start-up (900+5+300+300 s) and of
    # the final grade, export and summary after it (300+900+900 s)
    cells = [finished[i] for i, (rule, _) in submitted.items() if rule == "run_cell"]
    assert all("cpu=2,mem=6000M" in job["Tres"] for job in cells), cells
    assert all(job["TimeLimit"] == "61" for job in cells), cells


def test_slurm_outputs_equal_a_local_run(slurm_grid, local_grid):
    """Every record of every cell (ledger, run.json, final.json, summary.json, baseline.json)
    is the same field by field, times and run identifiers aside; so is the leaderboard."""
    summary = compare_runs(local_grid, slurm_grid)
    assert "differ" in summary and " 0 differ" in summary, summary
    for cell in CELLS:
        local = read_json(local_grid / RESULTS / "runs" / cell / "final.json")
        remote = read_json(slurm_grid / RESULTS / "runs" / cell / "final.json")
        assert remote["test_score"] == local["test_score"], cell
    local_board = board_without_times(local_grid / RESULTS / "leaderboard.md")
    assert board_without_times(slurm_grid / RESULTS / "leaderboard.md") == local_board


def board_without_times(path: Path) -> list[list[str]]:
    """The leaderboard's tables without their auc columns: the area under the best-so-far curve
    depends on when each submission arrived, which differs between two runs as times do."""
    rows = [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in path.read_text().splitlines() if line.startswith("|")]
    out, keep = [], None
    for row, after in zip(rows, rows[1:] + [[]]):
        if after and set(after[0]) <= set("-:"):  # a table's header, above its separator
            keep = [i for i, name in enumerate(row) if not name.startswith("auc")]
        out.append([row[i] for i in keep])
    assert any(len(r) < len(rows[0]) for r in out[:1]), rows[0]  # the auc columns were there
    return out


def test_cancelled_agent_job_is_rerun_to_a_consistent_run(slurm_grid, local_grid, slurm):
    """Cancel a cell's job while its agent trains (as a pre-emption or a lost node would):
    Snakemake's retry (profiles/slurm: retries) runs the cell again from the start, and its
    run directory is complete and consistent, with the local run's scores. (The finished run
    the first test left is deleted first: a cell's job keeps a finished run.)"""
    cell = "gsm8k_arith/sft/none/seed0"
    run_root = slurm_grid / RESULTS / "runs" / cell
    (run_root / "run.json").unlink()
    env = tool_env(slurm_grid) | slurm
    before = set(slurm_jobs_of(slurm_grid))
    command = [sys.executable, "-m", "snakemake", "--profile", "profiles/slurm", *SLURM_FLAGS,
               "--config", "grid=ci", overrides("cluster=localhost"),
               "--forcerun", f"{RESULTS}/runs/{cell}/summary.json",
               "--", f"{RESULTS}/runs/{cell}/summary.json"]
    started = time.time()
    with subprocess.Popen(command, cwd=slurm_grid, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True) as snakemake:
        cancelled = cancel_when_training(slurm_grid, before, run_root, env, started)
        output, _ = snakemake.communicate(timeout=TIMEOUT_S)
    assert snakemake.returncode == 0, output[-6000:]
    assert "Trying to restart job" in output, output[-3000:]

    finished = jobcomp(slurm["SLURM_CONF"], slurm_grid)
    assert finished[cancelled]["JobState"] == "CANCELLED"
    agents = [i for i, (rule, wc) in slurm_jobs_of(slurm_grid).items()
              if rule == "run_cell" and i not in before]
    assert len(agents) == 2 and finished[max(agents, key=int)]["JobState"] == "COMPLETED"

    # one run, from one start: the cancelled attempt left nothing behind
    events = read_jsonl(run_root / "events.jsonl")
    assert [e["kind"] for e in events].count("agent_start") == 1
    ledger = read_jsonl(run_root / "ledger.jsonl")
    assert [e["submission_id"] for e in ledger] == list(range(1, len(ledger) + 1))
    assert read_json(run_root / "run.json")["submissions"] == len(ledger)
    final = read_json(run_root / "final.json")
    assert final["selected_submission"] in {e["submission_id"] for e in ledger}
    assert read_json(run_root / "summary.json")["final_score"] == final["test_score"]
    compare_runs(local_grid, slurm_grid, "--only", cell)


def cancel_when_training(root: Path, before: set[str], run_root: Path, env,
                         started: float) -> str:
    """Wait until the cell's new run_cell job runs and its agent (in the run directory the
    job made afresh, after ``started``) has started training, then cancel the job; returns its
    Slurm job id."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        agents = [i for i, (rule, _) in slurm_jobs_of(root).items()
                  if rule == "run_cell" and i not in before]
        log = run_root / "agent.log"
        fresh = log.is_file() and log.stat().st_mtime > started
        if agents and fresh and "round 1" in log.read_text(errors="replace"):
            subprocess.run(["scancel", agents[0]], env=env, check=True)
            return agents[0]
        time.sleep(1)
    pytest.fail("the cell's job never started training")
