"""Baselines on the real ALFWorld games: expert walkthrough replay, a random admissible policy
and (optionally) a model, with a breakdown by the six task types.

    python experiments/alfworld_baselines/baselines.py --split valid_unseen --max-steps 50 \
        --out results/bench/alfworld_baselines.json
    python experiments/alfworld_baselines/baselines.py \
        --model resources/models/smollm2-135m-instruct --model-games 24 --skip-expert \
        --random-seeds 0                                        # the base model on a subset

The games are read the way the ``alfworld`` task reads them (``alfworld_data.find_games``) from
``--data`` (default ``$A2RL_DATA/alfworld``) and played by the task's environment
(``alfworld_env.AlfworldEnv``: TextWorld's PDDL backend with ALFWorld's wrappers) with
``a2rl.task.envs.play`` in the grader's prompt format. The expert replays each game's
``walkthrough`` (the walkthrough must win every game); the random policy picks a uniformly random
admissible action each step (mean over seeds); the model is played as the grader plays it
(greedy, batched, the reply mapped to the closest admissible action). The model subset is the one
the task's ``test_games`` cap takes (``alfworld_data.sample``: ``--model-games`` games, in turn
from each task type, seeded), so a capped test split grades the same games.
Wall times and the load average are recorded (the machine may be shared).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


def timed(run):
    load, started = os.getloadavg()[0], time.perf_counter()
    out = run()
    return out, {"seconds": round(time.perf_counter() - started, 1), "load_before": round(load, 2),
                 "load_after": round(os.getloadavg()[0], 2)}


def summary(games: list[str], won: list[float]) -> dict:
    from a2rl_tasks.alfworld.alfworld_env import task_type

    from a2rl.task import score_by_group

    return {"success": 100.0 * sum(won) / len(won), "games": len(won),
            "breakdown": score_by_group([task_type(g) for g in games], won, "success")}


def save(report: dict, out: str | None) -> None:
    """Print the report so far and write it to ``out``: a long run leaves what it finished."""
    text = json.dumps(report, indent=1)
    print(text, flush=True)
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(text + "\n")


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=os.path.join(os.environ.get("A2RL_DATA", "data"),
                                                   "alfworld"))
    ap.add_argument("--split", default="valid_unseen")
    ap.add_argument("--max-steps", type=int, default=50)
    ap.add_argument("--random-seeds", type=int, default=1)
    ap.add_argument("--skip-expert", action="store_true")
    ap.add_argument("--model", default=None, help="a model folder to play as the grader does")
    ap.add_argument("--model-games", type=int, default=24)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    os.environ.setdefault("TQDM_DISABLE", "1")

    from a2rl_tasks.alfworld.alfworld_data import data_root, find_games, sample
    from a2rl_tasks.alfworld.alfworld_env import PROMPT, AlfworldEnv, AlfworldExpertEnv

    from a2rl.task import ExpertPolicy, RandomPolicy, play

    root = data_root(a.data, Path.cwd())
    games = [str(g) for g in find_games(root, a.split)]
    report: dict = {"data": a.data, "split": a.split, "max_steps": a.max_steps,
                    "games": len(games), "cpus": os.cpu_count()}
    if not a.skip_expert:
        eps, t = timed(lambda: play(games, AlfworldExpertEnv, ExpertPolicy(0), a.max_steps,
                                    PROMPT))
        report["expert"] = {**summary(games, [float(e.won) for e in eps]), **t,
                            "lost": [e.game for e in eps if not e.won],
                            "off_walkthrough": [e.game for e in eps if
                                                [s["action"] for s in e.steps]
                                                != e.info["walkthrough"]]}
        save(report, a.out)
    if a.random_seeds:
        won, per_seed = [0.0] * len(games), []
        _, t = timed(lambda: [per_seed.append(play(games, AlfworldEnv, RandomPolicy(s),
                                                   a.max_steps, PROMPT))
                              for s in range(a.random_seeds)])
        for eps in per_seed:
            won = [w + e.won / a.random_seeds for w, e in zip(won, eps)]
        report["random"] = {**summary(games, won), **t, "seeds": a.random_seeds,
                            "per_seed": [100.0 * sum(e.won for e in eps) / len(eps)
                                         for eps in per_seed]}
        save(report, a.out)
    if a.model:
        from a2rl.config import InferenceConfig
        from a2rl.task import GeneratorPolicy, load_generator

        subset = [str(g) for g in sample([Path(g) for g in games], a.model_games)]
        cfg = InferenceConfig(backend="hf", batch_size=max(1, len(subset)), max_new_tokens=24,
                              torch_threads=a.threads)
        generator = load_generator(Path(a.model), cfg)
        eps, t = timed(lambda: play(subset, AlfworldEnv, GeneratorPolicy(generator, 24),
                                    a.max_steps, PROMPT))
        methods = [s["method"] for e in eps for s in e.steps]
        report["model"] = {**summary(subset, [float(e.won) for e in eps]), **t,
                           "model": a.model, "subset": [str(Path(g).relative_to(root))
                                                        for g in subset],
                           "mean_steps": sum(e.n_steps for e in eps) / len(eps),
                           "exact_action_pct": 100.0 * methods.count("exact") / max(1,
                                                                                   len(methods))}
        save(report, a.out)
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
