"""End to end on the tiny model, the way a user runs the harness: Snakemake and DVC run the ci
grid, ``a2rl run`` runs one cell, and the budget ends an agent that would run forever.

Everything runs in one scratch copy of the repository (its tracked files and the untracked ones
git does not ignore) that is its own git repository, so the repository's results/, resources/
and .snakemake/ are never touched. The copy is shared by the module's tests (Snakemake first,
then DVC on the same tree, then single cells), but each test checks only what its own tool
wrote, and each still passes when run alone: the tools redo whatever is missing.

Whole file: about two to three minutes on two CPU cores.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

from a2rl.config.compose import compose, grid_cells
from checkout import FULL_DATA, REPO, child_env, grid_results

pytestmark = pytest.mark.integration

TASK = "gsm8k_arith"
AGENTS = ("noop", "sft")
CI_TEST_SIZE = 16  # conf/grid_task/ci_gsm8k_arith.yaml: task.params.test_size
CI_HOUSEHOLD_GAMES = 4  # conf/grid_task/ci_household.yaml: task.params.test_games
CI_ALPACAEVAL_ITEMS = 8  # conf/grid_task/ci_alpacaeval_local.yaml: task.params.test_size
WORKSPACE_ENTRIES = {"description.md", "data", "base_model", "code", "output", "scores.json"}
TIMEOUT_S = 600
# the whole ci grid (three tasks, six cells, two at a time on 2 cores) took over 10 minutes at
# a load average of 8; the limit only catches a hang
GRID_TIMEOUT_S = 1800
CI_RESULTS = grid_results("ci")  # where the ci grid (and `a2rl run grid=ci`) files its runs


# ------------------------------------------------------------------------------------ helpers


def scratch_copy(dest: Path) -> Path:
    """Copy what a clone plus the working tree's new files would hold into ``dest``."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO,
                            capture_output=True, check=True).stdout
    for name in filter(None, listed.split(b"\0")):
        src = REPO / os.fsdecode(name)
        if src.is_file():  # a tracked file deleted in the working tree is listed too
            target = dest / os.fsdecode(name)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
    return dest


def tool_env(root: Path) -> dict[str, str]:
    """The environment of every command: offline, this checkout's code, the copy's conf/."""
    return child_env(A2RL_CONF=str(root / "conf"))


def logs_of(root: Path, limit: int = 3000) -> str:
    """The tail of every rule / stage log, for failure messages."""
    parts = []
    for log in sorted(root.glob("results/*/logs/**/*.log")):
        parts.append(f"--- {log.relative_to(root)}\n{log.read_text(errors='replace')[-limit:]}")
    return "\n".join(parts)


def run(cmd: list[str], root: Path, timeout: float = TIMEOUT_S,
        env: dict[str, str] | None = None) -> str:
    """Run ``cmd`` in ``root`` (with ``env`` added to tool_env); returns stdout + stderr, fails
    the test with them (and the stage logs) when it exits non-zero."""
    result = subprocess.run(cmd, cwd=root, env=tool_env(root) | (env or {}),
                            capture_output=True, text=True, timeout=timeout, check=False)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"{' '.join(cmd)} exited {result.returncode}\n" \
                                   f"{output[-6000:]}\n{logs_of(root)}"
    return output


def a2rl(*args: str) -> list[str]:
    """The ``a2rl`` console script of this interpreter (``python -m a2rl.pipeline.cli`` without
    one)."""
    script = Path(sys.executable).parent / "a2rl"
    if script.exists():
        return [str(script), *args]
    return [sys.executable, "-m", "a2rl.pipeline.cli", *args]


def read_json(path: Path):
    return json.loads(path.read_text())


def read_jsonl(path: Path) -> list[dict]:
    """Every line must be a JSON object: a torn or garbled line is a failure here."""
    lines = path.read_text().splitlines()
    assert lines, f"{path} is empty"
    records = [json.loads(line) for line in lines]
    assert all(isinstance(r, dict) for r in records), path
    return records


def run_dir(root: Path, agent: str, seed: int = 0) -> Path:
    return root / CI_RESULTS / "runs" / TASK / agent / "none" / f"seed{seed}"


def baseline_of(root: Path) -> float:
    return read_json(root / CI_RESULTS / "baseline" / TASK / "baseline.json")["test"]["score"]


def best_of(ledger: list[dict]) -> dict:
    """The valid entry with the highest score, the earliest on ties (as the grader picks)."""
    best = None
    for entry in ledger:
        if entry["valid"] and (best is None or entry["score"] > best["score"]):
            best = entry
    assert best is not None, "no valid submission in the ledger"
    return best


