"""The WebShop task (tasks/webshop): the procedural catalog and its near misses, the text
environment's pages and actions, prepare's layout and sealing, the scripted expert and the
random baseline, the real-format loader end to end, the agent-side copies, and evaluation of
a (tiny) model through the lockstep runner.

WebShop's product catalog is not available offline, so the loader runs on a hand-written
fixture in WebShop's exact product format (tests/fixtures/webshop/, see its PROVENANCE.md)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest
from a2rl_tasks.webshop.catalog import CatalogMaker, best_reward, instruction_key
from a2rl_tasks.webshop.env import PROMPT, WebShopEnv
from a2rl_tasks.webshop.products import DataFormatError, load_products
from a2rl_tasks.webshop.task import RandomShopper

from a2rl.common.files import iter_jsonl
from a2rl.config.types import ConfigError, InferenceConfig, TaskConfig
from a2rl.task.base import load_task
from a2rl.task.envs import ExpertPolicy, play
from checkout import REPO, prepare_in
from episode_prompts import assert_prompts_only_grow, tokenizers

FIXTURE = REPO / "tests" / "fixtures" / "webshop"  # see its PROVENANCE.md
PARAMS = {"train_goals": 12, "test_goals": 8, "random_seeds": 2, "max_steps": 10}
TWIN_SEED = 1_104_236_181


def webshop(**params) -> TaskConfig:
    return TaskConfig(id="webshop", package="webshop", level="L3", implemented=True,
                      params={**PARAMS, **params})


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    task = load_task(webshop(), Path("."))
    out, facts = prepare_in(task, tmp_path_factory.mktemp("prepared") / "webshop")
    return task, out, facts


def fixture_params() -> dict:
    return {"source": "webshop", "product_file": str(FIXTURE / "items_shuffle.json"),
            "attribute_file": str(FIXTURE / "items_ins_v2.json"),
            "human_instruction_file": str(FIXTURE / "items_human_ins.json"),
            "query_file": str(FIXTURE / "goal_query_map.json"), "train_goals": None,
            "test_goals": 500, "max_steps": 10}


def test_params_are_checked():
    with pytest.raises(ConfigError, match="unknown key"):
        load_task(webshop(test_size=3), Path("."))
    with pytest.raises(ConfigError, match="source"):
        load_task(webshop(source="amazon"), Path("."))
    with pytest.raises(ConfigError, match="own seeds"):
        load_task(webshop(train_seed=5, test_seed=5), Path("."))
    with pytest.raises(ConfigError, match="product_file"):
        load_task(webshop(source="webshop"), Path("."))
    with pytest.raises(ConfigError, match="max_steps"):
        load_task(webshop(max_steps=0), Path("."))


def test_near_misses_fail_their_goal_and_targets_can_win():
    made = CatalogMaker(seed=5, near_misses=3).make(30)
    assert len(made["products"]) == 30 * 4 and len(made["targets"]) == 30
    by_asin = {p["asin"]: p for p in made["products"]}
    for target in made["targets"]:
        ins = made["instructions"][target][0]
        raw = by_asin[target]
        goal = {"query": raw["query"], "product_category": raw["product_category"],
                "name": raw["name"], "attributes": ins["instruction_attributes"],
                "goal_options": ins["instruction_options"],
                "price_upper": float(raw["pricing"].lstrip("$")) + 1.0}
        attrs = made["attributes"][target]["attributes"]
        assert best_reward(raw, attrs, goal) == 1.0
        family = next(f for f in made["families"] if f[0] == target)
        assert len(family) == 4
        for asin in family[1:]:  # same type, and no purchase of it meets the goal
            miss = by_asin[asin]
            assert miss["query"] == raw["query"]
            assert best_reward(miss, made["attributes"][asin]["attributes"], {
                **goal, "price_upper": goal["price_upper"] + 39.0}) < 1.0
    again = CatalogMaker(seed=5, near_misses=3).make(30)
    assert again["products"] == made["products"]  # seeded
    assert CatalogMaker(seed=6).make(30)["products"] != made["products"]


def test_prepare_seals_test_goals_and_splits_targets(prepared):
    _, out, facts = prepared
    rows = list(iter_jsonl(out.test))
    assert len(rows) == 8 and facts["sizes"]["test"] == 8
    assert (out.sealed / "games" / "goals.jsonl").exists()
    test_goals = list(iter_jsonl(out.sealed / "games" / "goals.jsonl"))
    train_goals = list(iter_jsonl(out.data / "games" / "goals.jsonl"))
    assert len(train_goals) == 12
    # disjoint target products; the test instructions are nowhere in the agent's data
    assert not {g["asin"] for g in test_goals} & {g["asin"] for g in train_goals}
    data_text = "".join(p.read_text() for p in out.data.rglob("*.json*") if p.is_file())
    assert not any(g["instruction_text"] in data_text for g in test_goals)
    assert not (out.data / "source").exists() and (out.sealed / "source").is_dir()
    # one catalog and index for both sides
    assert (out.data / "games" / "catalog.json").read_bytes() == (
        out.sealed / "games" / "catalog.json").read_bytes()
    assert facts["sizes"]["products"] == 20 * 4
    assert facts["expert_test"]["score"] == 100.0 and facts["expert_train"]["score"] == 100.0
    assert facts["random_baseline"]["score"] < 50 and facts["random_baseline"]["success_pct"] < 30


def test_prepare_makes_the_same_files_and_baselines_wherever_it_runs(prepared, tmp_path):
    """The detours in the demonstrations and the random baseline are seeded by the game: with
    the game named by its place relative to the split, preparing the same params in another
    folder gives the same train pairs, trajectories and baselines (seeded by the absolute path,
    they differed from folder to folder)."""
    task, out, facts = prepared
    again, facts_again = prepare_in(task, tmp_path / "elsewhere" / "deeper" / "webshop")
    for name in ("train.jsonl", "trajectories.jsonl"):
        assert (again.data / name).read_bytes() == (out.data / name).read_bytes(), name
    assert facts_again["random_baseline"] == facts["random_baseline"]
    assert facts_again["expert_train"] == facts["expert_train"]
    assert str(out.root) not in (out.data / "trajectories.jsonl").read_text()


def test_results_and_manifests_say_which_title_nouns_the_reward_used(prepared, monkeypatch):
    """The offline stand-in for spaCy's noun tags is a departure from WebShop's reward: the
    manifest (prepared.json) and every evaluation's breakdown name it."""
    from a2rl_tasks.webshop import reward
    from a2rl_tasks.webshop.task import breakdown

    _, _, facts = prepared
    result = breakdown([{"category": "beauty"}], [1.0], [3])
    for record in (facts, result):
        assert record["title_tagger"] == reward.title_tagger()
        assert record["title_tagger_deviation"] == reward.title_tagger_deviation()
    monkeypatch.setattr(reward, "_spacy_tagger", lambda: None)
    stand_in = breakdown([{"category": "beauty"}], [1.0], [3])
    assert stand_in["title_tagger"] == "content-words"
    assert "not spaCy en_core_web_sm" in stand_in["title_tagger_deviation"]
    monkeypatch.setattr(reward, "_spacy_tagger", lambda: object())
    assert breakdown([{"category": "beauty"}], [1.0], [3])["title_tagger_deviation"] is None


