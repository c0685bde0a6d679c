"""The reward agents train on online (the task's ``SingleTurn`` declaration): a reply scores
1.0 when its final number equals the train row's, by the grader's own extraction and comparison
(``extract.py``), else 0.0.

prepare() copies this file, as ``__init__.py``, and extract.py into the agent's data folder
(``data/reward/``), so it imports nothing but extract.py beside it and the standard library.
"""

from __future__ import annotations

from .extract import gold_of, score_completion


def reward(completions: list[str], answer: list[str], **_: object) -> list[float]:
    """``completions[i]`` scored against ``answer[i]``, the worked solution ending in ``#### N``
    (the train rows' ``answer`` field); other fields are ignored."""
    return [score_completion(reply, gold_of(solution))
            for reply, solution in zip(completions, answer, strict=True)]
