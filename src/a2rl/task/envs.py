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
give the same episodes (``scripts/bench_lockstep.py`` measures the speed-up).

The prompt a model sees (``PromptFormat.user_prompt``) holds the task instructions, the goal,
the last ``history`` steps, the current observation and the admissible actions (if any); its
reply is parsed into one action by ``parse_action`` (first line, prose and quotes stripped, then
the closest admissible action, or the line itself for free-text actions).

This module depends on the standard library only (torch is imported lazily by the model
policies), so a task can copy it next to its environment into an agent's data folder.
"""

from __future__ import annotations

import difflib
import random
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

DEFAULT_INSTRUCTIONS = ("Text game: reach the goal. Reply with one action from the list of "
                        "available actions, nothing else.")


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


# ---- prompts and parsing ------------------------------------------------------------------

@dataclass
class PromptFormat:
    """How an episode's state becomes the user turn of a chat prompt."""

    instructions: str = DEFAULT_INSTRUCTIONS
    history: int = 2  # previous steps shown (action + observation)
    max_observation_chars: int = 300
    # earlier steps' observations are clipped to this (None: as the current one); a task with
    # long pages (WebShop's results) keeps the prompt short this way
    max_history_chars: int | None = None

    def __post_init__(self) -> None:
        if self.history < 0:
            raise ValueError(f"PromptFormat.history={self.history}; expected >= 0")
        for name in ("max_observation_chars", "max_history_chars"):
            value = getattr(self, name)
            if value is not None and value < 4:
                raise ValueError(f"PromptFormat.{name}={value}; expected >= 4")

    def _clip(self, text: str, limit: int | None = None) -> str:
        text = " ".join(text.split())
        limit = limit or self.max_observation_chars
        return text if len(text) <= limit else text[:limit - 3] + "..."

    def user_prompt(self, goal: str, history: list[tuple[str, str]], observation: str,
                    admissible: list[str]) -> str:
        parts = [self.instructions.strip(), f"Goal: {goal.strip()}"]
        recent = history[-self.history:] if self.history else []
        if recent:  # the last step's observation is the current one, shown once under "Now"
            lines = [f"> {action}\n{self._clip(obs, self.max_history_chars)}"
                     for action, obs in recent[:-1]]
            parts.append("Recent steps:\n" + "\n".join(lines + [f"> {recent[-1][0]}"]))
        parts.append(f"Now: {self._clip(observation)}")
        if admissible:  # free-text environments state their syntax in the instructions
            parts.append("Available actions:\n" + "\n".join(admissible))
        parts.append("Your action:")
        return "\n\n".join(parts)


_PREFIX = re.compile(r"^\s*(?:>|action\s*:|my action\s*:|next action\s*:|answer\s*:|\d+[.)])\s*",
                     re.IGNORECASE)


def clean_reply(text: str, lower: bool = True) -> str:
    """The first non-empty line of a reply, without an "Action:" / ">" prefix, quotes, markup
    and a final period, with single spaces, lower-cased unless ``lower`` is false."""
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    line = _PREFIX.sub("", line)
    line = line.strip().strip("`*\"'").strip().rstrip(".!").strip().strip("`*\"'")
    return " ".join((line.lower() if lower else line).split())


# an admissible action ``verb[<what>]`` is a template: any ``verb[text]`` is allowed
# (WebShop's ``search[<query>]``)
_TEMPLATE = re.compile(r"^(\w+)\[<[^\[\]<>]*>\]$")


def is_template(action: str) -> bool:
    """Whether an admissible action is a template for free text (``search[<query>]``)."""
    return bool(_TEMPLATE.match(action))


def _fill_template(cleaned: str, admissible: list[str]) -> str | None:
    """The reply as a filled-in template (``search[red shoes]``), if it is one."""
    verbs = {m.group(1).lower() for a in admissible if (m := _TEMPLATE.match(a))}
    m = re.match(r"^(\w+)\s*\[\s*([^\[\]]*?)\s*\]?$", cleaned)
    if not m or m.group(1) not in verbs or not m.group(2) or m.group(2).startswith("<"):
        return None
    return f"{m.group(1)}[{m.group(2)}]"


