"""``a2rl plan``: what a grid will spend on paid APIs before it runs, and whether each run's
grading caps fund the submissions its budget allows.

Three kinds of spending, each estimated from the grid's budgets and the configured prices
(conf/driver/*.yaml, a2rl.config.prices) under assumptions the output states:

* the driver LLM of each LLM agent's run: calls an hour of the run's time limit, each re-sending
  the conversation (most of it from the provider's prompt cache) and writing a reply; capped by
  ``budget.llm_max_usd`` where set;
* a task's paid judge (``Task.paid_apis``): what one evaluation calls, times the evaluations a
  run makes (every submission the budget allows graded anew; the base model's is the baseline's,
  measured once per task and grid; ``noop`` submits only that), capped by the judge's
  ``max_usd``;
* a task's search API: likewise, with no cap unless the task has one.

A run whose judge cap funds fewer graded submissions than ``budget.max_submissions`` allows is a
disagreement: the run would refuse the later submissions for a reason its budget did not state.
``budget_disagreements`` finds them; the pre-flight reports them as failures, and the baseline
stage and the runner refuse such a cell before its judge is called (the message says which of
the two numbers to change).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from a2rl.config.checks import ConfigError
from a2rl.config.compose import (
    command_grid,
    compose,
    grid_cells,
    grid_overrides,
    task_overrides,
)
from a2rl.config.types import DEFAULT_GRID, DriverConfig, RunConfig
from a2rl.task.base import PaidApi, Task

# an LLM agent's calls, as assumed for the estimate (a CLI agent at work: read, run, wait)
CALLS_PER_HOUR = 120
CONTEXT_TOKENS = 40_000  # prompt tokens a call: the conversation so far, re-sent
CACHED_SHARE = 0.85  # of them, read from the provider's prompt cache
REPLY_TOKENS = 800  # written a call (reasoning included)
ASSUMPTIONS = (
    f"an LLM agent makes {CALLS_PER_HOUR} calls an hour of its time limit, each sending "
    f"~{CONTEXT_TOKENS:,} prompt tokens ({CACHED_SHARE:.0%} from the prompt cache) and writing "
    f"~{REPLY_TOKENS} tokens; budget.llm_max_usd caps it where set",
    "a run grades every submission its budget allows (budget.max_submissions, or fewer where a "
    "judge's cap funds fewer), each anew; noop submits only the base model, whose score is the "
    "baseline's; each task's baseline is graded once per grid",
    "a judge's or search API's cap (max_usd) bounds a run's spending on it; no cache hits",
)


@dataclass
class Spend:
    """One line of the estimate: ``what`` over ``runs`` runs (a baseline counts as one)."""

    what: str
    runs: int
    usd_per_run: float
    usd: float
    basis: str


@cache
def driver_config(name: str) -> DriverConfig:
    return compose([f"driver={name}"]).driver


def driver_usd_per_hour(driver: DriverConfig) -> float:
    rates = driver.prices.rates()
    prompt = CALLS_PER_HOUR * CONTEXT_TOKENS
    return (prompt * (1 - CACHED_SHARE) * rates.input + prompt * CACHED_SHARE
            * rates.cached_input + CALLS_PER_HOUR * REPLY_TOKENS * rates.output) / 1e6


def driver_usd_per_run(cfg: RunConfig) -> float:
    usd = driver_usd_per_hour(cfg.driver) * cfg.budget.time_limit_s / 3600
    return usd if cfg.budget.llm_max_usd is None else min(usd, cfg.budget.llm_max_usd)


def usd_per_eval(api: PaidApi) -> float:
    """One evaluation's cost of ``api``: its calls at its driver's prices (a judge) or at its
    own price a call."""
    if api.driver is None:
        return api.calls_per_eval * api.usd_per_call
    rates = driver_config(api.driver).prices.rates()
    return api.calls_per_eval * (api.input_tokens_per_call * rates.input
                                 + api.output_tokens_per_call * rates.output) / 1e6


def funded_evaluations(api: PaidApi) -> int | None:
    """Evaluations the run's cap on ``api`` pays for (None: no cap, or it costs nothing)."""
    per_eval = usd_per_eval(api)
    if api.max_usd is None or per_eval <= 0:
        return None
    return math.floor(api.max_usd / per_eval)


def budget_disagreements(cfg: RunConfig, task: Task) -> list[str]:
    """Each paid API of the cell's task whose cap funds fewer graded submissions than
    ``budget.max_submissions`` allows, as a sentence saying what to change."""
    out = []
    allowed = cfg.budget.max_submissions
    for api in task.paid_apis():
        funded = funded_evaluations(api)
        if funded is not None and funded < allowed:
            per_eval = usd_per_eval(api)
            out.append(
                f"task {cfg.task.id}: its {api.kind} cap ({api.cap_key}={api.max_usd:g} USD) "
                f"funds {funded} graded submission(s) of ~{per_eval:.2f} USD each "
                f"({api.assumption}) but budget.max_submissions={allowed}; set "
                f"budget.max_submissions={max(1, funded)} for it or {api.cap_key}="
                f"{math.ceil(per_eval * allowed)}")
    return out


def check_grading_budget(cfg: RunConfig, task: Task) -> None:
    """Refuse a cell whose grading caps do not fund its submission limit (ConfigError)."""
    problems = budget_disagreements(cfg, task)
    if problems:
        raise ConfigError("; ".join(problems))


def evaluations_per_run(cfg: RunConfig, task: Task) -> int:
    if cfg.agent.name == "noop":
        return 0
    funded = [f for f in map(funded_evaluations, task.paid_apis()) if f is not None]
    final = 1 if cfg.task.feedback == "validation" else 0  # the best one, on the sealed test
    return min([cfg.budget.max_submissions, *funded]) + final


