"""WebShop (L3, interactive): the model shops in WebShop's text environment for the item an
instruction describes; the score is WebShop's mean reward x 100 over the sealed test goals.

The grader plays all test goals in lockstep (``a2rl.task.envs.play``): one batched greedy
generation per step through ``a2rl.task.inference``, the reply's first line parsed into an
action (``search[...]`` is taken as written; a click is matched to the closest available one).
The prompt is ``env.PROMPT``; ``data/train.jsonl`` holds the same prompts with the expert's
action, so a prompt/completion trainer sees what the grader sends.

Success is reported both ways: ``success_pct`` counts reward 1.0 (the WebShop paper's success
rate), ``success_ge_half_pct`` counts reward >= 0.5 (the looser count of some reference code).
"""

from __future__ import annotations

import json
import random
import shutil
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from a2rl.task import (
    Choice,
    EpisodeView,
    EvalResult,
    ExpertPolicy,
    GeneratorPolicy,
    InferenceConfig,
    PreparedTaskPaths,
    Rollouts,
    Task,
    TaskConfig,
    is_template,
    iter_jsonl,
    play,
    render_readme,
    require_test_feedback,
    score_by_group,
    ship_episode_modules,
    write_jsonl_atomic,
)

from . import products as products_module
from .catalog import CatalogMaker, instruction_key
from .env import BACK, BUY, CATALOG, INDEX, PROMPT, SETTINGS, WebShopEnv
from .params import WebShopParams
from .reward import title_tagger, title_tagger_deviation
from .search import SearchIndex

WEBSHOP_TEST_SPLIT, WEBSHOP_TRAIN_START = 500, 1500  # WebShop's goal index split
ENV_FILES = ("env.py", "reward.py", "search.py", "products.py")


class RandomShopper:
    """A uniformly random available action; on the search page it searches the instruction
    (a random search query would find nothing). Reproducible per (seed, game, step)."""

    def __init__(self, seed: int = 0):
        self.seed = seed

    def choose(self, views: list[EpisodeView]) -> list[Choice]:
        out = []
        for v in views:
            clicks = [a for a in v.admissible if not is_template(a)]
            if not clicks:
                query = products_module.instruction_without_price(v.info["instruction"])
                out.append(Choice(f"search[{query.lower()}]", "", "random"))
                continue
            rng = random.Random(f"{self.seed}|{v.game}|{v.step}")
            out.append(Choice(rng.choice(clicks), "", "random"))
        return out


class DetourExpert:
    """The expert, but with probability ``p`` in the first half of the episode a wrong click
    (another product, option or page; never buy now or back to search) that the expert then
    recovers from. Every step is labelled with the expert's action from that state."""

    def __init__(self, seed: int, p: float, max_steps: int):
        self.seed, self.p, self.max_steps = seed, p, max_steps
        self.expert = ExpertPolicy(seed)

    def choose(self, views: list[EpisodeView]) -> list[Choice]:
        out = []
        for v in views:
            rng = random.Random(f"detour|{self.seed}|{v.game}|{v.step}")
            expert = v.info.get("expert")
            wrong = [a for a in v.admissible if a != expert and not is_template(a)
                     and a not in (f"click[{BUY}]", f"click[{BACK}]")]
            if wrong and v.step < self.max_steps // 2 and rng.random() < self.p:
                out.append(Choice(rng.choice(wrong), "", "detour"))
            else:
                out.append(self.expert.choose([v])[0])
        return out


def tagger_record() -> dict[str, str | None]:
    """The title-noun finder the reward used and how it departs from the reference code's:
    in every result and manifest, so a score from the stand-in is never read as WebShop's."""
    return {"title_tagger": title_tagger(), "title_tagger_deviation": title_tagger_deviation()}


def breakdown(rows: list[dict[str, Any]], rewards: list[float],
              steps: list[int]) -> dict[str, Any]:
    """Both success rates, the mean reward, the mean reward by category, and the title-noun
    finder in use (``tagger_record``)."""
    n = max(1, len(rewards))
    out = {"success_pct": 100.0 * sum(r >= 1.0 - 1e-9 for r in rewards) / n,
           "success_ge_half_pct": 100.0 * sum(r >= 0.5 for r in rewards) / n,
           "mean_reward": sum(rewards) / n, "mean_steps": sum(steps) / max(1, len(steps))}
    categories = [row.get("category", "unknown") for row in rows]
    return out | score_by_group(categories, rewards, "score") | tagger_record()


