"""The scripted expert and a random policy on WebShop's sealed test goals (no model).

    python experiments/webshop_baselines/baselines.py        # the smoke grid's webshop task
    python experiments/webshop_baselines/baselines.py --seeds 5 --out baselines.json
    python experiments/webshop_baselines/baselines.py task.params.test_goals=200  # any override

It prepares the task as ``prepare_task`` does (into ``--prepared``, default a temporary
folder), then plays every test goal with the expert (searches its query, pages to the target,
picks the goal's options, buys) and with a random available action each step (the search page
searches the instruction), ``--seeds`` times, in lockstep. It reports the score (mean reward x
100), both success rates (reward 1.0, the WebShop paper's; reward >= 0.5), mean steps, wall
times and the machine's load average.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path


def summary(episodes) -> dict[str, float]:
    rewards = [float(e.score) for e in episodes]
    n = len(rewards)
    mean = sum(rewards) / n
    stderr = (sum((r - mean) ** 2 for r in rewards) / (n - 1) / n) ** 0.5 if n > 1 else 0.0
    return {"score": 100 * mean, "stderr": 100 * stderr,
            "success_pct": 100 * sum(r >= 1.0 - 1e-9 for r in rewards) / n,
            "success_ge_half_pct": 100 * sum(r >= 0.5 for r in rewards) / n,
            "bought_pct": 100 * sum(e.done and bool(e.steps) and e.steps[-1]["action"]
                                    == "click[buy now]" for e in episodes) / n,
            "mean_steps": sum(e.n_steps for e in episodes) / n}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("overrides", nargs="*", help="Hydra overrides (after grid=smoke task=webshop)")
    ap.add_argument("--seeds", type=int, default=3, help="random-policy seeds")
    ap.add_argument("--prepared", default=None, help="prepare into this folder (kept)")
    ap.add_argument("--out", default=None, help="write the report here (JSON)")
    a = ap.parse_args(argv)

    from a2rl_tasks.webshop.env import WebShopEnv
    from a2rl_tasks.webshop.task import RandomShopper

    from a2rl.common import PreparedTaskPaths, describe
    from a2rl.config import compose
    from a2rl.task import ExpertPolicy, load_task, play

    cfg = compose(["grid=smoke", "task=webshop", *a.overrides])
    task = load_task(cfg.task, Path(cfg.paths.data))
    root = Path(a.prepared) if a.prepared else Path(tempfile.mkdtemp(prefix="webshop-"))
    out = PreparedTaskPaths(root)
    out.data.mkdir(parents=True, exist_ok=True)
    out.sealed.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    started = time.perf_counter()
    facts = task.prepare(out)
    prepare_s = time.perf_counter() - started
    _, games, root = task._games(out.test)
    max_steps = task.params.max_steps

    def timed(policy) -> dict:
        t = time.perf_counter()
        episodes = play(games, WebShopEnv, policy, max_steps, task.fmt, root=root)
        return {**summary(episodes), "seconds": round(time.perf_counter() - t, 2)}

    expert = timed(ExpertPolicy(0))
    randoms = [timed(RandomShopper(seed)) for seed in range(a.seeds)]
    report = {
        "task": cfg.task.id, "source": facts["source"], "test_goals": len(games),
        "max_steps": max_steps, "title_tagger": facts["title_tagger"],
        "title_tagger_deviation": facts["title_tagger_deviation"],
        "expert": expert,
        "random": {key: sum(r[key] for r in randoms) / len(randoms) for key in randoms[0]},
        "random_per_seed": randoms,
        "prepare_s": round(prepare_s, 1), "prepared": str(root),
        "load_average": {"before": load_before, "after": os.getloadavg()},
        "hardware": describe(),
    }
    text = json.dumps(report, indent=1)
    print(text)
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(text)
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
