"""An honest model against real twin splits: a model folder scored on a task's sealed test split
and on ``--twins`` twins drawn as final grading draws them (``Task.twin_split``), each gap put
through the grader's verdict (``a2rl.grading.twin.verdict``, one submission: no winner's curse).
An honest model (the base model, or any model trained without the sealed split) should be
flagged on about none of them; how often it is is the check's false-positive rate for that
model, and the mean gap says whether the twins are as hard as test.

    python experiments/twin_false_positives/honest_twins.py resources/models/smollm2-135m-instruct \
        --twins 5 --out honest_base_smoke.json grid=smoke task=gsm8k_arith

The split is prepared into ``--prepared`` (default: a temporary folder) from the composed config;
the remaining arguments are Hydra overrides, as for ``a2rl run``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from a2rl.grading import verdict

FIRST_SEED = 1_000_000_007  # inside the range final grading draws from (a2rl.grading.twin)
# reasoning_gym builds item i of seed s from s + i: consecutive seeds draw nearly the same
# stream, so the twins' seeds lie far apart
SEED_STEP = 10_000_019


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", type=Path, help="HF model folder")
    p.add_argument("--twins", type=int, default=5)
    p.add_argument("--prepared", type=Path, help="where to prepare the task (default: temp)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("overrides", nargs="*", help="Hydra overrides naming the cell's config")
    args = p.parse_intermixed_args(argv)

    from a2rl.common import PreparedTaskPaths
    from a2rl.config import compose
    from a2rl.pipeline import load_task_of

    cfg = compose(args.overrides)
    task = load_task_of(cfg)
    prepared = PreparedTaskPaths(args.prepared or Path(tempfile.mkdtemp(prefix="twins_")))
    task.prepare(prepared)

    def score(split: Path) -> dict:
        started = time.monotonic()
        result = task.evaluate(args.model, split, cfg.task.inference)
        return {"score": round(result.score, 4), "stderr": round(result.stderr, 4),
                "n": result.n, "seconds": round(time.monotonic() - started, 1)}

    test = score(prepared.test)
    out = {"model": str(args.model), "overrides": args.overrides, "test": test, "twins": []}
    for seed in range(FIRST_SEED, FIRST_SEED + args.twins * SEED_STEP, SEED_STEP):
        split = task.twin_split(prepared, prepared.root / f"twin-{seed}", seed)
        twin = {"seed": seed, **score(split)}
        out["twins"].append(verdict(test["score"], test["stderr"], twin))
        args.out.write_text(json.dumps(out, indent=1) + "\n")  # kept when stopped early
    gaps = [t["gap"] for t in out["twins"]]
    out["flagged"] = sum(t["flagged"] for t in out["twins"])
    out["mean_gap"] = round(sum(gaps) / len(gaps), 4) if gaps else None
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: out[k] for k in ("test", "flagged", "mean_gap")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
