"""The GSM8K task: params checks, split preparation (determinism, no leakage), evaluation."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest
from a2rl_tasks.gsm8k import GSM8KParams, GSM8KTask, build
from a2rl_tasks.gsm8k.sources import normalize_question

import a2rl.task.inference
from a2rl.common.contract import render_description
from a2rl.common.layout import PreparedTaskPaths
from a2rl.config.types import ConfigError, InferenceConfig, TaskConfig
from a2rl.task.base import EvalResult, load_task
from checkout import RUN_VALUES, declared_reward, prepare_in

NO_DATA = Path("/nonexistent-data-root")  # procedural sources must not need one

CHAIN_SUM = {"source": {"kind": "reasoning_gym", "dataset": "chain_sum"},
             "train_size": 200, "test_size": 60, "validation_size": 30}


def task_with(data_root: Path = NO_DATA, feedback: str = "test", **params) -> GSM8KTask:
    return build(TaskConfig(feedback=feedback, params=params), data_root)


def read_jsonl(path: Path) -> list[dict]:
    with path.open() as fh:
        return [json.loads(line) for line in fh]


def questions(path: Path) -> set[str]:
    return {normalize_question(item["question"]) for item in read_jsonl(path)}


def prepared_files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


# ---- params -----------------------------------------------------------------------------------

def test_defaults():
    p = GSM8KParams.from_dict({})
    assert p.source.kind == "jsonl" and p.source.path == "gsm8k"
    assert (p.train_size, p.test_size, p.validation_size, p.shots) == (None, None, 0, 0)
    assert len({p.train_seed, p.test_seed, p.validation_seed}) == 3
    assert "####" in p.instruction


@pytest.mark.parametrize("params, message", [
    ({"train_sise": 10}, r"unknown key\(s\) \['train_sise'\]"),
    ({"source": {"kind": "jsonl", "dir": "x"}}, r"task.params.source: unknown key\(s\) \['dir'\]"),
    ({"source": {"kind": "csv"}}, "source.kind='csv'"),
    ({"source": "csv"}, "source.kind='csv'"),
    ({"test_size": 0}, "test_size=0"),
    ({"train_size": -1}, "train_size=-1"),
    ({"validation_size": -2}, "validation_size=-2"),
    ({"shots": 40}, "shots=40"),
    ({"max_new_tokens": 0}, "max_new_tokens=0"),
    ({"held_out_share": 1.0}, "held_out_share=1.0"),
    ({"held_out_share": 0}, "held_out_share=0"),
    ({"source": {"kind": "reasoning_gym"}, "test_size": 10}, "train_size is null"),
    ({"source": {"kind": "reasoning_gym"}, "train_size": 10}, "test_size is null"),
])
def test_bad_params_are_named(params, message):
    with pytest.raises(ConfigError, match=message):
        GSM8KParams.from_dict(params)


def test_source_shorthand_and_nested_dict():
    assert GSM8KParams.from_dict({"source": "hf"}).source.hf_id == "openai/gsm8k"
    p = GSM8KParams.from_dict({"source": {"kind": "reasoning_gym", "dataset": "basic_arithmetic",
                                          "kwargs": {"max_terms": 3}},
                               "train_size": 5, "test_size": 5})
    assert p.source.kwargs == {"max_terms": 3}


def test_validation_feedback_needs_a_validation_split():
    with pytest.raises(ConfigError, match="validation_size"):
        task_with(feedback="validation", **{**CHAIN_SUM, "validation_size": 0})


def test_unknown_reasoning_gym_dataset_is_named():
    with pytest.raises(ConfigError, match="no_such_dataset"):
        task = task_with(**{**CHAIN_SUM, "source": {"kind": "reasoning_gym",
                                                    "dataset": "no_such_dataset"}})
        task.prepare(PreparedTaskPaths(Path("/nonexistent-out")))


def test_harness_loads_the_task():
    task = load_task(TaskConfig(params=CHAIN_SUM), NO_DATA)
    assert isinstance(task, GSM8KTask)
    text = task.description()
    filled = render_description(text, RUN_VALUES)
    assert "a2rl submit output/<folder>" in filled and "#### <number>" in filled
    assert "base_model" in filled and "data/train.jsonl" in filled


# ---- prepare: procedural source ----------------------------------------------------------------

def test_reasoning_gym_prepare_is_deterministic(tmp_path):
    first = task_with(**CHAIN_SUM).prepare(PreparedTaskPaths(tmp_path / "a"))
    second = task_with(**CHAIN_SUM).prepare(PreparedTaskPaths(tmp_path / "b"))
    assert first == second
    assert prepared_files(tmp_path / "a") == prepared_files(tmp_path / "b")
    assert first["sizes"] == {"train": 200, "validation": 30, "test": 60}

    out = PreparedTaskPaths(tmp_path / "a")
    train = read_jsonl(out.data / "train.jsonl")
    assert set(train[0]) == {"id", "question", "answer", "prompt"}
    assert train[0]["answer"].rstrip().rsplit("####", 1)[1].strip()
    test = read_jsonl(out.test)
    assert {"id", "question", "answer", "gold", "prompt", "system"} <= set(test[0])
    assert test[0]["question"] in test[0]["prompt"]
    assert "README.md" in {p.name for p in out.data.iterdir()}


def test_nearby_seeds_do_not_leak(tmp_path):
    """Item i of seed s is built from s + i, so seeds 0/1/2 overlap almost completely; the
    splits must still be disjoint, full-sized, and the drops counted."""
    params = {**CHAIN_SUM, "train_seed": 1, "test_seed": 0, "validation_seed": 2}
    out = PreparedTaskPaths(tmp_path)
    manifest = task_with(**params).prepare(out)
    train, test, val = (questions(out.data / "train.jsonl"), questions(out.test),
                        questions(out.validation))
    assert (len(train), len(test), len(val)) == (200, 60, 30)
    assert not (train & test) and not (train & val) and not (val & test)
    assert manifest["dropped"]["train"]["dropped_overlap"] > 0
    assert manifest["dropped"]["validation"]["dropped_overlap"] > 0


def test_test_split_does_not_depend_on_train_params(tmp_path):
    small = PreparedTaskPaths(tmp_path / "small")
    large = PreparedTaskPaths(tmp_path / "large")
    task_with(**CHAIN_SUM).prepare(small)
    task_with(**{**CHAIN_SUM, "train_size": 300, "train_seed": 7}).prepare(large)
    assert small.test.read_bytes() == large.test.read_bytes()
    assert small.validation.read_bytes() == large.validation.read_bytes()


def test_too_small_generator_space_is_an_error(tmp_path):
    tiny_space = {"kind": "reasoning_gym", "dataset": "chain_sum",
                  "kwargs": {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1}}
    task = task_with(**{**CHAIN_SUM, "source": tiny_space, "test_size": 500})
    with pytest.raises(ConfigError, match="test_size=500"):
        task.prepare(PreparedTaskPaths(tmp_path))


def test_gsm_symbolic_items_keep_their_worked_solution(tmp_path):
    out = PreparedTaskPaths(tmp_path)
    task_with(source={"kind": "reasoning_gym", "dataset": "gsm_symbolic"},
              train_size=5, test_size=5).prepare(out)
    for item in read_jsonl(out.test):
        assert item["answer"].count("\n") >= 1 and item["answer"].endswith(f"#### {item['gold']}")
    assert not out.validation.exists()


def gsm8k_arith_params() -> dict:
    """The shipped offline task's params (conf/task/gsm8k_arith.yaml), sizes included."""
    from omegaconf import OmegaConf

    conf = Path(__file__).parents[2] / "tasks/gsm8k/conf/task/gsm8k_arith.yaml"
    return OmegaConf.to_container(OmegaConf.load(conf).params)


