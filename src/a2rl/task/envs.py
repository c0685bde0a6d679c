"""Text environments and the policy runner that plays them with a model.

One interface for every interactive task (household / ALFWorld games, DeepSearchQA; WebShop
later): ``TextEnv.reset(game)`` gives the first ``Observation`` (text, goal, admissible
actions), ``TextEnv.step(action)`` gives a ``Step`` (observation, reward, done, info with ``won``
and ``score``). An environment whose actions are free text (``search[query]``,
``answer[...]``) gives an empty admissible list: its prompt then shows no action list (the
instructions state the syntax), and a reply's first line is the action, case kept.

``play(games, make_env, policy, ...)`` plays one episode per game. In **lockstep** (the default)
all unfinished episodes advance together: one batched ``Policy.choose`` call per step, so a
model sees one batch of prompts per step instead of one prompt per episode per step. Sequential
play (``lockstep=False``) calls the policy with one episode at a time; under greedy decoding both
give the same episodes (``benchmarks/lockstep.py`` measures the speed-up).

What a model sees each step (``PromptFormat``: an append-only chat or one rewritten user turn)
and how its reply becomes an action (``parse_action``) live in ``a2rl.task.prompts``; this
module re-exports them, so ``a2rl_envs`` stays the one name an agent's code imports. With
``actions="own"`` (ALFWorld's ReAct-style protocol) a reply that is not an admissible action is
an invalid action, which the runner does not send to the environment and answers with "Nothing
happens." (ALFWorld's reply), counted in the episode's step record.

This module depends on the standard library only (torch is imported lazily by the model
policies), so a task can copy it, with ``prompts`` beside it as ``a2rl_prompts.py``, next to
its environment into an agent's data folder (``a2rl.task.base.ship_envs``).
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

# (wrapped as a grid, as in a face: one name a line would repeat the list line for line)
try:
    from a2rl.task.prompts import (  # noqa: I001
        ACTION_PROTOCOLS, DEFAULT_INSTRUCTIONS, PROMPT_STYLES, ChatTokens, PromptFormat,
        clean_reply, encode_prompt, is_template, parse_action, render_chat,
    )
except ImportError:  # inside an agent's sandbox: the copy next to this file
    from a2rl_prompts import (  # noqa: I001
        ACTION_PROTOCOLS, DEFAULT_INSTRUCTIONS, PROMPT_STYLES, ChatTokens, PromptFormat,
        clean_reply, encode_prompt, is_template, parse_action, render_chat,
    )

__all__ = [
    # the environment interface and the runner
    "NOTHING_HAPPENS", "Choice", "Episode", "EpisodeView", "ExpertPolicy", "GeneratorPolicy",
    "Observation", "Policy", "RandomPolicy", "Step", "TextEnv", "play", "success_rate",
    # re-exported from prompts: what the runner's users import by this module's name
    "ACTION_PROTOCOLS", "DEFAULT_INSTRUCTIONS", "PROMPT_STYLES", "ChatTokens", "PromptFormat",
    "clean_reply", "encode_prompt", "is_template", "parse_action", "render_chat",
]

# what the runner answers to an invalid action under actions="own" (ALFWorld's text for a
# command its engine does not take)
NOTHING_HAPPENS = "Nothing happens."


@dataclass
class Observation:
    """What the player sees: the text, the episode's goal and the actions allowed now."""

    text: str
    goal: str
    admissible: list[str]
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class Step:
    """The outcome of one action; ``info`` has at least ``won`` (bool) and ``score``."""

    observation: Observation
    reward: float
    done: bool
    info: dict[str, Any] = field(default_factory=dict)


class TextEnv(ABC):
    """A text environment. ``reset(game)`` starts the named game (a game file or an id the
    environment understands) and may be called again for another game."""

    @abstractmethod
    def reset(self, game: str) -> Observation: ...

    @abstractmethod
    def step(self, action: str) -> Step: ...

    def close(self) -> None:
        """Release the game engine."""


# ---- policies -----------------------------------------------------------------------------

@dataclass
class EpisodeView:
    """What a policy sees of one unfinished episode at one step."""

    game: str
    step: int
    # rewrite style: the user turn; append style: the chat so far (system turn first), the
    # model's reply comes after it
    prompt: str | list[dict[str, str]]
    admissible: list[str]
    info: dict[str, Any]
    episode: int = 0  # the episode's index in its play() call: a policy's key for its state
    observation: str = ""  # what the player sees now, unclipped


@dataclass
class Choice:
    action: str
    reply: str = ""
    method: str = ""


class Policy(Protocol):
    def choose(self, views: list[EpisodeView]) -> list[Choice]:
        """One action per view, in order (one batched model call for all of them)."""


