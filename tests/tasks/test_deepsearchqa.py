"""DeepSearchQA offline (tasks/deepsearchqa, source=world): the knowledge world and its
questions, the set matcher and outcome buckets, the search environment (actions, errors,
paging, the expert), prepare's layout and sealing, the policy bounds (oracle >= 95, closed-book
<= 5, search-only in between), evaluation of a tiny model in lockstep, the agent-side copies,
and the real questions' loader and split."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from a2rl_tasks.deepsearchqa.policies import names_by_kind
from a2rl_tasks.deepsearchqa.questions import QuestionMaker
from a2rl_tasks.deepsearchqa.search_env import LocalBackend

from a2rl.common.contract import render_description
from a2rl.common.files import iter_jsonl
from a2rl.common.layout import PreparedTaskPaths
from a2rl.config.types import ConfigError, InferenceConfig, TaskConfig
from a2rl.task.base import load_task, text_key
from a2rl.task.envs import ExpertPolicy, play
from checkout import FULL_DATA, RUN_VALUES, prepare_in

# the offline copy of the 900 real questions, in the full data ($A2RL_DATA) when it is there
REAL_DSQA = FULL_DATA / "deepsearchqa" / "DSQA-full.json" if FULL_DATA else None


def world_task(**params) -> TaskConfig:
    return TaskConfig(id="deepsearchqa_world", package="deepsearchqa", level="L3",
                      params={"source": "world", **params})


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    task = load_task(world_task(), Path("."))
    out, facts = prepare_in(task, tmp_path_factory.mktemp("prepared") / "deepsearchqa_world")
    return task, out, facts


# ---- the world and its questions ------------------------------------------------------------

def test_world_is_reproducible_and_no_name_contains_another():
    from a2rl_tasks.deepsearchqa.scoring import normalise
    from a2rl_tasks.deepsearchqa.world import World

    a, b = World.build(3), World.build(3)
    assert {p.id: p.text for p in a.pages.values()} == {p.id: p.text for p in b.pages.values()}
    assert World.build(4).pages["person/0"].text != a.pages["person/0"].text
    names = [normalise(e.name) for e in a.entities.values()]
    assert len(set(names)) == len(names)
    # no name is part of another, so a name found inside an answer is unambiguous
    padded = [f" {n} " for n in names]
    for name in names:
        assert sum(f" {name} " in other for other in padded) == 1, name


def test_questions_need_hops_have_gold_sets_and_spare_test_entities():
    from a2rl_tasks.deepsearchqa.questions import make_questions
    from a2rl_tasks.deepsearchqa.world import World

    world = World.build(0)
    test = make_questions(world, 36, 11, "test")
    asked = {e for q in test for e in q.entities}
    train = make_questions(world, 60, 12, "train", avoid=asked)
    assert not asked & {e for q in train for e in q.entities}
    assert {q.template for q in test} == set(QuestionMaker.TEMPLATES)
    assert all(2 <= q.hops <= 4 and q.answers for q in test + train)
    assert all(len(q.answers) == 1 for q in test if q.answer_type == "Single Answer")
    assert all(1 <= len(q.answers) <= 4 for q in test if q.answer_type == "Set Answer")
    # the gold answers are on the plan's pages: the expert reads them there
    for q in test:
        last = world.pages[q.plan[-1].page].text
        first = world.pages[q.plan[0].page].text
        assert all(a in last or a in first for a in q.answers), q.question
    with pytest.raises(RuntimeError, match="larger world"):
        make_questions(world, 50, 13, "x", avoid={e.id for e in world.entities.values()},
                       max_tries=2)


# ---- the matcher ------------------------------------------------------------------------------

@pytest.mark.parametrize("answer,outcome,correct", [
    ("Tarsk, Velmora", "fully_correct", True),
    ("The answers are: velmora and TÂRSK.", "fully_correct", True),
    ("Tarsk, Velmora, Ostek", "correct_with_extraneous", False),
    ("Tarsk", "partially_correct", False),
    ("Ostek", "fully_incorrect", False),
    ("", "fully_incorrect", False),
    ("   ,  ; ", "fully_incorrect", False),
])
def test_set_matcher_outcomes(answer, outcome, correct):
    from a2rl_tasks.deepsearchqa.scoring import match_answer

    grade = match_answer(["Tarsk", "Velmora"], answer)
    assert (grade.outcome, grade.correct) == (outcome, correct)


def test_metrics_follow_the_reference_definitions():
    from a2rl_tasks.deepsearchqa.scoring import Grade, match_answer, summarise

    grade = match_answer(["A1 Alpha", "Beta", "Gamma"], "a1 alpha, beta, delta")
    assert grade.found == {"A1 Alpha": True, "Beta": True, "Gamma": False}
    assert grade.excessive == ["delta"]
    assert grade.precision == pytest.approx(2 / 3) and grade.recall == pytest.approx(2 / 3)
    assert grade.f1 == pytest.approx(2 / 3)
    assert Grade({"x": False}).f1 == 0.0 and not Grade({}).correct
    out = summarise([Grade({"x": True}), Grade({"x": True}, ["y"]), Grade({"x": False}),
                     Grade({"x": True, "z": False})], ["a", "a", "b", "b"])
    assert [out[f"{o}_pct"] for o in ("fully_correct", "correct_with_extraneous",
                                      "partially_correct", "fully_incorrect")] == [25.0] * 4
    assert out["correct_a"] == 50.0 and out["correct_b"] == 0.0 and out["n_a"] == 2


# ---- the environment --------------------------------------------------------------------------

def test_actions_parse_and_malformed_ones_get_an_error_observation(prepared):
    from a2rl_tasks.deepsearchqa.search_env import (
        EnvSettings,
        LocalBackend,
        SearchEnv,
        parse_action,
    )

    assert parse_action("search[people born in Tarsk]") == ("search", "people born in Tarsk")
    assert parse_action("Answer(A (2001), B) thanks") == ("answer", "A (2001), B")
    assert parse_action("open[3") == ("open", "3")
    assert parse_action("Next Page") == ("next", "")
    for bad in ("open 3", "search[]", "look around", ""):
        with pytest.raises(ValueError):
            parse_action(bad)
    _, out, _ = prepared
    rows = {r["id"]: r for r in iter_jsonl(out.test)}
    qid = next(q for q, r in rows.items() if r["template"] == "alumni_born_in")
    env = SearchEnv(rows, LocalBackend.load(out.sealed / "search"),
                    EnvSettings(page_chars=200, max_steps=6))
    first = env.reset(qid)
    assert first.admissible == [] and first.goal == rows[qid]["question"]
    for bad in ("look around", "open[9]", "next page"):
        step = env.step(bad)
        assert step.observation.text.startswith("Invalid action") and not step.done
    step = env.step(f"search[{rows[qid]['plan'][1]['query']}]")
    assert "[1] " in step.observation.text and step.info["searches"] == 1
    opened = env.step("open[1]").observation.text
    assert "(page 1 of " in opened and "One action left" in opened  # step 5 of 6
    step = env.step("answer[" + ", ".join(rows[qid]["answers"]) + "]")
    assert step.done and step.info["won"] and step.reward == 1.0


def test_paging_shows_every_part_of_a_long_page():
    from a2rl_tasks.deepsearchqa.search_env import paginate

    text = "\n".join(f"- item number {i}" for i in range(40))
    pages = paginate(text, 100)
    assert all(len(p) <= 100 for p in pages) and len(pages) > 5
    assert " ".join(" ".join(pages).split()) == " ".join(text.split())
    assert paginate("short", 100) == ["short"] and paginate("", 10) == [""]


def test_expert_answers_every_test_question_within_the_step_limit(prepared):
    from a2rl_tasks.deepsearchqa.search_env import PROMPT, EnvSettings, LocalBackend, SearchEnv

    task, out, _ = prepared
    rows = {r["id"]: r for r in iter_jsonl(out.test)}
    backend = LocalBackend.load(out.sealed / "search")
    episodes = play(list(rows), lambda: SearchEnv(rows, backend, EnvSettings(max_steps=10)),
                    ExpertPolicy(), 10, PROMPT)
    assert all(e.won for e in episodes)
    assert max(e.n_steps for e in episodes) <= 10
    # the four-hop template takes a search and an open per hop, then the answer (fewer when a
    # search happens to list the next hop's page already)
    four = [e.n_steps for e in episodes if rows[e.game]["template"] == "founder_country"]
    assert four and 7 <= min(four) and max(four) <= 9


# ---- prepare, policies, evaluate ----------------------------------------------------------------

def test_prepare_seals_the_test_questions_and_writes_demonstrations(prepared):
    _, out, facts = prepared
    test = list(iter_jsonl(out.test))
    train = list(iter_jsonl(out.data / "train_questions.jsonl"))
    assert (len(test), len(train)) == (60, 300) == (facts["sizes"]["test"],
                                                    facts["sizes"]["train"])
    assert not {r["question"] for r in test} & {r["question"] for r in train}
    test_ids = {r["id"] for r in test}
    data_text = "".join(p.read_text() for p in out.data.glob("*.jsonl"))
    assert not any(f'"{i}"' in data_text for i in test_ids)
    assert facts["expert_success_train"] == 100.0
    pairs = list(iter_jsonl(out.data / "train.jsonl"))
    assert len(pairs) == facts["sizes"]["train_pairs"] > 300
    # the grader's chat at each step; free-text actions: no list of available ones
    assert all(p["prompt"][0]["role"] == "system" and p["prompt"][-1]["role"] == "user" and
               "Available actions" not in json.dumps(p["prompt"]) for p in pairs)
    assert {p["completion"].split("[")[0] for p in pairs} == {"search", "open", "next page",
                                                              "answer"}
    for name in ("README.md", "dsqa_env.py", "dsqa_scoring.py", "dsqa_web.py", "a2rl_envs.py",
                 "trajectories.jsonl", "search/corpus.jsonl"):
        assert (out.data / name).exists(), name
    assert (out.sealed / "search" / "corpus.jsonl").exists()


def test_the_task_rewards_real_tool_use(prepared):
    """The issue's bounds: the oracle >= 95, closed-book <= 5, search-only strictly between."""
    _, _, facts = prepared
    scores = {name: s["score"] for name, s in facts["policies"].items()}
    assert scores["oracle"] >= 95
    assert scores["closed_book"] <= 5
    assert scores["closed_book"] < scores["search_only"] < scores["oracle"]


