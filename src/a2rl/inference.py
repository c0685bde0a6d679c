"""One interface for "generate completions for these prompts".

``load_generator(model_dir, cfg)`` returns a Generator: HF transformers batched generation with
left padding (CPU and GPU) or vLLM when ``cfg.backend`` is ``vllm`` (or ``auto`` with vLLM and a
GPU present). Greedy unless ``cfg.temperature > 0``.
"""
# IMPLEMENTATION: helper A

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from a2rl.config import InferenceConfig


class Generator(Protocol):
    tokenizer: object

    def generate(self, prompts: list[str], max_new_tokens: int | None = None) -> list[str]:
        """Completions (new text only, special tokens stripped) for already-formatted prompts,
        in prompt order."""


def format_chat(tokenizer, user: str, system: str | None = None) -> str:
    """The prompt string for one user turn: the tokenizer's chat template when it has one
    (with the generation prompt added), else the plain text."""
    raise NotImplementedError


def load_generator(model_dir: Path, cfg: InferenceConfig) -> Generator:
    raise NotImplementedError
