"""The ALFWorld task's options (``task.params`` in conf/task/alfworld.yaml and household.yaml).

``source: household`` (the offline default) makes TextWorld household games with
``a2rl_tasks.alfworld.games``; ``source: alfworld`` plays the real ALFWorld game files under
``data_path`` (relative to ``paths.data`` / ``$A2RL_DATA``; see ``alfworld_data.py``)::

    params:
      source: household
      train_games: 120
      test_games: 50
      max_steps: 12
      rooms: [2, 4]
      objects: [6, 10]
      quest_length: [2, 4]
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from a2rl.task import ACTION_PROTOCOLS, EpisodePromptParams, from_mapping, require

SOURCES = ("household", "alfworld")
HOUSEHOLD_GOAL_TYPES = ["put_in", "put_on", "fetch", "open_fetch", "drop", "open"]
# what goal_types may name: TextWorld's generator's kinds, and ALFWorld's pick-two (pick_two.py),
# which is opt-in so the default test games stay the ones every earlier score was measured on
KNOWN_GOAL_TYPES = HOUSEHOLD_GOAL_TYPES + ["pick_two", "close", "lock", "unlock", "eat"]


def _range(name: str, value: Any) -> tuple[int, int]:
    """``value``, [low, high] or one number for both, as (low, high)."""
    lo, hi = (value, value) if isinstance(value, int) else tuple(value)
    require(1 <= lo <= hi,
            f"task.params.{name}={value!r}; expected [low, high] with 1 <= low <= high")
    return int(lo), int(hi)


@dataclass
class AlfworldParams(EpisodePromptParams):
    """Games, episode limits and prompting of the ALFWorld task (both sources); the household
    generator's own knobs (rooms, objects, quest_length, goal_types, seeds) and the real
    games' (split, train_splits, data_path) are ignored by the other source."""

    source: str = "household"
    """household (games generated with TextWorld, offline) or alfworld (the real game files under
    data_path)."""
    train_games: int | None = 120
    """household: games made for the agent; alfworld: a cap (null: all)."""
    test_games: int | None = 50
    """household: sealed games; alfworld: a cap (134 = the whole split)."""
    max_steps: int = 12
    """Actions per episode at most."""
    train_seed: int = 1_000_000
    """household: first seed tried for train games."""
    test_seed: int = 7_340_117
    """household: first seed tried for test games (far from train_seed)."""
    rooms: tuple[int, int] = (2, 4)
    """household: rooms per game, [low, high] (or one number for both)."""
    objects: tuple[int, int] = (6, 10)
    """household: objects per game, [low, high] (or one number for both)."""
    quest_length: tuple[int, int] = (2, 4)
    """household: actions the quest needs, [low, high] (or one number for both)."""
    goal_types: list[str] = field(default_factory=lambda: list(HOUSEHOLD_GOAL_TYPES))
    """household: goal kinds, from KNOWN_GOAL_TYPES (put_in, put_on, fetch, open_fetch, drop,
    open, pick_two, close, lock, unlock, eat)."""
    history: int = 2
    """prompt_format=rewrite: previous steps in the prompt."""
    actions: str = "closest"
    """closest: a reply is mapped onto the closest admissible action; own: ReAct-style, as
    ALFWorld's evaluations: the reply's own action, one that is not admissible is invalid ("Nothing
    happens.", a step spent)."""
    max_new_tokens: int = 24
    """Reply length when the grader generates an action."""
    random_seeds: int = 3
    """Random-policy baseline: mean over this many seeds."""
    trajectories_per_game: int = 2
    """Expert demonstrations per train game (1 clean + perturbed)."""
    split: str = "eval_out_of_distribution"
    """alfworld: the split the test games come from."""
    train_splits: list[str] = field(default_factory=lambda: ["train", "valid_train"])
    """alfworld: the splits the agent's train games come from, in order."""
    data_path: str = "alfworld"
    """alfworld: the data folder (holds json_2.1.1/), absolute or relative to paths.data
    ($A2RL_DATA)."""

    def __post_init__(self) -> None:
        require(self.source in SOURCES,
                f"task.params.source={self.source!r}; expected one of {SOURCES}")
        for name in ("train_games", "test_games"):
            value = getattr(self, name)
            require(value is None or value >= 1,
                    f"task.params.{name}={value}; expected >= 1 or null")
        require(self.max_steps >= 1, f"task.params.max_steps={self.max_steps}; expected >= 1")
        self.rooms = _range("rooms", self.rooms)
        self.objects = _range("objects", self.objects)
        self.quest_length = _range("quest_length", self.quest_length)
        if self.source == "household":
            span = (self.train_games or 0) * 20
            require(abs(self.train_seed - self.test_seed) >= span + (self.test_games or 0) * 20,
                    f"task.params.train_seed={self.train_seed} and test_seed={self.test_seed} "
                    f"are too close: their seed ranges may overlap")
        unknown = sorted(set(self.goal_types) - set(KNOWN_GOAL_TYPES))
        require(not unknown and bool(self.goal_types),
                f"task.params.goal_types={self.goal_types}: expected a non-empty list from "
                f"{KNOWN_GOAL_TYPES}")
        require(self.actions in ACTION_PROTOCOLS,
                f"task.params.actions={self.actions!r}; expected one of {ACTION_PROTOCOLS}")
        require(self.trajectories_per_game >= 1,
                f"task.params.trajectories_per_game={self.trajectories_per_game}; expected >= 1")

    @classmethod
    def from_dict(cls, params: Any) -> AlfworldParams:
        """Build from ``TaskConfig.params``; unknown keys are an error that names them."""
        return from_mapping(cls, params, "task.params")

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()}
