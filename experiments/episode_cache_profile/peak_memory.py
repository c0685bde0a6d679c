"""Peak memory of lockstep episodes with per-episode KV caches, against the caches they hold.

    python experiments/episode_cache_profile/peak_memory.py --src src          # this checkout
    python experiments/episode_cache_profile/peak_memory.py --src /old/src --src src

For each ``--src`` (an a2rl source tree; several compare versions side by side in one run), a
fresh subprocess plays ``--episodes`` synthetic episodes in lockstep through the grader's HF
generator (``a2rl.task.load_generator``, ``generate_episodes``): every step appends ``--turn``
tokens to every episode's prompt and decodes ``--new`` tokens. It reports the process's peak
resident memory above what it held after loading the model and one short call, the bytes of
the caches held after the last step, and their ratio: how many copies of the live caches a
step holds at its peak.
The synthetic prompts are random token ids (the memory does not depend on what they say).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

DEFAULT_MODEL = "resources/models/smollm2-135m-instruct"


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KB


def measure(a: argparse.Namespace) -> dict:
    """One version, in this process (run as a subprocess by ``main``)."""
    import torch

    from a2rl.config import InferenceConfig
    from a2rl.task import load_generator

    generator = load_generator(Path(a.model), InferenceConfig(backend="hf", torch_threads=a.threads,
                                                        max_new_tokens=a.new))
    gen = torch.Generator().manual_seed(0)
    # a first short call allocates what every call needs (about 0.5 GB here), counted apart
    generator.generate_episodes([("warm-up", list(range(100, 100 + a.turn)))], a.new)
    generator.release("warm-up")
    loaded = peak_mb()
    prompts = {k: [] for k in range(a.episodes)}
    for _ in range(a.steps):
        for ids in prompts.values():
            ids += torch.randint(100, 40000, (a.turn,), generator=gen).tolist()
        generator.generate_episodes([(k, list(ids)) for k, ids in prompts.items()],
                                    max_new_tokens=a.new)
    held = sum(t.numel() * t.element_size() for entry in generator.episodes.entries.values()
               for layer in entry.layers for t in layer) / 2**20
    peak = peak_mb() - loaded
    return {"src": a.src[0], "episodes": a.episodes, "tokens_per_episode": a.steps * a.turn,
            "caches_held_mb": round(held, 1), "peak_above_model_mb": round(peak, 1),
            "copies_at_peak": round(peak / held, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", action="append", required=True)
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--episodes", type=int, default=8)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--turn", type=int, default=250, help="tokens appended a step")
    ap.add_argument("--new", type=int, default=4, help="tokens decoded a step")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print(json.dumps(measure(a)))
        return
    rows = []
    for src in a.src:
        env = {**os.environ, "PYTHONPATH": os.path.abspath(src)}
        options = [f"--{name}={getattr(a, name)}"
                   for name in ("model", "episodes", "steps", "turn", "new", "threads")]
        out = subprocess.run([sys.executable, __file__, "--one", "--src", src, *options],
                             env=env, capture_output=True, text=True, check=True).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]))


if __name__ == "__main__":
    main()
