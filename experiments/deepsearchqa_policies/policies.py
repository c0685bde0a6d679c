"""The three scripted policies of DeepSearchQA's offline world, scored on its sealed test
questions with the grader's environment, prompt and matcher:

    python experiments/deepsearchqa_policies/policies.py        # the smoke grid's task
    python experiments/deepsearchqa_policies/policies.py --world-seeds 0 1 2   # other worlds
    python experiments/deepsearchqa_policies/policies.py --out policies.json

* oracle: the environment's expert (the plan's queries and pages, then the gold set);
* closed-book: answers at once with names of the asked kind, never searching;
* search-only: searches with the question and answers from the result list, never opening.

The task rewards real tool use when closed-book <= 5 < search-only < oracle >= 95. Each world
is prepared into a temporary folder exactly as ``prepare_task`` would (``conf/task/
deepsearchqa_world.yaml`` composed with Hydra, overrides after ``--``).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from a2rl.common import write_json_atomic


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--task", default="deepsearchqa_world", help="a conf/task/ id")
    ap.add_argument("--world-seeds", type=int, nargs="*", default=None,
                    help="score these world seeds (default: the config's)")
    ap.add_argument("--out", default=None, help="also write the report here (JSON)")
    ap.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. "
                                                 "task.params.test_questions=120")
    a = ap.parse_args(argv)

    from a2rl.common import PreparedTaskPaths, describe
    from a2rl.config import compose
    from a2rl.task import load_task

    base = compose([f"task={a.task}", *a.overrides])
    seeds = a.world_seeds if a.world_seeds is not None else [base.task.params["world_seed"]]
    report: dict = {"task": a.task, "overrides": a.overrides, "worlds": [],
                    "hardware": describe(), "load_before": os.getloadavg()}
    for seed in seeds:
        cfg = compose([f"task={a.task}", *a.overrides, f"task.params.world_seed={seed}"])
        task = load_task(cfg.task, Path(cfg.paths.root) / cfg.paths.data)
        started = time.monotonic()
        with tempfile.TemporaryDirectory() as tmp:
            out = PreparedTaskPaths(Path(tmp) / a.task)
            out.data.mkdir(parents=True)
            out.sealed.mkdir(parents=True)
            facts = task.prepare(out)
        world = {"world_seed": seed, "test_questions": facts["sizes"]["test"],
                 "policies": facts["policies"], "expert_success_train":
                 facts["expert_success_train"], "seconds": round(time.monotonic() - started, 1)}
        report["worlds"].append(world)
        print(f"world {seed}: " + ", ".join(
            f"{name} {s['score']:.1f} ± {s['stderr']:.1f} (F1 {s['f1']:.1f})"
            for name, s in world["policies"].items())
            + f"; {world['test_questions']} test questions, {world['seconds']} s")
    report["load_after"] = os.getloadavg()
    if a.out:
        write_json_atomic(Path(a.out), report)
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
