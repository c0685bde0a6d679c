"""Benchmark lockstep evaluation: the new generation path vs today's vs one episode at a time.

    python benchmarks/lockstep.py --games results/prepared/household/sealed/games --n 32 \
        --max-steps 6 --threads 2 --bf16 --out results/bench/lockstep.json
    python benchmarks/lockstep.py --tiny --n 4 --max-steps 2      # quick check (tiny model)

All phases use one model through ``a2rl.task.inference`` (HF on CPU), greedy, the household
prompt in its rewrite style (one user turn per step, the format these phases were measured on;
``benchmarks/episode_tokens.py`` compares it with the append-only chat) and
``a2rl.task.envs.play``, on the same games, in one run:
- ``lockstep_new``: one batched generation per step for all unfinished episodes, starting from
  the cached KV of the shared prompt prefix, its prompt pass in length buckets that pad at most
  ``--pad-budget`` (default: the config's, 0.1), decoded as one batch;
- ``lockstep_old``: the same with today's grouping (fixed chunks, padded to the longest, no
  prefix cache: ``pad_budget=1, prefix_cache=False``);
- ``sequential``: each episode alone (batch of one), today's path;
- ``lockstep_new_bf16`` (``--bf16``): the new path in bf16, with how many episodes differ.
Each phase reports wall seconds, the prompt pass's and the decoding's tokens per second, the
share of padded positions in the prompt pass, and whether its episodes (actions and outcomes)
equal ``lockstep_old``'s; the load average around each phase says how shared the machine was.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

DEFAULT_MODEL = "resources/models/smollm2-135m-instruct"


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--games", default="results/prepared/household/sealed/games",
                    help="folder of TextWorld game files (made on the fly with --make)")
    ap.add_argument("--make", type=int, default=0, help="make this many games into --games first")
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--tiny", action="store_true", help="use a freshly built tiny random model")
    ap.add_argument("--n", type=int, default=32, help="episodes (games)")
    ap.add_argument("--max-steps", type=int, default=6)
    ap.add_argument("--max-new-tokens", type=int, default=24)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--skip-sequential", action="store_true")
    ap.add_argument("--bf16", action="store_true", help="also run the new path in bf16")
    ap.add_argument("--pad-budget", type=float, default=None,
                    help="the new path's pad_budget (default: InferenceConfig's)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)

    from a2rl_tasks.alfworld.textworld_env import PROMPT, HouseholdEnv, load_games

    from a2rl.common import describe
    from a2rl.config import InferenceConfig
    from a2rl.task import GeneratorPolicy, load_generator, play, success_rate

    rewrite = dataclasses.replace(PROMPT, style="rewrite")
    games_dir = Path(a.games)
    if a.make:
        from a2rl_tasks.alfworld.games import Difficulty, make_games
        from a2rl_tasks.alfworld.params import HOUSEHOLD_GOAL_TYPES
        make_games(games_dir, "bench", a.make, 424242, Difficulty(), HOUSEHOLD_GOAL_TYPES)
    games = load_games(games_dir)[:a.n]
    model = Path(a.model)
    if a.tiny:
        import tempfile

        from a2rl.models import build_tiny_model
        model = build_tiny_model(Path(tempfile.mkdtemp()) / "tiny")
    cfg = InferenceConfig(backend="hf", batch_size=max(1, len(games)),
                          max_new_tokens=a.max_new_tokens, torch_threads=a.threads)
    cfg = dataclasses.replace(cfg, prefix_cache=True)  # the new path
    if a.pad_budget is not None:
        cfg = dataclasses.replace(cfg, pad_budget=a.pad_budget)
    generator = load_generator(model, cfg)
    os.environ.setdefault("TQDM_DISABLE", "1")
    old = {"pad_budget": 1.0, "prefix_cache": False}

    def timed(gen, lockstep: bool, **settings):
        """Play every game with ``gen`` set to ``settings`` (fresh counters and prefix cache)."""
        gen.cfg = dataclasses.replace(cfg, **settings)
        gen.generate(["warm-up"], max_new_tokens=2)  # first-call costs out of the timing
        gen.reset()
        load = os.getloadavg()[0]
        started = time.perf_counter()
        episodes = play(games, HouseholdEnv, GeneratorPolicy(gen, a.max_new_tokens), a.max_steps,
                        rewrite, lockstep=lockstep)
        seconds = round(time.perf_counter() - started, 2)
        print(f"phase done: {seconds} s, {gen.stats.as_dict()}", file=sys.stderr, flush=True)
        return episodes, {"seconds": seconds,
                          "success": success_rate(episodes),
                          "steps": sum(e.n_steps for e in episodes),
                          "load_before": round(load, 2), "load_after": round(os.getloadavg()[0], 2),
                          "tokens": gen.stats.as_dict()}

    def actions(episodes):
        return [(e.won, [s["action"] for s in e.steps]) for e in episodes]

    # warm-up: the game engine loads on its first game, outside the timing
    play(games[:1], HouseholdEnv, GeneratorPolicy(generator, 2), 1, rewrite)
    phases = {}
    new_eps, phases["lockstep_new"] = timed(generator, True)
    old_eps, phases["lockstep_old"] = timed(generator, True, **old)
    phases["lockstep_new"]["same_episodes"] = actions(new_eps) == actions(old_eps)
    if not a.skip_sequential:
        seq_eps, phases["sequential"] = timed(generator, False, **old)
        phases["sequential"]["same_episodes"] = actions(seq_eps) == actions(old_eps)
    if a.bf16:
        generator.close()
        bf16 = load_generator(model, dataclasses.replace(cfg, precision="bf16"))
        bf_eps, phases["lockstep_new_bf16"] = timed(bf16, True, precision="bf16")
        phases["lockstep_new_bf16"]["episodes_differing"] = sum(
            x != y for x, y in zip(actions(bf_eps), actions(old_eps)))
    seconds = {k: v["seconds"] for k, v in phases.items()}
    ratios = {"new_vs_old": round(seconds["lockstep_old"] / seconds["lockstep_new"], 2)}
    if "sequential" in seconds:
        ratios |= {"new_vs_sequential": round(seconds["sequential"] / seconds["lockstep_new"], 2),
                   "old_vs_sequential": round(seconds["sequential"] / seconds["lockstep_old"], 2)}
    report = {"model": str(model), "backend": type(generator).__name__, "episodes": len(games),
              "max_steps": a.max_steps, "threads": a.threads, "cpus": os.cpu_count(),
              "nice": os.nice(0), "phases": phases, "speedups": ratios,
              "hardware": describe(inference=generator.precision)}
    from a2rl.common import print_report

    print_report(report, a.out)
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
