"""The real-ALFWorld source of tasks/alfworld (source=alfworld): game discovery with ALFWorld's
filters (its own loader when ``traj_data.json`` is there, the game files alone otherwise), real
games played by ALFWorld's engine from the fixture (tests/fixtures/alfworld: three real games),
prepare's layout and demonstrations, and, when ``$A2RL_DATA`` has the data, the walkthroughs
winning a sample of the sealed test games."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

from a2rl.common.files import iter_jsonl
from a2rl.common.layout import PreparedTaskPaths
from a2rl.config.types import ConfigError, InferenceConfig, TaskConfig
from a2rl.task.base import load_task
from a2rl.task.envs import Choice, ExpertPolicy, RandomPolicy, play
from checkout import FULL_DATA, REPO, prepare_in
from episode_prompts import assert_prompts_only_grow, tokenizers

FIXTURE = REPO / "tests" / "fixtures" / "alfworld"
FULL = FULL_DATA / "alfworld" if FULL_DATA else None
PDDL = pytest.importorskip("fast_downward", reason="textworld[pddl] (scripts/setup.sh)")


def fake_game(root: Path, split: str, task: str, trial: str, solvable: bool = True,
              traj: bool = True) -> Path:
    folder = root / "json_2.1.1" / split / task / trial
    folder.mkdir(parents=True)
    if traj:
        (folder / "traj_data.json").write_text(json.dumps({"task_type": task.split("-")[0]}))
    game = folder / "game.tw-pddl"
    game.write_text(json.dumps({"solvable": solvable, "pddl_problem": "(define ...)"}))
    return game


def fake_tree(root: Path, traj: bool) -> Path:
    for split, task, trial, solvable in [
            ("valid_unseen", "pick_and_place_simple-Mug-None-Desk-308", "trial_1", True),
            ("valid_unseen", "pick_two_obj_and_place-Pen-None-Desk-310", "trial_2", True),
            ("valid_unseen", "pick_heat_then_place_in_recep-Egg-None-Fridge-1", "t3", False),
            ("valid_unseen", "pick_clean_then_place_in_recep-AppleSliced-None-X-2", "t4", True),
            ("train", "pick_cool_then_place_in_recep-Apple-None-Fridge-5", "trial_9", True),
            ("train", "look_at_obj_in_light-Book-None-DeskLamp-7", "trial_8", True)]:
        fake_game(root, split, task, trial, solvable, traj)
    return root


@pytest.mark.parametrize("traj", [True, False])
def test_discovery_keeps_what_alfworlds_loader_keeps(tmp_path, traj):
    """With traj_data.json the games come from ALFWorld's own loader; without, the game-file
    reader keeps the same games (unsolvable and Sliced dropped, task type from the folder)."""
    from a2rl_tasks.alfworld.alfworld_data import find_games
    from a2rl_tasks.alfworld.alfworld_env import task_type

    root = fake_tree(tmp_path / "alfworld", traj)
    games = find_games(root, "eval_out_of_distribution")
    assert [task_type(g) for g in games] == ["pick", "pick_two"]
    assert [task_type(g) for g in find_games(root, "train")] == ["examine", "cool"]
    with pytest.raises(ConfigError, match="no ALFWorld split folder"):
        find_games(root, "eval_in_distribution")


def test_a_capped_split_is_a_seeded_sample_across_task_types():
    from a2rl_tasks.alfworld.alfworld_data import sample

    kinds = ("look_at_obj_in_light", "pick_and_place_simple", "pick_two_obj_and_place")
    games = [Path(f"{kind}-X-{i:02d}/t/game.tw-pddl") for kind in kinds for i in range(20)]
    kept = sample(games, 12)
    assert kept == sample(games, 12) == sorted(kept) and len(kept) == 12
    assert sorted(g.parts[0].split("-")[0] for g in kept) == sorted(kinds * 4)  # 4 of each
    assert sample(games, None) == sample(games, 60) == games


def test_missing_data_says_how_to_get_it(tmp_path):
    from a2rl_tasks.alfworld.alfworld_data import data_root

    with pytest.raises(ConfigError, match="a2rl data fetch alfworld"):
        data_root("alfworld", tmp_path)
    assert data_root(str(FIXTURE), tmp_path) == FIXTURE


def test_a_real_game_through_alfworlds_engine():
    """The first observation, goal and admissible commands come from TextWorld's PDDL backend
    with ALFWorld's demangler (readable names), and the walkthrough's first action is one of
    them; an unknown command changes nothing."""
    from a2rl_tasks.alfworld.alfworld_env import AlfworldEnv, load_games

    game = load_games(FIXTURE / "json_2.1.1" / "valid_unseen")[0]
    env = AlfworldEnv()
    obs = env.reset(game)
    assert obs.goal == "clean some soapbar and put it in cabinet."
    assert obs.text.startswith("You are in the middle of a room.")
    assert obs.info["goal_type"] == "clean" and obs.info["expert"] is None
    assert obs.info["walkthrough"][0] in obs.admissible and "help" not in obs.admissible
    assert all("_" not in a for a in obs.admissible)  # demangled: "soapbar 1", not ids
    step = env.step("fly to the moon")
    assert step.observation.text == "Nothing happens." and not step.done and step.reward == 0
    env.close()


def test_walkthroughs_win_and_random_play_runs(tiny_model):
    from a2rl_tasks.alfworld.alfworld_env import PROMPT, AlfworldEnv, AlfworldExpertEnv, load_games

    games = load_games(FIXTURE)
    expert = play(games, AlfworldExpertEnv, ExpertPolicy(0), 50, PROMPT, keep_prompts=True)
    assert all(e.won for e in expert)
    assert [[s["action"] for s in e.steps] for e in expert] == \
        [e.info["walkthrough"] for e in expert]
    system, user = expert[0].steps[0]["prompt"]  # the first step's chat
    assert system["content"] == PROMPT.instructions and "Available actions:\n" in user["content"]
    for tok in tokenizers(tiny_model):  # real ALFWorld episodes: the prompt only grows
        assert assert_prompts_only_grow(expert, tok) >= 10
    random_eps = play(games, AlfworldEnv, RandomPolicy(0), 3, PROMPT)
    assert [e.n_steps for e in random_eps] == [3, 3, 3] and not any(e.won for e in random_eps)


class DetourThenExpert:
    """A wrong admissible action first, then the expert's."""

    def choose(self, views):
        out = []
        for v in views:
            if v.step == 0:
                wrong = sorted(a for a in v.admissible if a != v.info["expert"])
                out.append(Choice(random.Random(v.game).choice(wrong), "", "detour"))
            else:
                out.append(Choice(v.info["expert"], "", "expert"))
        return out


