"""The two rates ``a2rl doctor`` predicts a grid's cells from, measured on the real base model:
a training step the way the SFT script trains, and greedy generation (prompt pass and one
generated token for two batch sizes), each in the precision the agents and the grader use.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from a2rl.common.hardware import torch_dtype


@dataclass
class Rates:
    """Measured on the base model in the precision the agents and the grader would use."""

    train_s_per_token: float  # forward + backward, per token in the batch
    optimizer_s: float  # the AdamW update of one step, whatever the batch
    prefill_s_per_token: float  # the prompt pass of generation, per prompt token
    decode_step_s: dict[int, float]  # batch size -> seconds for one generated token
    seconds: dict[str, float] = field(default_factory=dict)


TRAIN_SHAPE = (2, 256)  # batch x tokens of the timed training step (scaled to each task)
DECODE_BATCHES = (4, 16)
PROMPT_TOKENS = 192
DECODE_TOKENS = 16


def time_training(model_dir: Path, precision: str) -> tuple[float, float]:
    """(seconds per token of forward + backward, seconds of one AdamW step) the way the SFT
    script trains (fp32 weights, bf16 autocast or none, no gradient checkpointing): the faster
    of two timed steps after a warm-up step, so a busy moment does not count as the machine's
    speed."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    batch, length = TRAIN_SHAPE
    ids = torch.randint(0, model.config.vocab_size, (batch, length),
                        generator=torch.Generator().manual_seed(0))
    passes, steps = [], []
    for _ in range(3):
        started = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        stepped = time.perf_counter()
        opt.step()
        opt.zero_grad()
        passes.append(stepped - started)
        steps.append(time.perf_counter() - stepped)
    return min(passes[1:]) / (batch * length), min(steps[1:])


def time_generation(model_dir: Path, precision: str) -> tuple[float, dict[int, float]]:
    """(seconds per prompt token, {batch: seconds per generated token for that many prompts}),
    greedy, in ``precision``."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch_dtype(precision)).eval()
    decode = {}
    with torch.inference_mode():
        for batch in DECODE_BATCHES:
            ids = torch.randint(0, model.config.vocab_size, (batch, PROMPT_TOKENS),
                                generator=torch.Generator().manual_seed(batch))
            model(input_ids=ids[:1, :16])  # warm-up
            started = time.perf_counter()
            model(input_ids=ids)
            prefill = time.perf_counter() - started
            started = time.perf_counter()
            model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                           max_new_tokens=DECODE_TOKENS, min_new_tokens=DECODE_TOKENS)
            decode[batch] = max(0.0, time.perf_counter() - started - prefill) / DECODE_TOKENS
            per_token = prefill / ids.numel()
    return per_token, decode


def decode_step_s(rates: Rates, batch: int) -> float:
    """A generated token for ``batch`` prompts, on the line through the two measured batches."""
    (b1, t1), (b2, t2) = sorted((int(k), v) for k, v in rates.decode_step_s.items())
    return max(t1, t1 + (t2 - t1) * (batch - b1) / (b2 - b1))


def measure(model_dir: Path, train_precision: str, inference_precision: str) -> Rates:
    started = time.monotonic()
    train, optimizer = time_training(model_dir, train_precision)
    trained = time.monotonic()
    prefill, decode = time_generation(model_dir, inference_precision)
    return Rates(train, optimizer, prefill, decode,
                 {"training": round(trained - started, 1),
                  "generation": round(time.monotonic() - trained, 1)})