def is_read_only(path: Path) -> bool:
    return stat.S_IMODE(path.stat().st_mode) & 0o222 == 0


def survivors(marker: str) -> list[list[str]]:
    """Command lines of live (non-zombie) processes that carry ``marker``."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmdline = proc.info["cmdline"] or []
        if proc.info["status"] != psutil.STATUS_ZOMBIE and marker in " ".join(cmdline):
            found.append(cmdline)
    return found


# ------------------------------------------------------------------------------------ fixtures


GIT = ["git", "-c", "user.name=a2rl tests", "-c", "user.email=tests@a2rl.invalid",
       "-c", "commit.gpgsign=false"]


def repo_copy_at(dest: Path) -> Path:
    """A scratch copy of the repository at ``dest`` that is its own git repository (DVC needs
    one)."""
    if subprocess.run(["git", "rev-parse", "--git-dir"], cwd=REPO, capture_output=True,
                      check=False).returncode != 0:
        pytest.skip("needs a git checkout to know which files belong to the repository")
    root = scratch_copy(dest)
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "scratch copy"]):
        subprocess.run([*GIT, *args], cwd=root, capture_output=True, check=True)
    return root


@pytest.fixture(scope="module")
def repo_copy(tmp_path_factory) -> Path:
    return repo_copy_at(tmp_path_factory.mktemp("a2rl") / "repo")


@pytest.fixture(scope="module")
def ci_grid(repo_copy) -> Path:
    """The copy after ``snakemake --cores 2 --config grid=ci``."""
    run([sys.executable, "-m", "snakemake", "--cores", "2", "--config", "grid=ci"], repo_copy,
        GRID_TIMEOUT_S)
    return repo_copy


# ------------------------------------------------------------------------- snakemake, grid=ci


@pytest.mark.parametrize("agent", AGENTS)
def test_snakemake_ci_grid_records(ci_grid, agent):
    """ledger.jsonl, scores.json, final.json, run.json, events and the summary agree."""
    run_root = run_dir(ci_grid, agent)
    baseline = baseline_of(ci_grid)

    ledger_path = run_root / "ledger.jsonl"
    ledger = read_jsonl(ledger_path) if ledger_path.exists() else []
    assert [e["submission_id"] for e in ledger] == list(range(1, len(ledger) + 1))
    for entry in ledger:  # the reference agents submit only valid models
        assert entry["valid"] is True and entry["error"] is None, entry
        assert entry["status_code"] == 200 and entry["split"] == "test", entry
        assert len(entry["artifact_hash"]) == 64, entry
        assert 0.0 <= entry["score"] <= 100.0 and entry["n"] == CI_TEST_SIZE, entry
        assert entry["baseline"] == baseline, entry

    run_json = read_json(run_root / "run.json")
    assert run_json["agent"] == agent and run_json["sandbox"] == "bwrap"
    assert run_json["submissions"] == len(ledger)
    assert run_json["time_limit_s"] == 120
    if agent == "noop":
        assert run_json["status"] == "completed" and run_json["exit_code"] == 0
        assert len(ledger) == 1
        assert ledger[0]["equals_base"] is True and ledger[0]["cached"] is True
    else:
        assert ledger, f"sft made no submission within the ci budget: {run_json}"
        assert run_json["status"] in ("completed", "budget_exhausted")
        # every checkpoint is a trained model, not a copy of the base
        assert all(e["equals_base"] is False for e in ledger)
    best = best_of(ledger) if ledger else None

    scores_json = run_root / "workspace" / "scores.json"
    mirror = read_json(scores_json)
    assert is_read_only(scores_json)
    assert mirror["best"] == (best["score"] if best else None)
    assert mirror["best_submission_id"] == (best["submission_id"] if best else None)
    assert mirror["baseline"] == baseline
    assert [s["submission_id"] for s in mirror["submissions"]] == \
        [e["submission_id"] for e in ledger]
    assert [s["score"] for s in mirror["submissions"]] == [e["score"] for e in ledger]

    final = read_json(run_root / "final.json")
    assert final["agent"] == agent and final["feedback"] == "test"
    assert final["rescored"] is False and final["baseline"] == baseline
    if best is not None:
        assert final["no_valid_submission"] is False
        assert final["selected_submission"] == best["submission_id"]
        assert final["artifact_hash"] == best["artifact_hash"]
        assert final["test_score"] == best["score"]  # test feedback: the ledger's score is final
        assert final["n"] == CI_TEST_SIZE
    else:
        assert final["no_valid_submission"] is True and final["selected_submission"] is None
        assert final["test_score"] == baseline
    assert final["improvement"] == pytest.approx(round(final["test_score"] - baseline, 4))
    if agent == "noop":
        assert final["improvement"] == 0 and final["test_score"] == baseline

    events = read_jsonl(run_root / "events.jsonl")
    kinds = [e["kind"] for e in events]
    assert kinds.index("agent_start") < kinds.index("agent_exit")
    assert kinds.count("submission") == len(ledger)
    assert [e["submission_id"] for e in events if e["kind"] == "submission"] == \
        [e["submission_id"] for e in ledger]

    summary = read_json(run_root / "summary.json")
    assert (summary["task"], summary["agent"], summary["seed"]) == (TASK, agent, 0)
    assert summary["status"] == run_json["status"]
    assert summary["final_score"] == final["test_score"]
    assert summary["baseline"] == baseline
    assert summary["submissions"]["total"] == len(ledger)
    assert f"· {agent} ·" in (run_root / "summary.md").read_text()


@pytest.mark.parametrize("agent", AGENTS)
def test_snakemake_ci_grid_household_cell(ci_grid, agent):
    """The L3 cell of the ci grid: sealed games outside the workspace, train games and expert
    trajectories inside it, every submission scored on all the test games."""
    run_root = ci_grid / CI_RESULTS / "runs" / "household" / agent / "none" / "seed0"
    sealed = ci_grid / CI_RESULTS / "prepared" / "household" / "sealed"
    assert len(list(sealed.rglob("*.z8"))) == CI_HOUSEHOLD_GAMES
    workspace = run_root / "workspace"
    assert (workspace / "data" / "train.jsonl").is_file()
    games = [p.name for p in (workspace / "data" / "games").iterdir()]
    assert games and not [name for name in games if name.startswith("test")]
    ledger = read_jsonl(run_root / "ledger.jsonl")
    assert ledger and all(e["valid"] and e["n"] == CI_HOUSEHOLD_GAMES for e in ledger)
    final = read_json(run_root / "final.json")
    assert final["n"] == CI_HOUSEHOLD_GAMES and 0 <= final["test_score"] <= 100
    evaluated = {e["submission_id"]: e for e in ledger if not e["cached"]}
    for sid, entry in evaluated.items():  # per-game results of each evaluated submission
        details = read_json(run_root / "evals" / f"{sid}.json")
        assert len(details["per_item"]) == CI_HOUSEHOLD_GAMES
        assert 100 * sum(details["per_item"]) / CI_HOUSEHOLD_GAMES == entry["score"]
        assert all("goal_type" in r and "actions" in r for r in details["records"])
    if final["selected_submission"] in evaluated:  # the goal-type breakdown reaches final.json
        assert any(k.startswith("success_") for k in final["breakdown"])
    if agent == "sft":
        assert all(e["equals_base"] is False for e in ledger)
        assert evaluated


@pytest.mark.parametrize("agent", AGENTS)
def test_snakemake_ci_grid_alpacaeval_cell(ci_grid, agent):
    """The L2 cell of the ci grid (the tiny model judging itself): references only for the
    training instructions, each evaluated submission's replies and both judge verdicts kept,
    the judge's usage in the ledger and run.json."""
    run_root = ci_grid / CI_RESULTS / "runs" / "alpacaeval_local" / agent / "none" / "seed0"
    sealed = read_jsonl(ci_grid / CI_RESULTS / "prepared" / "alpacaeval_local" / "sealed" /
                        "test.jsonl")
    assert len(sealed) == CI_ALPACAEVAL_ITEMS
    train = {r["instruction"] for r in read_jsonl(run_root / "workspace" / "data" /
                                                  "train.jsonl")}
    assert train and not train & {x["instruction"] for x in sealed}
    ledger = read_jsonl(run_root / "ledger.jsonl")
    assert ledger and all(e["valid"] and e["n"] == CI_ALPACAEVAL_ITEMS for e in ledger)
    for entry in (e for e in ledger if not e["cached"]):
        details = read_json(run_root / "evals" / f"{entry['submission_id']}.json")
        assert all({"output", "p_ref_first", "p_model_first", "preference"} <= set(r)
                   for r in details["records"])
        usage = entry["grading_usage"]
        assert usage["calls"] + usage["cache_hits"] == 2 * CI_ALPACAEVAL_ITEMS - sum(
            2 * r["empty"] for r in details["records"])
    if agent == "sft":
        assert read_json(run_root / "run.json")["grading_usage"]["calls"] >= 1


