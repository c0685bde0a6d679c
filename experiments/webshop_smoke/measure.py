"""Measure WebShop's smoke-grid cells: noop, sft and sft_grpo on SmolLM2-135M-Instruct (CPU).

    python experiments/webshop_smoke/measure.py                 # all three, in order
    python experiments/webshop_smoke/measure.py --agents noop sft --out results/bench/ws.json

Each cell runs as ``a2rl run grid=smoke task=webshop agent=<agent>`` (every stage: prepare,
baseline, the agent's 25-minute budget, the final grade in lockstep), one after another. The
report gives, per cell, the final test score (mean reward x 100) with its standard error, both
success rates, the baseline, the selected submission, the cell's wall time and the load
average before and after it (the machine may be shared: the numbers say so), and how long
each lockstep evaluation took: the base model's (the baseline stage) and every graded
submission's (the ledger). Heavy: expect about 1.5 hours on 2 idle cores. The report is
rewritten after every cell, so an interrupted measurement keeps the cells it finished.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from a2rl.common import write_json_atomic


def eval_seconds(results: Path, run: Path) -> dict:
    """Seconds of the base model's evaluation (the baseline stage; a cached record keeps the
    seconds it was measured in) and of each graded submission's (typed ledger entries)."""
    from a2rl.common import read_ledger

    baseline = results / "baseline" / "webshop" / "baseline.json"
    test = json.loads(baseline.read_text()).get("test", {}) if baseline.exists() else {}
    ledger = run / "ledger.jsonl"
    entries = read_ledger(ledger) if ledger.exists() else []
    return {"baseline_eval_s": test.get("seconds"), "baseline_cached": test.get("cached"),
            "submission_eval_s": [e.eval_seconds for e in entries if e.valid]}


def cell(agent: str, results: Path, extra: list[str]) -> dict:
    load_before = os.getloadavg()
    started = time.perf_counter()
    cmd = [sys.executable, "-c", "import sys; from a2rl.pipeline.cli import main; "
           "sys.exit(main())", "run", "grid=smoke", "task=webshop", f"agent={agent}",
           f"paths.results={results}", *extra]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
    wall = time.perf_counter() - started
    run = results / "runs" / "webshop" / agent / "none" / "seed0"
    final = json.loads((run / "final.json").read_text()) if (run / "final.json").exists() else {}
    # a submission answered with the baseline (noop) has no breakdown of its own
    baseline = results / "baseline" / "webshop" / "baseline.json"
    breakdown = final.get("breakdown") or (
        json.loads(baseline.read_text()).get("test", {}).get("breakdown") or {}
        if baseline.exists() else {})
    return {"agent": agent, "exit_code": proc.returncode, "wall_s": round(wall, 1),
            "test_score": final.get("test_score"), "test_stderr": final.get("test_stderr"),
            "success_pct": breakdown.get("success_pct"),
            "success_ge_half_pct": breakdown.get("success_ge_half_pct"),
            "baseline": final.get("baseline"), "improvement": final.get("improvement"),
            "selected_submission": final.get("selected_submission"),
            **eval_seconds(results, run),
            "load_average": {"before": load_before, "after": os.getloadavg()},
            "stderr_tail": proc.stderr[-1500:] if proc.returncode else ""}


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--agents", nargs="+", default=["noop", "sft", "sft_grpo"])
    ap.add_argument("--results", default="results", help="the results folder a2rl run writes")
    ap.add_argument("--out", default="results/bench/webshop_smoke.json")
    ap.add_argument("overrides", nargs="*", help="extra Hydra overrides for every cell")
    a = ap.parse_args(argv)
    rows = []
    for agent in a.agents:
        rows.append(cell(agent, Path(a.results).resolve(), a.overrides))
        print(json.dumps(rows[-1]), flush=True)
        write_json_atomic(Path(a.out), rows)
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
