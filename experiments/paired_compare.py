"""Two runs of one task compared on the same sealed items: each run's selected submission
(final.json), its per-item test scores (evals/<id>.json, the grader's records), and the paired
difference with its standard error; plus what the GRPO rounds of either run did (steps, seconds
a step) from workspace/output/grpo-*/grpo_log.json.

    python experiments/paired_compare.py results/smoke/runs/gsm8k_arith/sft/none/seed0 \\
        results/smoke/runs/gsm8k_arith/grpo/none/seed0 [--json out.json]

Scores are on the 0-100 scale. The paired SE is sd(d) / sqrt(n) over the per-item differences
d = b - a (n - 1 in the variance), the same items in the same split; z = difference / SE. The
discordant counts (items only a, or only b, got right) give an exact two-sided sign test
(McNemar's test without a normal approximation). Standard library only.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path


def read_json(path: Path):
    return json.loads(Path(path).read_text())


def per_item(run: Path) -> dict[str, float]:
    """Item id -> score in [0, 1] of the run's selected submission on the test split."""
    final = read_json(run / "final.json")
    selected = final["selected_submission"]
    if selected is None or final.get("rescored"):
        raise SystemExit(f"{run}: no test-split evaluation of a selected submission to pair "
                         f"(selected {selected}, rescored {final.get('rescored')})")
    details = read_json(run / "evals" / f"{selected}.json")
    if details["split"] != "test":
        raise SystemExit(f"{run}: evals/{selected}.json is on {details['split']}, not test")
    ids = [record["id"] for record in details["records"]]
    return dict(zip(ids, details["per_item"], strict=True))


def mean_se(values: list[float]) -> tuple[float, float]:
    """Mean and its standard error (sample variance), both x100."""
    n = len(values)
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / (n - 1) if n > 1 else 0.0
    return 100.0 * mean, 100.0 * math.sqrt(var / n)


def sign_test(only_a: int, only_b: int) -> float:
    """Exact two-sided p-value of the discordant pairs under 'no difference' (p = 1/2)."""
    n, k = only_a + only_b, min(only_a, only_b)
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def paired(a: dict[str, float], b: dict[str, float]) -> dict:
    if set(a) != set(b):
        raise SystemExit(f"the runs were graded on different items ({len(set(a) ^ set(b))} "
                         "differ): not a paired comparison")
    ids = sorted(a)
    diffs = [b[i] - a[i] for i in ids]
    (mean_a, se_a), (mean_b, se_b), (diff, se_diff) = (
        mean_se([a[i] for i in ids]), mean_se([b[i] for i in ids]), mean_se(diffs))
    only_a = sum(a[i] > b[i] for i in ids)
    only_b = sum(b[i] > a[i] for i in ids)
    return {"n": len(ids), "a": {"score": mean_a, "se": se_a}, "b": {"score": mean_b, "se": se_b},
            "difference": diff, "paired_se": se_diff,
            "z": diff / se_diff if se_diff else None,
            "only_a": only_a, "only_b": only_b, "sign_test_p": sign_test(only_a, only_b)}


def grpo_rounds(run: Path) -> list[dict]:
    """Each GRPO round the run's agent left: its steps, their seconds, the sampled success."""
    rounds = []
    for log in sorted((run / "workspace" / "output").glob("grpo-*/grpo_log.json")):
        rows = read_json(log)
        seconds = [r["seconds"] for r in rows]
        rounds.append({"round": log.parent.name, "steps": len(rows),
                       "seconds": round(sum(seconds), 1),
                       "seconds_a_step": round(sum(seconds) / len(rows), 1) if rows else None,
                       "save_s": rows[-1].get("save_s") if rows else None,
                       "sampled_success": [r["success"] for r in rows]})
    return rounds


def describe(run: Path) -> dict:
    """What the run was: agent, selected submission, the machine and load it ran on."""
    final, record = read_json(run / "final.json"), read_json(run / "run.json")
    hardware = record.get("hardware", {})
    return {"run": str(run), "agent": final["agent"], "test_score": final["test_score"],
            "test_stderr": final["test_stderr"], "baseline": final["baseline"],
            "selected_submission": final["selected_submission"],
            "cpu_model": hardware.get("cpu_model"), "cpu_cores": hardware.get("cpu_cores"),
            "precision": hardware.get("precision"), "grpo": grpo_rounds(run)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("a", type=Path, help="run folder of the first run (the reference)")
    p.add_argument("b", type=Path, help="run folder of the second run")
    p.add_argument("--json", type=Path, help="write the comparison here too")
    args = p.parse_args(argv)
    result = {"a": describe(args.a), "b": describe(args.b),
              "paired": paired(per_item(args.a), per_item(args.b))}
    text = json.dumps(result, indent=1)
    if args.json:
        args.json.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