def parse_action(reply: str, admissible: list[str]) -> tuple[str, str]:
    """One action from a model reply, and how it was found: ``exact`` (the cleaned reply is an
    admissible action), ``template`` (it fills in a template action such as
    ``search[<query>]``: the filled-in text is kept), ``prefix`` (the reply starts with one, the
    longest wins), ``contains`` (one appears in the reply), ``closest`` (highest string
    similarity), or ``free`` (no list to match against: the cleaned reply itself, case kept,
    since free text carries names and queries)."""
    if not admissible:
        return clean_reply(reply, lower=False), "free"
    cleaned = clean_reply(reply)
    filled = _fill_template(cleaned, admissible)
    if filled:
        return filled, "template"
    lowered = {a.lower(): a for a in admissible}
    if cleaned in lowered:
        return lowered[cleaned], "exact"
    starts = [a for a in lowered if cleaned.startswith((a + " ", a + ","))]
    if starts:
        return lowered[max(starts, key=len)], "prefix"
    flat = " ".join(reply.lower().split())
    inside = [a for a in lowered if re.search(rf"(?<!\w){re.escape(a)}(?!\w)", flat)]
    if inside:
        return lowered[max(inside, key=len)], "contains"
    best = max(lowered, key=lambda a: (difflib.SequenceMatcher(None, cleaned, a).ratio(), -len(a)))
    return lowered[best], "closest"


# ---- policies -----------------------------------------------------------------------------

@dataclass
class EpisodeView:
    """What a policy sees of one unfinished episode at one step."""

    game: str
    step: int
    prompt: str
    admissible: list[str]
    info: dict[str, Any]


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
    """A model through the inference interface (``a2rl.task.inference``): every view's prompt goes
    into the chat template, all of them are generated in one batch, and each reply is parsed
    into an admissible action."""

    def __init__(self, generator, max_new_tokens: int = 24, system: str | None = None):
        self.generator = generator
        self.max_new_tokens = max_new_tokens
        self.system = system

    def choose(self, views: list[EpisodeView]) -> list[Choice]:
        from a2rl.task.inference import format_chat

        prompts = [format_chat(self.generator.tokenizer, v.prompt, self.system) for v in views]
        replies = self.generator.generate(prompts, max_new_tokens=self.max_new_tokens)
        out = []
        for v, reply in zip(views, replies, strict=True):
            action, method = parse_action(reply, v.admissible)
            out.append(Choice(action, reply, method))
        return out


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
    def __init__(self, game: str, env: TextEnv, fmt: PromptFormat, path: str):
        self.env, self.fmt = env, fmt
        first = env.reset(path)
        self.episode = Episode(game=game, goal=first.goal,
                               info={k: v for k, v in first.info.items() if k != "expert"})
        self.obs = first
        self.history: list[tuple[str, str]] = []

    def view(self) -> EpisodeView:
        o = self.obs
        return EpisodeView(self.episode.game, self.episode.n_steps,
                           self.fmt.user_prompt(o.goal, self.history, o.text, o.admissible),
                           list(o.admissible), o.info)

    def advance(self, view: EpisodeView, choice: Choice, max_steps: int,
                keep_prompts: bool) -> None:
        step = self.env.step(choice.action)
        ep = self.episode
        record = {"action": choice.action, "reply": choice.reply, "method": choice.method,
                  "observation": step.observation.text, "reward": step.reward,
                  "expert": view.info.get("expert")}
        if keep_prompts:
            record["prompt"] = view.prompt
        ep.steps.append(record)
        self.history.append((choice.action, step.observation.text))
        self.obs = step.observation
        ep.won = bool(step.info.get("won", False))
        ep.score = float(step.info.get("score", ep.score))
        ep.done = step.done or ep.won or ep.n_steps >= max_steps


def play(games: Iterable[str], make_env: Callable[[], TextEnv], policy: Policy, max_steps: int,
         fmt: PromptFormat | None = None, lockstep: bool = True,
         keep_prompts: bool = False, root: str | Path | None = None) -> list[Episode]:
    """Play one episode per game with ``policy`` for at most ``max_steps`` actions each; returns
    the episodes in game order. Lockstep: one ``policy.choose`` call per step for all unfinished
    episodes (each with its own environment); sequential: one episode after another.
    With ``root``, games are ids relative to it: episodes and policies see the ids, so seeded
    choices (random and perturbed policies) do not depend on where the data lives."""
    fmt = fmt or PromptFormat()
    games = list(games)
    if max_steps < 1:
        raise ValueError(f"max_steps={max_steps}; expected >= 1")
    if not lockstep:
        return [ep for g in games
                for ep in play([g], make_env, policy, max_steps, fmt, True, keep_prompts, root)]
    running = [_Running(g, make_env(), fmt, str(Path(root) / g) if root else g) for g in games]
    try:
        active = [r for r in running if not r.episode.done]
        while active:
            views = [r.view() for r in active]
            choices = policy.choose(views)
            if len(choices) != len(views):
                raise RuntimeError(f"policy returned {len(choices)} actions for {len(views)} "
                                   "episodes")
            for r, v, c in zip(active, views, choices):
                r.advance(v, c, max_steps, keep_prompts)
            active = [r for r in active if not r.episode.done]
    finally:
        for r in running:
            r.env.close()
    return [r.episode for r in running]


def success_rate(episodes: list[Episode]) -> float:
    """Share of won episodes on the 0-100 scale."""
    return 100.0 * sum(e.won for e in episodes) / len(episodes) if episodes else 0.0