def test_the_expert_recovers_from_a_detour():
    """Off the walkthrough the expert is the PDDL planner from the current state (no
    traj_data.json in the game files), and it still wins."""
    from a2rl_tasks.alfworld.alfworld_env import PROMPT, AlfworldExpertEnv, load_games

    games = load_games(FIXTURE / "json_2.1.1" / "train")[:1]
    (ep,) = play(games, AlfworldExpertEnv, DetourThenExpert(), 50, PROMPT)
    assert ep.won and ep.steps[0]["method"] == "detour"
    assert all(s["expert"] for s in ep.steps)


def test_with_traj_data_alfworlds_handcoded_expert_recovers(tmp_path):
    """With the full download's traj_data.json (here written from the folder name, the fields
    ALFWorld's handcoded expert reads) the expert off the walkthrough is ALFWorld's own."""
    import shutil

    from a2rl_tasks.alfworld.alfworld_env import PROMPT, AlfworldExpertEnv, load_games

    source = Path(load_games(FIXTURE / "json_2.1.1" / "train")[0]).parent
    trial = tmp_path / source.parent.name / source.name
    shutil.copytree(source, trial)
    (trial / "traj_data.json").write_text(json.dumps({
        "task_type": "pick_and_place_simple", "pddl_params": {
            "object_target": "SprayBottle", "parent_target": "Toilet", "toggle_target": "",
            "mrecep_target": "", "object_sliced": False}}))
    env = AlfworldExpertEnv()
    env.reset(str(trial / "game.tw-pddl"))
    assert env.handcoded is not None
    env.close()
    (ep,) = play([str(trial / "game.tw-pddl")], AlfworldExpertEnv, DetourThenExpert(), 50, PROMPT)
    assert ep.won and ep.steps[0]["method"] == "detour"