def test_demonstrations_are_in_the_grader_prompt_format(prepared):
    task, out, facts = prepared
    pairs = list(iter_jsonl(out.data / "train.jsonl"))
    assert pairs and facts["sizes"]["train_pairs"] == len(pairs)
    first = pairs[0]
    assert first["step"] == 0 and first["completion"].startswith("search[")
    system, user = first["prompt"]  # the grader's chat at the first step
    assert system == {"role": "system", "content": PROMPT.instructions}
    assert "search[<query>]" in user["content"]
    assert all(p["completion"].startswith(("search[", "click[")) for p in pairs)
    kinds = {t["kind"] for t in iter_jsonl(out.data / "trajectories.jsonl")}
    assert kinds == {"expert", "perturbed_expert"}
    detours = [t for t in iter_jsonl(out.data / "trajectories.jsonl")
               if t["actions"] != t["expert_actions"]]
    assert detours and all(t["reward"] == 1.0 for t in detours)  # they recover


def test_episode_prompts_only_grow_token_for_token(prepared, tiny_model):
    """On real shopping episodes (the expert's and random ones, results pages and all), each
    step's prompt ids are the last step's plus new tokens and equal the templated chat."""
    task, out, _ = prepared
    _, games, root = task._games(out.test)
    episodes = [ep for policy in (ExpertPolicy(0), RandomShopper(0))
                for ep in play(games, WebShopEnv, policy, task.params.max_steps, task.fmt,
                               keep_prompts=True, root=root)]
    for tok in tokenizers(tiny_model):
        assert assert_prompts_only_grow(episodes, tok) >= 20


