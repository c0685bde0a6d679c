"""Benchmark lockstep evaluation against playing the same episodes one after another.

    python scripts/bench_lockstep.py --games results/prepared/household/sealed/games --n 32 \
        --max-steps 6 --threads 2 --out results/bench/lockstep.json
    python scripts/bench_lockstep.py --tiny --n 4 --max-steps 2      # quick check (tiny model)

Both runs use the same model through ``a2rl.task.inference`` (HF batched on CPU, vLLM on GPU with
``--backend vllm``), greedy, the household prompt, and ``a2rl.task.envs.play``: lockstep makes one
batched generation per step for all unfinished episodes; sequential plays each episode alone
(batch of one). The script checks that both give the same episodes (actions and outcomes) and
reports wall times, the speed-up ratio, success rates and the load average around each phase
(the machine may be shared; the numbers say so).
"""

from __future__ import annotations

import argparse
import json
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
    ap.add_argument("--backend", default="hf", choices=("auto", "hf", "vllm"))
    ap.add_argument("--skip-sequential", action="store_true")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)

    from a2rl_tasks.alfworld.textworld_env import PROMPT, HouseholdEnv, load_games

    from a2rl.common.hardware import describe
    from a2rl.config.types import InferenceConfig
    from a2rl.task.envs import GeneratorPolicy, play, success_rate
    from a2rl.task.inference import load_generator

    games_dir = Path(a.games)
    if a.make:
        from a2rl_tasks.alfworld.games import Difficulty, make_games
        from a2rl_tasks.alfworld.params import HOUSEHOLD_GOAL_TYPES
        make_games(games_dir, "bench", a.make, 424242, Difficulty(), HOUSEHOLD_GOAL_TYPES)
    games = load_games(games_dir)[:a.n]
    model = Path(a.model)
    if a.tiny:
        import tempfile

        from a2rl.models.provision import build_tiny_model
        model = build_tiny_model(Path(tempfile.mkdtemp()) / "tiny")
    cfg = InferenceConfig(backend=a.backend, batch_size=max(1, len(games)),
                          max_new_tokens=a.max_new_tokens, torch_threads=a.threads)
    generator = load_generator(model, cfg)
    policy = GeneratorPolicy(generator, a.max_new_tokens)
    os.environ.setdefault("TQDM_DISABLE", "1")

    def timed(lockstep: bool):
        load = os.getloadavg()[0]
        started = time.perf_counter()
        episodes = play(games, HouseholdEnv, policy, a.max_steps, PROMPT, lockstep=lockstep)
        return episodes, {"seconds": round(time.perf_counter() - started, 2),
                          "success": success_rate(episodes),
                          "steps": sum(e.n_steps for e in episodes),
                          "load_before": round(load, 2), "load_after": round(os.getloadavg()[0], 2)}

    lock_eps, lock = timed(True)
    report = {"model": str(model), "backend": type(generator).__name__, "episodes": len(games),
              "max_steps": a.max_steps, "threads": a.threads, "cpus": os.cpu_count(),
              "lockstep": lock, "hardware": describe(inference=generator.precision)}
    if not a.skip_sequential:
        seq_eps, seq = timed(False)
        same = [(e.won, [s["action"] for s in e.steps]) for e in lock_eps] == \
               [(e.won, [s["action"] for s in e.steps]) for e in seq_eps]
        report |= {"sequential": seq, "same_episodes": same,
                   "speedup": round(seq["seconds"] / max(lock["seconds"], 1e-9), 2)}
    text = json.dumps(report, indent=1)
    print(text)
    if a.out:
        from a2rl.common.files import write_text_atomic

        write_text_atomic(Path(a.out), text + "\n")
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
