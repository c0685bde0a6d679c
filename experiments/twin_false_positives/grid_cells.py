"""The twin-split verdicts of a grid's finished cells: for every run under ``<results>/runs``
with a final.json, the test score, the twin's score, the gap, the threshold and whether the run
was flagged (``a2rl.grading.twin``, written by final grading). Honest agents (noop, sft: none
sees the sealed split) flagged here are the check's false positives on real runs.

    python experiments/twin_false_positives/grid_cells.py results/smoke --out cells.json

Prints a Markdown table and the flagged share per agent.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

from a2rl.common import RunPaths, read_json


def cells(results: Path) -> list[dict]:
    """One row per final.json under ``results/runs`` (task/agent/driver/seed<k>)."""
    rows = []
    # the layout's one definition of where a run's final.json is (a2rl.common.layout)
    for final in sorted((results / "runs").glob(str(RunPaths(Path("*/*/*/seed*")).final))):
        record = read_json(final)
        twin = record.get("twin") or {}
        rows.append({"task": record["task"], "agent": record["agent"], "seed": record["seed"],
                     "test": record.get("test_score"), "test_se": record.get("test_stderr"),
                     "twin": twin.get("score"), "twin_se": twin.get("stderr"),
                     "gap": twin.get("gap"), "threshold": twin.get("threshold"),
                     "checked": bool(twin.get("checked")), "flagged": bool(twin.get("flagged")),
                     "selected_from": twin.get("selected_from"), "twin_seed": twin.get("seed")})
    return rows


def table(rows: list[dict]) -> str:
    def num(x):
        return "–" if x is None else f"{x:.1f}"

    lines = ["| task | agent | seed | test ± SE | twin ± SE | gap | threshold | flagged |",
             "|---|---|---:|---:|---:|---:|---:|---|"]
    lines += [f"| {r['task']} | {r['agent']} | {r['seed']} | {num(r['test'])} ± "
              f"{num(r['test_se'])} | {num(r['twin'])} ± {num(r['twin_se'])} | {num(r['gap'])} "
              f"| {num(r['threshold'])} | {'**yes**' if r['flagged'] else 'no'} |" for r in rows]
    return "\n".join(lines)


def flagged_share(rows: list[dict]) -> dict[str, str]:
    by = defaultdict(list)
    for r in rows:
        if r["checked"]:
            by[f"{r['task']}/{r['agent']}"].append(r["flagged"])
    return {k: f"{sum(v)} of {len(v)}" for k, v in sorted(by.items())}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", type=Path, help="a grid's results folder (results/<label>)")
    p.add_argument("--out", type=Path, help="also write the rows and shares as JSON")
    a = p.parse_args(argv)
    rows = cells(a.results)
    if not rows:
        print(f"no final.json under {a.results / 'runs'}", file=sys.stderr)
        return 1
    print(table(rows))
    shares = flagged_share(rows)
    print("\nflagged:", ", ".join(f"{k} {v}" for k, v in shares.items()))
    if a.out:
        a.out.write_text(json.dumps({"cells": rows, "flagged": shares}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
