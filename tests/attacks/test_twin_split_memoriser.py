"""Issue #28 on the interactive tasks whose sealed splits come from a generator: WebShop's
procedural shop and DeepSearchQA's world. A "model" that learnt the sealed split's sessions by
heart scores far higher on test than on a twin split (Task.twin_split) and a2rl.grading.twin
flags it; the honest scripted policies (the expert, and a weak one) score alike on both and are
not flagged.

The memoriser stands in for the model (a2rl.task.load_generator), so the grader's own
``evaluate`` plays it on both splits and nothing is trained; the honest policies play both
splits through the same runner. (A model trained on the sealed items and submitted in a real
cell is tests/attacks/test_twin_split_attacks.py's gsm8k_arith and household case; training on
every step of these tasks' sessions would take minutes.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from a2rl_tasks.deepsearchqa.policies import names_by_kind
from a2rl_tasks.deepsearchqa.search_env import LocalBackend, SearchEnv
from a2rl_tasks.webshop.env import WebShopEnv
from a2rl_tasks.webshop.task import RandomShopper

from a2rl.common.files import iter_jsonl
from a2rl.config.types import InferenceConfig, TaskConfig
from a2rl.grading import twin
from a2rl.task.base import EvalResult, load_task
from a2rl.task.envs import ExpertPolicy, play, render_chat
from checkout import prepare_in

pytestmark = pytest.mark.attacks

TWIN_SEED = 1_104_236_181
INFERENCE = InferenceConfig(backend="hf", batch_size=8, max_new_tokens=32, torch_threads=1)


class Memoriser:
    """The sealed split's sessions by heart: on a prompt it has seen, the expert's action
    there; on any other, the action of the seen prompt that shares the most words with it (a
    model trained on those sessions alone answers with what it learnt)."""

    tokenizer = None  # no chat template: it reads the turns' plain text (render_chat)

    def __init__(self, episodes):
        self.memory = {self.text(step["prompt"]): step["action"]
                       for ep in episodes for step in ep.steps}
        self.words = {prompt: set(prompt.split()) for prompt in self.memory}

    @staticmethod
    def text(prompt) -> str:
        """A step's prompt as the policy hands it to a generator without a chat template: an
        append-style chat as its turns' text, a rewrite-style prompt as it is."""
        return render_chat(None, prompt, True) if isinstance(prompt, list) else prompt

    def generate(self, prompts: list[str], max_new_tokens: int) -> list[str]:
        return [self.memory.get(prompt) or self._nearest(prompt) for prompt in prompts]

    def _nearest(self, prompt: str) -> str:
        words = set(prompt.split())
        seen = max(self.words, key=lambda p: len(words & self.words[p]) / len(
            words | self.words[p]))
        return self.memory[seen]


def scored(scores: list[float]) -> dict[str, float]:
    """Item scores as evaluate reports them: the score and its standard error (0-100)."""
    return EvalResult(per_item=scores, seconds=0.0).to_dict()


class WebShop:
    params = {"train_goals": 12, "test_goals": 8, "random_seeds": 1, "max_steps": 10}

    @staticmethod
    def sessions(task, split: Path, policy, keep_prompts: bool = False):
        _, games, root = task._games(split)
        return play(games, WebShopEnv, policy, task.params.max_steps, task.fmt,
                    keep_prompts=keep_prompts, root=root)

    @classmethod
    def honest(cls, task, split: Path) -> dict[str, dict[str, float]]:
        return {name: scored([ep.score for ep in cls.sessions(task, split, policy)])
                for name, policy in (("expert", ExpertPolicy(0)), ("random", RandomShopper(0)))}


class DeepSearch:
    params = {"source": "world", "test_questions": 8, "train_questions": 24}

    @staticmethod
    def sessions(task, split: Path, policy, keep_prompts: bool = False):
        questions = {row["id"]: row for row in iter_jsonl(split)}
        backend = LocalBackend.load(split.parent / "search", task.params.snippet_chars)
        return play(list(questions), lambda: SearchEnv(questions, backend, task.settings),
                    policy, task.params.max_steps, task.fmt, keep_prompts=keep_prompts)

    @staticmethod
    def honest(task, split: Path) -> dict[str, dict[str, float]]:
        """The oracle (the expert) and the search-only policy, which answers from result
        snippets without opening a page (tasks/deepsearchqa/policies.py)."""
        backend = LocalBackend.load(split.parent / "search", task.params.snippet_chars)
        scores = task.policy_scores(list(iter_jsonl(split)), backend, names_by_kind(backend.docs))
        return {name: scores[name] for name in ("oracle", "search_only")}


TASKS = {"webshop": WebShop, "deepsearchqa": DeepSearch}


def verdict(test: dict[str, float], twin_split: dict[str, float]) -> dict:
    return twin.verdict(test["score"], test["stderr"], twin_split)


@pytest.mark.parametrize("package", sorted(TASKS))
def test_a_memoriser_of_the_sealed_sessions_is_flagged_and_honest_policies_are_not(
        package, tmp_path, monkeypatch):
    kind = TASKS[package]
    task = load_task(TaskConfig(id=package, package=package, level="L3", params=kind.params),
                     Path("."))
    out, _ = prepare_in(task, tmp_path / "prepared")
    twin_split = task.twin_split(out, tmp_path / "twin", TWIN_SEED)

    memoriser = Memoriser(kind.sessions(task, out.test, ExpertPolicy(0), keep_prompts=True))
    monkeypatch.setattr("a2rl.task.load_generator", lambda model_dir, cfg: memoriser)
    on_test, on_twin = (task.evaluate(tmp_path / "no-model", split, INFERENCE).to_dict()
                        for split in (out.test, twin_split))
    assert on_test["score"] >= 75, on_test  # it learnt the sealed sessions
    found = verdict(on_test, on_twin)
    assert on_twin["score"] < on_test["score"] - 25 and found["flagged"], found

    honest_test, honest_twin = kind.honest(task, out.test), kind.honest(task, twin_split)
    for name in honest_test:
        found = verdict(honest_test[name], honest_twin[name])
        assert not found["flagged"], (name, found)
