"""Offline household games made with TextWorld's own generator (``textworld.generator``, what
``tw-make custom`` runs): rooms, containers, supporters and portable objects, with one quest whose
goal is stated ALFWorld-style (only the last action: "put the mug on the chair"); ALFWorld's
pick-two goals ("put two mugs in the cabinet"), which that generator cannot express, come from
``pick_two.py`` when ``goal_types`` asks for ``pick_two``.

A game is fully determined by its seed and the difficulty ranges; a seed whose quest ends in an
action outside ``goal_types`` is skipped (the next seed is tried), so train and test games come
from disjoint, recorded seed ranges.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .textworld_env import clean_goal

# the quest's last action (TextWorld rule name) -> goal type
GOAL_TYPES = {
    "put": "put_on", "insert": "put_in",
    "take": "fetch", "take/c": "fetch", "take/s": "fetch",
    "drop": "drop", "open/c": "open", "close/c": "close",
    "lock/c": "lock", "unlock/c": "unlock", "eat": "eat",
}


@dataclass(frozen=True)
class Difficulty:
    """Inclusive ranges drawn per game from its seed."""

    rooms: tuple[int, int] = (2, 4)
    objects: tuple[int, int] = (6, 10)
    quest_length: tuple[int, int] = (2, 4)

    def draw(self, seed: int) -> dict[str, int]:
        rng = random.Random(seed)
        return {"rooms": rng.randint(*self.rooms), "objects": rng.randint(*self.objects),
                "quest_length": rng.randint(*self.quest_length)}


def goal_type(game) -> str:
    """The goal type of a generated game from its quest's last action (``open_fetch`` when a
    fetch needs a container opened first)."""
    actions = [a.name for a in game.quests[0].win_events[0].actions]
    kind = GOAL_TYPES.get(actions[-1], actions[-1].split("/")[0])
    if kind == "fetch" and any(a.startswith("open") for a in actions[:-1]):
        return "open_fetch"
    return kind


def draft_game(seed: int, difficulty: Difficulty):
    """The TextWorld game for ``seed`` (not compiled) and its drawn size."""
    from textworld import GameOptions
    from textworld.generator import make_game

    size = difficulty.draw(seed)
    opts = GameOptions()
    opts.seeds = seed
    opts.nb_rooms = size["rooms"]
    opts.nb_objects = size["objects"]
    opts.quest_length = size["quest_length"]
    opts.grammar.only_last_action = True
    return make_game(opts), size


def draft_any(seed: int, difficulty: Difficulty, goal_types: list[str]):
    """The game for ``seed``: a pick-two game (``pick_two.py``) for a share 1/len(goal_types)
    of the seeds when ``pick_two`` is asked for, else TextWorld's generator; returns (game,
    drawn size, goal type)."""
    if "pick_two" in goal_types and random.Random(f"kind|{seed}").random() < 1 / len(goal_types):
        from .pick_two import make_pick_two_game

        size = difficulty.draw(seed)
        game = make_pick_two_game(seed, size["rooms"], size["objects"])
        return game, size, "pick_two"
    game, size = draft_game(seed, difficulty)
    return game, size, goal_type(game)


def make_games(folder: Path, prefix: str, n: int, first_seed: int, difficulty: Difficulty,
               goal_types: list[str], max_tries_per_game: int = 20,
               mix: dict[str, int] | None = None) -> list[dict[str, Any]]:
    """Compile ``n`` games into ``folder`` (``<prefix>-<i>.z8`` + TextWorld's ``.json`` +
    ``.meta.json``) from seeds ``first_seed, first_seed + 1, ...``; returns their metadata (seed,
    size, goal, goal type, walkthrough) in order. With ``mix`` (goal type -> games, summing to
    ``n``) a game is kept only while its goal type has room, so that the games have that mix
    (a twin split drawn like the test split it is compared with: goal types differ in
    difficulty)."""
    room = dict(mix) if mix is not None else None
    if room is not None and sum(room.values()) != n:
        raise ValueError(f"mix {mix} has {sum(room.values())} games, not {n}")
    from textworld import GameOptions
    from textworld.generator import compile_game

    from a2rl.task import progress

    folder.mkdir(parents=True, exist_ok=True)
    metas, seed = [], first_seed
    bar = progress(total=n, desc=f"{prefix} games", unit="game")
    while len(metas) < n:
        if seed - first_seed > n * max_tries_per_game:
            raise RuntimeError(f"only {len(metas)} of {n} games with goal types {goal_types} in "
                               f"{seed - first_seed} seeds from {first_seed}; widen goal_types")
        game, size, kind = draft_any(seed, difficulty, goal_types)
        seed += 1
        if kind not in goal_types or not game.metadata.get("walkthrough"):
            continue
        if room is not None:
            if room.get(kind, 0) <= 0:
                continue
            room[kind] -= 1
        name = f"{prefix}-{len(metas):04d}"
        opts = GameOptions()
        opts.path = str(folder / f"{name}.z8")
        opts.force_recompile = True
        game_file = Path(compile_game(game, opts))
        game_file.with_suffix(".ni").unlink(missing_ok=True)
        meta = {"game": game_file.name, "seed": seed - 1, **size, "goal_type": kind,
                "goal": clean_goal(game.objective),
                "walkthrough": list(game.metadata["walkthrough"])}
        game_file.with_suffix(".meta.json").write_text(json.dumps(meta, indent=1))
        metas.append(meta)
        bar.update()
    bar.close()
    return metas
