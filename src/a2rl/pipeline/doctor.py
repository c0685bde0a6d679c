"""``a2rl doctor``: can this machine run a grid (by default the quick grid) as configured?

In about a minute it checks that bubblewrap runs a sandbox, that the agents' Python has the
training stack, and that the base model is prepared (it prepares it when not); reports the
hardware and the precision ``auto`` picks; times one training step and one batch of generation
on the real base model in that precision; and from those timings predicts, per cell of the
grid, when each reference agent makes its first submission and how long the cell takes,
saying plainly what to change when a plan does not fit its budget.

The predictions are estimates from two measured rates (training tokens a second and
generation) scaled by each task's token counts; they are not a substitute for the run itself,
but they tell a machine that can do a cell in minutes from one that needs hours.
"""

from __future__ import annotations

import json
import math
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from a2rl.common import machine_load
from a2rl.common.hardware import AGENT_DEVICE, describe, one_line, resolve_precision
from a2rl.common.layout import Layout
from a2rl.config.compose import cell_overrides, compose, grid_cells, grid_overrides
from a2rl.config.types import DEFAULT_GRID, RunConfig
from a2rl.data.install import grid_data_problems
from a2rl.isolation import agent_python
from a2rl.pipeline.agent_settings import agent_settings, check_settings
from a2rl.pipeline.timings import Rates, decode_step_s, measure

ASSUMED_ROW_TOKENS = 400  # a training row's length when the task is not prepared yet
ASSUMED_PROMPT_TOKENS = 300  # an interactive step's prompt when the task is not prepared yet
TRAIN_OVERHEAD_S = 20.0  # loading the model and TRL's set-up, saving the checkpoint
NOOP_CELL_S = 30.0  # a noop cell: the workspace, one cached submission, the summary


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


@dataclass
class CellPlan:
    cell: str
    budget_s: float
    first_submission_s: float | None
    verdict: str
    predicted_s: float
    advice: str = ""


# ------------------------------------------------------------------------------- checks


def check_sandbox(kind: str = "bwrap", python: Path | None = None) -> Check:
    """Run the agents' Python (environment ``python``) in the harness's own sandbox."""
    from a2rl.isolation.sandbox import Sandbox, SandboxUnavailable

    if kind == "none":
        return Check("sandbox", True, "sandbox=none: agents run WITHOUT isolation")
    with tempfile.TemporaryDirectory(prefix="a2rl-doctor-") as tmp:
        root = Path(tmp)
        for sub in ("workspace/code", "workspace/output", "tools", "grader"):
            (root / sub).mkdir(parents=True)
        try:
            box = Sandbox("bwrap", root / "workspace", root / "tools", root / "grader",
                          python=python)
            argv = box.command([box.interpreter, "-c", "import os; print(os.getuid())"],
                               {"PATH": "/usr/bin:/bin"})
        except (SandboxUnavailable, agent_python.AgentPythonMissing) as err:
            return Check("sandbox", False, str(err))
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    if out.returncode != 0:
        return Check("sandbox", False, f"bwrap failed (exit {out.returncode}): "
                                       f"{out.stderr.strip()[-300:]}; unprivileged user "
                                       f"namespaces may be off (sysctl kernel."
                                       f"unprivileged_userns_clone=1), or set sandbox=none")
    return Check("sandbox", True, f"bubblewrap runs the agents' Python (uid "
                                  f"{out.stdout.strip()} inside)")


def check_agent_python(venv: Path) -> Check:
    """The agents' own environment (``{python}``: resources/agent-python) has the stack."""
    code = ("import importlib.metadata as m; print(' '.join(f'{p} {m.version(p)}' for p in "
            f"{list(agent_python.TRAINING_STACK)!r}))")
    try:
        python = agent_python.interpreter(venv)
    except agent_python.AgentPythonMissing as err:
        return Check("agent python", False, str(err))
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True,
                         timeout=120, check=False)
    if out.returncode != 0:
        return Check("agent python", False, f"{python} lacks the training stack: "
                                            f"{out.stderr.strip().splitlines()[-1:]}; run "
                                            f"scripts/setup.sh")
    return Check("agent python", True, f"{python}: {out.stdout.strip()}")