@pytest.mark.parametrize("agent", AGENTS)
def test_snakemake_ci_grid_workspace(ci_grid, agent):
    """The paper's workspace layout, read-only where it should be, without the test split."""
    run_root = run_dir(ci_grid, agent)
    workspace = run_root / "workspace"
    assert {p.name for p in workspace.iterdir()} == WORKSPACE_ENTRIES
    assert (workspace / "data" / "train.jsonl").is_file()
    assert (workspace / "base_model" / "config.json").is_file()
    for path in (workspace / "data", workspace / "base_model", workspace / "description.md"):
        assert is_read_only(path), path
    assert "a2rl submit" in (workspace / "description.md").read_text()
    if agent == "sft":
        assert "SFTTrainer" in (workspace / "code" / "train.py").read_text()
        if (run_root / "ledger.jsonl").exists():
            assert (workspace / "output" / "ckpt-1" / "config.json").is_file()

    sealed = ci_grid / CI_RESULTS / "prepared" / TASK / "sealed" / "test.jsonl"
    questions = [item["question"].encode() for item in read_jsonl(sealed)]
    assert len(questions) == CI_TEST_SIZE
    # everything the sandbox mounts from the run directory: the workspace and the tools
    visible = [p for area in (workspace, run_root / "tools") for p in area.rglob("*")
               if p.is_file() and not p.is_symlink()]
    assert visible
    for path in visible:
        assert path.name != "test.jsonl" and "sealed" not in path.parts, path
        content = path.read_bytes()
        leaked = [q for q in questions if q in content]
        assert not leaked, f"{path} holds test questions, e.g. {leaked[0]!r}"


