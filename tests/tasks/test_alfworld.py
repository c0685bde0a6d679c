"""The real-ALFWorld adapter (tasks/alfworld/alfworld_data.py). The ALFWorld data cannot be
downloaded offline, so these check the parts that do not need it: game discovery with
ALFWorld's filters on a fake data tree, task types, copying into data/ and sealed/, the clear
error without data, the paper's configuration, and that the adapter's ALFWorld imports
resolve when the package is installed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from a2rl.common.layout import PreparedTaskPaths
from a2rl.config.types import ConfigError


def fake_game(root: Path, split: str, task: str, trial: str, solvable: bool = True) -> Path:
    folder = root / "json_2.1.1" / split / task / trial
    folder.mkdir(parents=True)
    (folder / "traj_data.json").write_text(json.dumps({"task_type": task.split("-")[0]}))
    game = folder / "game.tw-pddl"
    game.write_text(json.dumps({"solvable": solvable, "pddl_problem": "(define ...)"}))
    return game


@pytest.fixture()
def alfworld_root(tmp_path, monkeypatch):
    root = tmp_path / "alfworld"
    fake_game(root, "valid_unseen", "pick_and_place_simple-Mug-None-Desk-308", "trial_1")
    fake_game(root, "valid_unseen", "pick_two_obj_and_place-Pen-None-Desk-310", "trial_2")
    fake_game(root, "valid_unseen", "pick_heat_then_place_in_recep-Egg-None-Fridge-1", "t3",
              solvable=False)
    fake_game(root, "valid_unseen", "pick_clean_then_place_in_recep-AppleSliced-None-X-2", "t4")
    fake_game(root, "train", "pick_cool_then_place_in_recep-Apple-None-Fridge-5", "trial_9")
    fake_game(root, "train", "look_at_obj_in_light-Book-None-DeskLamp-7", "trial_8")
    monkeypatch.setenv("ALFWORLD_DATA", str(root))
    return root


def test_task_types_and_discovery(alfworld_root):
    from a2rl_tasks.alfworld.alfworld_data import data_root, find_games, task_type

    games = find_games(data_root(), "eval_out_of_distribution")
    assert [task_type(g) for g in games] == ["pick", "pick_two"]  # unsolvable, Sliced dropped
    assert [task_type(g) for g in find_games(alfworld_root, "train")] == ["examine", "cool"]
    with pytest.raises(ConfigError, match="no ALFWorld games"):
        find_games(alfworld_root, "eval_in_distribution")


def test_discovery_matches_alfworlds_own_collect_game_files(alfworld_root):
    """The games we seal are exactly the ones ALFWorld's own loader (AlfredTWEnv) would play."""
    from a2rl_tasks.alfworld.alfworld_data import find_games
    from alfworld.agents.environment.alfred_tw_env import AlfredTWEnv

    split_dir = alfworld_root / "json_2.1.1"
    config = {"env": {"goal_desc_human_anns_prob": 0, "task_types": [1, 2, 3, 4, 5, 6]},
              "dataset": {"data_path": str(split_dir / "train"),
                          "eval_ood_data_path": str(split_dir / "valid_unseen"),
                          "eval_id_data_path": str(split_dir / "valid_seen"),
                          "num_train_games": -1, "num_eval_games": -1}}
    for ours, theirs in (("train", "train"), ("eval_out_of_distribution",
                                              "eval_out_of_distribution")):
        env = AlfredTWEnv(config, train_eval=theirs)
        assert sorted(map(Path, env.game_files)) == find_games(alfworld_root, ours)


def test_missing_data_says_how_to_get_it(monkeypatch, tmp_path):
    from a2rl_tasks.alfworld.alfworld_data import data_root

    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path / "nowhere"))
    with pytest.raises(ConfigError, match="alfworld-download"):
        data_root()


def test_prepare_copies_train_to_data_and_test_to_sealed(alfworld_root, tmp_path):
    from a2rl_tasks.alfworld.alfworld_data import prepare_alfworld
    from a2rl_tasks.alfworld.params import AlfworldParams

    out = PreparedTaskPaths(tmp_path / "prepared")
    params = AlfworldParams(source="alfworld", test_games=134, train_games=None, max_steps=50)
    train, rows, types, source = prepare_alfworld(params, out)
    assert len(rows) == 2 and {r["goal_type"] for r in rows} == {"pick", "pick_two"}
    assert all((out.sealed / r["game"]).exists() for r in rows)
    assert all(Path(g).is_relative_to(out.data) and Path(g).exists() for g in train)
    assert sorted(types.values()) == ["cool", "examine"] and source["split"] == params.split


def test_paper_configuration():
    from a2rl_tasks.alfworld.params import AlfworldParams

    from a2rl.config.compose import compose

    cfg = compose(["task=alfworld"])
    params = AlfworldParams.from_dict(cfg.task.params)
    assert cfg.task.level == "L3" and cfg.task.package == "alfworld"
    assert (params.source, params.split, params.test_games, params.max_steps) == \
        ("alfworld", "eval_out_of_distribution", 134, 50)
    household = AlfworldParams.from_dict(compose(["task=household"]).task.params)
    assert household.source == "household" and household.test_games >= 50


def test_goal_split():
    from a2rl_tasks.alfworld.alfworld_data import split_goal

    text, goal = split_goal("-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of "
                            "a room.\n\nYour task is to: put some mug on desk.")
    assert (text, goal) == ("You are in the middle of a room.", "put some mug on desk.")


def test_adapter_imports_resolve_in_the_alfworld_package():
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredExpert, AlfredInfos

    assert AlfredExpert(expert_type="handcoded").expert_type == "handcoded"
    assert AlfredDemangler and AlfredInfos