def api_name(api: PaidApi) -> str:
    return f"{api.kind} {api.name or api.driver or api.key_env}"


def estimate(cells: list[tuple[RunConfig, Task, int]]) -> list[Spend]:
    """The spending of ``cells``: (a cell's config, its task, how many seeds run it)."""
    lines: dict[str, Spend] = {}

    def add(what: str, runs: int, per_run: float, basis: str) -> None:
        line = lines.setdefault(what, Spend(what, 0, 0.0, 0.0, basis))
        line.runs += runs
        line.usd = round(line.usd + runs * per_run, 2)
        line.usd_per_run = round(line.usd / line.runs, 2)  # the mean: noop's runs spend less

    graded_tasks = set()
    for cfg, task, seeds in cells:
        if cfg.driver.provider != "none" and cfg.agent.kind == "llm":
            per_run = driver_usd_per_run(cfg)
            add(f"driver {cfg.driver.name}", seeds, per_run,
                f"{cfg.budget.time_limit_s / 3600:g} h runs")
        evaluations = evaluations_per_run(cfg, task)
        for api in task.paid_apis():
            per_eval = usd_per_eval(api)
            spent = evaluations * per_eval
            per_run = spent if api.max_usd is None else min(spent, api.max_usd)
            add(f"{api_name(api)} ({cfg.task.id})", seeds, per_run,
                f"~{per_eval:.2f} USD an evaluation: {api.assumption}")
            if cfg.task.id not in graded_tasks:
                add(f"{api_name(api)} ({cfg.task.id} baseline)", 1, per_eval,
                    "the base model, graded once")
        graded_tasks.add(cfg.task.id)
    return sorted(lines.values(), key=lambda s: -s.usd)


# ---------------------------------------------------------------------------------- the grid


def grid_cell_configs(grid: str, extra: list[str]) -> list[tuple[RunConfig, int]]:
    """One config per (task, agent, driver) of the grid, with how many seeds run it. A task's
    budget and params are its own composition's (conf/grid_task may change them); the agent
    and driver are put in it, so the paper grid's 200-odd cells take a dozen compositions."""
    base = grid_overrides(grid, extra)
    counts: dict[tuple[str, str, str], int] = {}
    for cell in grid_cells(compose(base)):
        key = (cell["task"], cell["agent"], cell["driver"])
        counts[key] = counts.get(key, 0) + 1
    by_task = {t: compose(task_overrides(t, base)) for t in {t for t, _, _ in counts}}
    agents = {a: compose([*base, f"agent={a}"]).agent for a in {a for _, a, _ in counts}}
    drivers = {d: compose([*base, f"driver={d}"]).driver for d in {d for _, _, d in counts}}
    return [(replace(by_task[t], agent=agents[a], driver=drivers[d]), n)
            for (t, a, d), n in counts.items()]


def load_tasks(configs: list[tuple[RunConfig, int]]) -> dict[str, Task]:
    from a2rl.task.base import load_task

    tasks: dict[str, Task] = {}
    for cfg, _ in configs:
        if cfg.task.id not in tasks:
            tasks[cfg.task.id] = load_task(cfg.task, Path(cfg.paths.root) / cfg.paths.data)
    return tasks


def plan(grid: str = DEFAULT_GRID, extra: list[str] | None = None) -> dict[str, Any]:
    """Everything ``a2rl plan`` reports, as a dict."""
    configs = grid_cell_configs(grid, extra or [])
    return plan_of(grid, configs, load_tasks(configs))


def plan_of(grid: str, configs: list[tuple[RunConfig, int]],
            tasks: dict[str, Task]) -> dict[str, Any]:
    lines = estimate([(cfg, tasks[cfg.task.id], seeds) for cfg, seeds in configs])
    problems = sorted({p for cfg, _ in configs
                       for p in budget_disagreements(cfg, tasks[cfg.task.id])})
    uncapped = sorted({f"{api_name(api)} ({cfg.task.id})" for cfg, _ in configs
                       for api in tasks[cfg.task.id].paid_apis() if api.max_usd is None})
    return {"grid": grid, "runs": sum(seeds for _, seeds in configs),
            "lines": [asdict(line) for line in lines],
            "total_usd": round(sum(line.usd for line in lines), 2),
            "assumptions": list(ASSUMPTIONS), "budget_disagreements": problems,
            "uncapped": uncapped}


def render(report: dict[str, Any], failures: bool = True) -> str:
    """The report as lines; ``failures``: with a FAIL line for each budget disagreement."""
    out = [f"a2rl plan: grid {report['grid']}, {report['runs']} runs; estimated API spend "
           f"{report['total_usd']:,.2f} USD"]
    for line in report["lines"]:
        out.append(f"  {line['usd']:>11,.2f} USD  {line['what']}: {line['runs']} x "
                   f"{line['usd_per_run']:,.2f} ({line['basis']})")
    if not report["lines"]:
        out.append("  nothing: no LLM driver, judge or search API is paid for")
    for what in report["uncapped"]:
        out.append(f"  no cap    {what}: nothing limits a run's spending on it")
    out += [f"assumes   {a}" for a in report["assumptions"]]
    out += [f"FAIL      {p}" for p in report["budget_disagreements"] if failures]
    return "\n".join(out)


def main(args: list[str]) -> int:
    grid, extra, flags = command_grid(args, ("--json",))
    report = plan(grid, extra)
    print(json.dumps(report, indent=1) if "--json" in flags else render(report))
    return 1 if report["budget_disagreements"] else 0
