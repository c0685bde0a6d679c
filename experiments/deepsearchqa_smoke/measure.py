"""Measure DeepSearchQA's smoke-grid cells (the offline world on SmolLM2-135M-Instruct): the
base model's score (``noop``) and ``sft`` on the expert trajectories, each with its standard
error, wall time and the machine's load, in one report:

    nice -n 19 python experiments/deepsearchqa_smoke/measure.py --out results/bench/dsqa_smoke.json
    python experiments/deepsearchqa_smoke/measure.py --agents noop        # the baseline only

Each cell runs as ``a2rl run grid=smoke task=deepsearchqa_world agent=<agent>`` (every stage:
prepare, baseline, the agent in its sandbox, the final grade, the summary), exactly as the
smoke grid runs it; the grader plays the sealed questions in lockstep. Extra Hydra overrides
follow ``--``. The load average is sampled every 30 s while a cell runs (the machine may be
shared; the numbers say how much).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from a2rl.common import write_json_atomic

TASK = "deepsearchqa_world"


def sample_load(stop: threading.Event, samples: list[float], every_s: float = 30.0) -> None:
    while not stop.is_set():
        samples.append(os.getloadavg()[0])
        stop.wait(every_s)


def run_cell(agent: str, overrides: list[str], root: Path) -> dict:
    command = [sys.executable, "-m", "a2rl.pipeline.cli", "run", "grid=smoke", f"task={TASK}",
               f"agent={agent}", "seed=0", *overrides]
    samples: list[float] = []
    stop = threading.Event()
    sampler = threading.Thread(target=sample_load, args=(stop, samples), daemon=True)
    started = time.monotonic()
    sampler.start()
    try:
        result = subprocess.run(command, cwd=root, check=False, capture_output=True, text=True)
    finally:
        stop.set()
        sampler.join()
    wall = time.monotonic() - started
    run = root / "results" / "runs" / TASK / agent / "none" / "seed0"
    cell = {"agent": agent, "command": " ".join(command[1:]), "exit_code": result.returncode,
            "wall_s": round(wall, 1),
            "load": {"min": min(samples, default=None), "max": max(samples, default=None),
                     "mean": round(sum(samples) / len(samples), 2) if samples else None}}
    if result.returncode != 0:
        cell["error"] = result.stderr[-3000:]
        return cell
    final = json.loads((run / "final.json").read_text())
    status = json.loads((run / "run.json").read_text())
    ledger = [json.loads(line) for line in (run / "ledger.jsonl").read_text().splitlines()]
    cell |= {"test_score": final["test_score"], "test_stderr": final["test_stderr"],
             "n": final["n"], "baseline": final["baseline"],
             "improvement": final["improvement"], "agent_seconds": status["agent_seconds"],
             "status": status["status"],
             "eval_seconds": [e.get("eval_seconds") for e in ledger if e.get("valid")],
             "breakdown": final.get("breakdown", {})}
    return cell


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--agents", nargs="*", default=["noop", "sft"])
    ap.add_argument("--root", default=".", help="the repository (results/ is written there)")
    ap.add_argument("--out", default=None, help="also write the report here (JSON)")
    ap.add_argument("overrides", nargs="*", help="Hydra overrides for both cells")
    a = ap.parse_args(argv)

    from a2rl.common import describe

    root = Path(a.root).resolve()
    report = {"task": TASK, "grid": "smoke", "hardware": describe(), "cells": []}
    for agent in a.agents:
        cell = run_cell(agent, a.overrides, root)
        report["cells"].append(cell)
        score = (f"{cell['test_score']:.2f} ± {cell['test_stderr']:.2f} (n={cell['n']})"
                 if "test_score" in cell else f"failed (exit {cell['exit_code']})")
        print(f"{agent}: {score}; wall {cell['wall_s']} s; load {cell['load']}", flush=True)
    if a.out:
        write_json_atomic(Path(a.out), report)
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
