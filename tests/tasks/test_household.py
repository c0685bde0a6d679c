"""The offline household task (tasks/alfworld, source=household): game generation, prepare's
layout and sealing, demonstrations in the grader's prompt format, the random baseline, and
evaluation of a (tiny) model through the lockstep runner."""

from __future__ import annotations

import json
import shutil
import sys
from collections import Counter
from pathlib import Path

import pytest

from a2rl.common.files import iter_jsonl
from a2rl.common.layout import PreparedTaskPaths
from a2rl.config.types import ConfigError, InferenceConfig, TaskConfig
from a2rl.task.base import load_task
from a2rl.task.envs import ExpertPolicy, RandomPolicy, play
from checkout import prepare_in
from episode_prompts import assert_prompts_only_grow, tokenizers

PARAMS = {"source": "household", "train_games": 3, "test_games": 3, "max_steps": 8,
          "quest_length": [1, 2], "rooms": [1, 2], "objects": [3, 5], "random_seeds": 2}


def household(**params) -> TaskConfig:
    return TaskConfig(id="household", package="alfworld", level="L3", params={**PARAMS, **params})


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    task = load_task(household(), Path("."))
    out, facts = prepare_in(task, tmp_path_factory.mktemp("prepared") / "household")
    return task, out, facts


def test_params_are_checked():
    with pytest.raises(ConfigError, match=r"unknown key\(s\)"):
        load_task(household(test_size=3), Path("."))
    with pytest.raises(ConfigError, match="quest_length"):
        load_task(household(quest_length=[3, 1]), Path("."))
    with pytest.raises(ConfigError, match="too close"):
        load_task(household(test_seed=1_000_001), Path("."))
    with pytest.raises(ConfigError, match="source"):
        load_task(household(source="webshop"), Path("."))
    with pytest.raises(ConfigError, match="goal_types"):
        load_task(household(goal_types=["put_in", "pick_three"]), Path("."))


def test_pick_two_games_need_both_objects(tmp_path):
    """ALFWorld's pick-two goal: the expert wins by placing two objects of one kind, and the
    walkthrough without its last step (one object placed) does not win."""
    from a2rl_tasks.alfworld.games import Difficulty, make_games
    from a2rl_tasks.alfworld.textworld_env import HouseholdEnv

    metas = make_games(tmp_path, "pt", 2, 5, Difficulty(rooms=(2, 3), objects=(4, 5)),
                       ["pick_two"])
    for meta in metas:
        assert meta["goal_type"] == "pick_two" and meta["goal"].startswith("Put two ")
        game = str(tmp_path / meta["game"])
        won = play([game], HouseholdEnv, ExpertPolicy(0), 20)[0]
        assert won.won and won.n_steps == len(meta["walkthrough"])
        env = HouseholdEnv()
        env.reset(game)
        steps = [env.step(cmd) for cmd in meta["walkthrough"][:-1]]
        env.close()
        assert not any(s.info["won"] for s in steps)
        assert sum(c.startswith(("put ", "insert ")) for c in meta["walkthrough"]) == 2


def test_prepare_writes_sealed_games_and_demonstrations(prepared):
    _, out, facts = prepared
    test_rows = list(iter_jsonl(out.test))
    assert len(test_rows) == 3 and facts["sizes"]["test"] == 3
    for row in test_rows:  # test game files live under sealed/, nowhere in data/
        assert (out.sealed / row["game"]).exists()
        assert not (out.data / row["game"]).exists()
    train_games = sorted((out.data / "games").glob("*.z8"))
    assert len(train_games) == 3
    test_seeds, train_seeds = facts["source"]["test_seeds"], facts["source"]["train_seeds"]
    assert max(train_seeds) < min(test_seeds)
    assert facts["expert_success_train"] == 100.0
    assert 0.0 <= facts["random_baseline"]["score"] <= 100.0
    assert set(facts["random_baseline"]["per_seed"]) <= {0.0, 100 / 3, 200 / 3, 100.0}
    pairs = list(iter_jsonl(out.data / "train.jsonl"))
    # each prompt is the grader's chat for that step: the system turn, then user and
    # assistant turns, ending with the user turn the completion answers
    assert pairs and all([t["role"] for t in p["prompt"]][:2] == ["system", "user"] and
                         p["prompt"][-1]["role"] == "user" for p in pairs)
    # every completion is an admissible action of its prompt's last turn
    for p in pairs:
        now = p["prompt"][-1]["content"]
        assert p["completion"] in now.split("Available actions:\n")[1].splitlines()
    trajectories = list(iter_jsonl(out.data / "trajectories.jsonl"))
    assert {t["kind"] for t in trajectories} == {"expert", "perturbed_expert"}
    for name in ("README.md", "household_env.py", "a2rl_envs.py", "a2rl_episode_cache.py",
                 "train_games.jsonl", "rollouts.json"):
        assert (out.data / name).exists()