def test_evaluate_plays_the_test_questions_with_a_model(prepared, tiny_model, tmp_path):
    task, out, _ = prepared
    split = out.sealed / "few.jsonl"
    split.write_text("".join(json.dumps(r) + "\n" for r in list(iter_jsonl(out.test))[:4]))
    inference = InferenceConfig(backend="hf", batch_size=4, max_new_tokens=6, torch_threads=1)
    result = task.evaluate(tiny_model, split, inference)
    assert result.n == 4 and set(result.per_item) <= {0.0, 1.0}
    assert all(1 <= r["steps"] <= task.params.max_steps for r in result.records)
    for key in ("f1", "fully_correct_pct", "fully_incorrect_pct", "mean_steps", "answered_pct",
                "mean_search", "mean_invalid"):
        assert key in result.breakdown
    again = task.evaluate(tiny_model, split, inference)  # greedy: the same episodes
    assert [r["actions"] for r in again.records] == [r["actions"] for r in result.records]
    json.dumps(result.to_dict())


# ---- the twin split (a2rl.grading.twin) ------------------------------------------------------

TWIN_SEED = 1_104_236_181


def test_twin_split_is_a_fresh_test_split_of_the_same_world(prepared, tmp_path):
    task, out, _ = prepared
    split = task.twin_split(out, tmp_path / "twin", TWIN_SEED)
    twin, test = list(iter_jsonl(split)), list(iter_jsonl(out.test))
    train = list(iter_jsonl(out.data / "train_questions.jsonl"))
    # the test split's size and format, every template (not test's mix: the 300 train
    # questions have used up most of the world's founder_country questions)
    assert len(twin) == len(test) == 60
    assert {tuple(r) for r in twin} == {tuple(test[0])}
    assert {r["template"] for r in twin} == set(QuestionMaker.TEMPLATES)
    # no question of train's or test's (ids, texts with case and spacing aside), and, as
    # train's, none about an entity a test question asks about
    assert not {r["id"] for r in twin} & {r["id"] for r in test + train}
    texts = {text_key(r["question"]) for r in twin}
    assert len(texts) == 60 and not texts & {text_key(r["question"]) for r in test + train}
    assert not {e for r in twin for e in r["entities"]} & {e for r in test for e in r["entities"]}
    # answered from the sealed search index, where the expert answers every question
    assert (split.parent / "search" / "corpus.jsonl").read_bytes() == (
        out.sealed / "search" / "corpus.jsonl").read_bytes()
    backend = LocalBackend.load(split.parent / "search", task.params.snippet_chars)
    assert task.policy_scores(twin, backend, names_by_kind(backend.docs))["oracle"][
        "score"] == 100.0


