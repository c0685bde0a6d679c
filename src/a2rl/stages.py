"""The pipeline's stages as plain functions of one composed RunConfig. Snakemake rules, DVC
stages and the ``a2rl run`` Hydra app all call these and nothing else.

prepare_model -> prepare_task -> measure_baseline -> run_agent -> final_grade -> summarize_run,
then build_leaderboard over the grid's runs.

Paths: ``Layout.from_paths(cfg.paths)``; a task's results are keyed by ``cfg.task.id``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from a2rl.config import RunConfig
from a2rl.layout import Layout, PreparedTaskPaths, RunPaths


def layout_of(cfg: RunConfig) -> Layout:
    return Layout.from_paths(cfg.paths)


def run_paths(cfg: RunConfig) -> RunPaths:
    return layout_of(cfg).run(cfg.task.id, cfg.agent.name, cfg.driver.name, cfg.seed)


def prepare_model(cfg: RunConfig) -> Path:
    """Make the task's base model folder under resources/models/{model.name}."""
    raise NotImplementedError


def prepare_task(cfg: RunConfig) -> PreparedTaskPaths:
    """Write results/prepared/{task.id}/ (data/, sealed/, prepared.json)."""
    raise NotImplementedError


def measure_baseline(cfg: RunConfig) -> dict[str, Any]:
    """Score the base model on the sealed split(s); writes results/baseline/{task.id}/baseline.json
    (cached by task, model hash and split hash; never cached when it failed)."""
    raise NotImplementedError


def run_agent(cfg: RunConfig) -> RunPaths:
    """Provision the workspace, start the grader, run the agent sandboxed within its budget.
    Writes the run directory (workspace/, ledger.jsonl, events.jsonl, agent.log, run.json)."""
    raise NotImplementedError


def final_grade(cfg: RunConfig) -> dict[str, Any]:
    """Score the selected submission on the test split; writes final.json."""
    raise NotImplementedError
