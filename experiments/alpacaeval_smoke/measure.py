"""Measure the smoke grid's AlpacaEval cells (the offline variant, SmolLM2-135M-Instruct, the
grader's own local judge, CPU): each reference agent's final LC win rate with its standard
error, the base model's, and the wall time of every stage, cell by cell.

    nice -n 19 python experiments/alpacaeval_smoke/measure.py --agents noop,sft,dpo \
        --out results/measure/alpacaeval_smoke.json

Each cell runs the pipeline's own stages (``a2rl.pipeline.stages``: prepare_model,
prepare_task, measure_baseline, run_agent, final_grade, summarize_run) on the config
``grid=smoke task=alpacaeval_local agent=AGENT``, exactly as ``snakemake --config grid=smoke`` runs
that cell. The JSON (and the Markdown table next to it) is rewritten after every cell, so a
measurement stopped early keeps the cells it finished. The load average before and after each
stage is recorded: numbers taken on a shared machine say so.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from a2rl.common import write_json_atomic

REPO = Path(__file__).resolve().parents[2]
STAGES = ("prepare_model", "prepare_task", "measure_baseline", "run_agent", "final_grade",
          "summarize_run")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", default="noop,sft,dpo",
                        help="comma-separated reference agents, run in this order")
    parser.add_argument("--out", type=Path, default=Path("results/measure/alpacaeval_smoke.json"))
    parser.add_argument("overrides", nargs="*",
                        help="extra Hydra overrides for every cell (e.g. paths.results=...)")
    return parser.parse_args(argv)


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def cell_config(agent: str, overrides: list[str]):
    from a2rl.config import compose

    # the data through the configured path (paths.data: $A2RL_DATA, else the checkout's data/)
    return compose(["grid=smoke", "task=alpacaeval_local", f"agent={agent}", "driver=none",
                    "seed=0", f"paths.root={REPO}", *overrides])


def run_stages(cfg) -> list[dict[str, Any]]:
    """Every stage of the cell in order: its wall time and the load around it."""
    from a2rl.pipeline import stage_function

    timings = []
    for name in STAGES:
        before, started = load(), time.monotonic()
        function = stage_function(name)
        function(cfg, reuse=True) if name == "prepare_task" else function(cfg)
        timings.append({"stage": name, "seconds": round(time.monotonic() - started, 1),
                        "load_before": before, "load_after": load()})
        print(f"  {name}: {timings[-1]['seconds']:.0f}s (load {before[0]} -> "
              f"{timings[-1]['load_after'][0]})", flush=True)
    return timings


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())


def cell_result(cfg, timings: list[dict[str, Any]]) -> dict[str, Any]:
    """What the cell's run directory says: the final and base scores, each submission, the
    agent's time and the judge's usage."""
    from a2rl.common import iter_jsonl
    from a2rl.pipeline import layout_of, run_paths

    run = run_paths(cfg)
    final, record = read_json(run.final), read_json(run.run_json)
    base = read_json(layout_of(cfg).baseline(cfg.task.id))["test"]
    submissions = [{k: e.get(k) for k in ("submission_id", "score", "stderr", "eval_seconds",
                                          "elapsed_s", "cached", "equals_base", "valid",
                                          "status")}
                   for e in iter_jsonl(run.ledger)]
    selected = next((s for s in submissions
                     if s["submission_id"] == final["selected_submission"]), {})
    # a copy of the base model is answered from the baseline, whose breakdown is the base's
    breakdown = (base if selected.get("equals_base") else final).get("breakdown") or {}
    keep = ("win_rate", "standard_error", "lc_win_rate", "discrete_win_rate", "avg_length",
            "empty_pct", "order_agreement_pct", "glm")
    return {
        "agent": cfg.agent.name,
        "score": final["test_score"], "stderr": final["test_stderr"], "n": final["n"],
        "breakdown": {k: breakdown.get(k) for k in keep},
        "base_score": base["score"], "base_stderr": base["stderr"],
        "base_breakdown": {k: (base.get("breakdown") or {}).get(k) for k in keep},
        "selected_submission": final["selected_submission"],
        "agent_seconds": record["agent_seconds"], "time_limit_s": record["time_limit_s"],
        "agent_status": record["status"], "submissions": submissions,
        "eval_seconds_total": round(sum(s["eval_seconds"] or 0 for s in submissions), 1),
        "grading_usage": record.get("grading_usage"),
        "stages": timings,
        "wall_s": round(sum(t["seconds"] for t in timings), 1),
    }


def number(value: Any, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def markdown(report: dict[str, Any]) -> str:
    lines = [f"# AlpacaEval smoke cells ({report['machine']})", "",
             f"Load average before: {report['load_before']}; after: {report.get('load_after')}",
             "", "| agent | LC win rate ± SE | raw win rate | avg length | base (LC ± SE) | "
             "submissions | agent s (limit) | eval s | cell wall s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for c in report["cells"]:
        b = c["breakdown"]
        lines.append(
            f"| {c['agent']} | {number(c['score'])} ± {number(c['stderr'])} | "
            f"{number(b['win_rate'])} | {number(b['avg_length'], 0)} | "
            f"{number(c['base_score'])} ± {number(c['base_stderr'])} | "
            f"{len(c['submissions'])} | {c['agent_seconds']:.0f} ({c['time_limit_s']}) | "
            f"{c['eval_seconds_total']:.0f} | {c['wall_s']:.0f} |")
    return "\n".join(lines) + "\n"


def write(report: dict[str, Any], out: Path) -> None:
    write_json_atomic(out, report)
    out.with_suffix(".md").write_text(markdown(report))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report: dict[str, Any] = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
        "load_before": load(), "cells": [], "command": sys.argv}
    started = time.monotonic()
    for agent in [a for a in args.agents.split(",") if a]:
        print(f"alpacaeval/{agent}/none/seed0", flush=True)
        cfg = cell_config(agent, args.overrides)
        report["cells"].append(cell_result(cfg, run_stages(cfg)))
        report |= {"load_after": load(), "wall_s": round(time.monotonic() - started, 1)}
        write(report, args.out)
    print(markdown(report), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