def test_twin_split_is_one_draw_per_seed(prepared, tmp_path):
    task, out, _ = prepared
    first = task.twin_split(out, tmp_path / "a", TWIN_SEED).read_text()
    assert task.twin_split(out, tmp_path / "b", TWIN_SEED).read_text() == first
    other = list(iter_jsonl(task.twin_split(out, tmp_path / "a", TWIN_SEED + 1)))
    assert [r["question"] for r in other] != [json.loads(line)["question"]
                                              for line in first.splitlines()]


def test_evaluate_plays_a_twin_split_with_a_model(tiny_model, tmp_path):
    task = load_task(world_task(test_questions=4, train_questions=12), Path("."))
    out, _ = prepare_in(task, tmp_path / "prepared")
    split = task.twin_split(out, tmp_path / "twin", TWIN_SEED)
    inference = InferenceConfig(backend="hf", batch_size=4, max_new_tokens=6, torch_threads=1)
    result = task.evaluate(tiny_model, split, inference)
    assert result.n == 4 and set(result.per_item) <= {0.0, 1.0}
    assert [r["id"] for r in result.records] == [r["id"] for r in iter_jsonl(split)]


def test_the_real_questions_have_no_twin(prepared, tmp_path):
    _, out, _ = prepared
    real = load_task(TaskConfig(id="d", package="deepsearchqa", level="L3",
                                params={"source": "dsqa", "backend": "web", "grader": "judge"}),
                     Path("."))
    assert real.twin_split(out, tmp_path / "twin", TWIN_SEED) is None


