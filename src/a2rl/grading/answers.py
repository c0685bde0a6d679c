"""The grader's closed vocabulary: what it tells the agent when a submission cannot be scored
after the submission's own code (its chat template, its config, its model) has run on harness
inputs or on the sealed split.

Every such answer is a fixed code and a fixed sentence, never text produced while the sealed
split is in play: an exception raised by a template can carry the prompt it was rendering (a
template that calls ``raise_exception(messages[-1]['content'])`` hands back one sealed item per
submission), and so can a traceback, a judge's error body or a model's output. The details go
to the grader's own log (``grader.log`` in the run folder, outside the sandbox, shown in no
report), and the ledger, ``scores.json``, the events and the report carry the code only.
Refusals made before any of the submission's code runs (a path, a size, a missing file) keep
their messages: they are built from what the harness found in the agent's own files.
"""

from __future__ import annotations

import logging
import traceback

log = logging.getLogger(__name__)

# code -> the sentence the agent gets
ANSWERS = {
    "chat_template_failed": (
        "the submission's chat template raised an error on a harness-made conversation (a system "
        "and a user turn, no task data); check it with tokenizer.apply_chat_template"),
    "eval_failed": (
        "the model failed while it was evaluated on the task's split; no details are given, as "
        "they could carry the split's items"),
    # follows the grader's "grading failed (not your submission's fault; it does not count): "
    "grading_unavailable": "the grader's judge or model server could not be used",
    # the run's budget for a paid grading API (task.params.judge.max_usd) is spent: the
    # submission does not count, and the grader takes no more (docs/grading.md)
    "grading_budget_exhausted": (
        "the run's budget for the grader's paid judge is used up, so no more submissions can "
        "be graded in this run; this one does not count, and your best graded submission so "
        "far stands"),
    "internal_error": "internal grader error; the harness logged it",
}


def answer(code: str) -> str:
    """``code: sentence`` for one of ANSWERS (an unknown code is the harness's bug)."""
    return f"{code}: {ANSWERS[code]}"


def log_detail(code: str, err: BaseException, subject: str) -> None:
    """The whole story of ``err`` for the grader's private log, never for the agent."""
    log.warning("%s (%s): %s", code, subject,
                "".join(traceback.format_exception(type(err), err, err.__traceback__)))
