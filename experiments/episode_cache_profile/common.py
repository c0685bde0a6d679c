"""What the two profiling scripts share: their common options, the model, random keys and
values shaped like the model's cache."""

from __future__ import annotations

import argparse

import torch
from transformers import AutoModelForCausalLM

DEFAULT_MODEL = "resources/models/smollm2-135m-instruct"


def arguments(doc: str, episodes: int) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--episodes", type=int, default=episodes)
    ap.add_argument("--cached", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=1)
    return ap


def load(a: argparse.Namespace):
    torch.set_num_threads(a.threads)
    return AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32).eval()


def random_kv(model, rows: int, length: int, gen: torch.Generator) -> list[tuple]:
    """Per layer (keys, values) of ``rows`` x ``length`` positions, as the model caches them."""
    cfg = model.config
    shape = (rows, cfg.num_key_value_heads, length, cfg.hidden_size // cfg.num_attention_heads)
    return [(torch.randn(*shape, generator=gen), torch.randn(*shape, generator=gen))
            for _ in range(cfg.num_hidden_layers)]
