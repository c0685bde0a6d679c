"""ALFWorld-style interactive task: the model plays text household games, one action per turn,
and scores the share of games it wins within ``max_steps`` (success rate x 100, with a
breakdown by goal type).

The grader plays all sealed test games in lockstep (``a2rl.task.envs.play``): one batched generation
per step through ``a2rl.task.inference`` (HF on CPU, vLLM on GPU), greedy, each reply parsed into
the closest admissible action. The prompt is ``textworld_env.PROMPT`` (goal, last 2 steps,
observation, admissible actions) in the model's chat template; ``data/train.jsonl`` holds the same
prompts for expert actions, so a prompt/completion trainer sees what the grader sends.

Generation (not log-probability ranking of the admissible actions) is the grader's policy: it is
what the model would do when deployed, it runs on every inference backend, and greedy batched
generation equals sequential generation. The reference ``grpo`` agents sample their rollouts
the same way (at temperature 1), so what they train is what the grader plays; the parser maps
near-misses onto the list.
"""

from __future__ import annotations

import json
import random
import shutil
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

from a2rl.task import (
    Choice,
    ConfigError,
    EpisodeView,
    EvalResult,
    ExpertPolicy,
    GeneratorPolicy,
    InferenceConfig,
    PreparedTaskPaths,
    RandomPolicy,
    Rollouts,
    Task,
    TaskConfig,
    iter_jsonl,
    play,
    render_readme,
    require_test_feedback,
    score_by_group,
    ship_episode_modules,
    success_rate,
    write_jsonl_atomic,
)

from .params import AlfworldParams
from .textworld_env import HouseholdEnv


class PerturbedExpert:
    """The expert, but with probability ``p`` a random admissible action instead (never on the
    last allowed step), so demonstrations also show how to recover from a detour; every step is
    still labelled with the expert's action from that state."""

    def __init__(self, seed: int, p: float, max_steps: int):
        self.seed, self.p, self.max_steps = seed, p, max_steps
        self.expert, self.noise = ExpertPolicy(seed), RandomPolicy(seed)

    def choose(self, views: list[EpisodeView]) -> list[Choice]:
        out = []
        for v in views:
            rng = random.Random(f"perturb|{self.seed}|{v.game}|{v.step}")
            detour = v.step < self.max_steps // 2 and rng.random() < self.p
            out.append(self.noise.choose([v])[0] if detour else self.expert.choose([v])[0])
        return out


def breakdown_by_type(types: list[str], won: list[float]) -> dict[str, float]:
    """Success rate (0-100) per goal type, keys ``success_<type>``, plus ``n_<type>``."""
    return score_by_group(types, won, "success")