def test_snakemake_ci_grid_leaderboard(ci_grid):
    results = ci_grid / CI_RESULTS
    with (results / "leaderboard.csv").open() as fh:
        table = list(csv.DictReader(fh))
    # the ci grid's other tasks, the household games and AlpacaEval, are on the board too
    assert {(r["task"], r["level"], r["agent"]) for r in table if r["task"] != TASK} == \
        {(task, level, agent) for task, level in (("household", "L3"), ("alpacaeval_local", "L2"))
         for agent in AGENTS}
    rows = {row["agent"]: row for row in table if row["task"] == TASK}
    assert set(AGENTS) <= set(rows)
    for agent in AGENTS:
        row = rows[agent]
        assert row["task"] == TASK and row["driver"] == "none" and int(row["n_seeds"]) >= 1
        if int(row["n_seeds"]) == 1:
            summary = read_json(run_dir(ci_grid, agent) / "summary.json")
            assert float(row["final_mean"]) == pytest.approx(summary["final_score"], abs=1e-4)
            assert float(row["baseline"]) == pytest.approx(baseline_of(ci_grid), abs=1e-4)
    metrics = read_json(results / "leaderboard.json")
    assert set(AGENTS) <= set(metrics[TASK])
    assert all(f"| {agent} |" in (results / "leaderboard.md").read_text() for agent in AGENTS)
    assert {row["grid"] for row in table} == {"ci"}


def test_more_seeds_for_a_finished_grid_plan_only_the_new_cells(ci_grid):
    """Asking a finished grid for another seed (an override that only chooses cells, so the
    runs stay under the grid's label) plans the new seed's cells and the leaderboard and report
    again, and leaves every finished job alone: their params do not name the seeds."""
    planned = run([sys.executable, "-m", "snakemake", "-n", "--cores", "2", "--config",
                   "grid=ci", 'overrides=["grid.seeds=[0,1]"]'], ci_grid)
    rules = re.findall(r"^rule (\w+):$", planned, re.MULTILINE)
    cells = re.findall(r"^ +output: results/ci/runs/(\S+?)/final\.json", planned, re.MULTILINE)
    assert sorted(set(rules)) == ["all", "build_leaderboard", "build_report", "run_cell"], rules
    assert cells and all(cell.endswith("/seed1") for cell in cells), cells
    assert len(cells) == len(list((ci_grid / CI_RESULTS).glob("runs/*/*/*/seed0/final.json")))


# a second small grid: the ci grid cut to one cell, with a reduced budget
SECOND_GRID = ["grid.tasks=[gsm8k_arith]", "grid.agents=[noop]", "budget.time_limit_s=60"]