class RandomPolicy:
    """A uniformly random admissible action; reproducible per (seed, game, step), so lockstep
    and sequential play agree."""

    def __init__(self, seed: int = 0):
        self.seed = seed

    def choose(self, views: list[EpisodeView]) -> list[Choice]:
        out = []
        for v in views:
            rng = random.Random(f"{self.seed}|{v.game}|{v.step}")
            out.append(Choice(rng.choice(v.admissible) if v.admissible else "look", "", "random"))
        return out


class ExpertPolicy:
    """The environment's own expert: ``info["expert"]`` (the first action of a winning plan
    from the current state), else a random admissible action."""

    def __init__(self, seed: int = 0):
        self.fallback = RandomPolicy(seed)

    def choose(self, views: list[EpisodeView]) -> list[Choice]:
        out = []
        for v in views:
            expert = v.info.get("expert")
            out.append(Choice(expert, "", "expert") if expert else self.fallback.choose([v])[0])
        return out


class GeneratorPolicy:
    """A model through the inference interface (``a2rl.task.inference``, or
    ``a2rl_episode_cache.ModelGenerator`` in an agent's sandbox), one batched call per step for
    all views. Append-style chats go in as token ids per episode (``ChatTokens``) to
    ``generator.generate_episodes``, which keeps each episode's KV cache across its steps
    (``end_episode`` frees it); a generator without that method gets the chat's text.
    Rewrite-style prompts go through the chat template as one user turn. Each reply is parsed
    into an action (``parse_action``, with the ``actions`` protocol)."""

    def __init__(self, generator, max_new_tokens: int = 24, system: str | None = None,
                 actions: str = "closest"):
        if actions not in ACTION_PROTOCOLS:
            raise ValueError(f"actions={actions!r}; expected one of {ACTION_PROTOCOLS}")
        self.generator = generator
        self.max_new_tokens = max_new_tokens
        self.system = system
        self.actions = actions
        self.chats: dict[int, ChatTokens] = {}

    def choose(self, views: list[EpisodeView]) -> list[Choice]:
        replies = self._replies(views)
        out = []
        for v, reply in zip(views, replies, strict=True):
            action, method = parse_action(reply, v.admissible, self.actions)
            out.append(Choice(action, reply, method))
        return out

    def _replies(self, views: list[EpisodeView]) -> list[str]:
        tokenizer = self.generator.tokenizer
        if not all(isinstance(v.prompt, list) for v in views):
            prompts = [render_chat(tokenizer, ([{"role": "system", "content": self.system}]
                                               if self.system else [])
                                   + [{"role": "user", "content": v.prompt}], True)
                       for v in views]
            return self.generator.generate(prompts, max_new_tokens=self.max_new_tokens)
        if not hasattr(self.generator, "generate_episodes"):
            return self.generator.generate([render_chat(tokenizer, v.prompt, True)
                                            for v in views], max_new_tokens=self.max_new_tokens)
        requests = []
        for v in views:
            chat = self.chats.setdefault(v.episode, ChatTokens(tokenizer))
            requests.append((v.episode, chat.ids(v.prompt)))
        return self.generator.generate_episodes(requests, max_new_tokens=self.max_new_tokens)

    def end_episode(self, episode: int) -> None:
        """Forget a finished episode's tokens and free its cache in the generator."""
        self.chats.pop(episode, None)
        release = getattr(self.generator, "release", None)
        if release:
            release(episode)


# ---- the runner ---------------------------------------------------------------------------

@dataclass
class Episode:
    """One played game: its steps (prompt, action, reply, observation, reward) and outcome."""

    game: str
    goal: str = ""
    steps: list[dict[str, Any]] = field(default_factory=list)
    won: bool = False
    score: float = 0.0
    done: bool = False
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def n_steps(self) -> int:
        return len(self.steps)

    def to_dict(self) -> dict[str, Any]:
        return {"game": self.game, "goal": self.goal, "won": self.won, "score": self.score,
                "n_steps": self.n_steps, "info": self.info, "steps": self.steps}


