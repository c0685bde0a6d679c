"""How far WebShop's offline title-noun stand-in is from the reference code's spaCy tagging.

    python experiments/webshop_tagger_gap/measure.py              # the default webshop task
    python experiments/webshop_tagger_gap/measure.py --seeds 5 --out gap.json \
        task.params.test_goals=200

The reward's product-type factor ``r_type`` compares the nouns of the bought product's title
with the goal's (``tasks/webshop/reward.py``). The reference code takes what spaCy's
``en_core_web_sm`` tags NOUN or PROPN; without that model (setup.sh does not install it) the
reward takes the title's content words. This script needs the model importable as
``en_core_web_sm`` and compares the two on the prepared catalog:

- ``titles``: goal titles whose noun list differs, mean nouns per title, titles repeating one;
- ``pairs``: goal x product pairs whose ``r_type`` differs, over every product of the catalog
  and over the first results page of a search for the goal's instruction;
- ``random``: the random policy's score on the test goals with each noun finder (the same
  episodes: the policy never reads the reward), and how many episodes' rewards differ.

The expert buys the goal's own product (same search query, so ``r_type`` is 1 either way).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from functools import lru_cache
from pathlib import Path


def nouns_by(tagger: str):
    """A title -> nouns function (cached: every title is read once per goal)."""
    from a2rl_tasks.webshop import reward

    if tagger == "content-words":
        return lru_cache(maxsize=None)(reward.content_words)
    nlp = reward._spacy_tagger()
    if nlp is None:
        sys.exit("webshop_tagger_gap: spaCy's en_core_web_sm is not importable")
    return lru_cache(maxsize=None)(
        lambda title: tuple(t.text.lower() for t in nlp(title) if t.pos_ in ("NOUN", "PROPN")))


def with_nouns(finder, work):
    """``work()`` with the reward's title nouns taken from ``finder``."""
    from a2rl_tasks.webshop import reward

    saved = reward.title_nouns
    reward.title_nouns = finder
    try:
        return work()
    finally:
        reward.title_nouns = saved


def titles_report(goals, finders) -> dict:
    names = sorted({g["name"] for g in goals})
    lists = {t: [f(n) for n in names] for t, f in finders.items()}
    a, b = lists.values()
    return {"goal_titles": len(names),
            "noun_lists_differ_pct": 100 * sum(x != y for x, y in zip(a, b)) / len(names),
            **{f"mean_nouns_{t}": sum(map(len, ls)) / len(ls) for t, ls in lists.items()},
            **{f"repeat_a_noun_pct_{t}": 100 * sum(len(set(x)) < len(x) for x in ls) / len(ls)
               for t, ls in lists.items()}}


def pairs_report(goals, products, first_page, finders) -> dict:
    from a2rl_tasks.webshop.reward import type_reward

    def r_types(pairs):
        return {t: with_nouns(f, lambda: [type_reward(p, g)["r_type"] for g, p in pairs])
                for t, f in finders.items()}

    out = {}
    for name, pairs in (("catalog", [(g, p) for g in goals for p in products]),
                        ("first_page", [(g, p) for g in goals for p in first_page(g)])):
        a, b = r_types(pairs).values()
        differ = sum(x != y for x, y in zip(a, b))
        out[name] = {"pairs": len(pairs), "r_type_differs_pct": 100 * differ / len(pairs),
                     "mean_abs_r_type_gap": sum(abs(x - y) for x, y in zip(a, b)) / len(pairs)}
    return out


def random_report(task, games, root, seeds, finders) -> dict:
    from a2rl_tasks.webshop.env import WebShopEnv
    from a2rl_tasks.webshop.task import RandomShopper

    from a2rl.task import play

    rewards = {t: [] for t in finders}
    for seed in range(seeds):
        for t, f in finders.items():
            episodes = with_nouns(f, lambda: play(games, WebShopEnv, RandomShopper(seed),
                                                 task.params.max_steps, task.fmt, root=root))
            rewards[t] += [float(e.score) for e in episodes]
    a, b = rewards.values()
    return {"episodes": len(a), **{f"score_{t}": 100 * sum(r) / len(r)
                                   for t, r in rewards.items()},
            "episodes_differ_pct": 100 * sum(x != y for x, y in zip(a, b)) / len(a)}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("overrides", nargs="*", help="Hydra overrides (after task=webshop)")
    ap.add_argument("--seeds", type=int, default=3, help="random-policy seeds")
    ap.add_argument("--out", default=None, help="write the report here (JSON)")
    a = ap.parse_args(argv)

    from a2rl_tasks.webshop.env import CATALOG, INDEX
    from a2rl_tasks.webshop.search import SearchIndex

    from a2rl.common import PreparedTaskPaths, iter_jsonl
    from a2rl.config import compose
    from a2rl.task import load_task

    finders = {t: nouns_by(t) for t in ("spacy", "content-words")}
    cfg = compose(["task=webshop", *a.overrides])
    task = load_task(cfg.task, Path(cfg.paths.data))
    out = PreparedTaskPaths(Path(tempfile.mkdtemp(prefix="webshop-gap-")))
    out.data.mkdir(parents=True, exist_ok=True)
    out.sealed.mkdir(parents=True, exist_ok=True)
    task.prepare(out)
    games_dir = out.sealed / "games"
    products = json.loads((games_dir / CATALOG).read_text())
    by_asin = {p["asin"]: p for p in products}
    goals = list(iter_jsonl(games_dir / "goals.jsonl")) + list(
        iter_jsonl(out.data / "games" / "goals.jsonl"))
    index = SearchIndex.load(games_dir / INDEX)

    def first_page(goal):
        hits = index.search(goal["instruction_text"].lower(), task.params.results_per_page)
        return [by_asin[asin] for asin in hits]

    _, games, root = task._games(out.test)
    report = {"task": cfg.task.id, "goals": len(goals), "products": len(products),
              "titles": titles_report(goals, finders),
              "pairs": pairs_report(goals, products, first_page, finders),
              "random": random_report(task, games, root, a.seeds, finders)}
    text = json.dumps(report, indent=1)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n")
    return report


if __name__ == "__main__":
    main()
