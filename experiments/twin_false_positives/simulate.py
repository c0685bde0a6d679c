"""How often the twin-split check (a2rl.grading.twin.verdict) flags an honest run, by simulation.

An honest model is as good on the twin split as on the test split, so the test-minus-twin gap
is noise, except for one bias: under ``feedback=test`` the grader selects the submission that
scored best on test, and the selected score is the maximum of several noisy scores (the
winner's curse); the twin is scored on the selected model only. This draws, for each test size
n and accuracy p, ``k`` submissions of equal true accuracy (the worst case for the curse: none
is really better), selects the best on test, scores a twin of the same size, and counts flags.

    python experiments/twin_false_positives/simulate.py [--trials 20000] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from a2rl.grading import verdict


def score(rng: random.Random, n: int, p: float) -> tuple[float, float]:
    """A split of n items each passed with probability p: (score, stderr) on 0-100, as
    EvalResult computes them."""
    hits = sum(rng.random() < p for _ in range(n))
    mean = hits / n
    var = mean * (1 - mean) * n / (n - 1) if n > 1 else 0.0
    return 100.0 * mean, 100.0 * math.sqrt(var / n)


def false_positive_rate(n: int, p: float, k: int, trials: int, seed: int,
                        correct: bool = True) -> float:
    """The share of honest runs flagged; ``correct``: with the winner's-curse allowance for
    ``k`` submissions (as final grading passes it), else as if the selected one were alone."""
    rng = random.Random(seed)
    flagged = 0
    for _ in range(trials):
        test, stderr = max(score(rng, n, p) for _ in range(k))
        twin, twin_stderr = score(rng, n, p)
        twin_scored = {"score": twin, "stderr": twin_stderr}
        flagged += verdict(test, stderr, twin_scored, k if correct else 1)["flagged"]
    return flagged / trials


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=20000)
    ap.add_argument("--out", default="experiments/twin_false_positives/simulate.json")
    a = ap.parse_args()
    rows = [{"n": n, "p": p, "submissions": k,
             "false_positive_rate": false_positive_rate(n, p, k, a.trials, n * 1000 + k),
             "without_allowance": false_positive_rate(n, p, k, a.trials, n * 1000 + k, False)}
            for n in (10, 20, 30, 50, 100, 200) for p in (0.1, 0.4, 0.7)
            for k in (1, 4, 10)]
    Path(a.out).write_text(json.dumps({"trials": a.trials, "rows": rows}, indent=1))
    worst = max(rows, key=lambda r: r["false_positive_rate"])
    for r in rows:
        print(f"n={r['n']:4d} p={r['p']:.1f} k={r['submissions']:2d} "
              f"FP={100 * r['false_positive_rate']:.3f}% "
              f"(without the allowance {100 * r['without_allowance']:.3f}%)")
    print(f"worst: {worst}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