def operand_digits(item: dict) -> tuple[int, ...]:
    """The digit counts of a chain sum's operands, read from the expression itself."""
    expression = item["question"].rsplit(":", 1)[1]
    return tuple(sorted(len(n) for n in re.findall(r"\d+", expression)))


@pytest.fixture(scope="module")
def arith_splits(tmp_path_factory) -> tuple[GSM8KTask, PreparedTaskPaths]:
    out = PreparedTaskPaths(tmp_path_factory.mktemp("gsm8k_arith"))
    task = task_with(**gsm8k_arith_params())
    task.prepare(out)
    return task, out


TWIN_SEEDS = (1_000_000_007, 1_487_053_600, 1_999_999_999)


def test_twins_have_the_test_splits_difficulty_mix(arith_splits, tmp_path):
    """The twin-check false positive of docs/results/2026-12-04-grpo-gsm8k-arith.md: the
    generator has only 200 one-digit sums; test and train took them all, so twins held only
    two-digit sums and an honest model scored far lower there. Each twin now has test's
    digit-count histogram exactly, one-digit sums included, and meets neither test nor train
    (nor another seed's twin as a whole)."""
    task, out = arith_splits
    test, train = read_jsonl(out.test), read_jsonl(out.data / "train.jsonl")
    histogram = Counter(map(operand_digits, test))
    assert histogram[(1, 1)] >= 0.15 * len(test)  # the small stratum is in test
    twins = []
    for seed in TWIN_SEEDS:
        twin = read_jsonl(task.twin_split(out, tmp_path / str(seed), seed))
        assert Counter(map(operand_digits, twin)) == histogram
        keys = {normalize_question(item["question"]) for item in twin}
        assert len(keys) == len(test)
        assert not keys & questions(out.test)
        assert not keys & questions(out.data / "train.jsonl")
        twins.append(keys)
    assert len({frozenset(keys) for keys in twins}) == len(TWIN_SEEDS)
    one_digit = [{normalize_question(x["question"]) for x in read_jsonl(
        tmp_path / str(seed) / "twin.jsonl") if operand_digits(x) == (1, 1)}
        for seed in TWIN_SEEDS]
    assert one_digit[0] != one_digit[1]  # the one-digit part of a twin varies too
    assert len(train) == 2000


