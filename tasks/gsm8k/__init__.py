"""GSM8K: grade-school math word problems, scored by exact match of the final number.

Also serves procedural variants from reasoning-gym (chain_sum, basic_arithmetic, gsm_symbolic,
...) through ``task.params.source``; see ``params.GSM8KParams``.
"""

from __future__ import annotations

from pathlib import Path

from a2rl.task import TaskConfig

from .params import GSM8KParams, SourceParams
from .task import GSM8KTask

__all__ = ["GSM8KParams", "GSM8KTask", "SourceParams", "build"]


def build(cfg: TaskConfig, data_root: Path) -> GSM8KTask:
    return GSM8KTask(cfg, Path(data_root))
