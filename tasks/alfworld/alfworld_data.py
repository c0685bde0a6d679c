"""Where the real ALFWorld games come from, and how prepare splits them (the engine is
``alfworld_env.py``).

The data folder (``task.params.data_path``, relative to ``paths.data`` / ``$A2RL_DATA``; default
``alfworld``) holds ALFWorld's json_2.1.1 release laid out as ALFWorld does:
``json_2.1.1/<split>/<task>-<object>-...-<scene>/<trial>/game.tw-pddl``. The paper's test split
``eval_out_of_distribution`` is ``valid_unseen`` (134 games). Two layouts are read:

- the full download (``alfworld-download``), with ``traj_data.json`` beside each game: the games
  are the ones ALFWorld's own loader keeps (``AlfredTWEnv.collect_game_files``);
- the game files alone (``/work/shared/data/alfworld``, see its PROVENANCE.md): every
  ``game.tw-pddl`` marked solvable, with the same filters (no movable/sliced variants, one of the
  six task types), the task type read from the folder name.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import shutil
from pathlib import Path
from typing import Any

from a2rl.task import ConfigError

from .alfworld_env import task_type

SPLITS = {"train": "train", "eval_in_distribution": "valid_seen",
          "eval_out_of_distribution": "valid_unseen"}


def data_root(path: str, base: Path) -> Path:
    """The ALFWorld data folder: ``path``, absolute or relative to ``base`` (paths.data)."""
    root = Path(path) if Path(path).is_absolute() else Path(base) / path
    if not (root / "json_2.1.1").is_dir():
        raise ConfigError(
            f"no ALFWorld data at {root} (task.params.data_path={path!r}, relative to "
            f"paths.data={base}): expected {root}/json_2.1.1/<split>/<task>/<trial>/game.tw-pddl. "
            "Run `a2rl data fetch alfworld` (ALFWorld's release archive; needs internet, or "
            "--from a folder holding it), or use the offline task conf/task/household.yaml")
    return root


def _solvable(game: Path) -> bool:
    try:
        return bool(json.loads(game.read_text()).get("solvable", False))
    except (OSError, ValueError):
        return False


def _kept(game: Path) -> bool:
    return ("movable" not in str(game.parent) and "Sliced" not in str(game.parent)
            and task_type(game) != "unknown")


def _alfworld_loader(folder: Path) -> list[Path]:
    """The games ALFWorld's own ``AlfredTWEnv.collect_game_files`` keeps in ``folder``."""
    from alfworld.agents.environment.alfred_tw_env import AlfredTWEnv

    config = {"env": {"goal_desc_human_anns_prob": 0, "task_types": [1, 2, 3, 4, 5, 6]},
              "dataset": {"data_path": str(folder), "eval_ood_data_path": str(folder),
                          "eval_id_data_path": str(folder), "num_train_games": -1,
                          "num_eval_games": -1}}
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        env = AlfredTWEnv(config, train_eval="eval_out_of_distribution")
    return sorted(Path(g) for g in env.game_files)


def find_games(root: Path, split: str) -> list[Path]:
    """The playable games of a split (an ALFWorld split name or a folder of json_2.1.1),
    sorted by path: through ALFWorld's own loader when the split has ``traj_data.json`` files
    (the full download), else from the game files (solvable, same filters)."""
    folder = root / "json_2.1.1" / SPLITS.get(split, split)
    if not folder.is_dir():
        raise ConfigError(f"no ALFWorld split folder {folder}")
    if any(folder.glob("*/*/traj_data.json")):
        games = _alfworld_loader(folder)
    else:
        games = sorted(p for p in folder.glob("*/*/game.tw-pddl") if _solvable(p) and _kept(p))
    if not games:
        raise ConfigError(f"no ALFWorld games (*/*/game.tw-pddl) under {folder}")
    return games


def sample(games: list[Path], n: int | None) -> list[Path]:
    """``n`` of the games (all with ``None``), stratified by task type and kept in path order:
    a seeded shuffle (seed 0), then one game of each type in turn, so a cap of 6k games has k of
    every type (``experiments/alfworld_baselines/baselines.py`` measures the same subset)."""
    if not n or n >= len(games):
        return games
    by_type: dict[str, list[Path]] = {}
    for g in random.Random(0).sample(games, len(games)):
        by_type.setdefault(task_type(g), []).append(g)
    queues = [by_type[k] for k in sorted(by_type)]
    kept: set[Path] = set()
    while len(kept) < n:
        for queue in queues:
            if queue and len(kept) < n:
                kept.add(queue.pop(0))
    return [g for g in games if g in kept]


def _copy(games: list[Path], root: Path, dest: Path) -> list[Path]:
    """Copy each game's trial folder to ``dest/<split>/<task>/<trial>/`` (the layout keeps the
    task type in the path); returns the copied game files."""
    files = []
    for g in games:
        target = dest / g.parent.relative_to(root / "json_2.1.1")
        shutil.copytree(g.parent, target, dirs_exist_ok=True)
        files.append(target / g.name)
    return files


def prepare_alfworld(p, base: Path, out) -> tuple[list[str], list[dict[str, Any]],
                                                  dict[str, str], dict]:
    """Copy the train games into ``out.data/games/`` and the test games into
    ``out.sealed/games/``; returns (train game files, test rows, goal types, source)."""
    root = data_root(p.data_path, base)
    test = sample(find_games(root, p.split), p.test_games)
    train = sample([g for split in p.train_splits for g in find_games(root, split)],
                   p.train_games)
    if SPLITS.get(p.split, p.split) in {SPLITS.get(s, s) for s in p.train_splits}:
        raise ConfigError(f"task.params.train_splits={p.train_splits} include the test split "
                          f"{p.split!r}")
    test_files = _copy(test, root, out.sealed / "games")
    train_files = _copy(train, root, out.data / "games")
    rows = [{"id": f"{i:04d}", "game": str(f.relative_to(out.sealed)), "goal_type": task_type(g),
             "source_game": str(g.relative_to(root))}
            for i, (f, g) in enumerate(zip(test_files, test))]
    types = {str(f): task_type(g) for f, g in zip(train_files, train)}
    return [str(f) for f in train_files], rows, types, {
        "kind": "alfworld", "root": str(root), "split": p.split,
        "train_splits": list(p.train_splits),
        "loader": "alfworld" if any((g.parent / "traj_data.json").exists() for g in test)
        else "game_files"}