def test_twin_verdicts_on_a_skilled_and_a_memorising_model(arith_splits, tmp_path):
    """The grader's verdict (a2rl.grading.twin) on two scripted models: one that does
    one-digit sums right and two-digit sums wrong (an honest model whose skill depends on
    difficulty, as a 135M model's does) is not flagged, since its twins have test's share of
    one-digit sums; one that knows the test answers by heart and nothing else is."""
    from a2rl.grading.twin import verdict

    task, out = arith_splits
    test = read_jsonl(out.test)
    known = {item["question"]: item["gold"] for item in test}

    def skilled(item):
        return f"#### {item['gold']}" if operand_digits(item) == (1, 1) else "#### -1"

    def memoriser(item):
        return f"#### {known.get(item['question'], -1)}"

    for seed in TWIN_SEEDS:
        twin = read_jsonl(task.twin_split(out, tmp_path / str(seed), seed))
        for model, flagged in ((skilled, False), (memoriser, True)):
            on_test, on_twin = (task.score_replies(items, [model(x) for x in items]).to_dict()
                                for items in (test, twin))
            result = verdict(on_test["score"], on_test["stderr"], on_twin)
            assert result["flagged"] is flagged, (model.__name__, seed, result)


def test_train_never_holds_a_problem_test_or_a_twin_may_draw(arith_splits):
    """The held-out part is a property of the question: whatever the seeds, train and
    validation draw outside it and test inside it."""
    from a2rl_tasks.gsm8k.splits import held_out

    task, out = arith_splits
    share = task.params.held_out_share
    assert all(held_out(item["question"], share) for item in read_jsonl(out.test))
    assert not any(held_out(item["question"], share)
                   for item in read_jsonl(out.data / "train.jsonl"))
    other = PreparedTaskPaths(out.root.parent / "other_seeds")
    task_with(**{**gsm8k_arith_params(), "train_seed": 5, "validation_size": 20,
                 "validation_seed": 6}).prepare(other)
    for split in (other.data / "train.jsonl", other.validation):
        assert not any(held_out(item["question"], share) for item in read_jsonl(split))


