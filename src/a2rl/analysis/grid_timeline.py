"""Where a grid's wall time went: each job of a Snakemake log with its start, end and seconds,
the seconds per rule, and the grid's wall time from its first job's start to its last job's end.

    a2rl timeline                        # the newest .snakemake/log/ file of this folder
    a2rl timeline LOG --out docs/results/DATE-STUDY-timeline.json

Snakemake writes every job's start ("[time]" then "rule NAME:" with its jobid and wildcards) and
end ("[time]" then "Finished jobid: N (Rule: NAME)") to its log, to the second; this reads those
lines and nothing else (Snakemake 8 and later), so it works for any grid. On a cluster a job's
start is its submission, so its seconds include the time it waited in the queue.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import sys
from pathlib import Path

from a2rl.common.files import print_report

_STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$", re.MULTILINE)
_START = re.compile(r"^(?:local)?(?:rule|checkpoint) (\w+):\n(?:\s+.*\n)*?\s+jobid: (\d+)",
                    re.MULTILINE)
_WILDCARDS = re.compile(r"^\s+wildcards: (.*)$", re.MULTILINE)
_END = re.compile(r"^Finished jobid: (\d+) \(Rule: (\w+)\)$", re.MULTILINE)


def _time(stamp: str) -> dt.datetime:
    return dt.datetime.strptime(" ".join(stamp.split()), "%a %b %d %H:%M:%S %Y")


def timeline(text: str) -> dict:
    """The jobs of a Snakemake log (in the order they ended), the seconds per rule and the wall
    seconds from the first job's start to the last job's end."""
    stamps = list(_STAMP.finditer(text))
    started: dict[str, tuple[dt.datetime, str, str]] = {}
    jobs, unmatched = [], []
    for i, stamp in enumerate(stamps):
        block = text[stamp.end():stamps[i + 1].start() if i + 1 < len(stamps) else len(text)]
        when = _time(stamp.group(1))
        if end := _END.search(block):
            if end.group(1) not in started:  # its start is in a form this does not read
                unmatched.append({"jobid": int(end.group(1)), "rule": end.group(2)})
                continue
            begun, rule, wildcards = started.pop(end.group(1))
            jobs.append({"rule": rule, "wildcards": wildcards, "start": begun, "end": when})
        elif start := _START.search(block):
            wildcards = _WILDCARDS.search(block)
            started[start.group(2)] = (when, start.group(1),
                                       wildcards.group(1) if wildcards else "")
    if not jobs:
        raise ValueError("no job both started and finished in this log: it needs a run's log "
                         "(not a dry run's) with Snakemake 8's 'Finished jobid: N (Rule: X)' "
                         "lines")
    origin = min(j["start"] for j in jobs)
    rows, per_rule = [], {}
    for job in jobs:
        seconds = (job["end"] - job["start"]).total_seconds()
        per_rule[job["rule"]] = per_rule.get(job["rule"], 0.0) + seconds
        rows.append({"rule": job["rule"], "wildcards": job["wildcards"], "seconds": seconds,
                     "start_s": (job["start"] - origin).total_seconds(),
                     "end_s": (job["end"] - origin).total_seconds()})
    unfinished = [{"jobid": int(jobid), "rule": rule, "wildcards": wildcards,
                   "start_s": (begun - origin).total_seconds()}
                  for jobid, (begun, rule, wildcards) in started.items()]
    return {"jobs": rows, "seconds_per_rule": per_rule,
            "wall_s": max(r["end_s"] for r in rows),
            "unfinished": sorted(unfinished, key=lambda j: j["jobid"]),
            "finished_without_start": unmatched}


def newest_log(workdir: Path) -> Path:
    logs = sorted((workdir / ".snakemake" / "log").glob("*.snakemake.log"),
                  key=lambda p: p.stat().st_mtime)
    if not logs:
        raise FileNotFoundError(f"no Snakemake log under {workdir / '.snakemake' / 'log'}")
    return logs[-1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="a2rl timeline",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("log", nargs="?", type=Path, help="a Snakemake log (default: the newest "
                    "under .snakemake/log/)")
    ap.add_argument("--out", help="also write the JSON report here")
    args = ap.parse_args(argv)
    try:
        log = args.log or newest_log(Path.cwd())
        report = timeline(log.read_text())
    except (OSError, ValueError) as err:
        print(f"a2rl timeline: {err}", file=sys.stderr)
        return 2
    for row in report["jobs"]:
        print(f"{row['start_s']:7.0f} -> {row['end_s']:7.0f} {row['seconds']:6.0f} s  "
              f"{row['rule']:18s} {row['wildcards']}", file=sys.stderr)
    print_report({"log": str(log), **report}, args.out)
    return 0