def test_pages_actions_and_reward(prepared):
    _, out, _ = prepared
    goals = list(iter_jsonl(out.sealed / "games" / "goals.jsonl"))
    goal = next(g for g in goals if g["goal_options"])
    env = WebShopEnv()
    obs = env.reset(f"{out.sealed / 'games' / 'goals.jsonl'}#{goal['id']}")
    assert obs.admissible == ["search[<query>]"] and obs.goal == goal["instruction_text"]
    assert obs.info["expert"].startswith("search[")
    # an action not on the page: state unchanged, and said
    step = env.step("click[buy now]")
    assert step.info["invalid"] and "Invalid action" in step.observation.text
    assert step.observation.admissible == obs.admissible and not step.done
    assert env.step("search[<query>]").info.get("invalid")  # the template itself is no query
    step = env.step(obs.info["expert"])
    results = step.observation
    assert "Page 1 (Total results:" in results.text
    products = [a for a in results.admissible if a.startswith("click[b0")]
    assert 1 <= len(products) <= 10 and "click[next >]" in results.admissible
    assert "click[< prev]" not in results.admissible
    if len(env.hits) > 10:
        assert "click[< prev]" in env.step("click[next >]").observation.admissible
        env.step("click[< prev]")
    # a wrong product, then back; then the expert's path
    wrong = next(a for a in products if a != f"click[{goal['asin'].lower()}]")
    item = env.step(wrong).observation
    assert "click[buy now]" in item.admissible and "click[description]" in item.admissible
    assert item.info["expert"] == "click[< prev]"
    sub = env.step("click[description]").observation
    assert sub.admissible == ["click[back to search]", "click[< prev]"]
    assert env.step("click[< prev]").observation.info["page"] == "item"
    assert env.step("click[< prev]").observation.info["page"] == "results"
    rewards, step = [], None
    for _ in range(10):
        action = env.expert_action()
        step = env.step(action)
        rewards.append(step.reward)
        if step.done:
            break
    assert step.done and step.reward == 1.0 and step.info["won"] and rewards[:-1] == [0.0] * (
        len(rewards) - 1)
    assert step.info["reward_info"]["r_type"] == 1.0
    with pytest.raises(RuntimeError, match="after the episode"):
        env.step("click[buy now]")


def test_results_per_page_is_the_shops_and_the_expert_pages_to_its_target(tmp_path):
    """A smaller page (the smoke grid's) is written with the shop, so the grader's env and the
    agent's copy page alike; the expert still reaches every target."""
    task = load_task(webshop(results_per_page=2, test_goals=4), Path("."))
    out, facts = prepare_in(task, tmp_path / "webshop")
    assert json.loads((out.data / "games" / "shop.json").read_text()) == {"results_per_page": 2}
    assert facts["expert_test"]["score"] == 100.0
    goal = next(iter_jsonl(out.sealed / "games" / "goals.jsonl"))
    env = WebShopEnv()
    obs = env.reset(f"{out.sealed / 'games' / 'goals.jsonl'}#{goal['id']}")
    results = env.step(obs.info["expert"]).observation
    assert len([a for a in results.admissible if a.startswith("click[b0")]) == 2
    if len(env.hits) > 2:
        page2 = env.step("click[next >]").observation
        assert [a for a in page2.admissible if a.startswith("click[b0")] == \
            [f"click[{a.lower()}]" for a in env.hits[2:4]]


