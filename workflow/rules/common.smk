# Configuration and input functions for every rule; defines no rules.
#
# The configuration is not a Snakemake configfile: it is composed from conf/ with Hydra's
# compose API (a2rl.config.compose), exactly as `a2rl run` composes it. Snakemake's own config takes
#   grid=<name>        conf/grid/<name>.yaml (default: quick)
#   infra_retries=N    run again a run the harness failed up to N times (default 2; run.smk)
#   overrides=[...]    Hydra overrides for every cell, e.g. '["++task.params.test_size=50"]'
#                      (a string is split like a shell line); they may not choose a cell axis.
#                      A task's own params take ++: the grid is composed before any task is.
# The grid config is checked before any job starts by the dataclasses of a2rl.config.types (the
# config's one definition) and the reference agents' settings by theirs
# (a2rl.pipeline.agent_settings); checked configs are cached in .snakemake/ (see
# a2rl.pipeline.plancache). Each task, agent and driver the grid names is composed too, so a
# missing conf/ option or a bad setting fails here. Planning imports a task's code for one
# question only, which data files it reads (Task.data_files): a grid whose data is missing fails
# here with the `a2rl data fetch` command that gets it (a dry run warns and plans on). A task
# with implemented: false is planned like any other and fails when prepare_task runs.
#
# Every job composes its own cell again from the same overrides (params.overrides), so a rule
# sees exactly the config `a2rl stage NAME <overrides>` would.
#
# The rules' paths come from a2rl.common.layout (PATHS below, relative to the working directory,
# with wildcards such as "{task}" in place of names), where the stages find them too.
import functools
import json
import os
import re
import shlex
import sys
from dataclasses import asdict, replace
from pathlib import Path

# scripts run in child processes; they compose from the conf/ next to this Snakefile
os.environ.setdefault("A2RL_CONF", str(Path(workflow.basedir) / "conf"))

from a2rl.common import Layout, cell_path
from a2rl.config import (
    DEFAULT_GRID,
    cell_overrides,
    composing,
    grid_cells,
    grid_label,
    grid_overrides,
    selects_cells,
    task_overrides,
)
from a2rl.data import grid_data_problems
from a2rl.pipeline import ComposeCache, check_agent_sizing, resource_keys, rule_resources


def as_override_list(value):
    """config["overrides"] as a list: a YAML/JSON list, or one string split like a shell."""
    if value is None:
        return []
    if isinstance(value, str):
        return shlex.split(value)
    return [str(v) for v in value]


# the checked RunConfig of some overrides (a2rl.pipeline.plancache.compose_checked), kept in
# .snakemake/ between runs and for the jobs a cluster executor starts, which each parse this
# workflow again
checked = ComposeCache(Path(".snakemake") / "a2rl-configs")


GRID = str(config.get("grid", DEFAULT_GRID))
# how many times a run the harness failed (run.json status infra_failed) is run again
INFRA_RETRIES = int(config.get("infra_retries", 2))
_USER_OVERRIDES = as_override_list(config.get("overrides"))
if any(o.lstrip("+~").startswith("paths.") for o in _USER_OVERRIDES):
    raise ValueError("overrides may not set paths.*: the workflow files a grid's runs under "
                     "./results/<grid label>/; use snakemake --directory to run elsewhere")
# the grid's runs, leaderboard and report go to results/<label>/: two grids, or one grid under
# other overrides, never share (or overwrite) a run
GRID_LABEL = grid_label(GRID, _USER_OVERRIDES)
GRID_RESULTS = Path("results") / GRID_LABEL
GRID_OVERRIDES = grid_overrides(
    GRID, [*_USER_OVERRIDES, f"++grid.label={GRID_LABEL}", f"paths.results={GRID_RESULTS}"])
# what a job for one model, task or cell composes from (its params): the grid's overrides but
# those that only choose which cells run, so that asking for more seeds (or other tasks) of a
# grid leaves its finished jobs' params, and so the jobs, as they were; Snakemake reruns a job
# whose params changed
JOB_OVERRIDES = [o for o in GRID_OVERRIDES if not selects_cells(o)]


def compose_options(axes):
    """Every option of every axis composed and checked once, options of different axes sharing
    a composition (the i-th task with the i-th agent and the i-th driver): a Hydra composition
    is the bulk of planning time, and this takes the longest axis's count of them instead of the
    sum. Sharing is sound because a task's, an agent's and a driver's options each configure
    only their own key. Returns {axis: {option: RunConfig}}."""
    names = {axis: list(dict.fromkeys(options)) for axis, options in axes.items()}
    composed = {axis: {} for axis in axes}
    for i in range(max(map(len, names.values()))):
        choice = {axis: options[i] for axis, options in names.items() if i < len(options)}
        cfg = checked([*GRID_OVERRIDES, *(f"{axis}={name}" for axis, name in choice.items())])
        for axis, name in choice.items():
            composed[axis][name] = cfg
    return composed


# the grid's config; each task's (model, data, budget, grading resources) and each agent's
# (the resources of run_cell's jobs); each driver is composed too, so that a missing option
# fails here. Compositions (those not cached) share one Hydra initialisation.
with composing():
    GRID_CFG = checked(GRID_OVERRIDES)
    check_agent_sizing(GRID, GRID_CFG.grid.tasks)
    _OPTIONS = compose_options(
        {
            "task": GRID_CFG.grid.tasks,
            "agent": GRID_CFG.grid.agents,
            "driver": GRID_CFG.grid.drivers,
        }
    )
CELLS = grid_cells(GRID_CFG)