def test_a_twin_that_cannot_match_the_mix_is_refused(tmp_path):
    """When the held-out part has too few problems left for test's mix (here: train.jsonl
    made to hold all of them), the twin is a ValueError, which the grader records as "not
    checked", never a twin of another mix."""
    from a2rl_tasks.gsm8k.sources import make_source
    from a2rl_tasks.gsm8k.splits import held_out

    one_digit = {"kind": "reasoning_gym", "dataset": "chain_sum",
                 "kwargs": {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1}}
    task = task_with(source=one_digit, test_size=20, train_size=20)
    out = PreparedTaskPaths(tmp_path)
    task.prepare(out)
    assert task.twin_split(out, tmp_path / "ok", 1_000_000_001) is not None
    every = make_source(task.params.source, NO_DATA).candidates("train", 3, 4000)
    test = questions(out.test)
    rest = [item for item in every if held_out(item["question"], task.params.held_out_share)
            and normalize_question(item["question"]) not in test]
    with (out.data / "train.jsonl").open("a") as fh:
        fh.writelines(json.dumps(item) + "\n" for item in rest)
    with pytest.raises(ValueError, match="more held-out items"):
        task.twin_split(out, tmp_path / "twin", 1_000_000_001)


def test_lm_eval_cot_protocol_sends_lm_evals_8_shot_prompt(tmp_path):
    """protocol: lm_eval_cot is lm-evaluation-harness's gsm8k_cot: the eight exemplars of Wei
    et al. in its order as ``Q: ...\nA: ... The answer is N.``, then ``Q: <question>\nA:``,
    with no instruction; train.jsonl's prompt is the same turn."""
    out = PreparedTaskPaths(tmp_path)
    task_with(**{**CHAIN_SUM, "protocol": "lm_eval_cot"}).prepare(out)
    item = read_jsonl(out.test)[0]
    prompt = item["prompt"]
    blocks = prompt.split("\n\n")
    assert len(blocks) == 9 and all(b.startswith("Q: ") and "\nA: " in b for b in blocks[:8])
    assert blocks[0].startswith("Q: There are 15 trees in the grove.")
    assert blocks[0].endswith("21 - 15 = 6. The answer is 6.")
    assert blocks[7].startswith("Q: Olivia has $23.") and blocks[7].endswith("The answer is 8.")
    assert blocks[8] == f"Q: {item['question']}\nA:"
    assert "####" not in prompt  # the a2rl instruction is gone
    assert read_jsonl(out.data / "train.jsonl")[0]["prompt"].startswith(blocks[0])
    with pytest.raises(ConfigError, match="shots=2 with protocol=lm_eval_cot"):
        GSM8KParams.from_dict({"protocol": "lm_eval_cot", "shots": 2})


def test_lm_eval_cot_reports_lm_evals_strict_and_flexible_matches():
    task = task_with(**{**CHAIN_SUM, "protocol": "lm_eval_cot"})
    items = [{"id": str(i), "gold": gold} for i, gold in enumerate(["12", "12", "1000", "7"])]
    replies = ["3 + 9 = 12. The answer is 12.\n\nQ: next one? The answer is 5.",
               "3 + 9 makes 12",  # no "The answer is": strict misses, flexible takes 12
               "So it is 1000. The answer is 1,000.",  # commas are ignored
               "The answer is 7 apples, or 8"]  # strict takes the first, flexible the last
    result = task.score_replies(items, replies)
    assert result.breakdown["lm_eval_strict_pct"] == 75.0
    assert result.breakdown["lm_eval_flexible_pct"] == 75.0
    assert "lm_eval_strict_pct" not in task_with(**CHAIN_SUM).score_replies(
        items, replies).breakdown


# ---- prepare: GSM8K jsonl -----------------------------------------------------------------------

def test_jsonl_prepare(tmp_path, gsm8k_data):
    out = PreparedTaskPaths(tmp_path)
    manifest = task_with(gsm8k_data.root, test_size=20, validation_size=10, shots=2).prepare(out)
    assert manifest["sizes"] == {"train": gsm8k_data.train - 10, "validation": 10, "test": 20}
    train = read_jsonl(out.data / "train.jsonl")
    test = read_jsonl(out.test)
    assert all(item["id"].startswith("gsm8k-test-") for item in test)
    assert all(item["answer"].endswith(f"#### {item['answer'].rsplit('#### ', 1)[1]}")
               for item in train)
    assert not (questions(out.data / "train.jsonl") & questions(out.test))
    assert not (questions(out.data / "train.jsonl") & questions(out.validation))
    # the two shots are train items, shown without GSM8K's <<calculator>> annotations
    shot_ids = manifest["shots"]
    shots = [item for item in train if item["id"] in shot_ids]
    assert len(shots) == 2
    assert all(shot["question"] in test[0]["prompt"] for shot in shots)
    assert "<<" not in test[0]["prompt"]
    assert test[0]["prompt"].endswith(f"Question: {test[0]['question']}")