def test_a_second_grid_leaves_the_first_grids_runs_and_leaderboard_intact(ci_grid):
    """Two grids in one checkout: each files its runs, leaderboard and report under its own
    label, the second's under the ci grid's name and a hash of its overrides, and the first
    grid's records are what they were, byte for byte."""
    first = ci_grid / CI_RESULTS
    kept = [first / "leaderboard.csv", first / "leaderboard.md", first / "report" / "index.html",
            *first.glob("runs/*/*/*/*/run.json"), *first.glob("runs/*/*/*/*/final.json")]
    before = {path: path.read_bytes() for path in kept}
    assert len(before) == 3 + 2 * 6  # the ci grid's six cells
    run([sys.executable, "-m", "snakemake", "--cores", "2", "--config", "grid=ci",
         f"overrides={json.dumps(SECOND_GRID)}"], ci_grid, GRID_TIMEOUT_S)
    second = ci_grid / grid_results("ci", SECOND_GRID)
    assert second.name.startswith("ci-") and second.parent == first.parent
    assert {path: path.read_bytes() for path in kept} == before
    with (second / "leaderboard.csv").open() as fh:
        board = [(r["grid"], r["task"], r["agent"]) for r in csv.DictReader(fh)]
    assert board == [(second.name, TASK, "noop")]
    summary = read_json(second / "runs" / TASK / "noop" / "none" / "seed0" / "summary.json")
    assert (summary["grid"], summary["budget"]["time_limit_s"]) == (second.name, 60)
    assert f"grid {second.name}" in (second / "report" / "index.html").read_text()
    # the base model folder the two grids share is made from the model's config alone, so the
    # second grid's overrides leave the first grid's jobs up to date
    planned = run([sys.executable, "-m", "snakemake", "-n", "--cores", "2", "--config",
                   "grid=ci"], ci_grid)
    assert "Nothing to be done" in planned, planned


# ------------------------------------------------------------------------------ dvc, grid=ci


def test_dvc_repro_runs_ci_grid(repo_copy):
    started = time.time()
    output = run([sys.executable, "-m", "dvc", "repro"], repo_copy, GRID_TIMEOUT_S)
    assert "run_grid" in output
    assert "grid=ci" in (repo_copy / "dvc.lock").read_text()
    results = repo_copy / CI_RESULTS
    # DVC removes the stage's non-persistent outputs before running it, so these are new
    assert (results / "leaderboard.csv").stat().st_mtime >= started - 1
    for agent in AGENTS:
        assert (run_dir(repo_copy, agent) / "final.json").is_file()

    metrics = run([sys.executable, "-m", "dvc", "metrics", "show"], repo_copy)
    assert f"{CI_RESULTS}/leaderboard.json" in metrics
    for agent in AGENTS:
        assert f"{TASK}.{agent}.none.final_mean" in metrics, metrics
    status = run([sys.executable, "-m", "dvc", "status"], repo_copy)
    assert "up to date" in status, status


def test_dvc_remote_round_trip(repo_copy, tmp_path):
    """``dvc push`` of the grid to a folder remote; in a fresh clone, ``dvc pull`` and then
    ``dvc repro``: DVC finds the stage up to date, so no agent runs again, and the leaderboard,
    the run records and the selected models are the pushed ones."""
    dvc = [sys.executable, "-m", "dvc"]
    run([*dvc, "repro"], repo_copy)  # up to date after test_dvc_repro_runs_ci_grid
    run([*dvc, "remote", "add", "-d", "shared", str(tmp_path / "remote")], repo_copy)
    run([*GIT, "add", "-A"], repo_copy)  # dvc.lock and the remote in .dvc/config
    run([*GIT, "commit", "-q", "-m", "the ci grid's results"], repo_copy)
    run([*dvc, "push"], repo_copy)

    clone = tmp_path / "clone"
    subprocess.run([*GIT, "clone", "-q", str(repo_copy), str(clone)], check=True)
    run([*dvc, "pull"], clone)
    output = run([*dvc, "repro"], clone)
    assert "didn't change, skipping" in output, output
    assert not (clone / CI_RESULTS / "logs").exists(), "a Snakemake job ran in the clone"
    assert not (clone / ".snakemake").exists(), "Snakemake ran in the clone"
    results = CI_RESULTS
    for name in ("leaderboard.csv", "leaderboard.md", "leaderboard.json"):
        assert (clone / results / name).read_bytes() == (repo_copy / results / name).read_bytes()
    for agent in AGENTS:
        cell = run_dir(repo_copy, agent).relative_to(repo_copy)
        for record in ("ledger.jsonl", "run.json", "final.json", "summary.json"):
            if (repo_copy / cell / record).exists():
                assert (clone / cell / record).read_bytes() == \
                    (repo_copy / cell / record).read_bytes()
        assert not (clone / cell / "workspace").exists()  # .dvcignore: never pushed
        exported = results / "models" / TASK / agent / "none" / "seed0"
        assert (clone / exported / "selected.json").read_bytes() == \
            (repo_copy / exported / "selected.json").read_bytes()
    assert "up to date" in run([*dvc, "status"], clone)