# the rules' paths, relative to the working directory (the jobs' outputs read the same in the
# plan on every machine); the config must put results and resources there
PATHS = Layout(results=GRID_RESULTS, resources=Path("resources"))
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

TASK_CFG = _OPTIONS["task"]
AGENT_CFG = _OPTIONS["agent"]

# a task whose data is missing stops the run before any job starts (onstart, which a dry run
# skips), with the command that gets it, instead of its prepare job failing later; snakemake -n
# plans a grid on a machine without its data and warns
_DATA_PROBLEMS = grid_data_problems(TASK_CFG.values())
if _DATA_PROBLEMS:
    _MISSING = "the grid's task data is missing:\n  " + "\n  ".join(_DATA_PROBLEMS)
    print(f"warning: {_MISSING}\n(a run stops before its first job)", file=sys.stderr)


onstart:
    if _DATA_PROBLEMS:
        raise ValueError(_MISSING)

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


def model_config(wildcards):
    """The model's config as JSON (what its folder is made from). The folder under resources/ is
    shared by every grid naming the model: its job's params are this alone, so that another
    grid's overrides do not make it, and the first grid's cells, look out of date."""
    return json.dumps(asdict(TASK_CFG[TASK_OF_MODEL[wildcards.model]].task.model), sort_keys=True)


def overrides_of_task(wildcards):
    return task_overrides(wildcards.task, JOB_OVERRIDES)


def overrides_of_cell(wildcards):
    cell = {
        "task": wildcards.task,
        "agent": wildcards.agent,
        "driver": wildcards.driver,
        "seed": int(wildcards.seed),
    }
    return cell_overrides(cell, JOB_OVERRIDES)


def model_of_task(wildcards):
    """The done-flag of the task's base model folder."""
    return str(PATHS.model_done(MODEL_OF_TASK[wildcards.task]))


# summary.json of every cell of the grid (the leaderboard's and the report's input); the job
# that writes one runs the whole cell (run_cell)
RUN_SUMMARIES = [str(PATHS.run(**cell).summary_json) for cell in CELLS]


# ------------------------------------------------------------------------------- resources


def job_kind(rule_name, wildcards):
    """What a job's resources depend on: its task (none for per-grid and per-model rules) and,
    for run_cell, its agent."""
    task = wildcards.get("task")
    return task, wildcards.get("agent") if rule_name == "run_cell" else None


def job_kinds(rule_name):
    """Every job_kind the grid has for ``rule_name``."""
    if rule_name == "run_cell":
        return {(cell["task"], cell["agent"]) for cell in CELLS}
    if rule_name in ("prepare_model", "build_leaderboard", "build_report"):
        return {(None, None)}
    return {(task, None) for task in GRID_CFG.grid.tasks}


@functools.cache
def resources_of_job(rule_name, task, agent):
    """The resources of a job of ``rule_name`` on ``task`` with ``agent`` (see job_kind): from
    the task's config (the grid's for per-grid rules), with the agent's resources for run_cell.
    Agents and tasks are composed once each, not once per cell, so a grid_task file sizes
    tasks and budgets, never agents' resources (check_agent_sizing)."""
    cfg = TASK_CFG[task] if task else GRID_CFG
    if rule_name == "run_cell":
        cfg = replace(cfg, agent=AGENT_CFG[agent].agent)
    return rule_resources(rule_name, cfg)


def resources_of(rule_name):
    """The resources of the rule ``rule_name``, which a2rl.pipeline.resources derives from the
    config: a value where every job of the rule gets the same, else a function of the job's
    wildcards (Snakemake calls such a function for each job while planning: slow on big grids)."""
    kinds = job_kinds(rule_name)

    def value(key):
        values = {resources_of_job(rule_name, *kind)[key] for kind in kinds}
        if len(values) == 1:
            return values.pop()

        def of_job(wildcards):
            return resources_of_job(rule_name, *job_kind(rule_name, wildcards))[key]

        return of_job

    return {key: value(key) for key in resource_keys(GRID_CFG.cluster)}


def cluster_cpus(rule_name, wildcards):
    """The CPUs a job of ``rule_name`` asks the cluster for."""
    return resources_of_job(rule_name, *job_kind(rule_name, wildcards))["cpus_per_task"]


def cell_threads(wildcards):
    """Run here, a cell's job takes every core Snakemake was given, so no other job competes
    with its agent's clock; on a cluster it gets its CPUs (the largest of its stages') and the
    scheduler keeps others off."""
    if workflow.local_exec:
        return workflow.cores
    return cluster_cpus("run_cell", wildcards)


def evaluation_threads(wildcards):
    """A baseline evaluation's threads, run here: the torch threads it computes with (the task's
    inference.torch_threads; 0, torch's default, is every core). Declared, they keep Snakemake
    from running two jobs' torch threads on the same cores, where each stalls at every parallel
    step waiting for its threads the other has pushed off (benchmarks/threads.py). On a
    cluster its CPUs."""
    if not workflow.local_exec:
        return cluster_cpus("measure_baseline", wildcards)
    return TASK_CFG[wildcards.task].task.inference.torch_threads or workflow.cores


def start_grid():
    """As the grid starts (onstart, Snakefile): grid.json, the cells as planned, for
    `a2rl status` and `a2rl view`, and where to look while it runs."""
    from a2rl.analysis import where_to_look, write_plan

    write_plan(GRID_RESULTS, GRID_LABEL, GRID, _USER_OVERRIDES, CELLS)
    print(where_to_look(GRID_RESULTS), file=sys.stderr, flush=True)
