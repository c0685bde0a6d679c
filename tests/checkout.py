"""Where the tests find this checkout, its test data, and the environment a child process gets.

Imported by test modules (``from checkout import REPO``) and by ``tests/conftest.py``; pytest puts
``tests/`` on ``sys.path`` because the conftest there has no package around it.

Test data: the GSM8K sample in ``tests/fixtures/data`` is part of the repository, so every test
runs from a fresh clone. ``$A2RL_DATA`` (the full copy CI uses, see ``.ci/run``) is an optional
extra: the tests that read task data run on it too when it is set (``gsm8k_data`` in conftest).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURE_DATA = REPO / "tests" / "fixtures" / "data"
# the full data, when this machine has it; None when A2RL_DATA is unset
FULL_DATA = Path(os.environ["A2RL_DATA"]).resolve() if os.environ.get("A2RL_DATA") else None

# the agents' Python environment (scripts/setup.sh builds it): the tests' runs use this one,
# whatever their results/ and resources/ folders (a2rl.isolation.agent_python.PYTHON_ENV)
AGENT_PYTHON = Path(os.environ.get("A2RL_AGENT_PYTHON")
                    or REPO / "resources" / "agent-python").resolve()
# the harness's interpreter as the sandbox shows it: a venv's own (.venv/bin/python, in the
# checkout, which the sandbox hides) is its base installation's, mounted with that installation
SANDBOX_PYTHON = getattr(sys, "_base_executable", sys.executable)
# one run's values for description.md, as a2rl.pipeline.runner.task_description gives them
# (a2rl.common.contract renders a task's description with them)
RUN_VALUES = {"time_limit_min": 30.0, "count_eval_time": False, "max_submissions": 5,
              "feedback": "validation", "workspace": "/workspace",
              "grader_url": "$A2RL_GRADER_URL", "base_model": "/workspace/base_model",
              "data_dir": "/workspace/data", "memory_gb": 12.0, "max_processes": 512,
              "tmpfs_gb": 2.0, "disk_gb": "10", "disk_files": 100000,
              "hardware": "2 CPUs (test machine)", "precision": "fp32"}
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


@dataclass(frozen=True)
class GSM8KData:
    """A data root holding ``gsm8k/{train,test}.jsonl``, and how many items each split has."""

    root: Path
    train: int
    test: int


FIXTURE_GSM8K = GSM8KData(FIXTURE_DATA, train=60, test=40)  # see its PROVENANCE.md
FULL_GSM8K = GSM8KData(FULL_DATA, train=7473, test=1319) if FULL_DATA else None


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment for a command the tests start: offline, importing this
    checkout's code, reading task data from the fixtures, plus ``extra``."""
    env = dict(os.environ)
    env.pop("A2RL_CONF", None)  # conf/ next to the code imported, unless extra names one
    env.update(OFFLINE_ENV)
    env["A2RL_AGENT_PYTHON"] = str(AGENT_PYTHON)
    env["A2RL_DATA"] = str(FIXTURE_DATA)
    env.update(extra)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO / "src"), str(REPO), env.get("PYTHONPATH")) if p)
    return env


def prepare_in(task, folder: Path) -> tuple:
    """``task`` prepared into ``folder`` as the prepare stage lays it out (data/, sealed/):
    (the PreparedTaskPaths, the facts ``task.prepare`` returned)."""
    from a2rl.common.layout import PreparedTaskPaths
    from a2rl.pipeline.stages import write_rollouts

    out = PreparedTaskPaths(folder)
    out.data.mkdir(parents=True)
    out.sealed.mkdir(parents=True)
    facts = task.prepare(out)
    write_rollouts(task, out.data)
    return out, facts


def declared_reward(data: Path):
    """The reward function a prepared data folder declares (``data/rollouts.json``, kind
    single_turn), imported from data/ as the agents' script does but under a module name of
    its own, so that two tasks' ``reward`` packages never share a cached module."""
    import importlib.util
    import json
    import uuid

    declared = json.loads((data / "rollouts.json").read_text())
    assert declared["kind"] == "single_turn", declared
    folder = data / declared["module"]
    name = f"declared_reward_{uuid.uuid4().hex}"
    spec = importlib.util.spec_from_file_location(name, folder / "__init__.py",
                                                  submodule_search_locations=[str(folder)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its relative imports find the package here
    spec.loader.exec_module(module)
    return getattr(module, declared["function"])


def grid_results(grid: str, overrides: Sequence[str] = ()) -> Path:
    """Where the workflow files a grid's runs, relative to its working directory:
    results/<grid label>/ (a2rl.config.compose.grid_label)."""
    from a2rl.config.compose import grid_label

    return Path("results") / grid_label(grid, overrides)
