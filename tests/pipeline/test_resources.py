"""Each rule's cluster resources, derived from the config (a2rl.pipeline.resources), and what
the workflow plans with them."""

from __future__ import annotations

import math
import re
import shutil

import pytest
from test_workflow import snakemake

from a2rl.config.compose import compose, grid_cells, grid_overrides
from a2rl.config.types import ConfigError
from a2rl.pipeline.resources import RULES, check_agent_sizing, rule_resources


def test_run_agent_gets_its_budget_plus_what_the_harness_adds():
    """The ci grid: 120 s budget + 5 s kill grace + one evaluation in flight at the deadline
    (task.eval_s 300) + the cluster's start-up (600 s): 1025 s, 18 minutes begun; the agent's
    CPUs and memory from conf/grid/ci.yaml."""
    cfg = compose(["grid=ci", "agent=sft"])
    assert rule_resources("run_agent", cfg) == {
        "cpus_per_task": 2, "mem_mb": 6000, "runtime": 18, "gpu": 0,
        "gpu_manufacturer": "nvidia"}


def test_uncounted_evaluations_lengthen_the_agent_job():
    """With count_eval_time false the budget stretches by every evaluation: one per scored
    submission and one in flight."""
    counted = compose(["grid=ci", "budget.max_submissions=3"])
    uncounted = compose(["grid=ci", "budget.max_submissions=3", "budget.count_eval_time=false"])
    extra = rule_resources("run_agent", uncounted)["runtime"] - \
        rule_resources("run_agent", counted)["runtime"]
    assert extra == 3 * 300 / 60


def test_grading_jobs_get_the_tasks_resources_per_split():
    cfg = compose(["grid=ci"])
    assert rule_resources("final_grade", cfg)["runtime"] == (300 + 600) / 60
    # run_cell: the agent's run (120 s budget, 5 s grace, 300 s in flight), the final grade,
    # then the export (900 s) and the summary (900 s), in one job
    assert rule_resources("run_cell", cfg)["runtime"] == \
        math.ceil((120 + 5 + 300 + 300 + 900 + 900 + 600) / 60)
    assert rule_resources("measure_baseline", cfg)["cpus_per_task"] == 1
    validation = compose(["grid=ci", "task.feedback=validation"])
    assert rule_resources("measure_baseline", validation)["runtime"] == (2 * 300 + 600) / 60


@pytest.mark.parametrize(("task", "agent"), [("gsm8k", "sft"), ("alpacaeval", "dpo"),
                                           ("alfworld", "sft_grpo")])
def test_the_paper_grid_asks_for_gpus_and_twelve_hours(task, agent):
    """Every reference agent trains on a GPU for the 12-hour budget, and every task grades on
    one (AlpacaEval's judge is an API, but its replies are generated on the GPU)."""
    cfg = compose(["grid=paper", f"task={task}", f"agent={agent}"])
    job = rule_resources("run_agent", cfg)
    assert job["gpu"] == 1 and job["runtime"] * 60 > 43200
    assert rule_resources("measure_baseline", cfg)["gpu"] == 1
    assert rule_resources("final_grade", cfg)["runtime"] == (3600 + 600) / 60
    # run_cell: what the largest of its stages needs (the agent's node share, larger than the
    # task's grading resources), for the agent's time plus the final grade, export and summary
    cell = rule_resources("run_cell", cfg)
    grading = rule_resources("final_grade", cfg)
    assert cell["gpu"] == 1
    assert cell["cpus_per_task"] == max(job["cpus_per_task"], grading["cpus_per_task"])
    assert cell["mem_mb"] == max(job["mem_mb"], grading["mem_mb"], 4000)
    assert cell["runtime"] == job["runtime"] + (3600 + 900 + 900) / 60
    assert rule_resources("build_report", cfg) == {
        "cpus_per_task": 1, "mem_mb": 4000, "runtime": (900 + 600) / 60, "gpu": 0,
        "gpu_manufacturer": "nvidia"}


def test_partitions_and_sbatch_flags_come_from_the_cluster_group():
    """Jobs with GPUs go to the GPU partition, the others to the CPU one; Slurm keys appear only
    when the cluster option sets them."""
    site = ["grid=paper", "task=gsm8k", "cluster.partition=cpu", "cluster.gpu_partition=gpu",
            "cluster.slurm_extra='--qos=normal'"]
    cfg = compose(site)
    assert rule_resources("run_agent", cfg)["slurm_partition"] == "gpu"
    assert rule_resources("run_cell", cfg)["slurm_partition"] == "gpu"
    assert rule_resources("build_report", cfg)["slurm_partition"] == "cpu"
    assert rule_resources("build_report", cfg)["slurm_extra"] == "--qos=normal"
    assert "slurm_partition" not in rule_resources("run_agent", compose(["grid=paper"]))
    localhost = compose(["grid=ci", "cluster=localhost"])
    assert rule_resources("prepare_task", localhost)["slurm_partition"] == "a2rl"


def test_every_rule_has_resources_and_others_are_refused():
    cfg = compose(["grid=ci"])
    assert {rule: rule_resources(rule, cfg)["runtime"] > 0 for rule in RULES} == \
        dict.fromkeys(RULES, True)
    with pytest.raises(ConfigError, match="no resources for rule 'train'"):
        rule_resources("train", cfg)


def test_bad_resources_fail_at_compose_time_with_the_key():
    with pytest.raises(ConfigError, match=r"resources.gpus=-1"):
        compose(["agent=sft", "agent.resources.gpus=-1"])
    with pytest.raises(ConfigError, match=r"task.eval_s=0"):
        compose(["task.eval_s=0"])
    with pytest.raises(ConfigError, match=r"cluster.gpu_manufacturer='intel'"):
        compose(["cluster.gpu_manufacturer=intel"])


def test_agent_resources_in_a_grid_task_file_are_refused(tmp_path, monkeypatch):
    """The workflow composes each agent once per grid, so a per-task agent size would be
    ignored: it is an error instead."""
    from a2rl.config.compose import conf_dir

    conf = shutil.copytree(conf_dir(), tmp_path / "conf")
    (conf / "grid_task" / "ci_household.yaml").write_text(
        "# @package _global_\nagent:\n  resources: {cpus: 8}\n")
    monkeypatch.setenv("A2RL_CONF", str(conf))
    check_agent_sizing("ci", ["gsm8k_arith"])
    with pytest.raises(ConfigError, match="ci_household.yaml sets agent.resources"):
        check_agent_sizing("ci", ["gsm8k_arith", "household"])


def test_planned_jobs_carry_the_derived_resources(tmp_path):
    """What Snakemake plans for the ci grid on the localhost cluster: every cell's job with
    the agent's CPUs and memory (larger than the task's grading ones), the time of its run and
    of the stages after it, and the partition."""
    result = snakemake("-n", "-p", "--config", "grid=ci", 'overrides=["cluster=localhost"]',
                       workdir=tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    agent_jobs = re.findall(r"rule run_cell:\n(?:.*\n)*?\s+resources: (.*)", output)
    assert len(agent_jobs) == len(grid_cells(compose(grid_overrides("ci"))))
    for resources in agent_jobs:
        for item in ("cpus_per_task=2", "mem_mb=6000", "runtime=48", "slurm_partition=a2rl"):
            assert item in resources.split(", "), resources