def test_jsonl_prepare_is_deterministic_and_subsamples(tmp_path, gsm8k_data):
    params = {"test_size": 30, "train_size": 40, "validation_size": 10}
    a = task_with(gsm8k_data.root, **params).prepare(PreparedTaskPaths(tmp_path / "a"))
    b = task_with(gsm8k_data.root, **params).prepare(PreparedTaskPaths(tmp_path / "b"))
    assert a == b and a["sizes"] == {"train": 40, "validation": 10, "test": 30}
    assert prepared_files(tmp_path / "a") == prepared_files(tmp_path / "b")


def test_jsonl_asking_for_more_than_exists_is_an_error(tmp_path, gsm8k_data):
    too_many = gsm8k_data.test + 1
    with pytest.raises(ConfigError, match=f"test_size={too_many}"):
        task_with(gsm8k_data.root, test_size=too_many).prepare(PreparedTaskPaths(tmp_path))


def test_hf_source_reads_both_splits(tmp_path, gsm8k_data, monkeypatch):
    """The Hub is out of reach here: serve the local files through datasets.load_dataset."""
    import datasets

    calls = []

    def fake_load_dataset(hf_id, hf_config, split, revision):
        calls.append((hf_id, hf_config, split, revision))
        return read_jsonl(gsm8k_data.root / "gsm8k" / f"{split}.jsonl")[:40]

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    out = PreparedTaskPaths(tmp_path)
    source = {"kind": "hf", "hf_revision": "7" * 40}
    manifest = task_with(source=source, test_size=10, train_size=20).prepare(out)
    assert sorted(calls) == [("openai/gsm8k", "main", split, "7" * 40)
                             for split in ("test", "train")]
    assert manifest["sizes"] == {"train": 20, "validation": 0, "test": 10}
    assert read_jsonl(out.test)[0]["id"].startswith("gsm8k-test-")


def test_missing_jsonl_dir_names_the_path(tmp_path):
    with pytest.raises(ConfigError, match="nowhere/test.jsonl"):
        task_with(tmp_path, source={"kind": "jsonl", "path": "nowhere"}).prepare(
            PreparedTaskPaths(tmp_path / "out"))


# ---- evaluate ---------------------------------------------------------------------------------

class ScriptedGenerator:
    """Stands in for a model: answers every prompt with ``reply(prompt)``."""

    tokenizer = None

    def __init__(self, reply):
        self.reply = reply
        self.max_new_tokens = None

    def generate(self, prompts, max_new_tokens=None):
        self.max_new_tokens = max_new_tokens
        return [self.reply(p) for p in prompts]


@pytest.fixture
def chain_sum_test(tmp_path) -> tuple[GSM8KTask, Path]:
    task = task_with(**{**CHAIN_SUM, "test_size": 20, "max_new_tokens": 7})
    out = PreparedTaskPaths(tmp_path / "prepared")
    task.prepare(out)
    return task, out.test


def test_evaluate_scores_what_the_model_says(chain_sum_test, monkeypatch, tmp_path):
    task, split = chain_sum_test
    gold = {item["prompt"]: item["gold"] for item in read_jsonl(split)}
    replies = {"right": lambda p: f"Adding up step by step.\n#### {gold[p]}",
               "wrong": lambda p: f"#### {int(gold[p]) + 1}",
               "silent": lambda p: "I cannot tell."}
    monkeypatch.setattr(a2rl.task.inference, "format_chat", lambda tok, user, system=None: user)
    scores = {}
    for name, reply in replies.items():
        generator = ScriptedGenerator(reply)
        monkeypatch.setattr(a2rl.task.inference, "load_generator", lambda d, cfg, g=generator: g)
        result = task.evaluate(tmp_path, split, InferenceConfig(max_new_tokens=99))
        assert generator.max_new_tokens == 7  # params.max_new_tokens wins over inference's
        scores[name] = result
    assert scores["right"].score == 100.0 and scores["right"].breakdown["marker_pct"] == 100.0
    assert scores["wrong"].score == 0.0
    assert scores["silent"].score == 0.0 and scores["silent"].breakdown["answered_pct"] == 0.0
    record = scores["right"].records[0]
    assert set(record) >= {"id", "prompt_tail", "completion", "extracted", "gold", "correct"}