def test_titles_click_too_and_options_replace_within_a_group(prepared):
    _, out, _ = prepared
    goal = next(g for g in iter_jsonl(out.sealed / "games" / "goals.jsonl")
                if g["goal_options"])
    env = WebShopEnv()
    env.reset(f"{out.sealed / 'games' / 'goals.jsonl'}#{goal['id']}")
    env.step(env.expert_action())
    page = env._page_hits()
    title = env.shop.products[page[0]]["Title"]
    assert env.step(f"click[{title}]").observation.info["page"] == "item"
    group, values = next(iter(env._product()["options"].items()))
    env.step(f"click[{values[0]}]")
    env.step(f"click[{values[-1]}]")
    assert env.options == {group: values[-1]}
    assert env.page_text().startswith(f"You have clicked {values[-1]}.")


def test_a_goals_file_written_again_is_loaded_again(prepared, tmp_path):
    """The shop cache follows the goals file: a folder rewritten in the same process (a twin
    split drawn anew) serves its new goals, not the ones first loaded."""
    _, out, _ = prepared
    shop = shutil.copytree(out.sealed / "games", tmp_path / "games")
    goal = next(iter_jsonl(shop / "goals.jsonl"))
    game = f"{shop / 'goals.jsonl'}#{goal['id']}"
    assert WebShopEnv().reset(game).goal == goal["instruction_text"]
    (shop / "goals.jsonl").write_text(json.dumps({**goal, "instruction_text": "i need a hat"})
                                      + "\n")
    assert WebShopEnv().reset(game).goal == "i need a hat"


def test_step_limit_ends_with_reward_zero(prepared):
    _, out, _ = prepared
    games = [f"{out.sealed / 'games' / 'goals.jsonl'}#{r['id']}" for r in iter_jsonl(out.test)]
    episodes = play(games[:3], WebShopEnv, ExpertPolicy(0), max_steps=2, fmt=PROMPT)
    assert all(e.n_steps == 2 and e.score == 0.0 and not e.won for e in episodes)


def test_real_format_loader_end_to_end(tmp_path):
    """WebShop's own three files (the fixture): products (a duplicate and a too-long ASIN
    skipped, option values cleaned, a price range and an empty price), human goals (one
    without attributes skipped), the split, the index, and an expert episode per goal that
    earns reward 1.0."""
    products = load_products(FIXTURE / "items_shuffle.json", FIXTURE / "items_ins_v2.json")
    assert len(products) == 6 and len({p["asin"] for p in products}) == 6
    wig = next(p for p in products if p["asin"] == "B07NDLGGS1")
    assert "rl56 | 60 silver mist" in wig["options"]["color"]
    spray = next(p for p in products if p["asin"] == "B08GCNBFX1")
    assert spray["pricing"] == [12.99, 18.99] and 12.99 <= spray["price"] <= 18.99
    assert spray["BulletPoints"] == ["Five 260ml bottles, fine mist, leak proof"]
    band = next(p for p in products if p["asin"] == "B092J891H7")
    assert band["price"] == 100.0 and band["Price"] == "$100.0"

    task = load_task(webshop(**fixture_params()), Path("."))
    out, facts = prepare_in(task, tmp_path / "webshop")
    assert facts["source"]["kind"] == "webshop" and facts["source"]["goals"] == 6
    assert facts["sizes"]["test"] + facts["sizes"]["train_goals"] == 6
    assert facts["expert_test"]["score"] == 100.0 and facts["expert_train"]["score"] == 100.0
    goals = list(iter_jsonl(out.sealed / "games" / "goals.jsonl")) + list(
        iter_jsonl(out.data / "games" / "goals.jsonl"))
    by_text = {g["instruction_text"].split(", and price")[0]: g for g in goals}
    headphones = by_text["i am looking for a red stereo sound earbud headphones"]
    assert headphones["search_query"] == "red stereo earbud headphones"  # the query map
    assert all(g["price_upper"] > 0 and "price lower than" in g["instruction_text"]
               for g in goals)
    for split in ("sealed", "data"):
        folder = getattr(out, split) / "games"
        games = [f"{folder / 'goals.jsonl'}#{g['id']}" for g in iter_jsonl(folder / "goals.jsonl")]
        episodes = play(games, WebShopEnv, ExpertPolicy(0), 10, PROMPT)
        assert [e.score for e in episodes] == [1.0] * len(games)
    assert task.twin_split(out, tmp_path / "twin", TWIN_SEED) is None  # a fixed pool


