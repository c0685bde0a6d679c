"""Every task's full description.md, rendered as a run renders it (the task's own part inside
the agent's contract, src/a2rl/templates/workspace.md.j2), compared with its golden copy in
tests/fixtures/descriptions/. A change to the contract or to a task's text shows here as a diff
to review; after reviewing it, write the goldens anew with

    A2RL_REGENERATE_GOLDENS=1 pytest tests/test_descriptions.py
"""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path

import jinja2
import pytest

from a2rl.common.contract import prompt_head, render_description, render_text
from a2rl.config.compose import compose
from a2rl.task.base import load_task
from checkout import REPO
from checkout import RUN_VALUES as VALUES

GOLDENS = REPO / "tests" / "fixtures" / "descriptions"
TASK_IDS = sorted({p.stem for p in (REPO / "tasks").glob("*/conf/task/*.yaml")})


def rendered(task_id: str) -> str:
    cfg = compose([f"task={task_id}"])
    return render_description(load_task(cfg.task, REPO / "no-data").description(), VALUES)


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_every_task_description_matches_its_golden(task_id):
    text, golden = rendered(task_id), GOLDENS / f"{task_id}.md"
    if os.environ.get("A2RL_REGENERATE_GOLDENS"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert golden.is_file(), f"no golden for {task_id}: run with A2RL_REGENERATE_GOLDENS=1"
    # a placeholder of the old str.format descriptions, left unfilled by Jinja2
    left = re.findall(r"(?<!\{)\{(?:data_dir|workspace|base_model|time_limit_min)\}", text)
    assert not left, f"{task_id}'s description holds unfilled placeholders: {left}"
    diff = "".join(difflib.unified_diff(golden.read_text().splitlines(True),
                                        text.splitlines(True), str(golden), "rendered"))
    assert not diff, f"{task_id}'s description changed (regenerate after review):\n{diff}"


def test_every_golden_belongs_to_a_task():
    stale = sorted({p.stem for p in GOLDENS.glob("*.md")} - set(TASK_IDS))
    assert not stale, f"goldens of no task: {stale}"


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_the_rules_are_written_once(task_id):
    """A task's own part names neither the budget nor the submit command: the contract does,
    and every description carries its rules with this run's values."""
    cfg = compose([f"task={task_id}"])
    own = load_task(cfg.task, REPO / "no-data").description()
    for word in ("time_limit_min", "max_submissions", "submit_command", "a2rl submit",
                 "Rules of the benchmark", "memory_gb"):
        assert word not in own, f"{task_id}'s description names {word!r} itself"
    text = rendered(task_id)
    assert "You have 30.0 minutes" in text and "**5 scored submissions**" in text
    assert text.count("a2rl submit") >= 2 and "## Rules of the benchmark" in text
    assert "**10 GiB** in **100000** files" in text


def test_the_contract_refuses_missing_values_and_old_descriptions():
    cfg = compose(["task=gsm8k"])
    own = load_task(cfg.task, REPO / "no-data").description()
    with pytest.raises(jinja2.UndefinedError, match="feedback"):
        render_description(own, {k: v for k, v in VALUES.items() if k != "feedback"})
    with pytest.raises(ValueError, match="must extend the workspace template"):
        render_description("# Task\nYou have {time_limit_min} minutes.", VALUES)
    # no disk quota, evaluation time not counted: the rules say so
    text = render_description(own, {**VALUES, "disk_gb": None, "count_eval_time": True})
    assert "files and folders" not in text and "(evaluation time not counted)" not in text


def test_the_prompt_head_and_the_data_readmes_use_the_same_commands():
    head = prompt_head("/workspace")
    assert "Your working directory is /workspace." in head and "`a2rl submit <folder>`" in head
    assert render_text("{{ submit_command }} | {{ status_command }}", {}) == \
        "a2rl submit | a2rl status"
    # the commands are named in the contract and nowhere else in the agent-facing texts
    texts = [*REPO.glob("tasks/*/description*.md"), *(REPO / "src/a2rl/llm/stacks").glob("*.py")]
    named = [str(p.relative_to(REPO)) for p in texts
             if re.search(r"a2rl (submit|status)\b", Path(p).read_text())]
    assert not named, f"name the submit command themselves: {named}"
