"""Compare two results/ trees of the same grid, cell by cell, field by field: what a refactor must
not change. Times and durations are not compared; neither are identifiers that differ between two
runs of the same code (git commits of the recorded code, ports, socket paths, process ids, artifact
hashes and sizes: a saved checkpoint holds its training times). Run the grid with a fixed amount
of training (e.g. the sft agent's rounds and steps) so that scores do not depend on the machine's
speed.

    a2rl compare BEFORE/results AFTER/results [--only CELL]
Exit status 1 when a compared field differs."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

TIME_KEYS = {"time", "elapsed_s", "eval_seconds", "started", "ended", "agent_seconds", "wall_s",
             "seconds", "code_commit", "duration_s"}
RUN_SPECIFIC = {"artifact_hash", "commit", "final_commit", "port", "socket", "pid",
                "artifact_bytes", "bytes", "bytes_scanned", "budget_used"}
DRAWN = {"twin", "behaviour"}  # final.json's twin, integrity's behaviour (in summary.json)
RESULTS_PREFIX = re.compile(r"^/\S*?/results/")
RECORDS = ("ledger.jsonl", "final.json", "run.json", "summary.json")


def load(path: Path) -> list:
    text = path.read_text()
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return [json.loads(text)]


def flatten(value, prefix: str = "") -> dict[str, object]:
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            out.update(flatten(item, f"{prefix}.{key}" if prefix else key))
        return out
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        out = {}
        for i, item in enumerate(value):
            out.update(flatten(item, f"{prefix}[{i}]"))
        return out
    return {prefix: value}


def is_time(key: str) -> bool:
    """A time, a duration, a run identifier or the twin split's record (drawn afresh from a
    random seed at each final grading, a2rl.grading.twin): not compared."""
    leaf = key.rsplit(".", 1)[-1].split("[")[0]
    timed = leaf in TIME_KEYS or leaf.endswith(("_s", "_at")) or "time" in leaf
    drawn = bool(DRAWN & set(key.split(".")))
    return timed or leaf in RUN_SPECIFIC or drawn


def rooted(values: dict[str, object]) -> dict[str, object]:
    """Paths inside a results tree, written relative to it: two trees live in two places."""
    return {k: RESULTS_PREFIX.sub("<results>/", v) if isinstance(v, str) else v
            for k, v in values.items()}


def compare(before: Path, after: Path, relative: Path) -> tuple[list[str], int, int]:
    a = rooted(flatten(load(before / relative)))
    b = rooted(flatten(load(after / relative)))
    diffs, same, timed = [], 0, 0
    for key in sorted(set(a) | set(b)):
        if is_time(key):
            timed += 1
            continue
        if a.get(key, "<missing>") != b.get(key, "<missing>"):
            diffs.append(f"{relative}: {key}: {a.get(key, '<missing>')!r} -> "
                         f"{b.get(key, '<missing>')!r}")
        else:
            same += 1
    return diffs, same, timed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="a2rl compare",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--only", default="", help="compare only cells whose path contains this")
    args = parser.parse_args(argv)
    for tree in (args.before, args.after):
        if not tree.is_dir():
            print(f"a2rl compare: {tree} is not a folder (a grid's results/<label>/)",
                  file=sys.stderr)
            return 2
    files = sorted(p.relative_to(args.before) for name in RECORDS + ("baseline.json",)
                   for p in args.before.rglob(name) if args.only in str(p))
    if not files:  # nothing compared must not read as "no difference"
        print(f"a2rl compare: no run records ({', '.join(RECORDS)}, baseline.json) under "
              f"{args.before}" + (f" in a cell matching {args.only!r}" if args.only else ""),
              file=sys.stderr)
        return 2
    all_diffs, total_same, total_timed = [], 0, 0
    for relative in files:
        if not (args.after / relative).is_file():
            all_diffs.append(f"{relative}: missing after")
            continue
        diffs, same, timed = compare(args.before, args.after, relative)
        all_diffs += diffs
        total_same += same
        total_timed += timed
    print("\n".join(all_diffs))
    print(f"{len(files)} files, {total_same} fields equal, {len(all_diffs)} differ, "
          f"{total_timed} times and run identifiers not compared")
    return 1 if all_diffs else 0

