"""Each Snakemake rule's resources, derived from the config rather than written by hand.

A cluster executor (profiles/slurm) turns them into its requests; a local
run ignores them. The keys are Snakemake's standard ones and those of the executor plugins:
``cpus_per_task``, ``mem_mb``, ``runtime`` (minutes), ``gpu`` and ``gpu_manufacturer``
(a GPU executor's), and ``slurm_partition`` / ``slurm_extra`` where conf/cluster/ names them.

- ``run_cell`` runs a cell's stages in one job: ``run_agent`` (the agent's ``agent.resources``,
  for the budget's time limit plus what the harness adds to it: an evaluation in flight at the
  deadline finishes, the kill grace, and every evaluation when ``budget.count_eval_time`` is
  false), then ``final_grade`` (the task's resources, one evaluation), ``export_model`` and
  ``summarize_run`` (small): what the largest of them needs, for the sum of their times, plus
  the cluster's ``start_s``.
- ``measure_baseline``: the task's ``task.resources``, for one evaluation (``task.eval_s``) per
  split it scores.
- every other rule prepares data or tabulates: one core, a little memory, minutes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from omegaconf import OmegaConf

from a2rl.config.compose import conf_dir
from a2rl.config.types import ClusterConfig, ConfigError, ResourcesConfig, RunConfig

# rules and stages that move files, download or tabulate: one core and a little memory
SMALL = ResourcesConfig(cpus=1, gpus=0, mem_mb=4000)
# their work in seconds, generous: prepare_model may download a 7B model from the Hub, and
# prepare_task may generate games; the others read or copy what a run left
SMALL_WORK_S = {
    "prepare_model": 3600.0,
    "prepare_task": 3600.0,
    "summarize_run": 900.0,
    "export_model": 900.0,
    "build_leaderboard": 600.0,
    "build_report": 900.0,
}
GRADING_STAGES = ("measure_baseline", "final_grade")
# rules whose job runs several stages one after the other (workflow/rules/run.smk)
STAGES_OF_RULE = {"run_cell": ("run_agent", "final_grade", "export_model", "summarize_run")}
# the workflow's rules; work_of also sizes each stage of STAGES_OF_RULE alone
RULES = ("prepare_model", "prepare_task", "measure_baseline", "run_cell", "build_leaderboard",
         "build_report")


def agent_seconds(cfg: RunConfig) -> float:
    """The longest wall-clock time run_agent's work can take (without start-up): the time limit,
    the kill grace, one evaluation still in flight at the deadline, and, when evaluations do not
    count against the budget, every scored submission's evaluation on top."""
    budget = cfg.budget
    evaluations = 1 if budget.count_eval_time else budget.max_submissions + 1
    return budget.time_limit_s + budget.kill_grace_s + evaluations * cfg.task.eval_s


def grading_seconds(rule: str, cfg: RunConfig) -> float:
    """measure_baseline scores the base model on the test split and, with validation feedback,
    on the validation split; final_grade scores the selected submission at most once."""
    splits = 2 if rule == "measure_baseline" and cfg.task.feedback == "validation" else 1
    return splits * cfg.task.eval_s


def work_of(rule: str, cfg: RunConfig) -> tuple[ResourcesConfig, float]:
    """What ``rule`` needs on ``cfg``'s cell or task, and for how many seconds of work."""
    if rule in STAGES_OF_RULE:
        return combined_work([work_of(stage, cfg) for stage in STAGES_OF_RULE[rule]])
    if rule == "run_agent":
        return cfg.agent.resources, agent_seconds(cfg)
    if rule in GRADING_STAGES:
        return cfg.task.resources, grading_seconds(rule, cfg)
    if rule in SMALL_WORK_S:
        return SMALL, SMALL_WORK_S[rule]
    raise ConfigError(f"no resources for rule {rule!r}; expected one of {', '.join(RULES)} "
                      f"or a stage of {', '.join(STAGES_OF_RULE)}")


def combined_work(works: list[tuple[ResourcesConfig, float]]) -> tuple[ResourcesConfig, float]:
    """Stages run one after the other in one job: the most CPUs, GPUs and memory any of them
    needs, for the sum of their times."""
    specs = [spec for spec, _ in works]
    largest = ResourcesConfig(cpus=max(s.cpus for s in specs), gpus=max(s.gpus for s in specs),
                              mem_mb=max(s.mem_mb for s in specs))
    return largest, sum(seconds for _, seconds in works)


def partition_of(spec: ResourcesConfig, cluster: ClusterConfig) -> str | None:
    """The Slurm partition of a job: the GPU partition for jobs with GPUs, when there is one."""
    if spec.gpus and cluster.gpu_partition:
        return cluster.gpu_partition
    return cluster.partition


def resource_keys(cluster: ClusterConfig) -> tuple[str, ...]:
    """The resource names every rule declares under ``cluster``: Snakemake fixes a rule's names
    when it parses the workflow, so the optional Slurm ones are there when the cluster sets
    them at all."""
    keys = ["cpus_per_task", "mem_mb", "runtime", "gpu", "gpu_manufacturer"]
    if cluster.partition or cluster.gpu_partition:
        keys.append("slurm_partition")
    if cluster.slurm_extra:
        keys.append("slurm_extra")
    return tuple(keys)


def rule_resources(rule: str, cfg: RunConfig) -> dict[str, Any]:
    """The Snakemake resources of one job of ``rule``; ``cfg`` is its cell's config (its task's
    for the per-task rules, the grid's for the per-grid ones)."""
    spec, seconds = work_of(rule, cfg)
    cluster = cfg.cluster
    values: dict[str, Any] = {
        "cpus_per_task": spec.cpus,
        "mem_mb": spec.mem_mb,
        "runtime": math.ceil((seconds + cluster.start_s) / 60),
        "gpu": spec.gpus,
        "gpu_manufacturer": cluster.gpu_manufacturer,
        # a job without a partition of its own goes to the cluster's default one
        "slurm_partition": partition_of(spec, cluster) or "",
        "slurm_extra": cluster.slurm_extra,
    }
    return {key: values[key] for key in resource_keys(cluster)}


def check_agent_sizing(grid: str, tasks: Iterable[str]) -> None:
    """The workflow composes each agent once per grid, not once per cell (planning stays fast),
    so an ``agent.resources`` in a conf/grid_task/ file would be silently ignored: refuse it."""
    for task in tasks:
        path = conf_dir() / "grid_task" / f"{grid}_{task}.yaml"
        if path.is_file() and OmegaConf.select(OmegaConf.load(path), "agent.resources"):
            raise ConfigError(f"{path} sets agent.resources; set an agent's resources in "
                              f"conf/agent/ or for the whole grid in conf/grid/{grid}.yaml")
