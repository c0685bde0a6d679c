"""``a2rl score TASK --replies FILE [OVERRIDES...]``: score replies written by anything (another
system, a person, an attack) exactly as the grader scores a model's (the task's extraction,
sandboxed execution and comparison), without a model.

FILE (``-``: stdin) holds JSON lines, one reply each, either ``{"id": ..., "reply": ...}`` with
the id of an item of any of the task's splits (``HumanEval/0``, ``gsm8k-test-12``) or
``{"item": {...}, "reply": ...}`` with an item in the task's split format. Each line gets one
JSON line back, in order: ``{"id", "score", "verdict", "reason"}`` with ``score`` in [0, 1], or
``{"line", "error"}`` for a line that cannot be scored (the exit status is then 1). TASK is a
conf/task name (``humaneval``, ``gsm8k``, ``gsm8k_arith``); OVERRIDES are Hydra overrides as
for ``a2rl run`` (``task.params.timeout_s=5``).

``a2rl score TASK ARGS...`` with anything but ``--replies`` runs the task's own scorer
(``a2rl.task.base.task_command``), e.g. ``a2rl score alpacaeval --annotations FILE``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from a2rl.config.types import RunConfig
from a2rl.task.base import Task

USAGE = ("usage: a2rl score TASK --replies FILE [OVERRIDES...]   (FILE '-' reads stdin)\n"
         "       a2rl score TASK ARGS...   (the task's own scorer, where it has one)")


class BadLine(ValueError):
    """A line of the replies file that names no scorable item and reply."""


def _parse(task: Task, line: str) -> tuple[dict[str, Any], str]:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as err:
        raise BadLine(f"not JSON ({err.msg})") from None
    if not isinstance(row, dict) or not isinstance(row.get("reply"), str):
        raise BadLine('expected an object with a string "reply" and an "id" or an "item"')
    if ("id" in row) == ("item" in row):
        raise BadLine('give exactly one of "id" (an item id of the task) and "item"')
    if "id" in row:
        try:
            return task.find_item(str(row["id"])), row["reply"]
        except KeyError:
            raise BadLine(f"task {task.name!r} has no item {row['id']!r}") from None
    item = row["item"]
    if not isinstance(item, dict):
        raise BadLine('"item" must be an object in the task\'s split format')
    missing = [f for f in task.item_fields if f not in item]
    if missing:
        raise BadLine(f'"item" lacks {missing}; task {task.name!r} items need '
                      f"{list(task.item_fields)}")
    return item, row["reply"]


def score_lines(task: Task, lines: Iterable[str]) -> list[dict[str, Any]]:
    """One result per non-blank line, in order (see the module docstring); the good lines are
    scored together, as one evaluation's replies are."""
    results: list[dict[str, Any]] = []
    slots, items, replies = [], [], []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            item, reply = _parse(task, line)
        except BadLine as err:
            results.append({"line": number, "error": f"line {number}: {err}"})
            continue
        slots.append(len(results))
        results.append({})
        items.append(item)
        replies.append(reply)
    scores = task.score_each(items, replies) if items else []
    for slot, item, score in zip(slots, items, scores, strict=True):
        results[slot] = {"id": item.get("id"), "score": score.score, "verdict": score.verdict,
                         "reason": score.reason}
    return results


def json_lines(text: str) -> list[str]:
    """The lines of a JSON-lines text, split at "\n" alone: ``str.splitlines`` would also cut
    at U+2028, U+0085 and the like, which a JSON string may hold raw (``json.dumps`` with
    ``ensure_ascii=False`` writes them so). A "\r" before the "\n" is JSON white space."""
    lines = text.split("\n")
    return lines[:-1] if lines and not lines[-1] else lines


def _read_lines(path: str) -> list[str]:
    if path == "-":
        return json_lines(sys.stdin.read())
    return json_lines(Path(path).read_text(encoding="utf-8"))


def main(args: list[str], compose: Callable[[list[str]], RunConfig]) -> int:
    """``a2rl score``; ``compose`` turns overrides into the checked config (the command line
    lends it, so that grading never runs Hydra itself)."""
    from a2rl.isolation.codeexec import SandboxError
    from a2rl.task.base import load_task, task_command

    if len(args) >= 2 and args[1] != "--replies" and not args[0].startswith("-"):
        command = task_command(compose([f"task={args[0]}"]).task)
        if command is not None:
            return command(args[1:])
    if len(args) < 3 or args[1] != "--replies" or args[0].startswith("-"):
        print(USAGE, file=sys.stderr)
        return 2

    name, path, overrides = args[0], args[2], args[3:]
    try:
        lines = _read_lines(path)
    except (OSError, UnicodeDecodeError) as err:
        print(f"a2rl score: cannot read {path}: {err}", file=sys.stderr)
        return 1
    cfg = compose([f"task={name}", *overrides])
    task = load_task(cfg.task, Path(cfg.paths.root) / cfg.paths.data)
    try:
        results = score_lines(task, lines)
    except (NotImplementedError, SandboxError) as err:
        print(f"a2rl score: {err}", file=sys.stderr)
        return 1
    for result in results:
        print(json.dumps(result))
    return 1 if any("error" in r for r in results) else 0
