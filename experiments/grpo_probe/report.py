"""The GRPO probes' reports side by side: per configuration and round, the score on the sealed
games, the paired gain over the start with its standard error, z = gain / SE, the games newly
won and lost, and the success per goal type (from the test split's ``goal_type``), as Markdown.

    python experiments/grpo_probe/report.py --test <prepared>/sealed/test.jsonl \
        kl0.05=probe-kl.json kl0=probe-nokl.json > table.md

Each report must be paired on the same games (the probe records the test split's sha256).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from probe import discordant, paired_gain  # noqa: E402


def goal_types(test: Path) -> list[str]:
    return [json.loads(line)["goal_type"] for line in test.read_text().splitlines() if line]


def by_goal(per_item: list[float], goals: list[str]) -> dict[str, float]:
    """Success (%) per goal type."""
    won, seen = defaultdict(float), defaultdict(int)
    for result, goal in zip(per_item, goals, strict=True):
        won[goal] += result
        seen[goal] += 1
    return {g: round(100.0 * won[g] / seen[g], 1) for g in sorted(seen)}


def rows(name: str, report: dict, goals: list[str]) -> list[dict]:
    start = report["rounds"][0]["per_item"]
    out = []
    for r in report["rounds"]:
        gain, se = paired_gain(start, r["per_item"])
        won, lost = discordant(start, r["per_item"])
        out.append({"config": name, "round": r["round"], "score": r["score"],
                    "stderr": r["stderr"], "gain": gain, "gain_stderr": se,
                    "z": gain / se if se else None, "newly_won": won, "newly_lost": lost,
                    "train_s": r.get("train_s", 0.0),
                    "train_success": r.get("train_success"), "train_kl": r.get("train_kl"),
                    "by_goal": by_goal(r["per_item"], goals)})
    return out


def markdown(table: list[dict]) -> str:
    kinds = sorted({g for row in table for g in row["by_goal"]})
    head = ["config", "round", "score ± SE", "gain ± SE (paired)", "z", "won / lost",
            "GRPO s", *kinds]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in table:
        z = "–" if row["z"] is None else f"{row['z']:+.2f}"
        gain = "–" if row["round"] == 0 else f"{row['gain']:+.1f} ± {row['gain_stderr']:.1f}"
        cells = [row["config"], str(row["round"]), f"{row['score']:.1f} ± {row['stderr']:.1f}",
                 gain, z, f"{row['newly_won']} / {row['newly_lost']}",
                 f"{row['train_s']:.0f}", *(f"{row['by_goal'].get(k, 0.0):.1f}" for k in kinds)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--test", required=True, help="the sealed test split the probes scored")
    ap.add_argument("--json", default=None, help="also write the rows here")
    ap.add_argument("reports", nargs="+", metavar="NAME=REPORT")
    a = ap.parse_args(argv)
    goals = goal_types(Path(a.test))
    table, digests = [], set()
    for item in a.reports:
        name, _, path = item.partition("=")
        report = json.loads(Path(path).read_text())
        digests.add(report.get("test_sha256"))
        if len(report["rounds"][0]["per_item"]) != len(goals):
            raise SystemExit(f"{path} scored {len(report['rounds'][0]['per_item'])} games, the "
                             f"test split has {len(goals)}")
        table += rows(name, report, goals)
    if len(digests) > 1:
        raise SystemExit(f"the reports scored different test games: {sorted(map(str, digests))}")
    print(markdown(table))
    if a.json:
        Path(a.json).write_text(json.dumps(table, indent=1))
    return table


if __name__ == "__main__":
    main()