def test_bad_data_files_fail_clearly(tmp_path):
    (tmp_path / "p.json").write_text(json.dumps({"not": "a list"}))
    with pytest.raises(DataFormatError, match="JSON list"):
        load_products(tmp_path / "p.json", FIXTURE / "items_ins_v2.json")
    (tmp_path / "p.json").write_text(json.dumps([{"asin": "B01", "name": "x"}]))
    with pytest.raises(DataFormatError, match="lacks"):
        load_products(tmp_path / "p.json", FIXTURE / "items_ins_v2.json")
    with pytest.raises(FileNotFoundError, match="product file"):
        load_products(tmp_path / "missing.json", FIXTURE / "items_ins_v2.json")


def test_agent_side_copies_run_without_the_a2rl_package(prepared, tmp_path):
    _, out, _ = prepared
    data = tmp_path / "data"
    shutil.copytree(out.data, data)
    script = ("import sys; sys.modules['a2rl'] = None; sys.path.insert(0, '.')\n"
              "from webshop_env import PROMPT, WebShopEnv, load_games\n"
              "from a2rl_envs import play, ExpertPolicy\n"
              "eps = play(load_games('games')[:4], WebShopEnv, ExpertPolicy(0), 10, PROMPT)\n"
              "print(len(eps), sum(e.score for e in eps))\n")
    result = subprocess.run([sys.executable, "-c", script], cwd=data, check=False,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["4", "4.0"]


def test_evaluate_plays_sealed_goals_with_a_model(prepared, tiny_model):
    task, out, _ = prepared
    inference = InferenceConfig(backend="hf", batch_size=8, max_new_tokens=6, torch_threads=1)
    result = task.evaluate(tiny_model, out.test, inference)
    assert result.n == 8 and all(0.0 <= r <= 1.0 for r in result.per_item)
    for key in ("success_pct", "success_ge_half_pct", "mean_reward", "bought_pct",
                "title_tagger", "title_tagger_deviation"):
        assert key in result.breakdown
    assert all(1 <= r["steps"] <= 10 for r in result.records)
    again = task.evaluate(tiny_model, out.test, inference)  # greedy: deterministic
    assert [r["actions"] for r in again.records] == [r["actions"] for r in result.records]
    json.dumps(result.to_dict())


# ---- the twin split (a2rl.grading.twin) ------------------------------------------------------

def shop_files(split: Path) -> dict[str, bytes]:
    """A split file and its shop folder's files, by name."""
    games = split.parent / "games"
    return {"split": split.read_bytes()} | {
        str(f.relative_to(games)): f.read_bytes() for f in games.rglob("*") if f.is_file()}


def test_twin_split_is_a_fresh_test_split_in_the_same_shop(prepared, tmp_path):
    task, out, _ = prepared
    split = task.twin_split(out, tmp_path / "twin", TWIN_SEED)
    rows, test_rows = list(iter_jsonl(split)), list(iter_jsonl(out.test))
    goals = list(iter_jsonl(split.parent / "games" / "goals.jsonl"))
    sealed = out.sealed / "games"
    test = list(iter_jsonl(sealed / "goals.jsonl"))
    train = list(iter_jsonl(out.data / "games" / "goals.jsonl"))
    # the test split's size and format
    assert len(rows) == len(goals) == len(test_rows) == 8
    assert {tuple(r) for r in rows} == {tuple(test_rows[0])}
    assert {tuple(g) for g in goals} == {tuple(test[0])}
    assert [r["id"] for r in rows] == [g["id"] for g in goals]
    # no goal of train's or test's: ids, instructions (case, spacing and price aside), targets
    assert not {g["id"] for g in goals} & {g["id"] for g in test + train}
    keys = {instruction_key(g["instruction_text"]) for g in goals}
    assert len(keys) == 8 and not keys & {instruction_key(g["instruction_text"])
                                          for g in test + train}
    catalog = json.loads((sealed / "catalog.json").read_text())
    assert not {g["asin"] for g in goals} & {p["asin"] for p in catalog}
    # the sealed catalog, every product as it is, with the fresh families (target + 3 misses)
    shop = json.loads((split.parent / "games" / "catalog.json").read_text())
    kept = {p["asin"] for p in catalog}
    assert sorted(map(json.dumps, catalog)) == sorted(json.dumps(p) for p in shop
                                                      if p["asin"] in kept)
    fresh_at = [i for i, p in enumerate(shop) if p["asin"] not in kept]
    assert len(fresh_at) == 8 * 4 and min(fresh_at) < len(catalog)  # among the others
    assert (split.parent / "games" / "shop.json").read_bytes() == (sealed / "shop.json"
                                                                     ).read_bytes()
    # every goal winnable, as every test goal is
    assert task.expert_score(split)["score"] == 100.0


def test_twin_split_is_one_draw_per_seed(prepared, tmp_path):
    task, out, _ = prepared
    first = shop_files(task.twin_split(out, tmp_path / "a", TWIN_SEED))
    assert shop_files(task.twin_split(out, tmp_path / "b", TWIN_SEED)) == first
    other = task.twin_split(out, tmp_path / "a", TWIN_SEED + 1)  # the same folder, drawn again
    assert shop_files(other) != first
    instructions = {r["instruction"] for r in iter_jsonl(other)}
    assert not instructions & {json.loads(line)["instruction"]
                               for line in first["split"].decode().splitlines()}
    # the folder's shop is the new draw's, in this process too (WebShopEnv's shop cache)
    assert task.expert_score(other)["score"] == 100.0


def test_evaluate_plays_a_twin_split_with_a_model(prepared, tiny_model, tmp_path):
    task, out, _ = prepared
    split = task.twin_split(out, tmp_path / "twin", TWIN_SEED)
    inference = InferenceConfig(backend="hf", batch_size=8, max_new_tokens=6, torch_threads=1)
    result = task.evaluate(tiny_model, split, inference)
    assert result.n == 8 and all(0.0 <= r <= 1.0 for r in result.per_item)
    assert [r["id"] for r in result.records] == [r["id"] for r in iter_jsonl(split)]
    assert all(1 <= r["steps"] <= 10 for r in result.records)


def test_grpo_script_rolls_out_in_the_shop(prepared, tiny_model, tmp_path):
    from a2rl.agents import grpo

    _, out, _ = prepared
    script = tmp_path / "grpo_train.py"
    shutil.copy(grpo.GRPO_SCRIPT, script)
    result = subprocess.run(
        [sys.executable, str(script), "--model", str(tiny_model), "--data", str(out.data),
         "--out", str(tmp_path / "grpo"), "--iterations", "1", "--games", "2", "--group", "2",
         "--max-steps", "3", "--train-layers", "1", "--max-new-tokens", "8", "--lr", "1e-5",
         "--temperature", "1.0", "--step-cost", "0.01", "--expert-bonus", "0",
         "--minibatch", "16", "--kl", "0"],
        check=False, capture_output=True, text=True, timeout=600,
        env={**__import__("os").environ, "OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stderr[-2000:]
    log = json.loads((tmp_path / "grpo" / "grpo_log.json").read_text())
    assert log[0]["episodes"] == 4 and 0.0 <= log[0]["mean_score"] <= 1.0
    assert log[0]["kl"] == 0.0  # --kl 0: no reference model, no penalty


def test_grpo_script_finds_the_shop_through_the_tasks_declaration(prepared, tmp_path):
    from a2rl.agents.grpo_train import data_env

    task, out, _ = prepared
    declared = data_env(out.data)
    assert declared.pop("prompt") == asdict(task.fmt)  # rollouts prompt as the grader does
    assert declared == {"kind": "episodes", "module": "webshop_env", "env": "WebShopEnv",
                        "reward": "score", "games": "games", "actions": "closest"}
    with pytest.raises(SystemExit, match="ships no environment for online rollouts"):
        data_env(tmp_path)  # no guessing by file name: a task declares its environment