class _Running:
    def __init__(self, index: int, game: str, env: TextEnv, fmt: PromptFormat, path: str):
        self.index, self.env, self.fmt = index, env, fmt
        self.closed = False  # its environment closed and the policy told (play's finish)
        first = env.reset(path)
        self.episode = Episode(game=game, goal=first.goal,
                               info={k: v for k, v in first.info.items() if k != "expert"})
        self.obs = first
        self.history: list[tuple[str, str]] = []
        # append style: the chat's turns after the system turn, only ever extended
        self.turns = [{"role": "user", "content": fmt.observation_turn(
            first.text, first.admissible, goal=first.goal)}]

    def view(self) -> EpisodeView:
        o = self.obs
        prompt = (self.fmt.window(self.turns) if self.fmt.style == "append" else
                  self.fmt.user_prompt(o.goal, self.history, o.text, o.admissible))
        return EpisodeView(self.episode.game, self.episode.n_steps, prompt,
                           list(o.admissible), o.info, self.index, o.text)

    def advance(self, view: EpisodeView, choice: Choice, max_steps: int,
                keep_prompts: bool) -> None:
        ep = self.episode
        if choice.method == "invalid":  # ReAct-style: the environment never sees it
            step = Step(Observation(NOTHING_HAPPENS, self.obs.goal, self.obs.admissible,
                                    self.obs.info), 0.0, False,
                        {"won": False, "score": ep.score})
        else:
            step = self.env.step(choice.action)
        record = {"action": choice.action, "reply": choice.reply, "method": choice.method,
                  "observation": step.observation.text, "reward": step.reward,
                  "expert": view.info.get("expert")}
        if keep_prompts:
            record["prompt"] = view.prompt
        ep.steps.append(record)
        self.history.append((choice.action, step.observation.text))
        self.turns += [{"role": "assistant", "content": choice.action},
                       {"role": "user", "content": self.fmt.observation_turn(
                           step.observation.text, step.observation.admissible,
                           before=self.obs.admissible)}]
        self.obs = step.observation
        ep.won = bool(step.info.get("won", False))
        ep.score = float(step.info.get("score", ep.score))
        ep.done = step.done or ep.won or ep.n_steps >= max_steps


def play(games: Iterable[str], make_env: Callable[[], TextEnv], policy: Policy, max_steps: int,
         fmt: PromptFormat | None = None, lockstep: bool = True,
         keep_prompts: bool = False, root: str | Path | None = None,
         live: int = 0) -> list[Episode]:
    """Play one episode per game with ``policy`` for at most ``max_steps`` actions each; returns
    the episodes in game order. Lockstep: one ``policy.choose`` call per step for all unfinished
    episodes (each with its own environment); sequential: one episode after another.
    ``live``: in lockstep, at most this many episodes at once, the next game starting (in
    order) as one ends; 0: all at once. What an episode holds while it runs (its environment,
    a model policy's KV cache) is freed when it ends, so ``live`` bounds the memory.
    With ``root``, games are ids relative to it: episodes and policies see the ids, so seeded
    choices (random and perturbed policies) do not depend on where the data lives. A policy
    with ``end_episode(index)`` is told when each episode ends (it frees what it kept)."""
    fmt = fmt or PromptFormat()
    games = list(games)
    if max_steps < 1:
        raise ValueError(f"max_steps={max_steps}; expected >= 1")
    if live < 0:
        raise ValueError(f"live={live}; expected >= 0 (0: every episode at once)")
    if not lockstep:
        return [ep for g in games
                for ep in play([g], make_env, policy, max_steps, fmt, True, keep_prompts, root)]
    end = getattr(policy, "end_episode", None)
    episodes: list[Episode] = []
    active: list[_Running] = []
    done = _episodes_done(len(games))

    def finish(r: _Running) -> None:
        if r.closed:
            return
        r.closed = True
        if end:
            end(r.index)
        r.env.close()

    try:
        while True:
            while len(episodes) < len(games) and (not live or len(active) < live):
                i = len(episodes)
                path = str(Path(root) / games[i]) if root else games[i]
                active.append(_Running(i, games[i], make_env(), fmt, path))
                episodes.append(active[-1].episode)
            if not active:
                break
            views = [r.view() for r in active]
            choices = policy.choose(views)
            if len(choices) != len(views):
                raise RuntimeError(f"policy returned {len(choices)} actions for {len(views)} "
                                   "episodes")
            for r, v, c in zip(active, views, choices):
                r.advance(v, c, max_steps, keep_prompts)
                if r.episode.done:
                    finish(r)
            active = [r for r in active if not r.episode.done]
            done(len(episodes) - len(active))
    finally:
        done(None)
        for r in active:
            finish(r)
    return episodes


def _episodes_done(total: int) -> Callable[[int | None], None]:
    """A callback taking the episodes finished so far (None: the end) for the harness's
    progress bar (a2rl.common.progress); a no-op in a copy of this module outside the harness
    (an agent's data folder has no a2rl to import)."""
    try:
        from a2rl.common.progress import progress
    except ImportError:
        return lambda finished: None
    bar = progress(total=total, desc="episodes", unit="episode")

    def done(finished: int | None) -> None:
        if finished is None:
            bar.close()
        else:
            bar.update(finished - bar.n)
    return done


def success_rate(episodes: list[Episode]) -> float:
    """Share of won episodes on the 0-100 scale."""
    return 100.0 * sum(e.won for e in episodes) / len(episodes) if episodes else 0.0
