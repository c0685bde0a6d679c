"""One command for a machine with a GPU: how fast evaluation generates there, per backend.

    python benchmarks/gpu_check.py                          # vLLM and HF on the GPU, 32 episodes
    python benchmarks/gpu_check.py --backend hf --allow-cpu --tiny --n 4 --prompts 8   # code path
    python benchmarks/gpu_check.py --random-weights     # a machine without the weights: MODEL's
                                                     # config and tokenizer, random weights

For each backend (vLLM with prefix caching on; HF transformers on the GPU with the inference
defaults: the shared-prefix KV cache, the prompt pass in length buckets), through
``a2rl.task.inference``:
1. generation: the same ``--prompts`` chat prompts (a shared instructions prefix, then a
   varied question) in one batched call and one prompt at a time; wall seconds, generated
   tokens per second (counted by re-tokenizing the texts, the same for both backends) and how
   many texts differ between the two;
2. rollouts: ``--n`` household episodes played in lockstep (one batched call per step) and one
   after another; wall seconds, steps and whether both give the same episodes.
Writes ``results/bench/gpu_check.json``. Without a CUDA GPU it says so and exits with status 2
at once, unless ``--allow-cpu`` (to exercise the code path).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_MODEL = "resources/models/smollm2-135m-instruct"
DEFAULT_GAMES = "results/prepared/household/sealed/games"
INSTRUCTIONS = ("You answer arithmetic and household questions. Think step by step in at most "
                "three short sentences, then give the answer on its own line as 'Answer: X'. ")
NO_GPU = 2


def prompts_for(tokenizer, n: int) -> list[str]:
    from a2rl.task import format_chat

    return [format_chat(tokenizer, f"{INSTRUCTIONS}Question {i}: what is {i * 7} + {i * i}? "
                        + "Explain. " * (i % 5)) for i in range(n)]


def timed(fn):
    started = time.perf_counter()
    value = fn()
    return value, round(time.perf_counter() - started, 3)


def check_generation(gen, n_prompts: int, max_new_tokens: int) -> dict:
    """One batched call vs one call per prompt on the same prompts."""
    prompts = prompts_for(gen.tokenizer, n_prompts)
    gen.generate(prompts[:2], max_new_tokens=4)  # warm-up (CUDA kernels, allocator)
    batched, batched_s = timed(lambda: gen.generate(prompts, max_new_tokens=max_new_tokens))
    single, single_s = timed(lambda: [gen.generate([p], max_new_tokens=max_new_tokens)[0]
                                      for p in prompts])
    tokens = sum(len(gen.tokenizer(t, add_special_tokens=False).input_ids) for t in batched)
    return {"prompts": n_prompts, "batched_s": batched_s, "sequential_s": single_s,
            "speedup": round(single_s / max(batched_s, 1e-9), 2),
            "batched_new_tokens_per_s": round(tokens / max(batched_s, 1e-9), 1),
            "texts_differing": sum(b != s for b, s in zip(batched, single))}


def check_rollouts(gen, games: list[str], max_steps: int, max_new_tokens: int) -> dict:
    """Lockstep vs one episode after another on the same household games."""
    from a2rl_tasks.alfworld.textworld_env import PROMPT, HouseholdEnv

    from a2rl.task import GeneratorPolicy, play

    policy = GeneratorPolicy(gen, max_new_tokens)
    play(games[:1], HouseholdEnv, policy, 1, PROMPT, True)  # warm-up: the game engine loads
    lock, lock_s = timed(lambda: play(games, HouseholdEnv, policy, max_steps, PROMPT, True))
    seq, seq_s = timed(lambda: play(games, HouseholdEnv, policy, max_steps, PROMPT, False))

    def actions(episodes):
        return [(e.won, [s["action"] for s in e.steps]) for e in episodes]

    return {"episodes": len(games), "max_steps": max_steps, "lockstep_s": lock_s,
            "sequential_s": seq_s, "speedup": round(seq_s / max(lock_s, 1e-9), 2),
            "steps": sum(e.n_steps for e in lock),
            "episodes_differing": sum(x != y for x, y in zip(actions(lock), actions(seq)))}


def load_games_for(a) -> list[str]:
    from a2rl_tasks.alfworld.textworld_env import load_games

    folder = Path(a.games)
    if not folder.is_dir() or not any(folder.iterdir()):
        from a2rl_tasks.alfworld.games import Difficulty, make_games
        from a2rl_tasks.alfworld.params import HOUSEHOLD_GOAL_TYPES

        folder = Path(tempfile.mkdtemp()) / "games"
        make_games(folder, "gpu", a.n, 424242, Difficulty(), HOUSEHOLD_GOAL_TYPES)
    return load_games(folder)[:a.n]


def with_random_weights(model: Path, dest: Path) -> Path:
    """``model``'s architecture and tokenizer with random weights in ``dest`` (seed 0): the same
    shapes and so the same cost per token, for a machine the weights cannot be brought to. Its
    replies are noise, so generated lengths run to the cap and rollouts win nothing."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(model)).save_pretrained(dest)
    AutoTokenizer.from_pretrained(model).save_pretrained(dest)
    return dest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="both", choices=("both", "vllm", "hf"))
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--tiny", action="store_true", help="use a freshly built tiny random model")
    ap.add_argument("--random-weights", action="store_true",
                    help="MODEL's config and tokenizer with random weights (no weights needed)")
    ap.add_argument("--games", default=DEFAULT_GAMES, help="made on the fly when missing")
    ap.add_argument("--n", type=int, default=32, help="household episodes")
    ap.add_argument("--max-steps", type=int, default=6)
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--allow-cpu", action="store_true", help="run without a GPU (code path check)")
    ap.add_argument("--out", default="results/bench/gpu_check.json")
    a = ap.parse_args(argv)

    import torch

    if not torch.cuda.is_available() and not a.allow_cpu:
        print("gpu_check: no CUDA GPU on this machine (torch.cuda.is_available() is False); "
              "run it where one is, or pass --allow-cpu to exercise the code path",
              file=sys.stderr)
        return NO_GPU
    from a2rl.common import describe, print_report
    from a2rl.config import InferenceConfig
    from a2rl.task import load_generator

    os.environ.setdefault("TQDM_DISABLE", "1")
    model = Path(a.model)
    if a.tiny:
        from a2rl.models import build_tiny_model

        model = build_tiny_model(Path(tempfile.mkdtemp()) / "tiny")
    elif a.random_weights:
        model = with_random_weights(model, Path(tempfile.mkdtemp()) / "random")
    games = load_games_for(a)
    report = {"model": str(model), "random_weights": a.random_weights, "hardware": describe(),
              "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
              "backends": {}}
    for backend in (("vllm", "hf") if a.backend == "both" else (a.backend,)):
        cfg = InferenceConfig(backend=backend, batch_size=max(a.n, a.prompts),
                              max_new_tokens=a.max_new_tokens, precision="auto")
        gen = load_generator(model, cfg)
        try:
            report["backends"][backend] = {
                "precision": gen.precision,
                "generation": check_generation(gen, a.prompts, a.max_new_tokens),
                "rollouts": check_rollouts(gen, games, a.max_steps, 24)}
        finally:
            gen.close()
    print_report(report, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