class AlfworldTask(Task):
    metric = "success rate (games won within max_steps)"
    def __init__(self, cfg: TaskConfig, data_root: Path):
        super().__init__(cfg, data_root)
        self.params = AlfworldParams.from_dict(cfg.params)
        require_test_feedback(cfg)
        self.fmt = self.params.episode_prompt(history=self.params.history)

    # ---- environments -----------------------------------------------------------------------

    def data_files(self) -> list[Path]:
        if self.params.source == "household":
            return []
        root = Path(self.params.data_path)
        return [(root if root.is_absolute() else self.data_root / root) / "json_2.1.1"]

    def _env_factory(self, expert: bool = False):
        """The environment class; for real ALFWorld games ``expert`` turns on the expert's
        next action in ``info`` (demonstrations only: the grader never needs it)."""
        if self.params.source == "household":
            return HouseholdEnv
        from .alfworld_env import AlfworldEnv, AlfworldExpertEnv
        return AlfworldExpertEnv if expert else AlfworldEnv

    def _env_module(self) -> str:
        """The environment's source file, copied into the agent's data folder."""
        return "household_env.py" if self.params.source == "household" else "alfworld_env.py"

    def grading_settings(self) -> dict[str, Any]:
        return {"prompt": asdict(self.fmt), "actions": self.params.actions}

    def rollouts(self) -> Rollouts:
        """The grader's environment class in the copied module (for ALFWorld without the
        expert: replanning with Fast Downward at every step would cost more than the rollout),
        rewarded by whether the episode was won."""
        env = "HouseholdEnv" if self.params.source == "household" else "AlfworldEnv"
        return Rollouts(module=Path(self._env_module()).stem, env=env, reward="won",
                        prompt=asdict(self.fmt), actions=self.params.actions,
                        live=self.cfg.inference.live_episodes)

    def _games(self, split: Path) -> tuple[list[dict[str, Any]], list[str], Path]:
        """The split's rows, their game ids and the folder the ids are relative to."""
        rows = list(iter_jsonl(split))
        if not rows:
            raise ValueError(f"{split}: no games to evaluate")
        root = split.parent.resolve()
        games = [row["game"] for row in rows]
        missing = [g for g in games if not (root / g).exists()]
        if missing:
            raise FileNotFoundError(f"{split}: {len(missing)} game files missing, e.g. "
                                    f"{root / missing[0]}; re-run prepare")
        return rows, games, root

    # ---- data -------------------------------------------------------------------------------

    def twin_split(self, prepared: PreparedTaskPaths, folder: Path, seed: int) -> Path | None:
        """As many games as the test split, of each goal type as many as test has, generated
        from ``seed`` on (the real ALFWorld games are a fixed pool: None). Seeds in train's or
        test's range are skipped."""
        if self.params.source != "household":
            return None
        from .games import Difficulty, make_games
        p = self.params
        test = list(iter_jsonl(prepared.test))
        used = {row["seed"] for row in test} | {
            json.loads(meta.read_text())["seed"]
            for meta in (prepared.data / "games").glob("*.meta.json")}
        while set(range(seed, seed + len(test) * 20)) & used:
            seed += len(test) * 20
        games = make_games(folder / "games", "twin", len(test), seed,
                           Difficulty(p.rooms, p.objects, p.quest_length), p.goal_types,
                           mix=dict(Counter(row["goal_type"] for row in test)))
        write_jsonl_atomic(folder / "twin.jsonl", [
            {"id": Path(m["game"]).stem, "game": f"games/{m['game']}",
             "goal_type": m["goal_type"], "goal": m["goal"], "seed": m["seed"]} for m in games])
        return folder / "twin.jsonl"

    def prepare(self, out: PreparedTaskPaths) -> dict[str, Any]:
        p = self.params
        started = time.monotonic()
        for folder in (out.data / "games", out.sealed / "games"):
            shutil.rmtree(folder, ignore_errors=True)
        if p.source == "household":
            from .games import Difficulty, make_games
            difficulty = Difficulty(p.rooms, p.objects, p.quest_length)
            test = make_games(out.sealed / "games", "test", p.test_games, p.test_seed,
                              difficulty, p.goal_types)
            train = make_games(out.data / "games", "train", p.train_games, p.train_seed,
                               difficulty, p.goal_types)
            overlap = {m["seed"] for m in test} & {m["seed"] for m in train}
            if overlap:
                raise ConfigError(f"train and test games share seeds {sorted(overlap)[:5]}")
            train_files = [str(out.data / "games" / m["game"]) for m in train]
            test_rows = [{"id": Path(m["game"]).stem, "game": f"games/{m['game']}",
                          "goal_type": m["goal_type"], "goal": m["goal"], "seed": m["seed"]}
                         for m in test]
            train_types = {str(out.data / "games" / m["game"]): m["goal_type"] for m in train}
            source = {"kind": "household", "generator": "textworld.generator.make_game",
                      "train_seeds": [train[0]["seed"], train[-1]["seed"]],
                      "test_seeds": [test[0]["seed"], test[-1]["seed"]]}
        else:
            from .alfworld_data import prepare_alfworld
            train_files, test_rows, train_types, source = prepare_alfworld(p, self.data_root,
                                                                           out)
        write_jsonl_atomic(out.test, test_rows)
        out.validation.unlink(missing_ok=True)
        made_s = time.monotonic() - started

        demos = self._demonstrations(train_files, train_types, out.data)
        write_jsonl_atomic(out.data / "trajectories.jsonl", demos["trajectories"])
        write_jsonl_atomic(out.data / "train.jsonl", demos["pairs"])
        write_jsonl_atomic(out.data / "train_games.jsonl",
                     [{"game": str(Path(g).relative_to(out.data)), "goal_type": train_types[g]}
                      for g in train_files])
        here = Path(__file__).parent
        ship_episode_modules(out.data)
        source_file = "textworld_env.py" if p.source == "household" else "alfworld_env.py"
        shutil.copyfile(here / source_file, out.data / self._env_module())
        (out.data / "README.md").write_text(self._data_readme(len(train_files),
                                                              len(demos["pairs"])))

        random_baseline = self.random_baseline(out.test)
        types = [r["goal_type"] for r in test_rows]
        return {
            "task": self.cfg.package, "task_id": self.cfg.id, "source": source,
            "sizes": {"train_games": len(train_files), "test": len(test_rows),
                      "train_pairs": len(demos["pairs"]),
                      "trajectories": len(demos["trajectories"])},
            "test_goal_types": {t: types.count(t) for t in sorted(set(types))},
            "expert_success_train": demos["expert_success"],
            "random_baseline": random_baseline,
            "seconds": {"games": round(made_s, 1),
                        "total": round(time.monotonic() - started, 1)},
            "params": p.to_dict(),
        }

    def _demonstrations(self, games: list[str], types: dict[str, str],
                        base: Path) -> dict[str, Any]:
        """Expert trajectories (clean, then perturbed ones) and their step-level
        prompt -> expert-action pairs in the grader's prompt format."""
        p = self.params
        make_env = self._env_factory(expert=True)
        ids = [str(Path(g).relative_to(base)) for g in games]
        types = {str(Path(g).relative_to(base)): t for g, t in types.items()}
        trajectories, pairs, clean_won = [], [], 0.0
        for k in range(p.trajectories_per_game):
            policy = ExpertPolicy(k) if k == 0 else PerturbedExpert(k, 0.3, p.max_steps)
            episodes = play(ids, make_env, policy, p.max_steps + (4 if k else 0), self.fmt,
                            keep_prompts=True, root=base)
            if k == 0:
                clean_won = success_rate(episodes)
            for ep in episodes:
                gid = ep.game
                trajectories.append({
                    "game": gid, "goal_type": types[gid], "goal": ep.goal,
                    "kind": "expert" if k == 0 else "perturbed_expert", "won": ep.won,
                    "actions": [s["action"] for s in ep.steps],
                    "expert_actions": [s["expert"] for s in ep.steps],
                    "observations": [s["observation"] for s in ep.steps]})
                for i, s in enumerate(ep.steps):
                    if s["expert"]:
                        pairs.append({"id": f"{len(pairs)}-{k}-{i}", "game": gid,
                                      "step": i, "prompt": s["prompt"],
                                      "completion": s["expert"]})
        return {"trajectories": trajectories, "pairs": pairs, "expert_success": clean_won}

    def random_baseline(self, split: Path) -> dict[str, Any]:
        """Success rate of a uniformly random admissible action (mean over seeds)."""
        rows, games, root = self._games(split)
        scores, won = [], [0.0] * len(games)
        for seed in range(self.params.random_seeds):
            eps = play(games, self._env_factory(), RandomPolicy(seed), self.params.max_steps,
                       self.fmt, root=root)
            scores.append(success_rate(eps))
            won = [w + e.won / self.params.random_seeds for w, e in zip(won, eps)]
        return {"score": sum(scores) / len(scores), "per_seed": scores,
                "breakdown": breakdown_by_type([r["goal_type"] for r in rows], won)}

    def _data_readme(self, n_games: int, n_pairs: int) -> str:
        example = self.fmt.example("<goal>", [("<previous action>", "<what it did>")],
                                   "<what you see now>", ["<action 1>", "<action 2>"])
        return render_readme(Path(__file__).with_name("data_readme.md.j2"), {
            "n_games": n_games, "n_pairs": n_pairs, "p": self.params,
            "rollouts": self.rollouts(), "sends": self.fmt.describe(), "example": example})

    # ---- scoring ----------------------------------------------------------------------------

    def evaluate(self, model_dir: Path, split: Path, inference: InferenceConfig) -> EvalResult:
        from a2rl.task import load_generator

        started = time.perf_counter()
        rows, games, root = self._games(split)
        generator = load_generator(Path(model_dir), inference)
        try:
            policy = GeneratorPolicy(generator, self.params.max_new_tokens,
                                     actions=self.params.actions)
            episodes = play(games, self._env_factory(), policy, self.params.max_steps, self.fmt,
                            root=root, live=inference.live_episodes)
        finally:
            close = getattr(generator, "close", None)
            if close:
                close()
        per_item = [1.0 if ep.won else 0.0 for ep in episodes]
        records = [{"id": row["id"], "goal_type": row["goal_type"], "goal": ep.goal,
                    "won": ep.won, "steps": ep.n_steps,
                    "actions": [s["action"] for s in ep.steps],
                    "replies": [s["reply"] for s in ep.steps],
                    "parse": [s["method"] for s in ep.steps]}
                   for row, ep in zip(rows, episodes, strict=True)]
        methods = [m for r in records for m in r["parse"]]
        breakdown = breakdown_by_type([r["goal_type"] for r in rows], per_item)
        breakdown["mean_steps"] = sum(ep.n_steps for ep in episodes) / len(episodes)
        breakdown["exact_action_pct"] = 100.0 * methods.count("exact") / max(1, len(methods))
        breakdown["invalid_action_pct"] = 100.0 * methods.count("invalid") / max(1, len(methods))
        return EvalResult(per_item=per_item, seconds=time.perf_counter() - started,
                          records=records, breakdown=breakdown)

    # ---- agent-facing -----------------------------------------------------------------------

    def description(self) -> str:
        text = Path(__file__).with_name("description.md").read_text()
        if self.params.source == "household":
            return text
        return (text.replace("household_env.py", "alfworld_env.py")
                .replace("(TextWorld game files)", "(ALFWorld's game files, TextWorld PDDL)")
                .replace("held-out **text household games** (ALFWorld-style:",
                         "held-out **ALFWorld text household games** ("))
