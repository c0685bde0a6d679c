"""Task plugins (a2rl.common.plugins, entry-point group a2rl.tasks): packages written by
``a2rl new task`` outside the repository, installed into this environment with pip, run as
ci-grid cells from a folder outside the repository, and gone once uninstalled; broken plugins
reported with their package while the others list and run."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from a2rl.common.plugins import plugins
from checkout import child_env

PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]


def a2rl(args: list[str], cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    script = Path(sys.executable).parent / "a2rl"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "a2rl.pipeline.cli"]
    return subprocess.run([*command, *args], cwd=cwd, env=child_env(), capture_output=True,
                          text=True, timeout=timeout, check=False)


def listed(cwd: Path) -> dict[str, dict]:
    done = a2rl(["tasks", "--json"], cwd, timeout=300)
    return {row["task"]: row for row in json.loads(done.stdout)}


@contextlib.contextmanager
def installed(*packages: Path):
    """``packages`` pip-installed into this interpreter's environment for the block."""
    names = [distribution_of(p) for p in packages]
    subprocess.run([*PIP, "install", "--no-deps", "--no-build-isolation", *map(str, packages)],
                   check=True, capture_output=True, timeout=300)
    try:
        yield names
    finally:
        subprocess.run([*PIP, "uninstall", "-y", *names], check=True, capture_output=True,
                       timeout=300)


def distribution_of(package: Path) -> str:
    import tomllib

    return tomllib.loads((package / "pyproject.toml").read_text())["project"]["name"]


def scaffold(name: str, folder: Path, *flags: str) -> Path:
    done = a2rl(["new", "task", name, "--dir", str(folder), *flags], folder, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return folder / f"a2rl-task-{name.replace('_', '-')}"


def cell(task: str, agent: str, cwd: Path, *extra: str) -> Path:
    """One ci-grid cell run from ``cwd`` (outside the repository); its run folder."""
    done = a2rl(["run", "grid=ci", f"task={task}", f"agent={agent}", *extra], cwd)
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
    return cwd / "results" / "ci" / "runs" / task / agent / "none" / "seed0"


def ledger_of(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "ledger.jsonl").read_text().splitlines()]


@pytest.mark.integration
def test_scaffolded_task_packages_install_run_and_uninstall(tmp_path):
    """A static and an interactive task, as `a2rl new task` writes them, pass ci-grid cells:
    sft on the static one, the SFT -> GRPO route on the interactive one (through the
    environment it declares), each with a leaderboard row; uninstalled, they are gone."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    static = scaffold("plug_words", outside)
    interactive = scaffold("plug_rooms", outside, "--interactive")
    with installed(static, interactive) as names:
        tasks = listed(outside)
        assert tasks["plug_words"]["package"] == names[0] and tasks["plug_words"]["level"] == "L1"
        assert tasks["plug_rooms"]["package"] == names[1] and tasks["plug_rooms"]["level"] == "L3"
        assert "gsm8k_arith" in tasks  # the built-ins list beside them

        words = cell("plug_words", "sft", outside)
        assert any(e["valid"] and not e["equals_base"] for e in ledger_of(words))
        rooms = cell("plug_rooms", "sft_grpo", outside, "budget.time_limit_s=400", *(
            f"++agent.settings.sft_grpo.{k}" for k in (
                "warmup_steps=2", "rounds=1", "iters=1", "games=2", "group=2", "max_steps=3")))
        assert [Path(e["model_path"]).name for e in ledger_of(rooms)] == ["sft-1", "grpo-1"]
        declared = json.loads((rooms / "workspace" / "data" / "rollouts.json").read_text())
        assert (declared["module"], declared["env"]) == ("rooms_env", "RoomsEnv")
        board = (outside / "results" / "ci" / "leaderboard.csv").read_text()
        assert ",plug_words," in board and ",plug_rooms," in board
    tasks = listed(outside)
    assert "plug_words" not in tasks and "plug_rooms" not in tasks and "gsm8k_arith" in tasks


def broken_package(folder: Path, name: str, entry: str, module: str) -> Path:
    """A package registering task ``entry`` -> ``name``, whose module is ``module``."""
    package = folder / name
    (package / name).mkdir(parents=True)
    (package / name / "__init__.py").write_text(module)
    (package / "pyproject.toml").write_text(
        f'[build-system]\nrequires = ["setuptools>=77"]\nbuild-backend = '
        f'"setuptools.build_meta"\n\n[project]\nname = "{name.replace("_", "-")}"\n'
        f'version = "0.1.0"\n\n[project.entry-points."a2rl.tasks"]\n{entry} = "{name}"\n\n'
        f'[tool.setuptools]\npackages = ["{name}"]\n')
    return package


def test_broken_task_plugins_are_reported_with_their_package_and_the_rest_runs(tmp_path):
    failing = broken_package(tmp_path, "plug_fails", "plug_fails",
                             "raise ImportError('a missing dependency of the plugin')\n")
    no_build = broken_package(tmp_path, "plug_nobuild", "plug_nobuild", "X = 1\n")
    clash = broken_package(tmp_path, "plug_clash", "gsm8k", "def build(cfg, root): ...\n")
    with installed(failing, no_build, clash):
        done = a2rl(["tasks", "--json"], tmp_path, timeout=300)
        assert done.returncode == 1  # something is broken, and the listing still came
        rows = json.loads(done.stdout)
        problems = {r["package"]: r["problem"] for r in rows if "problem" in r}
        assert "a missing dependency of the plugin" in problems["plug-fails"]
        assert "conf/task" in problems["plug-nobuild"]  # nothing to list: no task ids
        assert "already taken by the built-in" in problems["plug-clash"]
        # the built-in keeps its name, and the other tasks list and run
        builtin = [r for r in rows if r["task"] == "gsm8k_arith"]
        assert builtin and builtin[0]["package"] == "a2rl"
        assert plugins("tasks")["gsm8k"].package == "a2rl"
        composed = a2rl(["run", "grid=ci", "task=gsm8k_arith", "agent=noop", "--cfg", "job"],
                        tmp_path, timeout=300)
        assert composed.returncode == 0 and "gsm8k_arith" in composed.stdout, composed.stderr
    assert "plug_fails" not in listed(tmp_path)


def test_a_task_plugin_without_build_is_refused_by_name(tmp_path, monkeypatch):
    """load_task names the package when the module has no build(cfg, data_root)."""
    from a2rl.common import plugins as plugin_module
    from a2rl.config.types import TaskConfig
    from a2rl.task.base import TaskNotImplemented, load_task

    (tmp_path / "plug_empty.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    fake = plugin_module.Plugin("tasks", "plug_empty", "plug_empty", "plug-empty")
    monkeypatch.setattr(plugin_module, "usable", lambda kind: {"plug_empty": fake})
    with pytest.raises(TaskNotImplemented, match="plug-empty.*no build"):
        load_task(TaskConfig(id="plug_empty", package="plug_empty"), tmp_path)


def test_run_help_composes_with_the_plugins_configs(tmp_path):
    """``a2rl run --help`` prints Hydra's help over the composed config, which takes the agents'
    and tasks' config groups from their packages (it failed with 'Could not find agent/noop')."""
    done = a2rl(["run", "--help", "task=household", "agent=sft"], tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Configuration groups" in done.stdout
    assert "id: household" in done.stdout and "name: sft" in done.stdout
