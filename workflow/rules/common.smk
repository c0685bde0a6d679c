# Configuration and input functions for every rule; defines no rules.
#
# The configuration is not a Snakemake configfile: it is composed from conf/ with Hydra's
# compose API (a2rl.config.compose), exactly as `a2rl run` composes it. Snakemake's own config takes
#   grid=<name>        conf/grid/<name>.yaml (default: smoke)
#   overrides=[...]    Hydra overrides for every cell, e.g. '["task.params.test_size=50"]'
#                      (a string is split like a shell line); they may not choose a cell axis.
# The grid config is checked before any job starts by the dataclasses of a2rl.config.types (the
# config's one definition) and the reference agents' settings by theirs
# (a2rl.pipeline.agent_settings). Each task, agent and driver the grid names is composed too, so a
# missing conf/ option or a bad setting fails here. Planning never imports a task's code: a
# task with implemented: false is planned like any other and fails when prepare_task runs.
#
# Every job composes its own cell again from the same overrides (params.overrides), so a rule
# sees exactly the config `a2rl stage NAME <overrides>` would.
#
# The rules' paths come from a2rl.common.layout (PATHS below, relative to the working directory,
# with wildcards such as "{task}" in place of names), where the stages find them too.
import os
import re
import shlex
from dataclasses import asdict
from pathlib import Path

# scripts run in child processes; they compose from the conf/ next to this Snakefile
os.environ.setdefault("A2RL_CONF", str(Path(workflow.basedir) / "conf"))

from a2rl.config.compose import (
    cell_overrides,
    compose,
    grid_cells,
    grid_overrides,
    task_overrides,
)
from a2rl.common.layout import Layout, cell_path
from a2rl.pipeline.agent_settings import check_settings


def as_override_list(value):
    """config["overrides"] as a list: a YAML/JSON list, or one string split like a shell."""
    if value is None:
        return []
    if isinstance(value, str):
        return shlex.split(value)
    return [str(v) for v in value]


def checked(overrides):
    """The checked RunConfig of `overrides`, its agent settings checked too."""
    return check_settings(compose(overrides))


GRID = str(config.get("grid", "smoke"))
GRID_OVERRIDES = grid_overrides(GRID, as_override_list(config.get("overrides")))
GRID_CFG = checked(GRID_OVERRIDES)
CELLS = grid_cells(GRID_CFG)

# the rules' paths, relative to the working directory (the jobs' outputs read the same in the
# plan on every machine); the config must put results and resources there
PATHS = Layout(results=Path("results"), resources=Path("resources"))
_layout = Layout.from_paths(GRID_CFG.paths)
if (_layout.results, _layout.resources) != (PATHS.results.resolve(), PATHS.resources.resolve()):
    raise ValueError(
        f"paths put results in {_layout.results} and resources in {_layout.resources}; "
        f"the workflow writes ./{PATHS.results} and ./{PATHS.resources} of its working directory "
        f"({Path.cwd()}): leave paths.* at their defaults and use snakemake --directory"
    )
# the wildcards of a cell, and its run's paths and place in the logs
CELL = ("{task}", "{agent}", "{driver}", "{seed}")
RUN = PATHS.run(*CELL)
CELL_PATH = cell_path(*CELL)
PREPARED = PATHS.prepared("{task}")
BASELINE = PATHS.baseline("{task}")

TASK_CFG = {task: checked(task_overrides(task, GRID_OVERRIDES)) for task in GRID_CFG.grid.tasks}
for _axis, _names in (("agent", GRID_CFG.grid.agents), ("driver", GRID_CFG.grid.drivers)):
    for _name in _names:
        checked([*GRID_OVERRIDES, f"{_axis}={_name}"])

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
    return str(PATHS.model_done(MODEL_OF_TASK[wildcards.task]))


def run_summaries(wildcards):
    """summary.json of every cell of the grid."""
    return [str(PATHS.run(**cell).summary_json) for cell in CELLS]


def selected_models(wildcards):
    """The exported selected model (results/models/...) of every cell of the grid."""
    return [str(PATHS.selected_model(**cell)) for cell in CELLS]
