"""DeepSearchQA (L3): multi-step questions answered by searching, offline over a procedural
knowledge world (``conf/task/deepsearchqa_world.yaml``) or on the real questions with a web
search API and the LLM judge (``conf/task/deepsearchqa.yaml``)."""

from __future__ import annotations

from pathlib import Path

from a2rl.task import TaskConfig

from .params import DeepSearchParams
from .task import DeepSearchTask

__all__ = ["DeepSearchParams", "DeepSearchTask", "build"]


def build(cfg: TaskConfig, data_root: Path) -> DeepSearchTask:
    return DeepSearchTask(cfg, Path(data_root))