def test_games_are_reproducible(tmp_path):
    from a2rl_tasks.alfworld.games import Difficulty, make_games

    a = make_games(tmp_path / "a", "g", 2, 555, Difficulty((1, 2), (3, 5), (1, 2)), ["put_on",
                   "put_in", "fetch", "open_fetch", "drop", "open"])
    b = make_games(tmp_path / "b", "g", 2, 555, Difficulty((1, 2), (3, 5), (1, 2)), ["put_on",
                   "put_in", "fetch", "open_fetch", "drop", "open"])
    assert a == b


def test_prepared_data_does_not_depend_on_where_it_lives(prepared, tmp_path):
    """The same config prepared under another folder gives the same demonstrations and random
    baseline: seeded detours and random actions are keyed by game id, not by absolute path."""
    task, out, facts = prepared
    elsewhere = PreparedTaskPaths(tmp_path / "somewhere" / "else" / "household")
    elsewhere.data.mkdir(parents=True)
    elsewhere.sealed.mkdir(parents=True)
    other = load_task(household(), Path(".")).prepare(elsewhere)
    for name in ("train.jsonl", "trajectories.jsonl"):
        assert (elsewhere.data / name).read_bytes() == (out.data / name).read_bytes(), name
    assert other["random_baseline"] == facts["random_baseline"]
    assert any(t["kind"] == "perturbed_expert" and t["actions"] != t["expert_actions"]
               for t in iter_jsonl(out.data / "trajectories.jsonl")), "no detour was taken"


def test_environment_cleans_text_and_labels_expert(prepared):
    from a2rl_tasks.alfworld.textworld_env import HouseholdEnv

    _, out, _ = prepared
    game = str(min((out.data / "games").glob("*.z8")))
    env = HouseholdEnv()
    first = env.reset(game)
    assert "TextWorld" not in first.goal and "$$$" not in first.text and first.admissible
    assert first.info["expert"] == first.info["walkthrough"][0]
    assert first.info["goal_type"] != "unknown"
    step = env.step("look")
    assert not step.done and "-= " not in step.observation.text.splitlines()[-1][-12:]
    assert step.info["won"] is False
    env.close()
    episodes = play([game], HouseholdEnv, ExpertPolicy(), 8)
    assert episodes[0].won and episodes[0].steps[-1]["reward"] == 1.0