# ----------------------------------------------------------------------- a2rl run (Hydra app)


def test_a2rl_run_one_cell(repo_copy):
    run(a2rl("run", "grid=ci", f"task={TASK}", "agent=noop", "seed=3"), repo_copy)
    run_root = run_dir(repo_copy, "noop", seed=3)
    run_json = read_json(run_root / "run.json")
    assert run_json["status"] == "completed" and run_json["seed"] == 3
    final = read_json(run_root / "final.json")
    assert (final["agent"], final["seed"]) == ("noop", 3)
    assert final["test_score"] == final["baseline"] and final["improvement"] == 0
    summary = read_json(run_root / "summary.json")
    assert (summary["agent"], summary["seed"], summary["status"]) == ("noop", 3, "completed")
    assert (run_root / "summary.md").is_file()
    assert list((repo_copy / CI_RESULTS / "hydra" / "run").glob("*/a2rl.log"))


ALFWORLD_GAMES = REPO / "tests" / "fixtures" / "alfworld"  # three real games
# the interactive tasks sft_grpo runs on, each as a tiny cell of the ci grid
SFT_GRPO_TASKS = {
    "household": [],
    "webshop": ["task.params.train_goals=8", "task.params.test_goals=3",
                "task.params.max_steps=4", "task.inference.batch_size=8",
                "task.inference.max_new_tokens=16"],
    # real ALFWorld games played by ALFWorld's engine: a few from $A2RL_DATA where it is
    # there (CI), else the fixture's
    "alfworld": [f"task.params.data_path={FULL_DATA / 'alfworld' if FULL_DATA else ALFWORLD_GAMES}",
                 "task.params.test_games=2", "task.params.train_games=3",
                 "task.params.train_splits=[train]", "task.params.max_steps=6",
                 "task.inference.batch_size=8", "task.inference.max_new_tokens=16"],
}


@pytest.mark.parametrize("task", sorted(SFT_GRPO_TASKS))
def test_a2rl_run_sft_grpo_reaches_grpo(repo_copy, task):
    """The SFT -> GRPO route end to end on each interactive task, real ALFWorld included: a
    warm-up submission, then a GRPO round's in the environment the task declares
    (data/rollouts.json), each with its code commit, and the summary names both methods."""
    if task == "alfworld":
        pytest.importorskip("fast_downward", reason="textworld[pddl] (scripts/setup.sh)")
    quick = [f"++agent.settings.sft_grpo.{key}" for key in (
        "warmup_steps=2", "rounds=1", "iters=1", "games=2", "group=2", "max_steps=3")]
    run(a2rl("run", "grid=ci", f"task={task}", "agent=sft_grpo", "budget.time_limit_s=500",
             *SFT_GRPO_TASKS[task], *quick), repo_copy)
    run_root = repo_copy / CI_RESULTS / "runs" / task / "sft_grpo" / "none" / "seed0"
    assert read_json(run_root / "run.json")["status"] == "completed"
    ledger = read_jsonl(run_root / "ledger.jsonl")
    assert [Path(e["model_path"]).name for e in ledger] == ["sft-1", "grpo-1"], ledger
    assert all(e["valid"] and e["code_commit"] for e in ledger)
    if task == "household":
        assert all(e["n"] == CI_HOUSEHOLD_GAMES for e in ledger)
    grpo_log = read_json(run_root / "workspace" / "output" / "grpo-1" / "grpo_log.json")
    assert [row["episodes"] for row in grpo_log] == [4]  # 2 games x a group of 2
    route = read_json(run_root / "summary.json")["route"]
    assert [s["methods"] for s in route["per_submission"]] == [["SFT"], ["SFT", "GRPO"]]