def test_score_each_matches_final_answers(prepared):
    task, out, _ = prepared
    row = next(iter(iter_jsonl(out.test)))
    assert task.find_item(row["id"])["answers"] == row["answers"]
    good = "answer[" + ", ".join(row["answers"]) + "]"
    scores = task.score_each([row, row, row], [good, "answer[]", "Nobody"])
    assert [s.score for s in scores] == [1.0, 0.0, 0.0]
    assert scores[1].verdict == "fully_incorrect"
    with pytest.raises(KeyError):
        task.find_item("test-9999")


def test_f1_headline_scores_each_answer_by_its_f1(prepared):
    """headline: f1 is DeepSearchQA's F1 metric as the item score: precision = found / (found +
    excessive), recall = found / expected; fully correct stays in the outcome. The default
    scores the same replies 1 or 0."""
    _, out, _ = prepared
    row = next(r for r in iter_jsonl(out.test) if len(r["answers"]) >= 2)
    expected = row["answers"]
    f1_task = load_task(world_task(headline="f1"), Path("."))
    assert f1_task.metric.startswith("F1")
    replies = ["answer[" + ", ".join(expected) + "]",             # all: F1 1
               f"answer[{expected[0]}, Nobody Atall]",            # 1 found, 1 excessive
               "answer[Nobody Atall]"]                            # nothing found: F1 0
    n = len(expected)
    half = 2 * (1 / 2) * (1 / n) / (1 / 2 + 1 / n)
    scores = f1_task.score_each([row] * 3, replies)
    assert [s.score for s in scores] == pytest.approx([1.0, half, 0.0])
    assert [s.verdict for s in scores] == ["fully_correct", "partially_correct",
                                           "fully_incorrect"]
    default = load_task(world_task(), Path(".")).score_each([row] * 3, replies)
    assert [s.score for s in default] == [1.0, 0.0, 0.0]
    with pytest.raises(ConfigError, match="headline='recall'"):
        load_task(world_task(headline="recall"), Path("."))


