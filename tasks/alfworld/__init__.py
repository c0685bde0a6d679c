"""ALFWorld (L3, interactive): real ALFWorld games when their data is present, or offline
household games made with TextWorld's generator (the default, ``conf/task/household.yaml``)."""

from __future__ import annotations

from pathlib import Path

from a2rl.task import TaskConfig

from .params import AlfworldParams
from .task import AlfworldTask

__all__ = ["AlfworldParams", "AlfworldTask", "build"]


def build(cfg: TaskConfig, data_root: Path) -> AlfworldTask:
    return AlfworldTask(cfg, Path(data_root))