def alfworld_cfg(**params) -> TaskConfig:
    return TaskConfig(id="alfworld", package="alfworld", level="L3", params={
        "source": "alfworld", "data_path": str(FIXTURE), "test_games": None,
        "train_games": None, "max_steps": 50, "random_seeds": 1, "train_splits": ["train"],
        **params})


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("alfworld")
    task = load_task(alfworld_cfg(max_steps=12), tmp)
    out, facts = prepare_in(task, tmp / "prepared")
    return task, out, facts


def test_prepare_seals_the_test_games_and_gives_demonstrations(prepared):
    task, out, facts = prepared
    rows = list(iter_jsonl(out.test))
    assert [r["goal_type"] for r in rows] == ["clean"]
    assert (out.sealed / rows[0]["game"]).exists()
    assert not list(out.data.rglob("*valid_unseen*"))
    assert facts["sizes"]["train_games"] == 2 and facts["expert_success_train"] == 100.0
    assert facts["source"]["loader"] == "game_files"
    assert (out.data / "alfworld_env.py").exists() and (out.data / "a2rl_envs.py").exists()
    kinds = [t["kind"] for t in iter_jsonl(out.data / "trajectories.jsonl")]
    assert kinds == ["expert", "expert", "perturbed_expert", "perturbed_expert"]
    pairs = list(iter_jsonl(out.data / "train.jsonl"))
    assert pairs and all(p["prompt"][0]["content"] == task.fmt.instructions for p in pairs)
    assert "alfworld_env" in (out.data / "README.md").read_text()
    assert "alfworld_env.py" in task.description()