class WebShopTask(Task):
    metric = "mean reward (WebShop's score in [0, 1]) x 100"
    def __init__(self, cfg: TaskConfig, data_root: Path):
        super().__init__(cfg, data_root)
        self.params = WebShopParams.from_dict(cfg.params)
        require_test_feedback(cfg)
        self.fmt = self.params.episode_prompt(
            instructions=PROMPT.instructions, history=self.params.history,
            max_observation_chars=PROMPT.max_observation_chars,
            max_history_chars=PROMPT.max_history_chars)

    # ---- catalog and goals ---------------------------------------------------------------

    def data_files(self) -> list[Path]:
        p = self.params
        return ([Path(f) for f in (p.product_file, p.attribute_file, p.human_instruction_file)
                 if f] if p.source == "webshop" else [])

    def _procedural(self, folder: Path) -> tuple[list[dict], list[dict], list[dict], dict]:
        """Generate the catalog, write it in WebShop's formats to ``folder``, load it back
        like real data; returns (products, train goals, test goals, source facts)."""
        p = self.params
        made = CatalogMaker(p.catalog_seed, p.near_misses).make(p.train_goals + p.test_goals)
        targets = list(made["targets"])
        random.Random(f"split|{p.catalog_seed}").shuffle(targets)
        test_targets = set(targets[:p.test_goals])
        files = {"items_shuffle.json": made["products"], "items_ins_v2.json": made["attributes"],
                 "items_human_ins.json": made["instructions"],
                 "goal_query_map.json": made["queries"]}
        folder.mkdir(parents=True, exist_ok=True)
        for name, content in files.items():
            (folder / name).write_text(json.dumps(content, indent=1))
        products = products_module.load_products(folder / "items_shuffle.json",
                                                 folder / "items_ins_v2.json",
                                                 seed=p.catalog_seed)
        split = {k: v for k, v in made["instructions"].items() if k in test_targets}
        rest = {k: v for k, v in made["instructions"].items() if k not in test_targets}
        test = products_module.human_goals(products, split, p.test_seed)
        train = products_module.human_goals(products, rest, p.train_seed)
        source = {"kind": "procedural", "catalog_seed": p.catalog_seed,
                  "products": len(products), "families": len(made["targets"]),
                  "near_misses_per_target": p.near_misses,
                  "files": sorted(files), "train_seed": p.train_seed, "test_seed": p.test_seed}
        return products, train, test, {"source": source, "queries": made["queries"]}

    def _webshop(self) -> tuple[list[dict], list[dict], list[dict], dict]:
        """WebShop's own files: its products, its human goals, its split (shuffle with seed
        233; test = goals 0-499, train = goals 1500 on)."""
        p = self.params
        paths = {n: Path(getattr(p, n)) for n in ("product_file", "attribute_file",
                                                  "human_instruction_file")}
        products = products_module.load_products(paths["product_file"], paths["attribute_file"],
                                                 p.num_products, seed=p.split_seed)
        instructions = products_module.read_json(paths["human_instruction_file"],
                                                 "human instruction file")
        goals = products_module.human_goals(products, instructions, p.split_seed)
        random.Random(p.split_seed).shuffle(goals)
        if len(goals) <= WEBSHOP_TRAIN_START:  # a small fixture: the same split, scaled down
            cut = max(1, len(goals) // 3)
            test, train = goals[:cut], goals[cut:]
        else:
            test, train = goals[:WEBSHOP_TEST_SPLIT], goals[WEBSHOP_TRAIN_START:]
        test, train = test[:p.test_goals], train[:p.train_goals] if p.train_goals else train
        queries = (products_module.read_json(Path(p.query_file), "goal -> query map")
                   if p.query_file else {})
        source = {"kind": "webshop", **{k: str(v) for k, v in paths.items()},
                  "query_file": p.query_file, "products": len(products), "goals": len(goals),
                  "split_seed": p.split_seed}
        return products, train, test, {"source": source, "queries": queries}

    @staticmethod
    def _with_ids(goals: list[dict], prefix: str, queries: dict[str, list[str]]) -> list[dict]:
        out = []
        for i, goal in enumerate(goals):
            key = products_module.instruction_without_price(goal["instruction_text"])
            query = (queries.get(key) or queries.get(key.strip(".")) or [""])[0]
            out.append({"id": f"{prefix}-{i:04d}", **goal, "search_query": query})
        return out

    # ---- prepare ---------------------------------------------------------------------------

    def prepare(self, out: PreparedTaskPaths) -> dict[str, Any]:
        p = self.params
        started = time.monotonic()
        sealed_games, data_games = out.sealed / "games", out.data / "games"
        for folder in (sealed_games, data_games, out.sealed / "source"):
            shutil.rmtree(folder, ignore_errors=True)
        if p.source == "procedural":
            products, train, test, facts = self._procedural(out.sealed / "source")
        else:
            products, train, test, facts = self._webshop()
        if not test or not train:
            raise ValueError(f"WebShop data gave {len(train)} train and {len(test)} test goals; "
                             "both splits need at least one")
        train = self._with_ids(train, "train", facts["queries"])
        test = self._with_ids(test, "test", facts["queries"])
        loaded_s = time.monotonic() - started

        indexed = time.monotonic()
        self._write_shop(sealed_games, products)
        index_s = time.monotonic() - indexed
        shutil.copytree(sealed_games, data_games)  # one catalog and index, built once
        write_jsonl_atomic(sealed_games / "goals.jsonl", test)
        write_jsonl_atomic(data_games / "goals.jsonl", train)
        write_jsonl_atomic(out.test, self._split_rows(test))
        out.validation.unlink(missing_ok=True)

        train_games = [f"goals.jsonl#{g['id']}" for g in train]
        demos = self._demonstrations(train_games, {g["id"]: g for g in train}, data_games)
        write_jsonl_atomic(out.data / "trajectories.jsonl", demos["trajectories"])
        write_jsonl_atomic(out.data / "train.jsonl", demos["pairs"])
        self._copy_env(out.data)
        (out.data / "README.md").write_text(self._data_readme(len(train), len(demos["pairs"]),
                                                              len(products)))
        expert_test = self.expert_score(out.test)
        random_baseline = self.random_baseline(out.test)
        categories = [g["category"] for g in test]
        return {
            "task": self.cfg.package, "task_id": self.cfg.id, "source": facts["source"],
            "sizes": {"products": len(products), "train_goals": len(train),
                      "test": len(test), "train_pairs": len(demos["pairs"]),
                      "trajectories": len(demos["trajectories"])},
            "test_categories": {c: categories.count(c) for c in sorted(set(categories))},
            "expert_train": demos["expert"], "expert_test": expert_test,
            "random_baseline": random_baseline, **tagger_record(),
            "seconds": {"catalog": round(loaded_s, 1), "index": round(index_s, 2),
                        "total": round(time.monotonic() - started, 1)},
            "params": p.to_dict(),
        }

    def twin_split(self, prepared: PreparedTaskPaths, folder: Path, seed: int) -> Path | None:
        """As many goals as the test split, each on a fresh family of the catalog's generator
        (a target and its near misses, drawn from ``seed``), played in the sealed catalog with
        those families added (its ASINs kept out of theirs); no instruction is train's or
        test's. WebShop's own goals are a fixed pool: None."""
        if self.params.source != "procedural":
            return None
        p = self.params
        sealed = prepared.sealed / "games"
        test = list(iter_jsonl(sealed / "goals.jsonl"))
        taken = {instruction_key(g["instruction_text"])
                 for g in test + list(iter_jsonl(prepared.data / "games" / "goals.jsonl"))}
        catalog = json.loads((sealed / CATALOG).read_text())
        made = CatalogMaker(seed, p.near_misses, (x["asin"] for x in catalog)).fresh(
            len(test), p.train_goals + p.test_goals, taken)
        rng = random.Random(f"twin|{seed}")
        fresh = [products_module.convert_product(raw, made["attributes"], rng)
                 for raw in made["products"]]
        goals = self._with_ids(products_module.human_goals(fresh, made["instructions"], seed),
                               "twin", made["queries"])
        shop = catalog + fresh
        rng.shuffle(shop)  # the fresh products among the others, as the sealed catalog's are
        shutil.rmtree(folder / "games", ignore_errors=True)
        self._write_shop(folder / "games", shop)
        write_jsonl_atomic(folder / "games" / "goals.jsonl", goals)
        write_jsonl_atomic(folder / "twin.jsonl", self._split_rows(goals))
        return folder / "twin.jsonl"

    def _write_shop(self, games: Path, products: list[dict[str, Any]]) -> None:
        """A shop folder for goals to be played in: the catalog, its page settings and its
        search index."""
        games.mkdir(parents=True)
        (games / CATALOG).write_text(json.dumps(products))
        (games / SETTINGS).write_text(json.dumps({"results_per_page":
                                                  self.params.results_per_page}))
        SearchIndex.build(products).save(games / INDEX)

    @staticmethod
    def _split_rows(goals: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """A split file's rows: each goal as a game of the shop folder ``games/`` next to it."""
        return [{"id": g["id"], "game": f"games/goals.jsonl#{g['id']}", "asin": g["asin"],
                 "category": g["category"], "instruction": g["instruction_text"]}
                for g in goals]

    def grading_settings(self) -> dict[str, Any]:
        return {"prompt": asdict(self.fmt)}

    def rollouts(self) -> Rollouts:
        """The shop copied to ``data/webshop_env/``, rewarded by the episode's final score
        (WebShop's reward in [0, 1], partial matches count)."""
        return Rollouts(module="webshop_env", env="WebShopEnv", reward="score",
                        prompt=asdict(self.fmt), live=self.cfg.inference.live_episodes)

    def _copy_env(self, data: Path) -> None:
        """The environment for the agent's own rollouts: ``data/webshop_env/`` (this task's
        env, reward, search and loader modules) and ``data/a2rl_envs.py``."""
        here, target = Path(__file__).parent, data / "webshop_env"
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir()
        for name in ENV_FILES:
            shutil.copyfile(here / name, target / name)
        (target / "__init__.py").write_text(
            '"""WebShop\'s text environment (a copy of the task\'s own, see env.py)."""\n'
            "from .env import PROMPT, WebShopEnv, load_games\n\n"
            '__all__ = ["PROMPT", "WebShopEnv", "load_games"]\n')
        ship_episode_modules(data)

    def _demonstrations(self, games: list[str], goals: dict[str, dict], root: Path
                        ) -> dict[str, Any]:
        """Expert trajectories (clean, then with detours) and their step-level
        prompt -> expert-action pairs in the grader's prompt format; ``games`` relative to
        ``root``, so that the seeded detours do not depend on where the task is prepared."""
        p = self.params
        trajectories, pairs, expert = [], [], {}
        for k in range(p.trajectories_per_goal):
            policy = ExpertPolicy(k) if k == 0 else DetourExpert(k, p.detour_p, p.max_steps)
            episodes = play(games, WebShopEnv, policy, p.max_steps + (4 if k else 0), self.fmt,
                            keep_prompts=True, root=root)
            if k == 0:
                expert = self._summary(episodes)
            for ep in episodes:
                gid = ep.game.rpartition("#")[2]
                trajectories.append({
                    "goal_id": gid, "instruction": ep.goal, "asin": goals[gid]["asin"],
                    "kind": "expert" if k == 0 else "perturbed_expert", "reward": ep.score,
                    "actions": [s["action"] for s in ep.steps],
                    "expert_actions": [s["expert"] for s in ep.steps],
                    "observations": [s["observation"] for s in ep.steps]})
                for i, s in enumerate(ep.steps):
                    if s["expert"]:
                        pairs.append({"id": f"{gid}-{k}-{i}", "goal_id": gid, "step": i,
                                      "prompt": s["prompt"], "completion": s["expert"]})
        return {"trajectories": trajectories, "pairs": pairs, "expert": expert}

    # ---- scoring ---------------------------------------------------------------------------

    def _games(self, split: Path) -> tuple[list[dict[str, Any]], list[str], Path]:
        """A split's rows, its games ('<goals file>#<goal id>') relative to the root they are
        played from (``play(root=...)``), and that root, the split's folder: seeded policies
        (the random shopper, the detours) then choose the same wherever the task was prepared
        (as alfworld's ``_games``)."""
        rows = list(iter_jsonl(split))
        if not rows:
            raise ValueError(f"{split}: no goals to evaluate")
        for row in rows:
            file = split.parent / row["game"].rpartition("#")[0]
            if not file.is_file():
                raise FileNotFoundError(f"{split}: goals file {file} missing; re-run prepare")
        return rows, [row["game"] for row in rows], split.parent

    @staticmethod
    def _summary(episodes) -> dict[str, float]:
        rewards = [e.score for e in episodes]
        return {"score": 100.0 * sum(rewards) / len(rewards),
                "success_pct": 100.0 * sum(e.won for e in episodes) / len(episodes),
                "mean_steps": sum(e.n_steps for e in episodes) / len(episodes)}

    def expert_score(self, split: Path) -> dict[str, float]:
        """The scripted expert on a split's goals (100 when every goal is reachable)."""
        _, games, root = self._games(split)
        return self._summary(play(games, WebShopEnv, ExpertPolicy(0), self.params.max_steps,
                                  self.fmt, root=root))

    def random_baseline(self, split: Path) -> dict[str, Any]:
        """A random available action each step (mean over seeds)."""
        _, games, root = self._games(split)
        runs = [self._summary(play(games, WebShopEnv, RandomShopper(seed),
                                   self.params.max_steps, self.fmt, root=root))
                for seed in range(self.params.random_seeds)]
        return {key: sum(r[key] for r in runs) / len(runs) for key in runs[0]} | {
            "per_seed": [r["score"] for r in runs]}

    def evaluate(self, model_dir: Path, split: Path, inference: InferenceConfig) -> EvalResult:
        from a2rl.task import load_generator

        started = time.perf_counter()
        rows, games, root = self._games(split)
        generator = load_generator(Path(model_dir), inference)
        try:
            policy = GeneratorPolicy(generator, self.params.max_new_tokens)
            episodes = play(games, WebShopEnv, policy, self.params.max_steps, self.fmt,
                            root=root, live=inference.live_episodes)
        finally:
            close = getattr(generator, "close", None)
            if close:
                close()
        rewards = [float(ep.score) for ep in episodes]
        records = [{"id": row["id"], "category": row["category"], "goal": ep.goal,
                    "reward": ep.score, "won": ep.won, "steps": ep.n_steps,
                    "actions": [s["action"] for s in ep.steps],
                    "replies": [s["reply"] for s in ep.steps],
                    "parse": [s["method"] for s in ep.steps]}
                   for row, ep in zip(rows, episodes, strict=True)]
        methods = [m for r in records for m in r["parse"]]
        result = breakdown(rows, rewards, [ep.n_steps for ep in episodes])
        result["bought_pct"] = 100.0 * sum(
            bool(ep.steps) and ep.steps[-1]["action"] == f"click[{BUY}]" for ep in episodes
        ) / len(episodes)
        result["exact_action_pct"] = 100.0 * sum(m in ("exact", "template") for m in methods
                                                 ) / max(1, len(methods))
        return EvalResult(per_item=rewards, seconds=time.perf_counter() - started,
                          records=records, breakdown=result)

    # ---- agent-facing -----------------------------------------------------------------------

    def _data_readme(self, n_goals: int, n_pairs: int, n_products: int) -> str:
        example = self.fmt.example(
            "<instruction>", [("search[<query>]", "<results page>"), ("click[<asin>]", "<page>")],
            "<the page you see now>", ["click[<action 1>]", "click[<action 2>]"])
        return render_readme(Path(__file__).with_name("data_readme.md.j2"), {
            "n_goals": n_goals, "n_pairs": n_pairs, "n_products": n_products, "p": self.params,
            "sends": self.fmt.describe(), "example": example})

    def description(self) -> str:
        return Path(__file__).with_name("description.md").read_text()