def test_evaluate_on_tiny_model(chain_sum_test, tiny_model):
    task, split = chain_sum_test
    result = task.evaluate(tiny_model, split,
                           InferenceConfig(backend="hf", batch_size=8, max_new_tokens=7,
                                           torch_threads=1))
    assert isinstance(result, EvalResult)
    assert result.n == 20 and 0.0 <= result.score <= 100.0
    assert set(result.per_item) <= {0.0, 1.0}
    assert result.seconds > 0
    assert [r["id"] for r in result.records] == [item["id"] for item in read_jsonl(split)]
    assert all(isinstance(r["completion"], str) for r in result.records)


# ---- scoring replies without a model (a2rl score) ----------------------------------------------

def test_find_item_agrees_with_the_prepared_splits(chain_sum_test):
    """Ids name the split and the position, so `a2rl score` finds any item without drawing
    the splits; the found item is the prepared one."""
    task, split = chain_sum_test
    for item in read_jsonl(split)[:3]:
        found = task.find_item(item["id"])
        assert (found["question"], found["gold"]) == (item["question"], item["gold"])
    for bad in ("chain_sum-nosuch-1", "other-test-1", "chain_sum-test-x"):
        with pytest.raises(KeyError):
            task.find_item(bad)


def test_find_item_in_a_jsonl_pool(gsm8k_data):
    task = task_with(gsm8k_data.root, source={"kind": "jsonl", "path": "gsm8k"})
    item = task.find_item("gsm8k-test-12")
    assert item["id"] == "gsm8k-test-12" and item["gold"]
    with pytest.raises(KeyError):
        task.find_item(f"gsm8k-test-{gsm8k_data.test}")  # one past the last


def test_score_lines_uses_the_graders_extraction(chain_sum_test):
    from a2rl.grading.score import score_lines

    task, split = chain_sum_test
    item = read_jsonl(split)[0]
    rows = [{"id": item["id"], "reply": f"#### {item['gold']}"},
            {"item": {"id": "own", "gold": 18},
             "reply": "She has to answer 34-16 = 18 questions, so 18."},
            {"item": {"id": "long", "gold": "1"}, "reply": "#### 0.99999999999999999999999999999"},
            {"item": {"id": "no-gold"}, "reply": "1"}]
    results = score_lines(task, [json.dumps(r) for r in rows] + ["", "[1]"])
    assert [r.get("score") for r in results] == [1.0, 1.0, 0.0, None, None]
    assert results[0]["verdict"] == "correct" and "gold" in results[0]["reason"]
    assert "lacks ['gold']" in results[3]["error"] and results[4]["error"].startswith("line 6")


# ---- the reward agents train on (data/rollouts.json, kind single_turn) -------------------------

def test_the_reward_in_data_scores_replies_as_the_grader(tmp_path):
    """prepare ships the grader's rule as data/reward/ and declares it with the train prompts;
    on train rows it scores a right, a wrong, a silent and a late reply as score_each does."""
    task = task_with(**{**CHAIN_SUM, "train_size": 6, "test_size": 5, "validation_size": 0})
    out, _ = prepare_in(task, tmp_path / "prepared")
    assert json.loads((out.data / "rollouts.json").read_text()) == {
        "kind": "single_turn", "module": "reward", "function": "reward",
        "prompts": "train.jsonl", "system": None}
    rows = read_jsonl(out.data / "train.jsonl")
    items = [task.find_item(row["id"]) for row in rows]
    replies = [f"So the total is:\n#### {items[0]['gold']}", f"#### {int(items[1]['gold']) + 1}",
               "I cannot tell.", f"The answer is {items[3]['gold']}\nQuestion: 1 + 1 = 2",
               f"#### {items[4]['gold']}.0", f"\\boxed{{{items[5]['gold']}}}"]
    reward = declared_reward(out.data)
    got = reward(replies, **{key: [row[key] for row in rows] for key in rows[0]})
    assert got == [s.score for s in task.score_each(items, replies)] == [1, 0, 0, 1, 1, 1]
    # the task's own files, self-contained: the rule and its entry point, nothing else
    assert sorted(p.name for p in (out.data / "reward").iterdir()) == ["__init__.py", "extract.py"]
