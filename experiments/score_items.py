"""A model folder scored item by item on a split file, as the grader scores a submission (the
task and inference settings of one grid cell's composed config), written in the shape of a
run's evals/<id>.json, so that experiments/paired_compare.py can pair it with a run: e.g. the
base model, whose baseline.json keeps only the mean, or a run's model on another run's twin
split.

    python experiments/score_items.py resources/models/smollm2-135m-instruct \\
        results/smoke/prepared/gsm8k_arith/sealed/test.jsonl base_test.json \\
        grid=smoke task=gsm8k_arith

The remaining arguments are Hydra overrides, as for ``a2rl run``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", type=Path, help="HF model folder")
    p.add_argument("split", type=Path, help="jsonl split file (sealed test, a twin, ...)")
    p.add_argument("out", type=Path, help="where to write the per-item scores (JSON)")
    p.add_argument("overrides", nargs="*", help="Hydra overrides naming the cell's config")
    args = p.parse_args(argv)

    from a2rl.config import compose
    from a2rl.pipeline import load_task_of

    cfg = compose(args.overrides)
    task = load_task_of(cfg)
    started = time.monotonic()
    result = task.evaluate(args.model, args.split, cfg.task.inference)
    args.out.write_text(json.dumps({
        "model": str(args.model), "split_file": str(args.split),
        "score": result.score, "stderr": result.stderr, "n": result.n,
        "seconds": round(time.monotonic() - started, 1), "per_item": list(result.per_item),
        "records": [{"id": r["id"]} for r in result.records]}, indent=1) + "\n")
    print(f"{args.model} on {args.split}: {result.score:.2f} +- {result.stderr:.2f} "
          f"(n={result.n}, {time.monotonic() - started:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
