"""Whether the append-style prompt pass gains from batching (issue #32): ``--episodes``
episodes of ``--new`` new tokens over ``--cached`` cached tokens each (random keys and values),
run through SmolLM2-135M-Instruct one episode at a time (as ``a2rl.task.episode_cache`` does)
and as one batch over the joined caches; and, for scale, the same tokens as one row without a
cache.

    python experiments/episode_cache_profile/prefill_batching.py

On 2026-12-05 (Intel Xeon, one thread): 309 tokens/s one at a time, 305 batched; see
docs/results/2026-12-05-episode-tokens.md.
"""

from __future__ import annotations

import time

import torch
from transformers import DynamicCache

from common import arguments, load, random_kv


def main() -> None:
    ap = arguments(__doc__, episodes=16)
    ap.add_argument("--new", type=int, default=90)
    a = ap.parse_args()
    model = load(a)
    cfg = model.config
    rows, length, new = a.episodes, a.cached, a.new
    gen = torch.Generator().manual_seed(0)
    caches = [random_kv(model, 1, length, gen) for _ in range(rows)]
    ids = torch.randint(0, 10_000, (rows, new), generator=gen)
    with torch.no_grad():
        started = time.perf_counter()
        for row in range(rows):
            model.base_model(input_ids=ids[row:row + 1], use_cache=True,
                             cache=DynamicCache(caches[row], config=cfg))
        alone = time.perf_counter() - started
        joined = DynamicCache([(torch.cat([c[layer][0] for c in caches]),
                                torch.cat([c[layer][1] for c in caches]))
                               for layer in range(cfg.num_hidden_layers)], config=cfg)
        started = time.perf_counter()
        model.base_model(input_ids=ids, attention_mask=torch.ones(rows, length + new,
                                                                  dtype=torch.long),
                         position_ids=(length + torch.arange(new)).expand(rows, new),
                         cache=joined, use_cache=True)
        batched = time.perf_counter() - started
        started = time.perf_counter()
        model.base_model(input_ids=ids.reshape(1, -1), use_cache=False)
        flat = time.perf_counter() - started
    tokens = rows * new
    print(f"{rows} episodes x {new} new tokens over {length} cached, {a.threads} thread(s): one "
          f"at a time {alone:.2f} s ({tokens / alone:.0f} tokens/s), batched {batched:.2f} s "
          f"({tokens / batched:.0f} tokens/s); one row of {tokens} without a cache {flat:.2f} s")


if __name__ == "__main__":
    main()
