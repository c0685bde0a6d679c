"""The ALFWorld task's options (``task.params`` in conf/task/alfworld.yaml and household.yaml).

``source: household`` (the offline default) makes TextWorld household games with
``a2rl_tasks.alfworld.games``; ``source: alfworld`` uses the real ALFWorld games under
``$ALFWORLD_DATA`` (filled by ``alfworld-download``; see ``alfworld_data.py``)::

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

from a2rl.config.types import ConfigError, params_dataclass

SOURCES = ("household", "alfworld")
HOUSEHOLD_GOAL_TYPES = ["put_in", "put_on", "fetch", "open_fetch", "drop", "open"]
# what goal_types may name: TextWorld's generator's kinds, and ALFWorld's pick-two (pick_two.py),
# which is opt-in so the default test games stay the ones every earlier score was measured on
KNOWN_GOAL_TYPES = HOUSEHOLD_GOAL_TYPES + ["pick_two", "close", "lock", "unlock", "eat"]


def _range(name: str, value: Any) -> tuple[int, int]:
    lo, hi = (value, value) if isinstance(value, int) else tuple(value)
    if not 1 <= lo <= hi:
        raise ConfigError(f"task.params.{name}={value!r}; expected [low, high] with "
                          "1 <= low <= high")
    return int(lo), int(hi)


@dataclass
class AlfworldParams:
    source: str = "household"
    train_games: int = 120        # household: games made for the agent; alfworld: cap (null: all)
    test_games: int = 50          # household: sealed games; alfworld: 134 = the whole split
    max_steps: int = 12
    train_seed: int = 1_000_000   # household: first seed tried for train games
    test_seed: int = 7_340_117    # household: first seed tried for test games
    rooms: Any = (2, 4)
    objects: Any = (6, 10)
    quest_length: Any = (2, 4)
    goal_types: list[str] = field(default_factory=lambda: list(HOUSEHOLD_GOAL_TYPES))
    history: int = 2              # previous steps in the prompt
    max_new_tokens: int = 24      # reply length when the grader generates an action
    random_seeds: int = 3         # random-policy baseline: mean over this many seeds
    trajectories_per_game: int = 2  # expert demonstrations per train game (1 clean + perturbed)
    # alfworld only
    split: str = "eval_out_of_distribution"
    train_split: str = "train"
    data_env: str = "ALFWORLD_DATA"

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ConfigError(f"task.params.source={self.source!r}; expected one of {SOURCES}")
        for name in ("train_games", "test_games"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigError(f"task.params.{name}={value}; expected >= 1 or null")
        if self.max_steps < 1:
            raise ConfigError(f"task.params.max_steps={self.max_steps}; expected >= 1")
        self.rooms = _range("rooms", self.rooms)
        self.objects = _range("objects", self.objects)
        self.quest_length = _range("quest_length", self.quest_length)
        if self.source == "household":
            span = (self.train_games or 0) * 20
            if abs(self.train_seed - self.test_seed) < span + (self.test_games or 0) * 20:
                raise ConfigError(f"task.params.train_seed={self.train_seed} and test_seed="
                                  f"{self.test_seed} are too close: their seed ranges may overlap")
        unknown = sorted(set(self.goal_types) - set(KNOWN_GOAL_TYPES))
        if unknown or not self.goal_types:
            raise ConfigError(f"task.params.goal_types={self.goal_types}: expected a non-empty "
                              f"list from {KNOWN_GOAL_TYPES}")
        if self.trajectories_per_game < 1:
            raise ConfigError(f"task.params.trajectories_per_game={self.trajectories_per_game}; "
                              "expected >= 1")

    @classmethod
    def from_dict(cls, params: Any) -> AlfworldParams:
        return params_dataclass(cls, params)

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()}