def test_a2rl_run_grpo_on_a_single_turn_task(repo_copy):
    """GRPO on an L1 task: gsm8k_arith declares its train prompts and its reward
    (data/rollouts.json, kind single_turn), the grpo agent trains on them with TRL's
    GRPOTrainer and submits the round's model: valid, with its code commit, and the code reads
    as GRPO."""
    quick = [f"++agent.settings.grpo.{key}" for key in (
        "rounds=1", "iters=2", "games=2", "group=2", "reply_tokens=8", "train_layers=1", "kl=0")]
    run(a2rl("run", "grid=ci", f"task={TASK}", "agent=grpo", "budget.time_limit_s=300", *quick),
        repo_copy)
    run_root = run_dir(repo_copy, "grpo")
    assert read_json(run_root / "run.json")["status"] == "completed"
    ledger = read_jsonl(run_root / "ledger.jsonl")
    assert [Path(e["model_path"]).name for e in ledger] == ["grpo-1"], ledger
    assert ledger[0]["valid"] and ledger[0]["code_commit"] and ledger[0]["n"] == CI_TEST_SIZE
    grpo_log = read_json(run_root / "workspace" / "output" / "grpo-1" / "grpo_log.json")
    assert [row["step"] for row in grpo_log] == [1, 2]
    assert (run_root / "workspace" / "code" / "grpo_single_train.py").is_file()
    # the code the run leaves reads as GRPO alone (no SFT script copied in beside it); the
    # submission reads as prompt-only when, as usual with the tiny random model, every reply
    # scored 0: no group had an advantage and the weights did not move
    route = read_json(run_root / "summary.json")["route"]
    assert route["final_code"]["methods"] == ["GRPO"]
    assert route["per_submission"][0]["methods"] in (["GRPO"], ["prompt-only"])


# --------------------------------------------------------- budgets that survive slow machines


def test_sft_with_more_steps_than_the_budget_stops_at_its_deadline_and_submits(repo_copy):
    """Far more steps than fit in the budget, as on a slow CPU: the training script stops at the
    deadline (budget end less the reserve), saves, and the agent submits that checkpoint in
    time, says what it skipped, and runs no further round."""
    from a2rl.common.hardware import AGENT_DEVICE, resolve_precision

    # the deadline falls 90 s after the start: room for a loaded machine's imports and
    # tokenizing, far too little for 40,000 steps (0.007-0.05 s each on the tiny model: a fast
    # CI machine ran 8,000 within the deadline)
    steps = 40_000
    run(a2rl("run", "grid=ci", f"task={TASK}", "agent=sft", "seed=4", "budget.time_limit_s=150",
             "++agent.settings.sft.reserve_s=60", f"++agent.settings.sft.steps={steps}",
             "++agent.settings.sft.batch=1"), repo_copy)
    run_root = run_dir(repo_copy, "sft", seed=4)
    run_json = read_json(run_root / "run.json")
    assert run_json["status"] == "completed", run_json
    precision = resolve_precision("auto", AGENT_DEVICE)
    assert run_json["hardware"]["precision"]["agent"] == precision
    ledger = read_jsonl(run_root / "ledger.jsonl")
    assert [Path(e["model_path"]).name for e in ledger] == ["ckpt-1"]
    assert ledger[0]["valid"] and not ledger[0]["equals_base"]
    assert ledger[0]["elapsed_s"] < 150 - 30  # submitted within the reserve, not at the kill
    report = read_json(run_root / "workspace" / "output" / "ckpt-1" / "train_log.json")
    assert 1 <= report["steps"] < steps and report["skipped_steps"] == steps - report["steps"]
    assert report["precision"] == precision
    assert "stopped early by the deadline" in (run_root / "agent.log").read_text()
    # the summary says which machine (and precision) the scores and times came from
    summary = read_json(run_root / "summary.json")
    assert summary["hardware"]["precision"] == run_json["hardware"]["precision"]
    assert "Machine: " in (run_root / "summary.md").read_text()


def test_sft_without_time_for_one_step_submits_the_base_model(repo_copy):
    """No step fits before the deadline: the agent stops its training and submits the base
    model, so the run still ends with a valid submission."""
    run(a2rl("run", "grid=ci", f"task={TASK}", "agent=sft", "seed=6", "budget.time_limit_s=60",
             "++agent.settings.sft.reserve_s=100000"), repo_copy)
    run_root = run_dir(repo_copy, "sft", seed=6)
    ledger = read_jsonl(run_root / "ledger.jsonl")
    assert len(ledger) == 1 and ledger[0]["valid"] and ledger[0]["equals_base"], ledger
    log = (run_root / "agent.log").read_text()
    assert "still running at the deadline" in log and "submitting the base model" in log
    assert read_json(run_root / "final.json")["no_valid_submission"] is False


ROOMY_BUDGET = "budget.time_limit_s=3600"


