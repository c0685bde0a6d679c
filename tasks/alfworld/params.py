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

from a2rl.config.checks import from_mapping, require

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
class AlfworldParams:
    """Games, episode limits and prompting of the ALFWorld task (both sources); the household
    generator's own knobs (rooms, objects, quest_length, goal_types, seeds) and the real
    games' (split, train_splits, data_path) are ignored by the other source."""

    source: str = field(default="household", metadata={
        "help": "household (games generated with TextWorld, offline) or alfworld (the real "
                "game files under data_path)."})
    train_games: int | None = field(default=120, metadata={
        "help": "household: games made for the agent; alfworld: a cap (null: all)."})
    test_games: int | None = field(default=50, metadata={
        "help": "household: sealed games; alfworld: a cap (134 = the whole split)."})
    max_steps: int = field(default=12, metadata={"help": "Actions per episode at most."})
    train_seed: int = field(default=1_000_000, metadata={
        "help": "household: first seed tried for train games."})
    test_seed: int = field(default=7_340_117, metadata={
        "help": "household: first seed tried for test games (far from train_seed)."})
    rooms: tuple[int, int] = field(default=(2, 4), metadata={
        "help": "household: rooms per game, [low, high] (or one number for both)."})
    objects: tuple[int, int] = field(default=(6, 10), metadata={
        "help": "household: objects per game, [low, high] (or one number for both)."})
    quest_length: tuple[int, int] = field(default=(2, 4), metadata={
        "help": "household: actions the quest needs, [low, high] (or one number for both)."})
    goal_types: list[str] = field(default_factory=lambda: list(HOUSEHOLD_GOAL_TYPES),
                                  metadata={"help": f"household: goal kinds, from "
                                                    f"{KNOWN_GOAL_TYPES}."})
    history: int = field(default=2, metadata={"help": "Previous steps in the prompt."})
    max_new_tokens: int = field(default=24, metadata={
        "help": "Reply length when the grader generates an action."})
    random_seeds: int = field(default=3, metadata={
        "help": "Random-policy baseline: mean over this many seeds."})
    trajectories_per_game: int = field(default=2, metadata={
        "help": "Expert demonstrations per train game (1 clean + perturbed)."})
    split: str = field(default="eval_out_of_distribution", metadata={
        "help": "alfworld: the split the test games come from."})
    train_splits: list[str] = field(default_factory=lambda: ["train", "valid_train"], metadata={
        "help": "alfworld: the splits the agent's train games come from, in order."})
    data_path: str = field(default="alfworld", metadata={
        "help": "alfworld: the data folder (holds json_2.1.1/), absolute or relative to "
                "paths.data ($A2RL_DATA)."})

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
        require(self.trajectories_per_game >= 1,
                f"task.params.trajectories_per_game={self.trajectories_per_game}; expected >= 1")

    @classmethod
    def from_dict(cls, params: Any) -> AlfworldParams:
        """Build from ``TaskConfig.params``; unknown keys are an error that names them."""
        return from_mapping(cls, params, "task.params")

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()}