def ensure_model(cfg: RunConfig) -> tuple[Path, Check]:
    from a2rl.pipeline.stages import base_model_dir, prepare_model

    model_dir = base_model_dir(cfg)
    if (model_dir / "config.json").is_file():
        return model_dir, Check("base model", True, f"{cfg.task.model.name} at {model_dir}")
    started = time.monotonic()
    prepare_model(cfg)
    return model_dir, Check("base model", True, f"{cfg.task.model.name} was missing; prepared "
                                                f"it in {time.monotonic() - started:.0f}s")


# ---------------------------------------------------------------------------- predictions


def token_lengths(path: Path, tokenizer, fields: tuple[str, ...], limit: int = 64) -> float | None:
    """Mean token count of the text ``fields`` of up to ``limit`` rows of a JSONL file (None when
    the file is missing or has none of them)."""
    if not path.is_file():
        return None
    counts = []
    with path.open() as f:
        for line in f:
            if len(counts) >= limit:
                break
            row = json.loads(line) if line.strip() else {}
            text = " ".join(str(row[k]) for k in fields if k in row)
            if "messages" in row and "messages" in fields:
                text = " ".join(m.get("content", "") for m in row["messages"])
            if text:
                counts.append(len(tokenizer(text)["input_ids"]))
    return sum(counts) / len(counts) if counts else None


def count_lines(path: Path) -> int | None:
    if not path.is_file():
        return None
    with path.open() as f:
        return sum(1 for line in f if line.strip())


def eval_seconds(cfg: RunConfig, rates: Rates, tokenizer) -> tuple[float, str]:
    """The grader's evaluation of one submission of ``cfg``'s task: the baseline's measured
    time when there is one on this machine, else an estimate from the rates."""
    from a2rl.common.layout import Layout

    layout = Layout.from_paths(cfg.paths)
    prepared, baseline = layout.prepared(cfg.task.id), layout.baseline(cfg.task.id)
    if baseline.is_file():
        test = json.loads(baseline.read_text()).get("test") or {}
        if test.get("seconds") and not test.get("cached"):
            return float(test["seconds"]), "measured by the baseline"
    items = count_lines(prepared.test) or int(cfg.task.params.get("test_size")
                                              or cfg.task.params.get("test_games") or 100)
    steps = int(cfg.task.params.get("max_steps", 1))  # an interactive game: a call a step
    prompt = (token_lengths(prepared.test, tokenizer, ("prompt", "question"))
              or ASSUMED_PROMPT_TOKENS)
    calls = items * steps
    batches = math.ceil(items / cfg.task.inference.batch_size) * steps
    batch = min(items, cfg.task.inference.batch_size)
    seconds = (calls * prompt * rates.prefill_s_per_token
               + batches * cfg.task.inference.max_new_tokens * decode_step_s(rates, batch))
    return seconds, "estimated"


def grpo_iteration_s(cfg: RunConfig, rates: Rates) -> float:
    """One GRPO iteration, roughly: games x group episodes played in lockstep (one batched
    generation a step, ~16 new tokens) and an update over about half their steps."""
    settings = agent_settings(cfg)
    episodes = settings.games * settings.group
    # episodes end with the game: the task's step limit unless the agent's own is configured
    configured = "max_steps" in cfg.agent.settings.get(cfg.agent.name, {})
    steps = (settings.max_steps if configured
             else int(cfg.task.params.get("max_steps", settings.max_steps)))
    rollout = steps * (episodes * ASSUMED_PROMPT_TOKENS * rates.prefill_s_per_token
                       + 16 * decode_step_s(rates, episodes))
    update = episodes * steps / 2 * ASSUMED_PROMPT_TOKENS * rates.train_s_per_token
    return rollout + update


