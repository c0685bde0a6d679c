"""Where a grid's wall time went: each job of a Snakemake log with its start, end and seconds,
the seconds per rule, and the grid's wall time from its first job's start to its last job's end.

    python scripts/grid_timeline.py                        # the newest .snakemake/log/ file
    python scripts/grid_timeline.py LOG --out results/bench/grid_timeline.json

Snakemake writes every job's start ("[time]" then "rule NAME:" with its jobid and wildcards) and
end ("[time]" then "Finished jobid: N (Rule: NAME)") to its log, to the second; this reads those
lines and nothing else, so it works for any grid, local or on a cluster.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import sys
from pathlib import Path

from a2rl.common.files import print_report

_STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$", re.MULTILINE)
_START = re.compile(r"^(?:local)?rule (\w+):\n(?:\s+.*\n)*?\s+jobid: (\d+)", re.MULTILINE)
_WILDCARDS = re.compile(r"^\s+wildcards: (.*)$", re.MULTILINE)
_END = re.compile(r"^Finished jobid: (\d+) \(Rule: (\w+)\)$", re.MULTILINE)


def _time(stamp: str) -> dt.datetime:
    return dt.datetime.strptime(" ".join(stamp.split()), "%a %b %d %H:%M:%S %Y")


def timeline(text: str) -> dict:
    """The jobs of a Snakemake log (in the order they ended), the seconds per rule and the wall
    seconds from the first job's start to the last job's end."""
    stamps = list(_STAMP.finditer(text))
    started: dict[str, tuple[dt.datetime, str, str]] = {}
    jobs = []
    for i, stamp in enumerate(stamps):
        block = text[stamp.end():stamps[i + 1].start() if i + 1 < len(stamps) else len(text)]
        when = _time(stamp.group(1))
        if end := _END.search(block):
            begun, rule, wildcards = started.pop(end.group(1), (None, end.group(2), ""))
            jobs.append({"rule": rule, "wildcards": wildcards, "start": begun, "end": when})
        elif start := _START.search(block):
            wildcards = _WILDCARDS.search(block)
            started[start.group(2)] = (when, start.group(1), wildcards.group(1) if wildcards else "")
    timed = [j for j in jobs if j["start"] is not None]
    if not timed:
        raise ValueError("no job both started and finished in this log: is it a Snakemake log "
                         "of a run (not a dry run)?")
    origin = min(j["start"] for j in timed)
    rows, per_rule = [], {}
    for job in timed:
        seconds = (job["end"] - job["start"]).total_seconds()
        per_rule[job["rule"]] = per_rule.get(job["rule"], 0.0) + seconds
        rows.append({"rule": job["rule"], "wildcards": job["wildcards"], "seconds": seconds,
                     "start_s": (job["start"] - origin).total_seconds(),
                     "end_s": (job["end"] - origin).total_seconds()})
    return {"jobs": rows, "seconds_per_rule": per_rule,
            "wall_s": max(r["end_s"] for r in rows), "unfinished": sorted(started)}


def newest_log(workdir: Path) -> Path:
    logs = sorted((workdir / ".snakemake" / "log").glob("*.snakemake.log"),
                  key=lambda p: p.stat().st_mtime)
    if not logs:
        raise FileNotFoundError(f"no Snakemake log under {workdir / '.snakemake' / 'log'}")
    return logs[-1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log", nargs="?", type=Path, help="a Snakemake log (default: the newest "
                    "under .snakemake/log/)")
    ap.add_argument("--out", help="also write the JSON report here")
    args = ap.parse_args(argv)
    try:
        log = args.log or newest_log(Path.cwd())
        report = timeline(log.read_text())
    except (OSError, ValueError) as err:
        print(f"grid_timeline: {err}", file=sys.stderr)
        return 2
    for row in report["jobs"]:
        print(f"{row['start_s']:7.0f} -> {row['end_s']:7.0f} {row['seconds']:6.0f} s  "
              f"{row['rule']:18s} {row['wildcards']}", file=sys.stderr)
    print_report({"log": str(log), **report}, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
