"""How far the paper cell's DeepSearchQA split is from the paper's reference code's split.

Both draw 100 train and 200 evaluation questions from the 900 with seed 42, but shuffle
differently: a2rl (``tasks/deepsearchqa/dsqa_data.py``) shuffles the rows in ``example_id`` order
with Python's ``random.Random(42)`` and skips the 4 rows without an answer; the reference code
(RD-Agent's autorl_bench, ``benchmarks/deepsearchqa/data.py``) calls
``datasets.Dataset.shuffle(seed=42)`` (NumPy's generator) on the Hub's row order and keeps
every row. This script draws both from the same questions and counts what they share::

    A2RL_DATA=../shared/data python experiments/dsqa_split_overlap/overlap.py \
        --out experiments/dsqa_split_overlap/overlap.json

It assumes the Hub's row order is ``example_id`` order (the offline copy lists the rows that way;
this machine cannot reach the Hub to check). The write-up:
docs/results/2026-12-04-dsqa-split-overlap.md; docs/deviations.md#deepsearchqa quotes it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from a2rl.common import write_json_atomic

REFERENCE_SEED, REFERENCE_TRAIN, REFERENCE_EVAL = 42, 100, 200


def reference_split(rows: list[dict]) -> tuple[list[str], list[str]]:
    """The reference code's (train, eval) example ids: Dataset.shuffle(seed=42) of the rows in
    their stored order, the first 100, then the next 200, empty answers included."""
    from datasets import Dataset

    shuffled = Dataset.from_list([{"example_id": r["example_id"]} for r in rows]).shuffle(
        seed=REFERENCE_SEED)["example_id"]
    return (list(shuffled[:REFERENCE_TRAIN]),
            list(shuffled[REFERENCE_TRAIN:REFERENCE_TRAIN + REFERENCE_EVAL]))


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=None, help="also write the counts here (JSON)")
    ap.add_argument("overrides", nargs="*", help="Hydra overrides of task=deepsearchqa")
    a = ap.parse_args(argv)

    from a2rl_tasks.deepsearchqa.dsqa_data import load_dsqa, split_dsqa

    from a2rl.config import compose
    from a2rl.task import load_task

    cfg = compose(["task=deepsearchqa", *a.overrides])
    data_root = Path(cfg.paths.root) / cfg.paths.data
    params = load_task(cfg.task, data_root).params.dsqa
    rows, source = load_dsqa(params, data_root)
    rows.sort(key=lambda r: int(r["example_id"]) if r["example_id"].isdigit()
              else r["example_id"])
    train, test, excluded = split_dsqa(rows, params)
    ours_train = {i["example_id"] for i in train}
    ours_test = {i["example_id"] for i in test}
    ref_train, ref_eval = reference_split(rows)
    empty = {r["example_id"] for r in rows if not r["answer"]}
    import datasets
    import numpy

    report = {
        "source": source,
        "versions": {"datasets": datasets.__version__, "numpy": numpy.__version__},
        "a2rl": {"train": len(ours_train), "test": len(ours_test), "excluded": excluded},
        "reference": {"train": len(ref_train), "eval": len(ref_eval),
                      "eval_without_answer": sorted(set(ref_eval) & empty)},
        "shared": {"test_and_eval": len(ours_test & set(ref_eval)),
                   "train_and_train": len(ours_train & set(ref_train)),
                   "test_in_reference_train": len(ours_test & set(ref_train)),
                   "train_in_reference_eval": len(ours_train & set(ref_eval))},
    }
    shared = report["shared"]
    print(f"sealed questions also in the reference code's evaluation split: "
          f"{shared['test_and_eval']} of {len(ours_test)}; in its train split: "
          f"{shared['test_in_reference_train']}; a2rl train questions the reference code "
          f"evaluates on: {shared['train_in_reference_eval']}; reference evaluation rows "
          f"without an answer: {report['reference']['eval_without_answer']}")
    if a.out:
        write_json_atomic(Path(a.out), report)
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