def plan_cell(cfg: RunConfig, rates: Rates, tokenizer,
              evaluation: tuple[float, str]) -> CellPlan:
    """``evaluation``: (seconds, how known) of one evaluation of the cell's task."""
    from a2rl.common.layout import Layout

    prepared = Layout.from_paths(cfg.paths).prepared(cfg.task.id)
    name = f"{cfg.task.id}/{cfg.agent.name}/{cfg.driver.name}/seed{cfg.seed}"
    budget = cfg.budget.time_limit_s
    evaluation, how = evaluation
    settings = agent_settings(cfg)
    if cfg.agent.name == "grpo":
        seconds = grpo_iteration_s(cfg, rates)
        iters = settings.iters
        first = TRAIN_OVERHEAD_S + iters * seconds
        return CellPlan(name, budget, min(first, budget - settings.reserve_s),
                        f"first submission after a GRPO round of {iters} iterations of "
                        f"~{seconds:.0f}s (estimated; fewer if they do not fit)", budget)
    if cfg.agent.name == "dpo":  # sampling + DPO rounds: no step-time model of them yet
        return CellPlan(name, budget, None, "DPO rounds until the budget ends (sampling and "
                        "steps not predicted)", budget)
    if cfg.agent.name not in ("sft", "sft_grpo"):
        verdict = ("submits the base model at once" if cfg.agent.name == "noop" else
                   "not a reference agent: its plan is the LLM's own")
        # noop's submission is the base model, answered from the baseline's cached score
        return CellPlan(name, budget, 0.0 if cfg.agent.name == "noop" else None, verdict,
                        NOOP_CELL_S if cfg.agent.name == "noop" else budget)
    # the first SFT round: sft's own, or sft_grpo's warm-up
    steps_key = "steps" if cfg.agent.name == "sft" else "warmup_steps"
    steps = getattr(settings, steps_key)
    batch, max_len = ((settings.batch, settings.max_len) if cfg.agent.name == "sft"
                      else (settings.warmup_batch, settings.warmup_max_len))
    row = min(token_lengths(prepared.data / "train.jsonl", tokenizer,
                            ("prompt", "completion", "question", "answer", "messages"))
              or ASSUMED_ROW_TOKENS, max_len)
    step_s = rates.train_s_per_token * batch * row + rates.optimizer_s
    first = TRAIN_OVERHEAD_S + steps * step_s
    reserve = settings.reserve_s
    usable = budget - reserve
    if first <= usable:
        verdict = f"first submission after {steps} steps of ~{step_s:.1f}s"
        advice = ""
    else:
        fit = max(0, int((usable - TRAIN_OVERHEAD_S) / step_s))
        need = math.ceil(first + reserve)
        verdict = (f"only {fit} of {steps} steps fit: the agent stops there and submits" if fit
                   else "no step fits: the agent submits the base model")
        advice = (f"for all {steps} steps: budget.time_limit_s={need}, or fewer steps: "
                  f"++agent.settings.{cfg.agent.name}.{steps_key}={max(1, fit)}")
    if cfg.agent.name == "sft":
        rounds = settings.max_rounds
        work = rounds * (first + (evaluation if cfg.budget.count_eval_time else 0))
        predicted = min(work, budget) + (0 if cfg.budget.count_eval_time else rounds * evaluation)
    else:  # sft_grpo: GRPO rounds go on until the budget ends; evaluations may be extra
        predicted = budget + (0 if cfg.budget.count_eval_time else 3 * evaluation)
    return CellPlan(name, budget, min(first, usable), f"{verdict} ({how} "
                    f"evaluation {evaluation:.0f}s)", predicted, advice)


# ---------------------------------------------------------------------------------- report


def plan_cells(grid_cfg: RunConfig) -> list[dict[str, Any]]:
    """One cell per (task, agent): drivers and seeds do not change a reference agent's plan,
    and an LLM agent's plan is its own (the paper grid has 687 cells, 54 of these)."""
    seen, cells = set(), []
    for cell in grid_cells(grid_cfg):
        if (cell["task"], cell["agent"]) not in seen:
            seen.add((cell["task"], cell["agent"]))
            cells.append(cell)
    return cells


def diagnose(grid: str = DEFAULT_GRID, extra: list[str] | None = None) -> dict[str, Any]:
    """Everything ``a2rl doctor`` reports, as a dict."""
    from transformers import AutoTokenizer

    started = time.monotonic()
    base = grid_overrides(grid, extra or [])
    cells = [check_settings(compose(cell_overrides(c, base)))
             for c in plan_cells(compose(base))]
    venv = agent_python.agent_python_dir(Layout.from_paths(cells[0].paths).resources)
    python_check = check_agent_python(venv)
    checks = [check_sandbox(cells[0].sandbox, venv if python_check.ok else None), python_check]
    data_problems = grid_data_problems(cells)
    checks.append(Check("data", not data_problems,
                        "; ".join(data_problems) or "every task's data is present"))
    model_dir, model_check = ensure_model(cells[0])
    checks.append(model_check)
    train_p = resolve_precision(cells[0].agent.precision, AGENT_DEVICE)
    infer_p = resolve_precision(cells[0].task.inference.precision)
    load = machine_load.sample()  # before the timing, which loads the cores itself
    rates = measure(model_dir, train_p, infer_p)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    # the rates are the timed model's: cells on another model are listed, not predicted
    timed = [cfg for cfg in cells if cfg.task.model.name == cells[0].task.model.name]
    # one evaluation estimate per task: it tokenizes the task's test split
    evaluations = {cfg.task.id: eval_seconds(cfg, rates, tokenizer) for cfg in timed}
    plans = [plan_cell(cfg, rates, tokenizer, evaluations[cfg.task.id]) for cfg in timed]
    plans += [CellPlan(f"{cfg.task.id}/{cfg.agent.name}", cfg.budget.time_limit_s, None,
                       f"not timed: model {cfg.task.model.name}, not "
                       f"{cells[0].task.model.name}; run `a2rl doctor` with that task alone",
                       cfg.budget.time_limit_s) for cfg in cells if cfg not in timed]
    baselines = {task: round(seconds) for task, (seconds, _) in evaluations.items()}
    return {"grid": grid, "hardware": describe(agent=train_p, inference=infer_p),
            "checks": [asdict(c) for c in checks], "rates": asdict(rates),
            "cells": [asdict(p) for p in plans], "baselines_s": baselines,
            "predicted_grid_s": round(sum(p.predicted_s for p in plans)
                                      + sum(baselines.values())),
            **timing_verdict(load, all(c.ok for c in checks), not any(p.advice for p in plans)),
            "seconds": round(time.monotonic() - started, 1)}


