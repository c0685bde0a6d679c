"""How close the prompt pass runs to this CPU's limit: in one run, the matrix-multiply rate torch
reaches on the model's own layer shapes (the most a forward pass can do) and the rate of the
model's prompt pass itself, in fp32 and in bf16, as GFLOP/s and as a share of the first.

    python benchmarks/peak.py --threads 2 --out results/bench/peak.json
    python benchmarks/peak.py --tiny --tokens 64 --repeats 2        # quick check

Why: issue #16 asked the new generation path for 2x today's on the household evaluation in
fp32. If the prompt pass already runs near the rate of a bare matrix multiply of the same
shapes, no batching or caching trick can double it; only fewer prompt tokens or another
precision can.

The prompt pass's work is counted as a decoder's: per token, 2 FLOPs per weight of the
attention and MLP projections (the embedding is a lookup; no logits are computed, as in the
grader's bucketed prompt pass), plus 2 x 2 x hidden x (tokens it attends to) per layer for
the attention scores and their weighted sum (causal: the row's position, averaged).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

DEFAULT_MODEL = "resources/models/smollm2-135m-instruct"


def timed(fn, repeats: int) -> float:
    """The best of ``repeats`` wall times of ``fn()`` after one warm-up call."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


def projection_shapes(config) -> list[tuple[int, int]]:
    """(in, out) of each linear layer of one decoder layer: q, k, v, o, gate, up, down."""
    hidden, inter = config.hidden_size, config.intermediate_size
    heads = config.num_attention_heads
    kv = hidden * getattr(config, "num_key_value_heads", heads) // heads
    return [(hidden, hidden), (hidden, kv), (hidden, kv), (hidden, hidden),
            (hidden, inter), (hidden, inter), (inter, hidden)]


def projection_flops(config, rows: int) -> int:
    """FLOPs of one decoder layer's projections over ``rows`` tokens: 2 per weight a token."""
    return 2 * rows * sum(i * o for i, o in projection_shapes(config))


def prompt_pass_flops(config, batch: int, length: int) -> float:
    """FLOPs of one prompt pass over ``batch`` rows of ``length`` tokens (see the module doc)."""
    linear = projection_flops(config, batch * length)
    attention = 2 * 2 * config.hidden_size * batch * length * (length + 1) / 2
    return config.num_hidden_layers * (linear + attention)


def matmul_rate(config, rows: int, dtype, repeats: int) -> float:
    """GFLOP/s of the layer's projections as bare matrix multiplies of ``rows`` tokens."""
    import torch

    pairs = [(torch.randn(rows, i, dtype=dtype), torch.randn(i, o, dtype=dtype))
             for i, o in projection_shapes(config)]

    def run():
        for a, b in pairs:
            torch.matmul(a, b)

    return projection_flops(config, rows) / timed(run, repeats) / 1e9


def prompt_pass_rate(model, batch: int, length: int, repeats: int) -> float:
    """GFLOP/s of the model's decoder over a batch of random prompts (no logits)."""
    import torch

    ids = torch.randint(0, model.config.vocab_size, (batch, length))
    with torch.inference_mode():
        seconds = timed(lambda: model.base_model(input_ids=ids, use_cache=False), repeats)
    return prompt_pass_flops(model.config, batch, length) / seconds / 1e9


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--tiny", action="store_true", help="a freshly built tiny random model")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8, help="prompts in the prompt pass")
    ap.add_argument("--tokens", type=int, default=384, help="tokens a prompt (household: ~350)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)

    import tempfile

    import torch
    from transformers import AutoModelForCausalLM

    from a2rl.common import describe, print_report

    torch.set_num_threads(a.threads)
    model_dir = a.model
    if a.tiny:
        from a2rl.models import build_tiny_model
        model_dir = str(build_tiny_model(Path(tempfile.mkdtemp(prefix="bench-peak-")) / "tiny"))
    report = {"model": "tiny" if a.tiny else model_dir, "threads": a.threads, "batch": a.batch,
              "tokens": a.tokens, "hardware": describe(), "precisions": {}}
    for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype).eval()
        peak = matmul_rate(model.config, a.batch * a.tokens, dtype, a.repeats)
        forward = prompt_pass_rate(model, a.batch, a.tokens, a.repeats)
        report["precisions"][name] = {"matmul_gflops": round(peak, 1),
                                      "prompt_pass_gflops": round(forward, 1),
                                      "share_of_matmul": round(forward / peak, 3)}
        del model
    print_report(report, a.out)
    return report


if __name__ == "__main__":
    main()