def test_doctor_checks_the_machine_and_plans_each_cell(repo_copy):
    """``a2rl doctor`` on the ci grid: the sandbox, the agents' Python, the model, timings and
    a plan for each cell, in under a minute of its own time. The budget is raised so that the
    verdict does not depend on how loaded the test machine is (a tight budget's verdict does:
    test_doctor_names_what_to_change_when_training_does_not_fit)."""
    text = run(a2rl("doctor", "grid=ci", ROOMY_BUDGET), repo_copy)
    assert "ok        sandbox" in text and "verdict   ready" in text, text
    result = subprocess.run(a2rl("doctor", "grid=ci", ROOMY_BUDGET, "--json"), cwd=repo_copy,
                            env=tool_env(repo_copy), capture_output=True, text=True,
                            timeout=TIMEOUT_S, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    assert all(c["ok"] for c in report["checks"]), report["checks"]
    cells = {c["cell"] for c in report["cells"]}
    assert cells == {f"{t}/{a}/none/seed0" for t in (TASK, "household", "alpacaeval_local")
                     for a in AGENTS}
    assert report["hardware"]["precision"]["inference"] == "fp32"
    assert report["rates"]["train_s_per_token"] > 0 and report["seconds"] < 60
    assert all(c["first_submission_s"] is not None for c in report["cells"])


def test_doctor_names_what_to_change_when_training_does_not_fit(repo_copy):
    """With a budget too short for the sft cells' steps, doctor says so (exit 1) and names the
    override for each cell: the budget that fits all steps, or the steps that fit."""
    result = subprocess.run(a2rl("doctor", "grid=ci", "budget.time_limit_s=300",
                                 "++agent.settings.sft.steps=8000"), cwd=repo_copy,
                            env=tool_env(repo_copy), capture_output=True, text=True,
                            timeout=TIMEOUT_S, check=False)
    assert result.returncode == 1, result.stdout + result.stderr[-3000:]
    changes = [line for line in result.stdout.splitlines() if line.strip().startswith("change")]
    sft_cells = [c for c in grid_cells(compose(["grid=ci"])) if c["agent"] == "sft"]
    assert len(changes) == len(sft_cells) >= 2, result.stdout  # one line per sft cell
    assert all("budget.time_limit_s=" in c and "++agent.settings.sft.steps=" in c
               for c in changes), changes


# ----------------------------------------------------------------------------------- budget

# The agent starts a daemon (double fork, setsid, ignores SIGTERM) that carries the marker in
# its command line and prints it, then both sleep far past the budget. (No quotes inside the
# inner program: the command travels as a Hydra override.)
SLEEPER = ("import subprocess,sys,time;"
           "subprocess.Popen([sys.executable,'-c','import os,signal,sys,time;"
           "os.fork() and os._exit(0);os.setsid();signal.signal(signal.SIGTERM,signal.SIG_IGN);"
           "print(sys.argv[1],flush=True);time.sleep(900)',sys.argv[1]]);"
           "time.sleep(900)")


@pytest.mark.parametrize("sandbox", ["bwrap", "none"])
def test_budget_ends_agent_and_its_daemon(repo_copy, sandbox):
    if sandbox == "bwrap" and shutil.which("bwrap") is None:
        pytest.skip("needs bubblewrap")
    marker = f"a2rl-itest-{uuid.uuid4().hex}"
    agent = f"sleeper_{sandbox}"
    command = json.dumps(["{python}", "-c", SLEEPER, marker])
    started = time.monotonic()
    run(a2rl("run", "grid=ci", f"task={TASK}", "agent=noop", f"agent.name={agent}",
             f"agent.command={command}", f"sandbox={sandbox}", "budget.time_limit_s=5",
             "++budget.kill_grace_s=1"), repo_copy)
    assert time.monotonic() - started < 120

    run_root = run_dir(repo_copy, agent)
    # the daemon was running when the budget ran out, else this test proves nothing
    assert marker in (run_root / "agent.log").read_text()
    run_json = read_json(run_root / "run.json")
    assert run_json["status"] == "budget_exhausted", run_json
    assert run_json["exit_code"] not in (0, None), run_json  # ended by a signal
    assert 4.5 <= run_json["agent_seconds"] < 15, run_json
    kinds = [e["kind"] for e in read_jsonl(run_root / "events.jsonl")]
    assert "budget_kill" in kinds and kinds.index("budget_kill") < kinds.index("agent_exit")
    assert survivors(marker) == []
    final = read_json(run_root / "final.json")
    assert final["no_valid_submission"] is True and final["improvement"] == 0
    assert read_json(run_root / "summary.json")["status"] == "budget_exhausted"
