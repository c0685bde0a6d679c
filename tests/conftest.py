"""Shared fixtures. Tests run offline on the tiny generated model, one torch thread.

Tests marked ``heavy`` (the real SmolLM2-135M model) are skipped unless selected with
``-m heavy`` (or ``-m "heavy or not heavy"`` for everything).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}

# huggingface_hub reads these when it is first imported, which can happen while test modules are
# collected, before any fixture runs; so set them at import time too.
os.environ.update(OFFLINE_ENV)


def pytest_collection_modifyitems(config, items):
    """Heavy tests (real SmolLM2 runs) are left out of the default run, not skipped inside it:
    select them with ``-m heavy``."""
    if "heavy" in (config.getoption("-m") or ""):
        return
    heavy = [item for item in items if "heavy" in item.keywords]
    if heavy:
        config.hook.pytest_deselected(items=heavy)
        items[:] = [item for item in items if "heavy" not in item.keywords]


@pytest.fixture(scope="session", autouse=True)
def offline_single_thread():
    """No Hub access, no tokenizer thread pools, one torch thread (the machines are shared)."""
    os.environ.update(OFFLINE_ENV)
    import torch

    torch.set_num_threads(1)
    yield


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    """The tiny random Qwen2 model with its ChatML tokenizer, built once per session. Treat it as
    read-only: copy it before changing anything."""
    from a2rl.models.provision import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("models") / "tiny")
