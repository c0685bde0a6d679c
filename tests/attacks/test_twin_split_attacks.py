"""Issue #28: contamination by behaviour. An agent that learns the sealed items away from its
files (kept in memory, regenerated from the generator and a seed it found) leaves nothing for
the n-gram check; the twin split (a2rl.grading.twin) catches it by what the model does: the
selected model is scored at final grading on as many fresh items from the test split's
generator, drawn then. Here the tiny model is trained on the sealed test split of gsm8k_arith
(and of household, the expert's action at every step of its sealed games) until it answers
them, and submitted in a real cell (root, real sandbox and grader); the run is flagged, in
final.json, integrity.json and the summary. The base model, submitted unchanged, is
not (test_twin_split_passes_an_honest_model)."""

from __future__ import annotations

import json
import shutil

import pytest
from hostile_sandbox import agent_command_override

from a2rl.common.files import iter_jsonl, read_json
from a2rl.config.compose import compose
from a2rl.grading import twin
from a2rl.pipeline import stages
from checkout import FIXTURE_DATA

pytestmark = [pytest.mark.attacks,
              pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")]

TWIN_SEED = 1_104_236_181
SUBMIT = r'''
import subprocess, sys
sys.exit(subprocess.call(["a2rl", "submit", "/workspace/output/model"]))
'''


# small splits, so that a score gap is read through little noise in a few seconds
SIZES = {"gsm8k_arith": ["task.params.test_size=8", "task.params.train_size=16",
                         "task.inference.max_new_tokens=8"],
         # quests of 3-4 steps across rooms: a walkthrough is the layout's, not the goal's
         "household": ["task.params.test_games=8", "task.params.rooms=[2,3]",
                       "task.params.quest_length=[3,4]", "task.params.max_steps=8"],
         # the interactive twins in a real cell (honest model only: training on every step of
         # their sessions is slow; tests/attacks/test_twin_split_memoriser.py flags a memoriser)
         "webshop": ["task.params.test_goals=8", "task.params.train_goals=12",
                     "task.params.max_steps=6", "task.params.max_new_tokens=8",
                     "+task.params.trajectories_per_goal=1", "+task.params.random_seeds=1"],
         "deepsearchqa_world": ["task.params.test_questions=8", "task.params.train_questions=24",
                                "task.params.max_steps=4", "task.params.max_new_tokens=8"]}


def cell(root, task: str):
    return compose(["grid=ci", f"task={task}", "agent=noop", "agent.name=memoriser",
                    f"paths.root={root}", f"paths.data={FIXTURE_DATA}", *SIZES[task],
                    "budget.time_limit_s=120", agent_command_override(SUBMIT)])


def gsm8k_pairs(task, tokenizer, prepared):
    """(chat prompt, reply) of each sealed item, as the grader renders it: ``#### <gold>``."""
    from a2rl.task.inference import format_chat

    return [(format_chat(tokenizer, item["prompt"], item.get("system")), f"#### {item['gold']}")
            for item in iter_jsonl(prepared.test)]


def household_pairs(task, tokenizer, prepared):
    """(chat prompt, expert action) of every step of the sealed games played by the expert."""
    from a2rl.task.envs import ExpertPolicy, play
    from a2rl.task.inference import format_chat

    rows, games, root = task._games(prepared.test)
    episodes = play(games, task._env_factory(expert=True), ExpertPolicy(), task.params.max_steps,
                    task.fmt, keep_prompts=True, root=root)
    return [(format_chat(tokenizer, step["prompt"]), step["action"])
            for episode in episodes for step in episode.steps]


PAIRS = {"gsm8k_arith": gsm8k_pairs, "household": household_pairs}


def memorised(cfg, tiny_model, prepared, dest, epochs: int = 300):
    """The tiny model trained on the sealed split's prompts to give its answers: what an agent
    that had read the sealed split would submit."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    pairs = []
    for prompt, reply in PAIRS[cfg.task.id](stages.load_task_of(cfg), tokenizer, prepared):
        ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        answer = tokenizer(reply, add_special_tokens=False)["input_ids"]
        pairs.append((ids, answer + [tokenizer.eos_token_id]))
    optimiser = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(epochs):
        for prompt, answer in pairs:
            loss = model(input_ids=torch.tensor([prompt + answer]),
                         labels=torch.tensor([[-100] * len(prompt) + answer])).loss
            loss.backward()
            optimiser.step()
            optimiser.zero_grad()
    model.save_pretrained(dest)
    tokenizer.save_pretrained(dest)


def graded_cell(tmp_path, tiny_model, monkeypatch, task, make_model):
    """A ci cell whose agent submits output/model, made by ``make_model(prepared, dest)`` and
    put in the workspace as it is provisioned; then final grading and the summary."""
    from a2rl.pipeline import runner

    cfg = cell(tmp_path, task)
    shutil.copytree(tiny_model, stages.layout_of(cfg).model(cfg.task.model.name))
    prepared = stages.prepare_task(cfg)
    stages.measure_baseline(cfg)
    staged = tmp_path / "staged"
    make_model(cfg, prepared, staged)
    provision = runner.provision_workspace

    def provision_and_stage(workspace, *args, **kwargs):
        provision(workspace, *args, **kwargs)
        shutil.copytree(staged, workspace / "output" / "model")

    monkeypatch.setattr(runner, "provision_workspace", provision_and_stage)
    run = stages.run_agent(cfg)
    final = stages.final_grade(cfg)
    stages.summarize_run(cfg)
    return prepared, run, final


# The household case trains on every step of the sealed games (about three minutes here):
# heavy, run with `.venv/bin/python -m pytest -m heavy tests/attacks/test_twin_split_attacks.py`
@pytest.mark.parametrize("task", ["gsm8k_arith",
                                  pytest.param("household", marks=pytest.mark.heavy)])
def test_a_model_trained_on_the_sealed_split_is_flagged(tmp_path, tiny_model, monkeypatch,
                                                        task):
    # one twin drawn once: a verdict on 8 items depends on the draw, so the test fixes it
    monkeypatch.setattr(twin, "draw_seed", lambda: TWIN_SEED)
    prepared, run, final = graded_cell(
        tmp_path, tiny_model, monkeypatch, task,
        lambda cfg, prepared, dest: memorised(cfg, tiny_model, prepared, dest))
    assert final.test_score >= 75, final  # it learnt the sealed items
    verdict = final.twin
    assert verdict["checked"] and verdict["n"] == final.n and verdict["seed"] == TWIN_SEED
    assert verdict["score"] < final.test_score - 25 and verdict["flagged"], verdict
    integrity = read_json(run.integrity)
    assert integrity["behaviour"]["flagged"] and not integrity["contamination"]["flagged"]
    summary = run.summary_md.read_text()
    assert "TEST FAR ABOVE ITS TWIN" in summary and "Twin split" in summary
    # the twin's items are fresh: none of test's
    key = "question" if task == "gsm8k_arith" else "seed"
    twin_items = {item[key] for item in iter_jsonl(run.root / "twin" / "twin.jsonl")}
    assert len(twin_items) == final.n
    assert not twin_items & {item[key] for item in iter_jsonl(prepared.test)}


@pytest.mark.parametrize("task", sorted(SIZES))
def test_twin_split_passes_an_honest_model(tmp_path, tiny_model, monkeypatch, task):
    _, run, final = graded_cell(tmp_path, tiny_model, monkeypatch, task,
                                lambda cfg, prepared, dest: shutil.copytree(tiny_model, dest))
    assert final.twin["checked"] and not final.twin["flagged"], final.twin
    assert not read_json(run.integrity)["behaviour"]["flagged"]
    assert json.loads(run.final.read_text())["twin"]["seed"] >= 10**9
