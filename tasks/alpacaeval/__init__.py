"""AlpacaEval (L2): open-ended instructions judged against GPT-4 Turbo's replies; the score is
alpaca_eval's length-controlled win rate. See ``task`` (protocol), ``judge`` (backends, cache,
retries), ``metric`` (alpaca_eval's GLM) and ``params``.
"""

from __future__ import annotations

from pathlib import Path

from a2rl.task import TaskConfig

from .params import AlpacaEvalParams, JudgeParams
from .task import AlpacaEvalTask

__all__ = ["AlpacaEvalParams", "AlpacaEvalTask", "JudgeParams", "build"]


def build(cfg: TaskConfig, data_root: Path) -> AlpacaEvalTask:
    return AlpacaEvalTask(cfg, Path(data_root))
