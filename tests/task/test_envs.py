"""The text-environment interface, action parsing, and the lockstep policy runner (on a fake
environment, so these run in milliseconds)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from a2rl.task.envs import (
    Choice,
    ExpertPolicy,
    Observation,
    PromptFormat,
    RandomPolicy,
    Step,
    TextEnv,
    clean_reply,
    is_template,
    parse_action,
    play,
    success_rate,
)


class CorridorEnv(TextEnv):
    """Walk east ``length`` times to win; every other action wastes a step."""

    def __init__(self):
        self.pos, self.length = 0, 0

    def reset(self, game: str) -> Observation:
        self.pos, self.length = 0, int(game.split("-")[1])
        return self._obs("You are at the start.")

    def _obs(self, text: str) -> Observation:
        return Observation(text, f"reach room {self.length}", ["go east", "go west", "look"],
                           {"expert": "go east"})

    def step(self, action: str) -> Step:
        if action == "go east":
            self.pos += 1
        won = self.pos >= self.length
        return Step(self._obs(f"You are in room {self.pos}."), float(won), won,
                    {"won": won, "score": float(won)})


class RecordingPolicy:
    """Deterministic: east on even steps for even games, else by the prompt's length; records
    the size of every batch it is asked for."""

    def __init__(self):
        self.batches = []

    def choose(self, views):
        self.batches.append(len(views))
        return [Choice("go east" if (len(v.prompt) + v.step) % 3 else "look", "", "test")
                for v in views]


GAMES = [f"corridor-{n}" for n in (1, 2, 3, 5, 8, 2)]


@pytest.mark.parametrize("reply,expected,method", [
    ("go east", "go east", "exact"),
    ("Action: Go East.", "go east", "exact"),
    ("> `go east`\nbecause the goal is there", "go east", "exact"),
    ("go east, then look around", "go east", "prefix"),
    ("I think I should go west now.", "go west", "contains"),
    ("goo eest", "go east", "closest"),
    ("", "look", "closest"),
])
def test_parse_action(reply, expected, method):
    assert parse_action(reply, ["go east", "go west", "look"]) == (expected, method)


def test_parse_action_prefers_longest_and_keeps_free_text():
    acts = ["take key", "take key from box"]
    assert parse_action("take key from box", acts)[0] == "take key from box"
    assert parse_action("I will take key from box now", acts) == ("take key from box",
                                                                    "contains")
    assert parse_action("Open The Door", []) == ("Open The Door", "free")
    assert parse_action("Action: search[Tarsk City]\nbecause", []) == ("search[Tarsk City]",
                                                                      "free")
    assert clean_reply("\n\n  1. **open box**.") == "open box"


def test_template_actions_take_free_text():
    """``search[<query>]`` admits any ``search[...]`` reply as written (WebShop's search)."""
    acts = ["search[<query>]"]
    assert is_template("search[<query>]") and not is_template("click[buy now]")
    assert parse_action("search[Red Running Shoes]", acts) == ("search[red running shoes]",
                                                               "template")
    assert parse_action("Action: search[ tea tree shampoo ]\nthen buy", acts) == (
        "search[tea tree shampoo]", "template")
    assert parse_action("search[cut short", acts) == ("search[cut short]", "template")
    # no query, the placeholder itself, or another verb: matched like any other action
    for reply in ("search[]", "search[<query>]", "click[red shoes]", "hello"):
        assert parse_action(reply, acts)[0] == "search[<query>]"
        assert parse_action(reply, acts)[1] != "template"
    clicks = ["click[buy now]", "click[< prev]"]
    assert parse_action("search[shoes]", clicks)[1] != "template"  # no template offered


def test_prompt_clips_earlier_observations_to_their_own_limit():
    fmt = PromptFormat(history=3, max_observation_chars=50, max_history_chars=10)
    prompt = fmt.user_prompt("g", [("a1", "x" * 40), ("a2", "y" * 40)], "z" * 40, ["q"])
    assert "> a1\n" + "x" * 7 + "..." in prompt and "z" * 40 in prompt
    with pytest.raises(ValueError, match="max_history_chars"):
        PromptFormat(max_history_chars=2)


def test_prompt_holds_goal_history_and_actions():
    fmt = PromptFormat(history=2, max_observation_chars=20)
    prompt = fmt.user_prompt("win", [("a1", "o1"), ("a2", "o2"), ("a3", "o3")],
                             "now " * 20, ["x", "y"])
    assert "Goal: win" in prompt and "> a1" not in prompt and "> a2\no2" in prompt
    assert "> a3" in prompt and "o3" not in prompt  # the last observation is "Now"
    assert "Now: " + ("now " * 5)[:17] in prompt and prompt.endswith("Your action:")
    assert "Available actions:\nx\ny" in prompt
    with pytest.raises(ValueError, match="history"):
        PromptFormat(history=-1)


class EchoEnv(TextEnv):
    """Free-text actions: no admissible list; won when the action repeats the goal word."""

    def reset(self, game: str) -> Observation:
        self.word = game
        return Observation("Say the word.", game, [], {})

    def step(self, action: str) -> Step:
        won = action == f"say[{self.word}]"
        return Step(Observation(f"You said {action}", self.word, [], {}), float(won), won,
                    {"won": won})


class TableGenerator:
    """The generator interface of a2rl.task.inference, replying by a function of the prompt."""

    class Tok:
        chat_template = None

    tokenizer = Tok()

    def __init__(self, replies):
        self.replies, self.prompts = replies, []

    def generate(self, prompts, max_new_tokens):
        self.prompts += prompts
        return [self.replies(p) for p in prompts]


def test_free_text_actions_reach_the_environment_as_written():
    """With no admissible list the prompt shows none, and a model's first line goes to the
    environment with its case (names and queries are case-sensitive text)."""
    from a2rl.task.envs import GeneratorPolicy

    generator = TableGenerator(lambda p: "Action: say[Tarsk]\nbecause" if "Tarsk" in p
                              else "say[nothing]")
    episodes = play(["Tarsk", "Velmora"], EchoEnv, GeneratorPolicy(generator), max_steps=2)
    assert [e.won for e in episodes] == [True, False]
    assert episodes[0].steps[0]["action"] == "say[Tarsk]"
    assert episodes[0].steps[0]["method"] == "free"
    assert all("Available actions" not in p and "You said" in p
               for p in generator.prompts[2:])


def test_expert_wins_and_step_limit_holds():
    episodes = play(GAMES, CorridorEnv, ExpertPolicy(), max_steps=5)
    assert [e.won for e in episodes] == [True, True, True, True, False, True]
    assert [e.n_steps for e in episodes] == [1, 2, 3, 5, 5, 2]
    assert success_rate(episodes) == pytest.approx(500 / 6)
    assert episodes[0].goal == "reach room 1" and episodes[0].steps[0]["reward"] == 1.0


def test_lockstep_equals_sequential_with_one_call_per_step():
    lock, seq = RecordingPolicy(), RecordingPolicy()
    a = play(GAMES, CorridorEnv, lock, max_steps=6, keep_prompts=True)
    b = play(GAMES, CorridorEnv, seq, max_steps=6, lockstep=False, keep_prompts=True)
    assert [e.to_dict() for e in a] == [e.to_dict() for e in b]
    assert len(lock.batches) == max(e.n_steps for e in a)  # one call per step
    assert lock.batches[0] == len(GAMES) and lock.batches == sorted(lock.batches, reverse=True)
    assert set(seq.batches) == {1} and len(seq.batches) == sum(e.n_steps for e in b)


class OpenCorridor(CorridorEnv):
    """The corridor, counting how many of its environments are open at once."""

    open = peak = 0

    def reset(self, game: str) -> Observation:
        OpenCorridor.open += 1
        OpenCorridor.peak = max(OpenCorridor.peak, OpenCorridor.open)
        return super().reset(game)

    def close(self) -> None:
        OpenCorridor.open -= 1


def test_a_bound_on_live_episodes_keeps_the_episodes_and_frees_each_as_it_ends():
    """live=2: the same episodes as all at once, never more than two open environments or two
    views in a call, each environment closed and the policy told as its episode ends."""
    policy, ended = RecordingPolicy(), []
    policy.end_episode = ended.append
    bounded = play(GAMES, OpenCorridor, policy, max_steps=6, keep_prompts=True, live=2)
    assert max(policy.batches) == 2 and OpenCorridor.peak == 2 and OpenCorridor.open == 0
    assert sorted(ended) == list(range(len(GAMES)))
    at_once = play(GAMES, CorridorEnv, RecordingPolicy(), max_steps=6, keep_prompts=True)
    assert [e.to_dict() for e in bounded] == [e.to_dict() for e in at_once]
    with pytest.raises(ValueError, match="live=-1"):
        play(GAMES, CorridorEnv, RecordingPolicy(), max_steps=6, live=-1)


def test_random_policy_is_reproducible_and_order_free():
    a = play(GAMES, CorridorEnv, RandomPolicy(3), max_steps=6)
    b = play(list(reversed(GAMES)), CorridorEnv, RandomPolicy(3), max_steps=6, lockstep=False)
    assert [e.to_dict() for e in a] == [e.to_dict() for e in reversed(b)]


def test_bad_policy_and_limits_fail_clearly():
    class Short:
        def choose(self, views):
            return []

    with pytest.raises(RuntimeError, match="0 actions for 6"):
        play(GAMES, CorridorEnv, Short(), max_steps=3)
    with pytest.raises(ValueError, match="max_steps=0"):
        play(GAMES, CorridorEnv, RandomPolicy(), max_steps=0)


class FakeGenerator:
    """Answers with prose around the right action for even prompts."""

    class Tok:
        chat_template = None

    tokenizer = Tok()

    def __init__(self):
        self.calls = []

    def generate(self, prompts, max_new_tokens=None):
        self.calls.append(len(prompts))
        return ["Action: go east. It leads on." for _ in prompts]


def test_generator_policy_batches_and_parses():
    from a2rl.task.envs import GeneratorPolicy

    gen = FakeGenerator()
    episodes = play(GAMES, CorridorEnv, GeneratorPolicy(gen, 8), max_steps=8)
    assert all(e.won for e in episodes)
    assert gen.calls == [6, 5, 3, 2, 2, 1, 1, 1]
    assert {s["method"] for e in episodes for s in e.steps} == {"contains"}


class StrictCorridor(CorridorEnv):
    """The corridor, refusing any command it did not list (as a game engine would)."""

    def step(self, action: str) -> Step:
        assert action in self._obs("").admissible, f"the environment was sent {action!r}"
        return super().step(action)


def test_own_actions_protocol_counts_invalid_actions_without_sending_them():
    """ReAct-style (actions="own"): a reply that is not an admissible action is not mapped onto
    the list: it is an invalid step ("Nothing happens."), the environment never sees it, and
    the chat shows the model's own action; the closest-action protocol maps the same reply."""
    from a2rl.task.envs import NOTHING_HAPPENS, GeneratorPolicy

    replies = iter(["walk eastwards", "go east", "Go East.", "go east"])
    generator = TableGenerator(lambda p: next(replies))
    episodes = play(["corridor-2"], StrictCorridor, GeneratorPolicy(generator, actions="own"),
                    max_steps=4)
    steps = episodes[0].steps
    assert [s["method"] for s in steps] == ["invalid", "exact", "exact"]
    assert steps[0]["action"] == "walk eastwards" and steps[0]["observation"] == NOTHING_HAPPENS
    assert episodes[0].won and episodes[0].n_steps == 3  # the invalid step was spent
    assert "walk eastwards" in generator.prompts[1]
    assert parse_action("walk eastwards", ["go east", "go west"]) == ("go east", "closest")
    with pytest.raises(ValueError, match="actions="):
        parse_action("go east", ["go east"], actions="guess")


def test_append_prompt_grows_and_rewrite_keeps_the_old_user_turn():
    """The append style's chat after two steps is the first step's plus (action, observation)
    turns, with each step's admissible actions in its own turn; the rewrite style is the
    single user turn the earlier baselines were measured with."""
    views = []

    class Keep(RecordingPolicy):
        def choose(self, vs):
            views.extend(vs)
            return [Choice("go east") for _ in vs]

    play(["corridor-3"], CorridorEnv, Keep(), max_steps=3)
    first, second = views[0].prompt, views[1].prompt
    assert second[:len(first)] == first and len(second) == len(first) + 2
    assert second[-2] == {"role": "assistant", "content": "go east"}
    assert second[-1]["content"] == \
        "You are in room 1.\n\nAvailable actions:\ngo east\ngo west\nlook"
    assert first[1]["content"].startswith("Goal: reach room 3\n\nYou are at the start.")
    rewrite = PromptFormat(style="rewrite")
    views.clear()
    play(["corridor-3"], CorridorEnv, Keep(), max_steps=2, fmt=rewrite)
    assert isinstance(views[1].prompt, str) and views[1].prompt.endswith("Your action:")
    with pytest.raises(ValueError, match="style"):
        PromptFormat(style="grow")


def test_shipped_copies_play_where_there_is_no_a2rl(tmp_path):
    """What ship_envs copies into data/ works without the a2rl package (blocked here, as the
    sandbox lacks it): the runner imports its prompts by their shipped name and re-exports
    them, so an agent's code still imports everything from a2rl_envs."""
    from a2rl.task import ship_envs

    ship_envs(tmp_path)
    script = ("import sys; sys.modules['a2rl'] = None; sys.path.insert(0, '.')\n"
              "import a2rl_envs, a2rl_prompts\n"
              "from a2rl_envs import Observation, PromptFormat, RandomPolicy, Step, TextEnv, play\n"
              "assert PromptFormat is a2rl_prompts.PromptFormat\n"
              "class Door(TextEnv):\n"
              "    def reset(self, game):\n"
              "        return Observation('a door', 'open it', ['open door', 'wait'])\n"
              "    def step(self, action):\n"
              "        won = action == 'open door'\n"
              "        return Step(Observation('done', 'open it', []), float(won), True,\n"
              "                    {'won': won, 'score': float(won)})\n"
              "eps = play([f'g{i}' for i in range(8)], Door, RandomPolicy(0), 3, PromptFormat())\n"
              "print(len(eps), sum(e.won for e in eps), 'a2rl.task' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    played, won, host = done.stdout.split()
    assert played == "8" and 0 < int(won) < 8 and host == "False"
