"""Where one decoding step of a joined append-style batch goes with transformers'
concatenating cache (issue #32): torch.profiler over a few decoding steps of
SmolLM2-135M-Instruct from a joined ``DynamicCache`` of ``--episodes`` x ``--cached`` tokens
(random keys and values, a third of the rows left-padded), as ``a2rl.task.episode_cache`` decoded
before it reserved its buffers.

    python experiments/episode_cache_profile/decode_profile.py

On 2026-12-05 (Intel Xeon, one thread) ``aten::cat`` was 67 % of a step; the before/after of
the change is ``benchmarks/episode_tokens.py``'s (docs/results/2026-12-05-episode-tokens.md).
"""

from __future__ import annotations

import time

import torch
from torch.profiler import ProfilerActivity, profile
from transformers import DynamicCache

from common import arguments, load, random_kv


def main() -> None:
    ap = arguments(__doc__, episodes=50)
    ap.add_argument("--steps", type=int, default=4)
    a = ap.parse_args()
    model = load(a)
    cfg = model.config
    rows, length = a.episodes, a.cached
    layers = random_kv(model, rows, length, torch.Generator().manual_seed(0))
    cache = DynamicCache(layers, config=cfg)
    mask = torch.ones(rows, length + 1 + a.steps, dtype=torch.long)
    mask[: rows // 3, : length // 3] = 0
    ids = torch.full((rows, 1), 5)
    started = time.perf_counter()
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU]) as prof:
        for step in range(a.steps):
            seen = mask[:, : length + 1 + step]
            out = model(input_ids=ids, attention_mask=seen, cache=cache, use_cache=True,
                        position_ids=seen.sum(-1, keepdim=True) - 1)
            ids = out.logits[:, -1:].argmax(-1)
    seconds = (time.perf_counter() - started) / a.steps
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=8))
    print(f"concatenating cache: {seconds * 1000:.0f} ms a decoding step (profiler on), "
          f"{rows} episodes x {length} cached tokens, {a.threads} thread(s)")


if __name__ == "__main__":
    main()