def test_agent_side_rollout_runs_from_the_data_folder(prepared):
    """The copies in data/ play the train games without the a2rl package's envs module."""
    import subprocess
    import sys

    _, out, _ = prepared
    script = ("import sys; sys.modules['a2rl.task.envs'] = None; sys.path.insert(0, '.')\n"
              "from alfworld_env import AlfworldEnv, load_games, PROMPT\n"
              "from a2rl_envs import play, RandomPolicy, success_rate\n"
              "eps = play(load_games('games'), AlfworldEnv, RandomPolicy(0), 2, PROMPT)\n"
              "print(len(eps), sorted(e.info['goal_type'] for e in eps))\n")
    result = subprocess.run([sys.executable, "-c", script], cwd=out.data, check=False,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[0] == "2 ['pick', 'pick_two']"


SANDBOX_ROLLOUT = r"""
import importlib.util, json, sys
sys.path.insert(0, "data")
from alfworld_env import AlfworldEnv, AlfworldExpertEnv, load_games, PROMPT
from a2rl_envs import ExpertPolicy, play
games = load_games("data/games")
env = AlfworldEnv()
first = env.reset(games[0])
step = env.step(first.info["walkthrough"][0])
(episode,) = play(games[:1], AlfworldExpertEnv, ExpertPolicy(0), 50, PROMPT)
print(json.dumps({"python": sys.executable, "a2rl": importlib.util.find_spec("a2rl") is not None,
                  "goal": first.goal, "admissible": len(first.admissible),
                  "after_first_step": step.observation.text, "won": episode.won}))
"""


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_the_copied_env_plays_a_real_game_in_the_sandbox_on_the_agents_python(
        prepared, agent_python, tmp_path):
    """What the agent gets in data/ (alfworld_env.py, a2rl_envs.py, the train games) resets a
    real game, steps it and replays its walkthrough to a win inside the real sandbox on the
    agents' own Python (textworld[pddl] and alfworld there, no a2rl); neither the workspace
    nor that environment holds a sealed valid_unseen game."""
    import subprocess

    from a2rl.isolation.agent_python import MARKER, VIEW, extra_requirements
    from a2rl.isolation.sandbox import Sandbox
    from a2rl.isolation.workspace import provision_workspace

    built = json.loads((agent_python / MARKER).read_text())["requirements"]
    missing = [r for r in extra_requirements(REPO / "pyproject.toml") if r not in built]
    assert not missing, (f"{agent_python} was built without {missing}: rebuild it with "
                         "python scripts/agent_python.py")
    _, out, _ = prepared
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    ws = tmp_path / "run" / "workspace"
    provision_workspace(ws, out.data, model, "describe", link_model=True)
    for sub in ("tools", "grader"):
        (tmp_path / "run" / sub).mkdir()
    box = Sandbox("bwrap", ws, tmp_path / "run" / "tools", tmp_path / "run" / "grader",
                  python=agent_python)
    env = {"PATH": f"{Path(box.interpreter).parent}:/usr/bin:/bin", "HOME": "/tmp/home"}
    argv = box.command(["python3", "-c", SANDBOX_ROLLOUT], env)
    done = subprocess.run(argv, capture_output=True, text=True, env=box.host_env(env),
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    # the agents' Python is shown at its neutral path (isolation/agent_python.VIEW)
    assert result["python"] == f"{VIEW}/bin/python3" and not result["a2rl"]
    assert result["goal"] and result["admissible"] > 5 and result["after_first_step"]
    assert result["won"]
    leaked = [p for p in ws.rglob("*") if "valid_unseen" in str(p)]
    leaked += [p for p in agent_python.rglob("*") if "valid_unseen" in str(p)
               or p.name in ("game.tw-pddl", "traj_data.json")]  # no game at all there
    assert not leaked, leaked[:5]


def test_evaluate_plays_the_sealed_game_with_a_model(prepared, tiny_model):
    task, out, _ = prepared
    inference = InferenceConfig(backend="hf", batch_size=4, max_new_tokens=4, torch_threads=1)
    result = task.evaluate(tiny_model, out.test, inference)
    assert result.n == 1 and result.per_item == [0.0]  # a random tiny model does not win
    (record,) = result.records
    assert record["goal_type"] == "clean" and record["steps"] == 12
    assert "success_clean" in result.breakdown


def test_paper_configuration_and_the_missing_data_error(tmp_path):
    from a2rl_tasks.alfworld.params import AlfworldParams

    from a2rl.config.compose import compose

    cfg = compose(["task=alfworld"])
    params = AlfworldParams.from_dict(cfg.task.params)
    assert (params.source, params.split, params.test_games, params.max_steps,
            params.data_path) == ("alfworld", "eval_out_of_distribution", 134, 50, "alfworld")
    task = load_task(cfg.task, tmp_path)  # a data folder without alfworld/
    out = PreparedTaskPaths(tmp_path / "prepared")
    with pytest.raises(ConfigError, match="no ALFWorld data"):
        task.prepare(out)
    with pytest.raises(ConfigError, match="include the test split"):
        load_task(alfworld_cfg(train_splits=["valid_unseen"]), tmp_path).prepare(out)


def test_goal_split():
    from a2rl_tasks.alfworld.alfworld_env import split_goal

    text, goal = split_goal("-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of "
                            "a room.\n\nYour task is to: put some mug on desk.")
    assert (text, goal) == ("You are in the middle of a room.", "put some mug on desk.")


@pytest.mark.skipif(not (FULL and (FULL / "json_2.1.1").is_dir()),
                    reason="the ALFWorld data ($A2RL_DATA/alfworld)")
def test_walkthroughs_win_sealed_test_games_of_the_full_data():
    """The paper's test split has its 134 games, and the walkthroughs of a sample of them (one
    per task type) win through the task's environment."""
    from a2rl_tasks.alfworld.alfworld_data import find_games
    from a2rl_tasks.alfworld.alfworld_env import PROMPT, AlfworldExpertEnv, task_type

    games = find_games(FULL, "eval_out_of_distribution")
    assert len(games) == 134
    by_type: dict[str, list[str]] = {}
    for g in random.Random(0).sample(games, len(games)):
        by_type.setdefault(task_type(g), []).append(str(g))
    sample = [g for kind in sorted(by_type) for g in by_type[kind][:1]]
    assert len(by_type) == 6
    episodes = play(sample, AlfworldExpertEnv, ExpertPolicy(0), 50, PROMPT)
    assert [e.game for e in episodes if not e.won] == []
