"""Does every grid plan the same jobs in two checkouts? The "outputs unchanged" check of a
reshaping (issue #31), beside ``a2rl compare`` for the records of a grid actually run.

    python experiments/reshape_no_change/plans.py BEFORE_CHECKOUT AFTER_CHECKOUT [--grids ci quick]

Each checkout plans each grid of the after checkout's conf/grid/ with
``snakemake -n --forceall --nolock --config grid=NAME`` (every job listed, whatever is already
built), its own src/ and tasks/ first on PYTHONPATH; a job is its rule, wildcards, outputs,
threads and resources as the plan prints them. Prints one line per grid, and the jobs only one
side plans; exit status 1 when a grid differs.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

FIELDS = ("wildcards", "output", "threads", "resources")


def plan(checkout: Path, grid: str) -> str:
    """The dry run's text of ``grid`` in ``checkout``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(checkout / "src"), str(checkout / ".pypath"), str(checkout)])}
    done = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--forceall", "--nolock",
                           "--config", f"grid={grid}"], cwd=checkout, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{checkout}: planning {grid} failed:\n{done.stderr[-3000:]}")
    return done.stdout + done.stderr


def jobs(text: str) -> list[tuple[str, ...]]:
    """Every job of a dry run: (rule, wildcards, output, threads, resources), sorted."""
    found = []
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", text):
        rule = re.match(r"(?:local)?rule (\w+):", block)
        if rule:
            values = [re.search(rf"^\s+{f}: (.*)$", block, re.MULTILINE) for f in FIELDS]
            found.append((rule.group(1), *(v.group(1) if v else "" for v in values)))
    return sorted(found)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--grids", nargs="*", help="default: every conf/grid/*.yaml of AFTER")
    args = ap.parse_args(argv)
    grids = args.grids or sorted(p.stem for p in (args.after / "conf" / "grid").glob("*.yaml"))
    differ = False
    for grid in grids:
        before, after = jobs(plan(args.before, grid)), jobs(plan(args.after, grid))
        same = before == after and bool(before)
        differ |= not same
        print(f"{grid}: {len(before)} jobs before, {len(after)} after: "
              f"{'the same' if same else 'DIFFERENT'}")
        for job in sorted(set(before) ^ set(after)):
            print(f"  {'before' if job in before else 'after '} only: {job[:3]}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
