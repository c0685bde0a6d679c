# Configuration and input functions for every rule; defines no rules.
#
# The configuration is not a Snakemake configfile: it is composed from conf/ with Hydra's
# compose API (a2rl.config.compose), exactly as `a2rl run` composes it. Snakemake's own config takes
#   grid=<name>        conf/grid/<name>.yaml (default: smoke)
#   overrides=[...]    Hydra overrides for every cell, e.g. '["task.params.test_size=50"]'
#                      (a string is split like a shell line); they may not choose a cell axis.
# The grid config is checked twice before any job starts, by the dataclasses of a2rl.config.types and
# against workflow/schemas/config.schema.yaml. Each task, agent and driver the grid names is
# composed too, so a missing conf/ option fails here. Planning never imports a task's code: a
# task with implemented: false is planned like any other and fails when prepare_task runs.
#
# Every job composes its own cell again from the same overrides (params.overrides), so a rule
# sees exactly the config `a2rl stage NAME <overrides>` would.
import os
import re
import shlex
from dataclasses import asdict, replace
from pathlib import Path

from snakemake.utils import validate

# scripts run in child processes; they compose from the conf/ next to this Snakefile
os.environ.setdefault("A2RL_CONF", str(Path(workflow.basedir) / "conf"))

from a2rl.config.compose import (
    cell_overrides,
    compose,
    grid_cells,
    grid_overrides,
    task_overrides,
)
from a2rl.common.layout import Layout
from a2rl.pipeline.resources import check_agent_sizing, resource_keys, rule_resources


def as_override_list(value):
    """config["overrides"] as a list: a YAML/JSON list, or one string split like a shell."""
    if value is None:
        return []
    if isinstance(value, str):
        return shlex.split(value)
    return [str(v) for v in value]


def checked(overrides):
    """The RunConfig of `overrides`, also validated against the workflow's schema."""
    cfg = compose(overrides)
    validate(asdict(cfg), "../schemas/config.schema.yaml")
    return cfg


GRID = str(config.get("grid", "smoke"))
GRID_OVERRIDES = grid_overrides(GRID, as_override_list(config.get("overrides")))
GRID_CFG = checked(GRID_OVERRIDES)
CELLS = grid_cells(GRID_CFG)

# the rules' literal paths are relative to the working directory; the config must agree
_layout = Layout.from_paths(GRID_CFG.paths)
if (_layout.results, _layout.resources) != (
    Path("results").resolve(),
    Path("resources").resolve(),
):
    raise ValueError(
        f"paths put results in {_layout.results} and resources in {_layout.resources}; "
        f"the workflow writes ./results and ./resources of its working directory "
        f"({Path.cwd()}): leave paths.* at their defaults and use snakemake --directory"
    )

TASK_CFG = {task: checked(task_overrides(task, GRID_OVERRIDES)) for task in GRID_CFG.grid.tasks}
# each agent as the grid configures it: its resources size run_agent's jobs
check_agent_sizing(GRID, GRID_CFG.grid.tasks)
AGENT_CFG = {agent: checked([*GRID_OVERRIDES, f"agent={agent}"]) for agent in GRID_CFG.grid.agents}
for _driver in GRID_CFG.grid.drivers:
    checked([*GRID_OVERRIDES, f"driver={_driver}"])

# base models: one folder per model name, shared by the tasks that use it
MODEL_OF_TASK = {task: cfg.task.model.name for task, cfg in TASK_CFG.items()}
TASK_OF_MODEL = {}
for _task, _cfg in TASK_CFG.items():
    _first = TASK_OF_MODEL.setdefault(_cfg.task.model.name, _task)
    if asdict(TASK_CFG[_first].task.model) != asdict(_cfg.task.model):
        raise ValueError(
            f"tasks {_first!r} and {_task!r} both name model {_cfg.task.model.name!r} but "
            f"configure it differently; give one of them another task.model.name"
        )


def _alternatives(names):
    return "|".join(re.escape(str(n)) for n in sorted(set(names), key=str))


wildcard_constraints:
    task=_alternatives(GRID_CFG.grid.tasks),
    agent=_alternatives(c["agent"] for c in CELLS),
    driver=_alternatives(c["driver"] for c in CELLS),
    seed=r"\d+",
    model=_alternatives(MODEL_OF_TASK.values()),


# ------------------------------------------------------------------------- input functions


def overrides_of_model(wildcards):
    """Overrides composing the (first) task that uses this model."""
    return task_overrides(TASK_OF_MODEL[wildcards.model], GRID_OVERRIDES)


def overrides_of_task(wildcards):
    return task_overrides(wildcards.task, GRID_OVERRIDES)


def overrides_of_cell(wildcards):
    cell = {
        "task": wildcards.task,
        "agent": wildcards.agent,
        "driver": wildcards.driver,
        "seed": int(wildcards.seed),
    }
    return cell_overrides(cell, GRID_OVERRIDES)


def model_of_task(wildcards):
    """The done-flag of the task's base model folder."""
    return "resources/models/{model}.done".format(model=MODEL_OF_TASK[wildcards.task])


def run_summaries(wildcards):
    """summary.json of every cell of the grid."""
    return [
        "results/runs/{task}/{agent}/{driver}/seed{seed}/summary.json".format(**cell)
        for cell in CELLS
    ]


def selected_models(wildcards):
    """The exported selected model (results/models/...) of every cell of the grid."""
    return [
        "results/models/{task}/{agent}/{driver}/seed{seed}".format(**cell) for cell in CELLS
    ]


# ------------------------------------------------------------------------------- resources


def config_of_job(rule, wildcards):
    """The config a job's resources derive from: its task's (the grid's for per-grid rules),
    with its agent's for run_agent. Agents and tasks are composed once each, not once per cell;
    a grid_task file therefore sizes tasks and budgets, never agents' resources."""
    task = getattr(wildcards, "task", None)
    cfg = TASK_CFG[task] if task else GRID_CFG
    if rule == "run_agent":
        return replace(cfg, agent=AGENT_CFG[wildcards.agent].agent)
    return cfg


def resources_of(rule):
    """The resources: of ``rule``, one function of the job's wildcards per resource
    (a2rl.pipeline.resources derives them from the config)."""

    def value(key):
        def of_job(wildcards):
            return rule_resources(rule, config_of_job(rule, wildcards))[key]

        return of_job

    return {key: value(key) for key in resource_keys(GRID_CFG.cluster)}


def run_agent_threads(wildcards):
    """Run here, an agent takes every core Snakemake was given, so no other job competes with
    its clock; on a cluster its job gets the agent's CPUs and the scheduler keeps others off."""
    if workflow.local_exec:
        return workflow.cores
    return rule_resources("run_agent", config_of_job("run_agent", wildcards))["cpus_per_task"]
