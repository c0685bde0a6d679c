"""Issue #28, finding 1: the grader's answers as a channel out of the sealed split.

A submission's chat template runs while the task formats its sealed prompts; transformers gives
templates ``raise_exception(msg)``, so a template that raises with the last user message once
returned one sealed item per (invalid, uncounted) submission through the error message, copied
into scores.json, the ledger, the events and the report. Here that attack is replayed on every
offline task, on the task's real prepared split and real evaluation, through the real grader on
its socket (tests/attacks/grader_rig.py), and nothing any of them writes where the agent or the
report can see may hold a 12-word run of any sealed item.
"""

from __future__ import annotations

import json
import shutil

import pytest
from grader_rig import Rig
from sealed_ngrams import leaked, sealed_runs

from a2rl.common.layout import Layout
from a2rl.config.compose import compose
from a2rl.pipeline import stages
from a2rl.task.base import load_task
from checkout import FIXTURE_DATA

pytestmark = pytest.mark.attacks

TASKS = ["gsm8k_arith", "humaneval", "alpacaeval_local", "household", "webshop",
         "deepsearchqa_world"]
# raises with whatever it renders: fails on the harness's own probe too
ALWAYS = "{{ raise_exception(messages[-1]['content']) }}"
# renders a plain prompt for short messages (the probe a harness might send) and raises with
# the message for longer ones (a task's prompts), so it gets past a probe of any one kind
ONLY_ON_TASK_TEXT = ("{% for m in messages %}{% if m['content'] | length > 40 %}"
                     "{{ raise_exception(m['content']) }}{% endif %}{{ m['content'] }}"
                     "{% endfor %}")


@pytest.fixture(scope="module")
def prepared(tmp_path_factory, tiny_model):
    """Each task prepared at the quick grid's sizes (the ci grid's where it has them), graded
    on the tiny model: {task: (evaluate, its sealed split)}."""
    root = tmp_path_factory.mktemp("tasks")
    made = {}
    for task in TASKS:
        grid = "ci" if task in ("gsm8k_arith", "household", "alpacaeval_local") else "quick"
        cfg = compose([f"grid={grid}", f"task={task}", f"paths.root={root}",
                       f"paths.data={FIXTURE_DATA}", "task.model.name=tiny-qwen2",
                       "task.model.source=tiny"])
        stages.prepare_task(cfg)
        split = Layout.from_paths(cfg.paths).prepared(task).test
        graded = load_task(cfg.task, FIXTURE_DATA)
        made[task] = (lambda model, g=graded, s=split, i=cfg.task.inference:
                      g.evaluate(model, s, i)), split
    return made


def hostile(rig: Rig, name: str, template: str) -> str:
    """The tiny model with ``template`` as its chat template, in the agent's output/."""
    folder = rig.ws / "output" / name
    shutil.copytree(rig.tiny, folder)
    config = folder / "tokenizer_config.json"
    settings = json.loads(config.read_text())
    settings["chat_template"] = template
    config.write_text(json.dumps(settings))
    (folder / "chat_template.jinja").unlink(missing_ok=True)
    return f"output/{name}"


def everything_written(rig: Rig, answers: list[dict]) -> str:
    """What the agent or the report can see: its answers, the ledger, scores.json, events."""
    run = rig.tmp / "run"
    parts = [json.dumps(answers)]
    for path in (run / "ledger.jsonl", rig.ws / "scores.json", run / "events.jsonl"):
        parts.append(path.read_text() if path.exists() else "")
    return "\n".join(parts)


@pytest.mark.parametrize("task", TASKS)
def test_a_template_that_raises_with_the_prompt_leaks_no_sealed_item(task, prepared, tmp_path,
                                                                     tiny_model):
    evaluate, split = prepared[task]
    runs = sealed_runs(split)
    assert runs, f"{split} has no text to look for"
    with Rig(tmp_path, tiny_model, evaluate=evaluate) as rig:
        answers = []
        for name, template in (("always", ALWAYS), ("on_task_text", ONLY_ON_TASK_TEXT)):
            code, body = rig.post(hostile(rig, name, template))
            assert code == 422 and body["submission_id"], body
            answers.append(body)
    assert leaked(runs, everything_written(rig, answers)) == []
    assert answers[0]["error"].startswith("chat_template_failed: ")
    assert answers[1]["error"].startswith("eval_failed: ")  # it got past the probe
    ledger = [json.loads(line) for line in (tmp_path / "run" / "ledger.jsonl").read_text()
              .splitlines()]
    assert [e["error"].split(":")[0] for e in ledger] == ["chat_template_failed", "eval_failed"]
