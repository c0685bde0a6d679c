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

import argparse
import time

import torch
from transformers import AutoModelForCausalLM, DynamicCache

DEFAULT_MODEL = "resources/models/smollm2-135m-instruct"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--episodes", type=int, default=16)
    ap.add_argument("--new", type=int, default=90)
    ap.add_argument("--cached", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32).eval()
    cfg = model.config
    heads, dim = cfg.num_key_value_heads, cfg.hidden_size // cfg.num_attention_heads
    rows, length, new = a.episodes, a.cached, a.new
    gen = torch.Generator().manual_seed(0)
    caches = [[(torch.randn(1, heads, length, dim, generator=gen),
                torch.randn(1, heads, length, dim, generator=gen))
               for _ in range(cfg.num_hidden_layers)] for _ in range(rows)]
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