def timing_verdict(load: machine_load.Load, checks_ok: bool, plans_fit: bool
                   ) -> dict[str, Any]:
    """The report's load, whether its timings can be trusted, and its verdict. On a busy
    machine (other work on the cores, ``machine_load``) the timings run slow, so the verdict
    says they are unreliable, and a plan that does not fit says it may fit on idle cores."""
    reliable = not load.busy
    if not checks_ok:
        verdict = "see FAIL lines above"
    elif plans_fit:
        verdict = "ready" + ("" if reliable else "; timings UNRELIABLE (a busy machine, see "
                             "load): the predictions are likely too long")
    else:
        verdict = "see change lines above" + ("" if reliable else (
            "; but the timings are UNRELIABLE (a busy machine, see load): these plans may "
            "fit on idle cores, so run `a2rl doctor` again there before changing them"))
    return {"load": load.to_dict() | {"text": load.describe()}, "timings_reliable": reliable,
            "verdict": verdict, "ok": checks_ok and plans_fit}


def render(report: dict[str, Any]) -> str:
    lines = [f"a2rl doctor: grid {report['grid']}",
             f"machine   {one_line(report['hardware'])}"]
    for c in report["checks"]:
        lines.append(f"{'ok  ' if c['ok'] else 'FAIL'}      {c['name']}: {c['detail']}")
    r = report["rates"]
    lines.append(f"load      {report['load']['text']}"
                 + ("" if report["timings_reliable"] else " -> timings below UNRELIABLE"))
    lines.append(f"timed     training step {r['train_s_per_token'] * 1e3:.3f} ms/token "
                 f"+ {r['optimizer_s']:.2f}s AdamW (8 x 400 tokens: "
                 f"{r['train_s_per_token'] * 3200 + r['optimizer_s']:.1f}s); prompt pass "
                 f"{r['prefill_s_per_token'] * 1e3:.3f} ms/token; a generated token for "
                 + ", ".join(f"{b} prompts {t * 1e3:.0f} ms"
                             for b, t in r["decode_step_s"].items()))
    for p in report["cells"]:
        lines.append(f"cell      {p['cell']}: budget {p['budget_s']:.0f}s; {p['verdict']}; "
                     f"predicted {p['predicted_s'] / 60:.1f} min")
        if p["advice"]:
            lines.append(f"  change  {p['advice']}")
    lines.append("baseline  " + "; ".join(f"{task} {s / 60:.1f} min"
                                          for task, s in report["baselines_s"].items()))
    lines.append(f"grid      predicted {report['predicted_grid_s'] / 60:.0f} min for the baselines "
                 f"and cells (plus preparing the tasks); doctor took {report['seconds']:.0f}s")
    lines.append(f"verdict   {report['verdict']}")
    return "\n".join(lines)


def main(args: list[str]) -> int:
    as_json = "--json" in args
    rest = [a for a in args if a != "--json"]
    grid = next((a.split("=", 1)[1] for a in rest if a.startswith("grid=")), DEFAULT_GRID)
    report = diagnose(grid, [a for a in rest if not a.startswith("grid=")])
    print(json.dumps(report, indent=1) if as_json else render(report))
    return 0 if report["ok"] else 1