def test_agent_side_rollouts_work_from_data(prepared):
    """The copies in data/ run without the a2rl packages (blocked here)."""
    _, out, _ = prepared
    script = ("import sys\n"
              "for m in ('a2rl', 'a2rl.task', 'a2rl.task.envs', 'a2rl_tasks'):\n"
              "    sys.modules[m] = None\n"
              "sys.path.insert(0, '.')\n"
              "from dsqa_env import LocalBackend, SearchEnv, EnvSettings, load_questions, PROMPT\n"
              "from a2rl_envs import play, ExpertPolicy, success_rate\n"
              "import dsqa_web\n"
              "qs = dict(list(load_questions('train_questions.jsonl').items())[:12])\n"
              "b = LocalBackend.load('search')\n"
              "eps = play(list(qs), lambda: SearchEnv(qs, b, EnvSettings()), ExpertPolicy(), 10,"
              " PROMPT)\n"
              "print(len(eps), success_rate(eps))\n")
    result = subprocess.run([sys.executable, "-c", script], cwd=out.data, check=False,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["12", "100.0"]


def test_descriptions_fill_the_harness_placeholders(prepared):
    task, _, _ = prepared
    assert "data/search/" in render_description(task.description(), RUN_VALUES)
    real = load_task(TaskConfig(id="d", package="deepsearchqa", level="L3",
                                params={"source": "dsqa", "backend": "web", "grader": "judge"}),
                     Path("."))
    assert "LLM judge" in render_description(real.description(), RUN_VALUES)


def test_params_are_checked():
    with pytest.raises(ConfigError, match="unknown keys"):
        load_task(world_task(test_size=3), Path("."))
    with pytest.raises(ConfigError, match="backend=local only"):
        load_task(world_task(backend="web"), Path("."))
    with pytest.raises(ConfigError, match="world.people"):
        load_task(world_task(world={"people": 10}), Path("."))
    with pytest.raises(ConfigError, match="world has unknown keys"):
        load_task(world_task(world={"planets": 3}), Path("."))
    with pytest.raises(ConfigError, match="needs grader=judge"):
        load_task(world_task(source="dsqa", backend="web"), Path("."))
    with pytest.raises(ConfigError, match="feedback"):
        load_task(TaskConfig(id="w", package="deepsearchqa", level="L3", feedback="validation"),
                  Path("."))


# ---- the real questions -----------------------------------------------------------------------

def _fake_dsqa(path: Path, n: int, empty: set[int]) -> None:
    rows = [{"example_id": str(i), "problem": f"Question {i}?", "problem_category": "Other",
             "answer": "" if i in empty else f"Answer {i}",
             "answer_type": "Set Answer" if i % 3 else "Single Answer"} for i in range(n)]
    path.write_text(json.dumps(rows))


def test_real_data_split_skips_empty_answers_and_follows_the_seed(tmp_path):
    from a2rl_tasks.deepsearchqa.dsqa_data import load_dsqa, split_dsqa
    from a2rl_tasks.deepsearchqa.params import DsqaData

    _fake_dsqa(tmp_path / "dsqa.json", 40, {3, 17})
    params = DsqaData(path="dsqa.json", train_size=10, test_size=20)
    rows, source = load_dsqa(params, tmp_path)
    train, test, excluded = split_dsqa(rows, params)
    assert (len(train), len(test), excluded["count"]) == (10, 20, 2)
    assert excluded["example_ids"] == ["17", "3"] and source["rows"] == 40
    assert not {r["id"] for r in train} & {r["id"] for r in test}
    assert all(r["answer"] for r in train + test)
    again = split_dsqa(list(reversed(rows)), params)  # the input order does not matter
    assert [r["id"] for r in again[1]] == [r["id"] for r in test]
    other = split_dsqa(rows, DsqaData(path="dsqa.json", train_size=10, test_size=20,
                                      shuffle_seed=7))
    assert [r["id"] for r in other[1]] != [r["id"] for r in test]
    with pytest.raises(ConfigError, match="only 38"):
        split_dsqa(rows, DsqaData(train_size=30, test_size=10))
    (tmp_path / "bad.json").write_text(json.dumps([{"example_id": "1", "problem": "q"}]))
    with pytest.raises(ValueError, match="expected the fields"):
        load_dsqa(DsqaData(path="bad.json"), tmp_path)
    with pytest.raises(FileNotFoundError, match="hf_id"):
        load_dsqa(DsqaData(path="missing.json"), tmp_path)


@pytest.mark.skipif(REAL_DSQA is None or not REAL_DSQA.exists(),
                    reason="the offline DeepSearchQA copy ($A2RL_DATA) is absent")
def test_real_questions_give_the_papers_split(tmp_path, monkeypatch):
    """The 900 questions: 4 without an answer are excluded and counted; 100 train and 200
    sealed items, both answer types, from seed 42; prepare writes them where they belong."""
    monkeypatch.setenv("BRAVE_API_KEY", "sekrit-key-123")
    task = load_task(TaskConfig(id="deepsearchqa", package="deepsearchqa", level="L3",
                                params={"source": "dsqa", "backend": "web", "grader": "judge"}),
                     FULL_DATA)
    out, facts = prepare_in(task, tmp_path / "deepsearchqa")
    assert facts["source"]["rows"] == 900 and facts["excluded_empty_answer"]["count"] == 4
    assert sorted(facts["excluded_empty_answer"]["example_ids"]) == ["110", "132", "707", "892"]
    test = list(iter_jsonl(out.test))
    train = list(iter_jsonl(out.data / "train_questions.jsonl"))
    assert (len(train), len(test)) == (100, 200)
    assert set(facts["test_answer_types"]) == {"Single Answer", "Set Answer"}
    assert not {r["example_id"] for r in train} & {r["example_id"] for r in test}
    assert facts["web"]["name"] == "brave" and "sekrit" not in json.dumps(facts)
    pairs = list(iter_jsonl(out.data / "train.jsonl"))
    assert pairs[0]["completion"] == f"answer[{train[0]['answer']}]"
    again = PreparedTaskPaths(tmp_path / "again")
    again.data.mkdir(parents=True)
    again.sealed.mkdir(parents=True)
    task.prepare(again)
    assert out.test.read_text() == again.test.read_text()