def test_agent_side_rollout_helpers_work_from_data(prepared, tmp_path):
    """The copies in data/ run without the a2rl package's envs module on the path."""
    import subprocess
    import sys

    _, out, _ = prepared
    script = ("import sys; sys.modules['a2rl.task.envs'] = None; sys.path.insert(0, '.')\n"
              "from household_env import HouseholdEnv, load_games, PROMPT\n"
              "from a2rl_envs import play, RandomPolicy, success_rate\n"
              "eps = play(load_games('games'), HouseholdEnv, RandomPolicy(0), 4, PROMPT)\n"
              "print(len(eps), success_rate(eps))\n")
    result = subprocess.run([sys.executable, "-c", script], cwd=out.data, check=False,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[0] == "3"


def test_evaluate_plays_sealed_games_with_a_model(prepared, tiny_model):
    task, out, _ = prepared
    inference = InferenceConfig(backend="hf", batch_size=8, max_new_tokens=4, torch_threads=1)
    result = task.evaluate(tiny_model, out.test, inference)
    assert result.n == 3 and set(result.per_item) <= {0.0, 1.0}
    assert all(f"success_{r['goal_type']}" in result.breakdown for r in result.records)
    assert all(1 <= r["steps"] <= 8 for r in result.records)
    again = task.evaluate(tiny_model, out.test, inference)  # greedy: deterministic
    assert [r["actions"] for r in again.records] == [r["actions"] for r in result.records]
    json.dumps(result.to_dict())


def test_episode_prompts_only_grow_token_for_token(prepared, tiny_model):
    """On real episodes of the sealed games (random and expert play), each step's prompt ids
    are the last step's plus new tokens, and equal the chat template applied to the whole
    chat: the incremental encoding is what a trainer templating the chat would see."""
    task, out, _ = prepared
    rows, games, root = task._games(out.test)
    episodes = [ep for policy in (RandomPolicy(0), ExpertPolicy(0))
                for ep in play(games, task._env_factory(), policy, 8, task.fmt,
                               keep_prompts=True, root=root)]
    for tok in tokenizers(tiny_model):
        assert assert_prompts_only_grow(episodes, tok) >= 10


def _listed(turn: str, heading: str) -> list[str]:
    """The lines under ``heading`` in a user turn (one block, up to the next blank line)."""
    if heading + "\n" not in turn:
        return []
    return turn.split(heading + "\n", 1)[1].split("\n\n", 1)[0].split("\n")


def test_step_turns_can_list_only_the_changed_actions_or_only_the_first(prepared, tiny_model):
    """step_actions=changes: after the first turn a step's turn lists only the actions that
    became admissible and those that no longer are, and from them the admissible list of every
    step is rebuilt exactly (nothing is lost, on real episodes); first: only the first turn lists
    them. Both stay append-only, and each is a grading setting of its own."""
    import dataclasses

    task, out, _ = prepared
    rows, games, root = task._games(out.test)

    def episodes(listed):
        fmt = dataclasses.replace(task.fmt, step_actions=listed)
        return play(games, task._env_factory(), RandomPolicy(0), 8, fmt, keep_prompts=True,
                    root=root)

    full, changes, first = episodes("all"), episodes("changes"), episodes("first")
    rebuilt = 0
    for every, changed in zip(full, changes, strict=True):
        assert [s["action"] for s in every.steps] == [s["action"] for s in changed.steps]
        admissible = None
        for a, b in zip(every.steps, changed.steps, strict=True):
            now, turn = _listed(a["prompt"][-1]["content"], "Available actions:"), \
                b["prompt"][-1]["content"]
            if admissible is None:
                admissible = _listed(turn, "Available actions:")
            else:
                assert "Available actions:" not in turn
                gone = set(_listed(turn, "No longer available:"))
                admissible = [x for x in admissible if x not in gone] + \
                    _listed(turn, "New actions:")
            assert sorted(admissible) == sorted(now) and now
            rebuilt += 1
    assert rebuilt >= 10
    for ep in first:  # the first turn lists them all, no later turn lists any
        user = [t["content"] for t in ep.steps[-1]["prompt"] if t["role"] == "user"]
        assert "Available actions:" in user[0]
        assert not any("actions:" in turn or "available:" in turn for turn in user[1:])
    for tok in tokenizers(tiny_model):
        assert assert_prompts_only_grow(changes + first, tok) >= 10
    assert len({json.dumps(load_task(household(step_actions=v), Path(".")).grading_settings())
                for v in ("all", "changes", "first")}) == 3
    with pytest.raises(ConfigError, match="step_actions"):
        load_task(household(step_actions="some"), Path("."))


class _TextOnly:
    """A generator without per-episode caches: every step's whole chat is encoded again."""

    def __init__(self, generator):
        self.generator, self.tokenizer = generator, generator.tokenizer

    def generate(self, prompts, max_new_tokens=None):
        return self.generator.generate(prompts, max_new_tokens)


class _Watching:
    """A policy that records, before each step, how many episodes it is asked about and how
    many caches the generator holds."""

    def __init__(self, policy):
        self.policy, self.seen = policy, []

    def choose(self, views):
        self.seen.append((len(views), len(self.policy.generator.episodes)))
        return self.policy.choose(views)

    def end_episode(self, episode):
        self.policy.end_episode(episode)


def test_cached_generation_gives_the_actions_of_uncached_and_frees_caches(prepared,
                                                                          tiny_model):
    """Greedy play with each episode's KV cache kept across steps gives the same actions as
    encoding every step's whole prompt, in lockstep and one at a time; each cache is freed when
    its episode ends, and only the new tokens of a step are encoded."""
    from a2rl.task.envs import GeneratorPolicy
    from a2rl.task.inference import load_generator

    task, out, _ = prepared
    rows, games, root = task._games(out.test)
    cfg = InferenceConfig(backend="hf", batch_size=8, max_new_tokens=6, torch_threads=1,
                          prefix_cache=False, pad_budget=1.0)
    generator = load_generator(tiny_model, cfg)
    watched = _Watching(GeneratorPolicy(generator, 6))
    cached = play(games, task._env_factory(), watched, 6, task.fmt, root=root)
    peaks = [generator.episodes.take_peak()]  # the most live caches, per play
    plain = play(games, task._env_factory(), GeneratorPolicy(_TextOnly(generator), 6), 6,
                 task.fmt, root=root)
    one_by_one = play(games, task._env_factory(), GeneratorPolicy(generator, 6), 6, task.fmt,
                      lockstep=False, root=root)
    peaks.append(generator.episodes.take_peak())
    # at most two live at once (inference.live_episodes): later games join mid-way
    bounded = play(games, task._env_factory(), GeneratorPolicy(generator, 6), 6, task.fmt,
                   root=root, live=2)
    peaks.append(generator.episodes.take_peak())
    assert peaks == [len(games), 1, 2]
    actions = [[s["action"] for s in ep.steps] for ep in cached]
    assert actions == [[s["action"] for s in ep.steps] for ep in plain]
    assert actions == [[s["action"] for s in ep.steps] for ep in one_by_one]
    assert actions == [[s["action"] for s in ep.steps] for ep in bounded]
    assert len(generator.episodes) == 0  # every episode's cache freed at its end
    # before each step the generator holds a cache for each live episode after the first step,
    # none for the finished ones
    assert watched.seen[0] == (len(games), 0)
    assert all(live == views for views, live in watched.seen[1:])
    counts = generator.episodes.counts()
    assert counts["reused"] > counts["encoded"] / 2 and counts["rebuilt"] == 0


def test_window_drops_whole_old_steps_deterministically():
    """Past window_chars the oldest (action, observation) pairs after the first turn go, down
    to half the window; the chat then grows append-only again until the next overflow."""
    from a2rl.task.envs import PromptFormat

    fmt = PromptFormat(window_chars=1000)
    turns = [{"role": "user", "content": "Goal: g\n\nstart"}]
    kept, breaks = [], 0
    for i in range(40):
        turns += [{"role": "assistant", "content": f"act {i}"},
                  {"role": "user", "content": f"obs {i} " + "x" * 60}]
        chat = fmt.window(turns)
        assert sum(len(t["content"]) for t in chat) <= 1000
        assert chat[:2] == [{"role": "system", "content": fmt.instructions},
                            turns[0]]  # instructions and task text always kept
        assert chat[-2:] == turns[-2:] and [t["role"] for t in chat[2::2]] == \
            ["assistant"] * ((len(chat) - 2) // 2)
        breaks += kept != chat[:len(kept)]
        kept = chat
        assert fmt.window(list(turns)) == chat  # a function of the turns alone
    assert 2 <= breaks <= 40 // 5  # the prefix breaks once per half window, not every step


def _grpo_module(tmp_path):
    import importlib.util

    from a2rl.agents import grpo
    from a2rl.task import envs

    # the script reads the episode runner the task ships (data/a2rl_envs.py); here: a2rl's own
    sys.modules.setdefault("a2rl_envs", envs)
    path = tmp_path / "grpo_train.py"
    shutil.copy(grpo.GRPO_SCRIPT, path)
    spec = importlib.util.spec_from_file_location("grpo_train", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_grpo_update_raises_the_rewarded_action(tiny_model, tmp_path):
    """A policy-gradient step with a positive advantage makes that action more likely, with a
    negative one less likely (the core of the GRPO loop)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    m = _grpo_module(tmp_path)
    tok = AutoTokenizer.from_pretrained(tiny_model)
    eos = tok.eos_token_id
    prompts, actions = ["Goal: win\n\nAvailable actions:\nopen box\ngo west"] * 2, ["open box",
                                                                                     "go west"]
    for sign in (1.0, -1.0):
        model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        before = m.action_logprobs(model, tok, prompts, actions, eos).detach()
        loss = -(torch.tensor([sign, 0.0]) * m.action_logprobs(model, tok, prompts, actions,
                                                               eos)).sum()
        loss.backward()
        opt.step()
        after = m.action_logprobs(model, tok, prompts, actions, eos).detach()
        assert torch.isfinite(before).all()
        assert (after[0] - before[0]) * sign > 0


def test_grpo_kl_anchor_is_zero_at_the_start_and_pulls_a_moved_policy_back(tiny_model,
                                                                           tmp_path):
    """The KL penalty to the frozen starting model: 0 (and no gradient) before the policy
    moves; once a step has raised an action's log-prob, KL-only updates (zero advantages)
    lower the KL and bring that log-prob back towards the reference's."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    m = _grpo_module(tmp_path)
    tok = AutoTokenizer.from_pretrained(tiny_model)
    eos = tok.eos_token_id
    prompts, actions = ["Goal: win\n\nAvailable actions:\nopen box\ngo west"], ["open box"]
    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    reference = m.frozen_reference(model, bf16=False)
    assert not any(q.requires_grad for q in reference.parameters())

    def kl_now():
        lps = m.token_logprobs(model, tok, prompts, actions, eos)
        with torch.no_grad():
            ref = m.token_logprobs(reference, tok, prompts, actions, eos)
        return m.kl_to_reference(lps, ref).mean(), lps[0].mean().detach(), ref[0].mean()

    start, _, ref_lp = kl_now()
    start.backward()
    assert float(start.detach()) == pytest.approx(0.0, abs=1e-6)
    assert all(q.grad is None or q.grad.abs().max() < 1e-6 for q in model.parameters())
    model.zero_grad()
    (-m.action_logprobs(model, tok, prompts, actions, eos).sum()).backward()  # move the policy
    torch.optim.SGD(model.parameters(), lr=1.0).step()
    moved, moved_lp, _ = kl_now()
    moved = moved.detach()
    assert float(moved) > 1e-3 and float(moved_lp) > float(ref_lp)
    params = [q for q in model.parameters() if q.requires_grad]
    opt = torch.optim.SGD(params, lr=0.5)
    losses, kls = m.update(model, tok, opt, params, [[(prompts[0], actions[0], 0.0)]] * 4, 2,
                           eos, False, reference, 1.0)
    assert len(kls) == 2 and kls[0] == pytest.approx(float(moved), rel=1e-4)
    after, after_lp, _ = kl_now()
    after = after.detach()
    assert float(after) < 0.9 * float(moved)
    assert abs(float(after_lp - ref_lp)) < abs(float(moved_lp - ref_lp))
    _, no_kls = m.update(model, tok, opt, params, [[(prompts[0], actions[0], 0.0)]], 1, eos,
                         False)
    assert no_kls == []  # without a reference: no KL term, nothing logged
    # a token the policy has made rare: its k3 term is capped, and its gradient stays finite
    lp = torch.tensor([-30.0, -1.0], requires_grad=True)
    capped = m.kl_to_reference([lp], [torch.tensor([-1.0, -1.0])])
    capped.sum().backward()
    assert float(capped[0]) == pytest.approx(m.KL_TOKEN_MAX / 2)
    assert torch.isfinite(lp.grad).all()


def test_grpo_groups_give_zero_mean_advantages_and_skip_ties(tmp_path):
    """Group-relative advantages: each group's are zero-mean with unit spread, every step of an
    episode carries its episode's advantage, groups whose returns tie give no samples, and the
    per-game win counts are kept for picking games."""
    from a2rl.task.envs import Episode

    m = _grpo_module(tmp_path)

    def episode(game, tag, won, n):
        return Episode(game=game, won=won, steps=[{"prompt": f"{game}{tag}{i}", "action": "go"}
                                                  for i in range(n)])

    picked = ["a", "b"]
    episodes = [episode("a", "w", True, 2), episode("a", "l", False, 3),   # differ: signal
                episode("b", "x", False, 4), episode("b", "y", False, 4)]  # tie: no signal
    stats = {"a": [1, 2]}
    samples = m.group_samples(picked, episodes, 2, 0.01, stats)
    assert stats == {"a": [2, 4], "b": [0, 2]}
    assert [len(steps) for steps in samples] == [2, 3]  # per episode, its steps in order
    assert all(p.startswith("a") for steps in samples for p, _, _ in steps)
    advantages = {p: adv for steps in samples for p, _, adv in steps}
    assert advantages["aw0"] == advantages["aw1"] == pytest.approx(1.0)
    assert advantages["al0"] == advantages["al2"] == pytest.approx(-1.0)
    # the text trained on is what the policy sampled: a reply mapped onto another action is
    # scored as the reply
    episodes[0].steps[1] |= {"reply": "og", "action": "go"}
    episodes[1].steps[0] |= {"reply": "", "action": "go"}  # the end of turn at once: sampled
    texts = [t for steps in m.group_samples(picked, episodes, 2, 0.01, {}) for _, t, _ in steps]
    assert texts == ["go", "og", "", "go", "go"]


def test_grpo_expert_bonus_ranks_episodes_that_all_lost(tmp_path):
    """With the shaping bonus, a group whose episodes all lost still gives a signal: the episode
    that followed the expert more gets the positive advantage; without it the group is skipped."""
    from a2rl.task.envs import Episode

    m = _grpo_module(tmp_path)

    def episode(tag, actions, experts):
        return Episode(game="g", won=False, steps=[
            {"prompt": f"{tag}{i}", "action": a, "expert": x}
            for i, (a, x) in enumerate(zip(actions, experts))])

    close = episode("c", ["open box", "take key"], ["open box", "take key"])
    astray = episode("a", ["go west", "take key"], ["open box", None])  # unlabelled step
    assert m.expert_agreement(close) == 1.0 and m.expert_agreement(astray) == 0.0
    assert m.expert_agreement(Episode(game="g")) == 0.0
    assert m.episode_return(close, 0.01, 0.5) == pytest.approx(0.5 - 0.02)
    assert m.group_samples(["g"], [close, astray], 2, 0.01, {}) == []
    samples = m.group_samples(["g"], [close, astray], 2, 0.01, {}, expert_bonus=0.5)
    advantages = {p: adv for steps in samples for p, _, adv in steps}
    assert advantages["c0"] == pytest.approx(1.0) and advantages["a1"] == pytest.approx(-1.0)


def test_grpo_picks_distinct_games_favouring_uncertain_ones(tmp_path):
    import random

    m = _grpo_module(tmp_path)
    games = [f"g{i}" for i in range(6)]
    stats = {g: [0, 8] for g in games[:3]}   # always lost: little to learn
    stats.update({g: [4, 8] for g in games[3:]})  # won half the time
    random.seed(0)
    counts = {g: 0 for g in games}
    for _ in range(200):
        picked = m.pick_games(games, stats, 2)
        assert len(set(picked)) == 2
        for g in picked:
            counts[g] += 1
    assert sum(counts[g] for g in games[3:]) > 2 * sum(counts[g] for g in games[:3])


def test_grpo_script_runs_rollouts_and_saves(prepared, tiny_model, tmp_path):
    import subprocess
    import sys

    from a2rl.agents import grpo
    from a2rl.agents.settings import GrpoSettings

    _, out, _ = prepared
    script = tmp_path / "grpo_train.py"
    shutil.copy(grpo.GRPO_SCRIPT, script)
    stats = tmp_path / "stats.json"
    quick = GrpoSettings(iters=1, games=2, group=2, max_steps=3, train_layers=1)

    def grpo_log(data: Path, name: str, *extra: str) -> list[dict]:
        result = subprocess.run(
            [sys.executable, str(script), "--model", str(tiny_model), "--data", str(data),
             "--out", str(tmp_path / name), *grpo.method_args(quick), *extra],
            check=False, capture_output=True, text=True, timeout=600,
            env={**__import__("os").environ, "OMP_NUM_THREADS": "1"})
        assert result.returncode == 0, result.stderr[-2000:]
        return json.loads((tmp_path / name / "grpo_log.json").read_text())

    log = grpo_log(out.data, "grpo", "--stats", str(stats))
    assert log[0]["episodes"] == 4 and 0 <= log[0]["success"] <= 100
    assert log[0]["kl"] >= 0.0  # the agent's default anchors to the starting model
    assert (tmp_path / "grpo" / "config.json").exists()
    assert sum(n for _, n in json.loads(stats.read_text()).values()) == 4
    assert (log[0]["live_bound"], log[0]["peak_live"]) == (0, 4)  # the four episodes at once
    # a task whose grader plays a few episodes at a time declares it, and rollouts follow
    data = tmp_path / "data"
    shutil.copytree(out.data, data)
    declared = json.loads((data / "rollouts.json").read_text())
    (data / "rollouts.json").write_text(json.dumps(declared | {"live": 1}))
    log = grpo_log(data, "grpo-live")
    assert (log[0]["episodes"], log[0]["live_bound"], log[0]["peak_live"]) == (4, 1, 1)


def test_rollouts_declare_the_graders_live_episodes():
    """The environment an interactive task hands to training plays as many episodes at once as
    its grader does (inference.live_episodes; ALFWorld's default bounds them)."""
    from dataclasses import replace

    task = household()
    bounded = replace(task, inference=InferenceConfig(live_episodes=16))
    assert "live" not in load_task(task, Path(".")).rollouts().to_dict()
    assert load_task(bounded, Path(".")).rollouts().to_dict()["live"] == 16


def test_grpo_scores_an_append_style_episode_in_one_pass(prepared, tiny_model, tmp_path):
    """An append-style episode's steps join one sequence (each action a span in it) and their
    log-probs equal scoring every step on its own prompt; rewrite-style steps stay apart."""
    import dataclasses

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    m = _grpo_module(tmp_path)
    task, out, _ = prepared
    rows, games, root = task._games(out.test)
    tok = AutoTokenizer.from_pretrained(tiny_model)
    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    for fmt, sequences in ((task.fmt, 1), (dataclasses.replace(task.fmt, style="rewrite"), None)):
        episode = max(play(games, task._env_factory(), RandomPolicy(0), 5, fmt,
                           keep_prompts=True, root=root), key=lambda e: e.n_steps)
        steps = [(s["prompt"], s["action"], 1.0) for s in episode.steps]
        if sequences:
            appended = list(steps)  # the append-style episode's, for the reply below
        seqs = m.step_sequences(tok, steps, eos)
        assert len(seqs) == (sequences or len(steps)) and len(steps) >= 2
        assert sum(len(spans) for _, spans in seqs) == len(steps)
        with torch.no_grad():
            joined = m.span_logprobs(model, seqs, tok.pad_token_id)
            alone = m.token_logprobs(model, tok, [p for p, _, _ in steps],
                                     [a for _, a, _ in steps], eos)
        for x, y in zip(joined, alone, strict=True):
            assert torch.allclose(x, y, atol=1e-4)
    # a reply the chat recorded as another action is scored as sampled: the episode's sequence
    # ends with it, and the next step starts one of its own
    appended[1] = (appended[1][0], "open the fridge please", 1.0)
    seqs = m.step_sequences(tok, appended, eos)
    assert [len(spans) for _, spans in seqs] == [2, len(appended) - 2]
    ids, spans = seqs[0]
    start, end, _ = spans[1]
    assert tok.decode(ids[start:end]) == "open the fridge please<|im_end|>"


def test_grpo_update_parts_stay_within_their_token_budget(tmp_path):
    """The update's forward passes: padded size (sequences x the longest) within the budget,
    order kept, a sequence longer than the budget alone (a real ALFWorld episode's chat, about
    3,500 tokens, is never padded together with another)."""
    m = _grpo_module(tmp_path)
    seqs = [([0] * n, []) for n in (3000, 3000, 500, 500, 500, 5000, 100)]
    groups = m.micro_batches(seqs, max_tokens=4096)
    assert [[len(ids) for ids, _ in g] for g in groups] == [[3000], [3000], [500] * 3, [5000],
                                                           [100]]
    assert all(len(g) == 1 or len(g) * max(len(i) for i, _ in g) <= 4096 for g in groups)
    assert [len(ids) for g in m.micro_batches(seqs, 10**6) for ids, _ in g] == \
        [len(ids) for ids, _ in seqs]


def test_grpo_update_in_parts_has_the_gradient_of_one_pass(tiny_model, tmp_path):
    """Gradient accumulation over the parts gives the minibatch's gradient: the same as one
    padded pass over all its sequences (policy-gradient term and KL term)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    m = _grpo_module(tmp_path)
    tok = AutoTokenizer.from_pretrained(tiny_model)
    eos = tok.eos_token_id
    steps = [(f"Goal: win\n\n{'look around ' * k}\n\nAvailable actions:\nopen box\ngo west",
              action, adv) for k, action, adv in ((1, "open box", 1.5), (9, "go west", -0.5),
                                                  (4, "open box", -1.0))]
    seqs = m.step_sequences(tok, steps, eos)
    assert len({len(ids) for ids, _ in seqs}) == 3  # padded together in one pass
    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    reference = m.frozen_reference(model, bf16=False)
    with torch.no_grad():  # the policy moved away from its anchor: a KL with a gradient
        for param in model.parameters():
            param.add_(0.01 * torch.randn_like(param))

    def gradient(parts):
        model.zero_grad()
        for part in parts:
            loss, kl_part = m.part_loss(model, tok, part, False, reference, len(steps))
            (loss + 0.05 * kl_part).backward()
        return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])

    whole, alone = gradient([seqs]), gradient([[seq] for seq in seqs])
    assert whole.abs().max() > 0
    assert torch.allclose(whole, alone, atol=1e-5, rtol=1e-4)


def test_prompt_format_is_checked_and_keys_cached_baselines():
    """prompt_format and actions are task params (a bad value names itself), and they are part
    of the grading settings a cached baseline score is keyed by (stages._cached_score), so a
    score measured under one prompt is never reused under another."""
    append = load_task(household(), Path("."))
    rewrite = load_task(household(prompt_format="rewrite"), Path("."))
    react = load_task(household(actions="own"), Path("."))
    assert append.grading_settings()["prompt"]["style"] == "append"
    assert len({json.dumps(t.grading_settings(), sort_keys=True)
                for t in (append, rewrite, react)}) == 3
    with pytest.raises(ConfigError, match="prompt_format"):
        load_task(household(prompt_format="grow"), Path("."))
    with pytest.raises(ConfigError, match="actions"):
        load_task(household(actions="guess"), Path("."))
    with pytest.raises(ConfigError, match="window_chars"):
        load_task(household(window_chars=10), Path("."))


def test_games_drawn_to_a_goal_type_mix_have_that_mix(tmp_path):
    """A twin split is drawn with its test split's goal types (they differ in difficulty): the
    games keep exactly the asked mix, in the generator's order of seeds."""
    from a2rl_tasks.alfworld.games import Difficulty, make_games

    types = ["put_on", "put_in", "fetch", "open_fetch", "drop", "open"]
    small = Difficulty((1, 2), (3, 5), (1, 2))
    free = make_games(tmp_path / "free", "g", 4, 555, small, types)
    mix = {"open": 2, "put_on": 1, "fetch": 1}
    mixed = make_games(tmp_path / "mix", "g", 4, 555, small, types, mix=mix)
    assert Counter(m["goal_type"] for m in mixed) == mix
    assert Counter(m["goal_type"] for m in free) != mix  # the draw alone gives another mix
    assert [m["seed"] for m in mixed] == sorted(m["seed"] for m in mixed)
    with pytest.raises(ValueError, match="not 3"):
        make_games(tmp_path / "bad", "g", 3, 555, small, types, mix=mix)
