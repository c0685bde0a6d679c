"""Where one decoding step of a joined append-style batch goes (issue #32): torch.profiler over a
few decoding steps of SmolLM2-135M-Instruct from a joined cache of ``--episodes`` x
``--cached`` tokens (random keys and values, a third of the rows left-padded), with transformers'
concatenating ``DynamicCache`` or with the reserved buffers of ``a2rl.task.episode_cache``.

    python experiments/episode_cache_profile/decode_profile.py --cache concatenating
    python experiments/episode_cache_profile/decode_profile.py --cache reserved

On 2026-12-05 (Intel Xeon, one thread) ``aten::cat`` was 67 % of a concatenating step; see
docs/results/2026-12-05-episode-tokens.md.
"""

from __future__ import annotations

import time

import torch
from torch.profiler import ProfilerActivity, profile
from transformers import DynamicCache

from a2rl.task.episode_cache import _reserved_layer
from common import arguments, load, random_kv


def main() -> None:
    ap = arguments(__doc__, episodes=50)
    ap.add_argument("--cache", choices=["concatenating", "reserved"], default="concatenating")
    ap.add_argument("--steps", type=int, default=4)
    a = ap.parse_args()
    model = load(a)
    cfg = model.config
    rows, length = a.episodes, a.cached
    layers = random_kv(model, rows, length, torch.Generator().manual_seed(0))
    heads, dim = layers[0][0].shape[1], layers[0][0].shape[3]
    if a.cache == "reserved":
        cache = DynamicCache(config=cfg)
        reserved = _reserved_layer()
        cache.layers = []
        for k, v in layers:
            keys = k.new_zeros(rows, heads, length + a.steps + 1, dim)
            values = v.new_zeros(rows, heads, length + a.steps + 1, dim)
            keys[:, :, :length], values[:, :, :length] = k, v
            cache.layers.append(reserved(keys, values, length))
    else:
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
    print(f"{a.cache}: {seconds * 1000:.0f} ms a decoding step (profiler on), {rows} episodes "
          f"x {length} cached tokens, {a.threads} thread(s)")


if __name__ == "__main__":
    main()
