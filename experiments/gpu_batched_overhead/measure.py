"""Where the HF backend's batched generation spends its time on a GPU: the gpu_check run on an
H200 (docs/results/2026-12-04-gpu-check.md) took about 140 ms per decoding step for a batch of
64 prompts but 28 ms per token for one prompt at a time. This times one batched call of
``--prompts`` chat prompts (gpu_check's) at ``--max-new-tokens`` through a2rl's generator with
the shared-prefix cache on and off and with one padded prompt pass (pad_budget 1) against
length buckets, and plain ``model.generate`` on the same left-padded batch, plus one prompt
alone; wall seconds and seconds per decoding step for each.

    python experiments/gpu_batched_overhead/measure.py --model MODEL [--random-weights]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from gpu_check import prompts_for, with_random_weights  # noqa: E402


def timed(fn, repeats: int = 2) -> float:
    """The faster of ``repeats`` runs of ``fn`` (the first also warms the kernels up)."""
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return round(best, 3)


def a2rl_call(model: Path, prompts: list[str], tokens: int, **options) -> float:
    from a2rl.config import InferenceConfig
    from a2rl.task import load_generator

    cfg = InferenceConfig(backend="hf", batch_size=len(prompts), max_new_tokens=tokens,
                          precision="auto", **options)
    gen = load_generator(model, cfg)
    try:
        return timed(lambda: gen.generate(prompts, max_new_tokens=tokens))
    finally:
        gen.close()


def plain_generate(model_dir: Path, prompts: list[str], tokens: int) -> float:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device = "cuda" if torch.cuda.is_available() else "cpu"
    tok = AutoTokenizer.from_pretrained(model_dir, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16).to(device)
    batch = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(device)

    def run():
        model.generate(**batch, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False,
                       pad_token_id=tok.pad_token_id)
        if device == "cuda":
            torch.cuda.synchronize()
    return timed(run)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--random-weights", action="store_true")
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--out", default="results/bench/gpu_batched_overhead.json")
    a = ap.parse_args()
    from transformers import AutoTokenizer

    model = Path(a.model)
    if a.random_weights:
        model = with_random_weights(model, Path(tempfile.mkdtemp()) / "random")
    prompts = prompts_for(AutoTokenizer.from_pretrained(model), a.prompts)
    n, t = a.prompts, a.max_new_tokens
    walls = {
        "a2rl_default": a2rl_call(model, prompts, t),
        "a2rl_no_prefix_cache": a2rl_call(model, prompts, t, prefix_cache=False),
        "a2rl_one_prompt_pass": a2rl_call(model, prompts, t, pad_budget=1.0),
        "a2rl_neither": a2rl_call(model, prompts, t, prefix_cache=False, pad_budget=1.0),
        "plain_generate": plain_generate(model, prompts, t),
        "plain_generate_one_prompt": plain_generate(model, prompts[:1], t),
    }
    report = {"prompts": n, "max_new_tokens": t, "random_weights": a.random_weights,
              "wall_s": walls,
              "ms_per_step": {k: round(1000 * v / t, 1) for k, v in walls.items()}}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
