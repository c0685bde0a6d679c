"""Real ALFWorld games (``alfworld`` package, its TextWorld PDDL engine) behind ``TextEnv``.

ALFWorld's data (``alfworld-download``, needs internet) lives under ``$ALFWORLD_DATA``:
``json_2.1.1/{train,valid_seen,valid_unseen}/<task>/<trial>/game.tw-pddl`` plus
``traj_data.json``. The paper's test split ``eval_out_of_distribution`` is ``valid_unseen``
(134 games). Games are loaded the way ``alfworld.agents.environment.AlfredTWEnv`` loads them:
the same filters as ``AlfredTWEnv.collect_game_files`` and the same TextWorld wrappers as
``AlfredTWEnv.init_env`` (``AlfredDemangler``, ``AlfredInfos``, ``AlfredExpert`` for expert
actions from its handcoded agent). Running them needs ``alfworld==0.4.2`` with its
``textworld[pddl]`` dependency (fast-downward-textworld).

Not tested end to end here: the data cannot be downloaded offline. ``tests/test_alfworld.py``
checks the path layout, goal-type mapping and the error when the data is missing.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from a2rl.config.types import ConfigError
from a2rl.task.envs import Observation, Step, TextEnv

SPLITS = {"train": "train", "eval_in_distribution": "valid_seen",
          "eval_out_of_distribution": "valid_unseen"}
# ALFWorld task folder prefix -> the paper's six task types
TASK_TYPES = {
    "pick_and_place_simple": "pick", "look_at_obj_in_light": "examine",
    "pick_clean_then_place_in_recep": "clean", "pick_heat_then_place_in_recep": "heat",
    "pick_cool_then_place_in_recep": "cool", "pick_two_obj_and_place": "pick_two",
}
_GOAL = re.compile(r"Your task is to:\s*(.*)", re.IGNORECASE)


def task_type(game_file: str | Path) -> str:
    """``pick``, ``clean``, ``heat``, ``cool``, ``examine`` or ``pick_two`` from the game's
    folder name (``<task>-<object>-...-<scene>/<trial>/game.tw-pddl``)."""
    folder = Path(game_file).parent.parent.name
    for prefix, kind in TASK_TYPES.items():
        if folder.startswith(prefix):
            return kind
    return "unknown"


def data_root(env_var: str = "ALFWORLD_DATA") -> Path:
    root = os.environ.get(env_var)
    if not root or not Path(root).is_dir():
        raise ConfigError(f"${env_var}={root!r} is not a folder with the ALFWorld data; run "
                          "`pip install alfworld==0.4.2 && alfworld-download` (needs internet) or "
                          "use the offline task conf/task/household.yaml")
    return Path(root)


def _solvable(game: Path) -> bool:
    try:
        return bool(json.loads(game.read_text()).get("solvable", False))
    except (OSError, ValueError):
        return False


def find_games(root: Path, split: str) -> list[Path]:
    """The games of a split that ``AlfredTWEnv.collect_game_files`` keeps: a ``game.tw-pddl``
    with its ``traj_data.json``, marked solvable, not a movable/sliced variant, one of the six
    task types; sorted by path."""
    folder = root / "json_2.1.1" / SPLITS.get(split, split)
    games = sorted(p for p in folder.glob("*/*/game.tw-pddl")
                   if (p.parent / "traj_data.json").exists() and _solvable(p)
                   and "movable" not in str(p.parent) and "Sliced" not in str(p.parent)
                   and task_type(p) != "unknown")
    if not games:
        raise ConfigError(f"no ALFWorld games (*/*/game.tw-pddl) under {folder}")
    return games


class AlfworldEnv(TextEnv):
    """One ALFWorld game (``game.tw-pddl``) through ``textworld.start`` (its PDDL backend) with
    the wrappers ``AlfredTWEnv.init_env`` uses: ``AlfredDemangler`` (readable object names),
    ``AlfredInfos`` and ``AlfredExpert("handcoded")`` (``info["expert"]``). Reward 1 on a win."""

    def __init__(self):
        self.env = None
        self.goal = ""

    def reset(self, game: str) -> Observation:
        import textworld
        from alfworld.agents.environment.alfred_tw_env import (
            AlfredDemangler,
            AlfredExpert,
            AlfredInfos,
        )

        self.close()
        infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"])
        self.env = textworld.start(str(game), infos, wrappers=[
            AlfredDemangler(), AlfredInfos, AlfredExpert(expert_type="handcoded")])
        state = self.env.reset()
        text, self.goal = split_goal(state["feedback"])
        obs = self._observation(text, state)
        obs.info["goal_type"] = task_type(game)
        return obs

    def _observation(self, text: str, state) -> Observation:
        plan = state.get("extra.expert_plan") or []
        admissible = [a for a in (state["admissible_commands"] or []) if a != "help"]
        return Observation(text=text.strip(), goal=self.goal, admissible=admissible,
                           info={"expert": plan[0] if plan else None})

    def step(self, action: str) -> Step:
        if self.env is None:
            raise RuntimeError("AlfworldEnv.step before reset")
        state, score, done = self.env.step(action)
        won = bool(state["won"])
        return Step(self._observation(state["feedback"], state), 1.0 if won else 0.0,
                    bool(done or won), {"won": won, "score": float(score)})

    def close(self) -> None:
        if self.env is not None:
            self.env.close()
            self.env = None


def split_goal(feedback: str) -> tuple[str, str]:
    """ALFWorld's first observation without its welcome banner, and the goal ("Your task is
    to: put a mug in desk." -> "put a mug in desk.")."""
    text = re.sub(r"-= Welcome to TextWorld, ALFRED! =-\s*", "", feedback or "")
    match = _GOAL.search(text)
    if not match:
        return text.strip(), ""
    return text[:match.start()].strip(), match.group(1).strip()


def prepare_alfworld(p, out) -> tuple[list[str], list[dict[str, Any]], dict[str, str], dict]:
    """Copy train games into ``out.data/games/<i>/`` and test games into
    ``out.sealed/games/<i>/``; returns (train game files, test rows, goal types, source)."""
    import shutil

    root = data_root(p.data_env)
    test = find_games(root, p.split)[:p.test_games] if p.test_games else find_games(root, p.split)
    train = find_games(root, p.train_split)
    train = train[:p.train_games] if p.train_games else train

    def copy(games: list[Path], dest: Path) -> list[Path]:
        files = []
        for i, g in enumerate(games):
            target = dest / "games" / f"{i:04d}"
            shutil.copytree(g.parent, target, dirs_exist_ok=True)
            files.append(target / g.name)
        return files

    test_files = copy(test, out.sealed)
    train_files = copy(train, out.data)
    rows = [{"id": f"{i:04d}", "game": str(f.relative_to(out.sealed)),
             "goal_type": task_type(g), "source_game": str(g.relative_to(root))}
            for i, (f, g) in enumerate(zip(test_files, test))]
    types = {str(f): task_type(g) for f, g in zip(train_files, train)}
    return [str(f) for f in train_files], rows, types, {
        "kind": "alfworld", "root": str(root), "split": p.split, "train_split": p.train_split}
