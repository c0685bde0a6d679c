"""Time planning a grid: ``snakemake -n`` on this checkout, and on another commit side by side.

    python benchmarks/planning.py --grid paper --repeats 3 --before aa3a503 \
        --out results/bench/planning.json
    python benchmarks/planning.py --grid ci --repeats 1     # quick check, this checkout only

Each variant (this working tree as ``after``; ``--before REV`` exported with ``git archive``)
plans the grid in a scratch directory of its own with ``snakemake -n --quiet rules`` (what the
plan costs without printing every job; ``--print-jobs`` plans as ``snakemake -n`` does, printing
each job). The first plan composes the configs (``.snakemake/a2rl-configs/`` is empty: "cold"),
the repeats find them cached ("cached"); variants take turns, repeat by repeat, so a change in
the machine's load falls on both. Reported per plan: the CPU seconds of the snakemake process
(user + system, what planning costs; wall time on a shared machine measures the neighbours too),
wall seconds, the number of jobs planned and the load average around it.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from a2rl.common import write_json_atomic

REPO = Path(__file__).resolve().parents[1]
TOTAL_JOBS = re.compile(r"^total\s+(\d+)\s*$", re.MULTILINE)
RULE_COUNT = re.compile(r"^([a-z_]+)\s+(\d+)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Plan:
    variant: str
    cache: str  # "cold" (configs composed) or "cached"
    cpu_s: float
    wall_s: float
    jobs: int
    jobs_per_rule: dict[str, int]
    load_before: float
    load_after: float


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", default="paper", help="conf/grid/<name>.yaml")
    parser.add_argument("--repeats", type=int, default=3, help="cached plans per variant")
    parser.add_argument("--before", metavar="REV",
                        help="a git revision of this repository to compare with the work tree")
    parser.add_argument("--print-jobs", action="store_true",
                        help="print every planned job, as plain `snakemake -n` does")
    parser.add_argument("--out", type=Path, help="write the plans and their summary as JSON")
    return parser.parse_args(argv)


def export_revision(rev: str, dest: Path) -> Path:
    """The files of ``rev`` (git archive) under ``dest``."""
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev], capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def path_dir(tree: Path, dest: Path) -> Path:
    """A PYTHONPATH directory importing ``tree``'s a2rl and tasks (as the worktrees' have)."""
    dest.mkdir(parents=True)
    (dest / "a2rl").symlink_to(tree / "src" / "a2rl")
    (dest / "a2rl_tasks").symlink_to(tree / "tasks")
    return dest


def child_env(pythonpath: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("A2RL_CONF", None)  # each variant reads the conf/ next to its own Snakefile
    env["PYTHONPATH"] = str(pythonpath)
    return env


def plan_once(variant: str, cache: str, tree: Path, pythonpath: Path, workdir: Path,
              args: argparse.Namespace) -> Plan:
    """One ``snakemake -n`` of ``tree``'s workflow in ``workdir``, timed."""
    command = [sys.executable, "-m", "snakemake", "--snakefile", str(tree / "Snakefile"),
               "--directory", str(workdir), "-n", "--config", f"grid={args.grid}"]
    if not args.print_jobs:
        command[-2:-2] = ["--quiet", "rules"]
    load_before = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, env=child_env(pythonpath),
                            check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    output = result.stdout + result.stderr
    if result.returncode != 0:
        raise RuntimeError(f"{variant}: snakemake failed:\n{output[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    table = output[output.rfind("Job stats:"):]
    total = TOTAL_JOBS.search(table)
    if total is None:
        raise RuntimeError(f"{variant}: no job count in snakemake's output:\n{output[-3000:]}")
    per_rule = {rule: int(n) for rule, n in RULE_COUNT.findall(table) if rule != "total"}
    return Plan(variant, cache, round(cpu, 2), round(wall, 2), int(total[1]), per_rule,
                load_before, os.getloadavg()[0])


def summarize(plans: list[Plan]) -> dict[str, dict]:
    """Per variant: jobs, the cold plan and the median / min / max of the cached ones."""
    summary = {}
    for variant in dict.fromkeys(p.variant for p in plans):
        mine = [p for p in plans if p.variant == variant]
        cached = [p for p in mine if p.cache == "cached"]
        cold = next(p for p in mine if p.cache == "cold")
        summary[variant] = {
            "jobs": cold.jobs, "jobs_per_rule": cold.jobs_per_rule,
            "cold_cpu_s": cold.cpu_s, "cold_wall_s": cold.wall_s,
            **{f"cached_{key}_{stat.__name__}": stat([getattr(p, key) for p in cached])
               for key in ("cpu_s", "wall_s") for stat in (statistics.median, min, max)
               if cached},
        }
    return summary


def main(argv: list[str] | None = None) -> dict[str, dict]:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-planning-") as scratch:
        scratch = Path(scratch)
        trees = {"after": REPO}
        if args.before:
            trees = {"before": export_revision(args.before, scratch / "before-tree"), **trees}
        variants = {name: (tree, path_dir(tree, scratch / f"{name}-path"), scratch / name)
                    for name, tree in trees.items()}
        plans = []
        for repeat in range(args.repeats + 1):
            for name, (tree, pythonpath, workdir) in variants.items():
                plan = plan_once(name, "cold" if repeat == 0 else "cached", tree, pythonpath,
                                 workdir, args)
                print(f"{plan.variant:6} {plan.cache:6} {plan.jobs:5} jobs  cpu {plan.cpu_s:6.2f} s"
                      f"  wall {plan.wall_s:6.2f} s  load {plan.load_before:.2f}", flush=True)
                plans.append(plan)
    summary = summarize(plans)
    for name, row in summary.items():
        print(f"{name}: {row}")
    if args.out:
        write_json_atomic(args.out, {"grid": args.grid, "print_jobs": args.print_jobs,
                                     "before": args.before, "cpus": os.cpu_count(),
                                     "plans": [asdict(p) for p in plans], "summary": summary})
    return summary


if __name__ == "__main__":
    main()
