"""Issue #30's standard protocols, each one config line away: a cell composed as the pipeline
composes it (``grid=ci``, a Hydra override of ``task.params``) prepares with the option in
force. What each option does to prompts and scores is tested in the task's own test file."""

from __future__ import annotations

import json

import pytest

from a2rl.config.compose import compose
from a2rl.pipeline.stages import load_task_of
from checkout import prepare_in


def first_sealed(out) -> dict:
    with out.test.open() as fh:
        return json.loads(fh.readline())


def lm_eval_cot(task, out, facts):
    assert first_sealed(out)["prompt"].startswith("Q: There are 15 trees in the grove.")
    assert facts["params"]["protocol"] == "lm_eval_cot"


def all_of_humaneval(task, out, facts):
    assert facts["sizes"]["test"] == 164 and facts["sizes"]["train"] == 0


def f1_headline(task, out, facts):
    assert task.params.headline == "f1" and task.metric.startswith("F1")


@pytest.mark.parametrize("task, override, check", [
    ("gsm8k_arith", "task.params.protocol=lm_eval_cot", lm_eval_cot),
    ("humaneval", "task.params.test_size=164", all_of_humaneval),
    ("deepsearchqa_world", "+task.params.headline=f1", f1_headline),
])
def test_a_standard_protocol_is_one_override_away(tmp_path, task, override, check):
    cfg = compose(["grid=ci", f"task={task}", override, f"paths.root={tmp_path}"])
    loaded = load_task_of(cfg)
    out, facts = prepare_in(loaded, tmp_path / "prepared")
    check(loaded, out, facts)
