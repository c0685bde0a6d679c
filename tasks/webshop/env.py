"""WebShop's text environment (Yao et al. 2022; the reference code's
``web_agent_site/envs/web_agent_text_env.py`` in its ``text`` observation mode) behind the
``a2rl.task.envs.TextEnv`` interface.

Pages and actions, as in WebShop:

- search page: ``search[<query>]`` (free text, BM25 over the catalog, top 50 hits);
- results page (10 per page, WebShop's; a shop folder's ``shop.json`` may set fewer, as the
  smoke grid does): ``click[<asin>]`` (or the product's title), ``click[next >]``,
  ``click[< prev]`` (after page 1), ``click[back to search]``;
- product page: ``click[<option value>]`` (one per option group; a later click in a group
  replaces the earlier one), ``click[description]``, ``click[features]``, ``click[reviews]``,
  ``click[buy now]``, ``click[< prev]`` (back to the results), ``click[back to search]``;
- description / features / reviews pages: ``click[< prev]`` (back to the product),
  ``click[back to search]``.

``click[buy now]`` ends the episode with WebShop's reward for the product and options bought
(``reward.purchase_reward``); every other step gives 0. An action that is not available on the
page leaves the state unchanged and says so. Observations are WebShop's simple text mode
(visible texts joined by `` [SEP] ``) without the instruction, which the prompt shows as the
goal; a product page starts with the options clicked so far.

A game is ``<folder>/<goals file>#<goal id>``: the folder also holds the catalog
(``catalog.json``, products as ``products.load_products`` gives them) and its search index
(``index/``), loaded once per process and shared by every environment. ``info["expert"]`` is
the scripted expert's action from the current state: search (the goal's ``search_query``, then
the instruction, then the product's name), page to the target product, click it, choose the
product's option values that match the goal's options, buy.

Self-contained apart from ``thefuzz``, ``bm25s`` and ``PyStemmer``: the task copies this
package into the agent's data folder (``data/webshop_env/``), next to ``a2rl_envs.py``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

try:
    from a2rl.task import Observation, PromptFormat, Step, TextEnv
except ImportError:  # inside an agent's sandbox: the copy next to this package
    from a2rl_envs import Observation, PromptFormat, Step, TextEnv

from thefuzz import fuzz

from .products import instruction_without_price
from .reward import FUZZY_MATCH, goal_option_values, normalize_color, purchase_reward
from .search import SearchIndex

RESULTS_PER_PAGE = 10  # WebShop's PRODUCT_WINDOW
SETTINGS = "shop.json"  # a shop folder's page settings (results_per_page), when not WebShop's
SEARCH_ACTION = "search[<query>]"  # the search page's one action: a template for free text
BACK, NEXT, PREV, BUY = "back to search", "next >", "< prev", "buy now"
SUB_PAGES = ("description", "features", "reviews")
SEP = " [SEP] "
INSTRUCTIONS = (
    "You are shopping on WebShop for the item the goal describes. Reply with exactly one action "
    "and nothing else: search[your query] on the search page, otherwise click[...] with one of "
    "the available actions.")

# the prompt the grader uses: the last 3 actions, earlier pages clipped short, the current page
# in full (a results page of 10 products runs to about 1,000 characters)
PROMPT = PromptFormat(instructions=INSTRUCTIONS, history=3, max_observation_chars=1400,
                      max_history_chars=80)
CATALOG, INDEX = "catalog.json", "index"
_ACTION = re.compile(r"^\s*(\w+)\s*\[(.*)\]\s*$", re.DOTALL)


class Shop:
    """A catalog, its search index and a goals file, loaded once per version of the goals file."""

    _loaded: dict[tuple[str, str], tuple[tuple[int, int], Shop]] = {}

    def __init__(self, folder: Path, goals_file: str):
        products = json.loads((folder / CATALOG).read_text())
        self.products = {p["asin"]: p for p in products}
        self.index = SearchIndex.load(folder / INDEX)
        settings = folder / SETTINGS
        self.results_per_page = int(json.loads(settings.read_text())["results_per_page"]) \
            if settings.is_file() else RESULTS_PER_PAGE
        self.goals = {}
        for line in (folder / goals_file).read_text().splitlines():
            if line.strip():
                goal = json.loads(line)
                self.goals[str(goal["id"])] = goal

    @classmethod
    def of(cls, game: str) -> tuple[Shop, dict[str, Any]]:
        """The shop and the goal that a game string names."""
        path, _, goal_id = str(game).rpartition("#")
        if not path or not goal_id:
            raise ValueError(f"WebShop game {game!r}: expected <folder>/<goals file>#<goal id>")
        file = Path(path).resolve()
        if not file.is_file():
            raise FileNotFoundError(f"WebShop goals file not found: {file}")
        # keyed on the file's version too: a shop folder written again in this process (a
        # twin split drawn anew, a re-run prepare) is loaded again, not served stale
        stat = file.stat()
        key, version = (str(file.parent), file.name), (stat.st_mtime_ns, stat.st_size)
        cached = cls._loaded.get(key)
        if cached is None or cached[0] != version:
            cached = cls._loaded[key] = (version, cls(file.parent, file.name))
        shop = cached[1]
        if goal_id not in shop.goals:
            raise KeyError(f"WebShop game {game!r}: no goal {goal_id!r} in {file}")
        return shop, shop.goals[goal_id]


def load_games(folder: str | Path, goals_file: str = "goals.jsonl") -> list[str]:
    """The games of a goals file in ``folder`` (the train goals in ``data/games``)."""
    file = Path(folder) / goals_file
    if not file.is_file():
        raise FileNotFoundError(f"no WebShop goals file {file}")
    ids = [json.loads(line)["id"] for line in file.read_text().splitlines() if line.strip()]
    return [f"{file}#{i}" for i in ids]


def split_action(action: str) -> tuple[str, str | None]:
    """WebShop's action parse: ``name[arg]`` -> (name, lower-cased arg); anything else ->
    (the text, None)."""
    m = _ACTION.match(action or "")
    if not m:
        return (action or "").strip().lower(), None
    return m.group(1).lower(), " ".join(m.group(2).lower().split())


def best_option(options: dict[str, list[str]], wanted: str) -> tuple[str, str] | None:
    """The (group, value) of a product's options that matches a goal option best, if any
    matches (the reward's matching: colours normalized, token-set ratio above 85)."""
    scored = [(fuzz.token_set_ratio(normalize_color(v), normalize_color(wanted)), -i, g, v)
              for i, (g, values) in enumerate(options.items()) for v in values]
    scored = [s for s in scored if s[0] > FUZZY_MATCH]
    if not scored:
        return None
    _, _, group, value = max(scored)
    return group, value


class WebShopEnv(TextEnv):
    """One shopping session per ``reset(game)``; see the module docstring."""

    def __init__(self):
        self.shop: Shop | None = None
        self.goal: dict[str, Any] = {}

    # ---- state -------------------------------------------------------------------------

    def reset(self, game: str) -> Observation:
        self.shop, self.goal = Shop.of(game)
        self.page, self.keywords, self.hits, self.page_no = "search", "", [], 1
        self.asin, self.options, self.sub = None, {}, None
        self.missed = 0  # searches without the target: the expert's next query is the next one
        return self._observation()

    def _product(self) -> dict[str, Any]:
        return self.shop.products[self.asin]

    def _page_hits(self) -> list[str]:
        size = self.shop.results_per_page
        return self.hits[(self.page_no - 1) * size:self.page_no * size]

    def clickables(self) -> list[str]:
        """What can be clicked on the current page (lower-cased, as WebShop keys them)."""
        if self.page == "results":
            nav = [BACK] + ([PREV] if self.page_no > 1 else []) + [NEXT]
            return nav + [a.lower() for a in self._page_hits()]
        if self.page == "item":
            values = [v for vs in self._product()["options"].values() for v in vs]
            return [BACK, PREV] + values + list(SUB_PAGES) + [BUY]
        if self.page == "sub":
            return [BACK, PREV]
        return []

    def admissible(self) -> list[str]:
        if self.page == "search":
            return [SEARCH_ACTION]
        return [f"click[{c}]" for c in dict.fromkeys(self.clickables())]

    # ---- text ----------------------------------------------------------------------------

    def page_text(self) -> str:
        if self.page == "search":
            return "WebShop [SEP] Search"
        if self.page == "results":
            nav = ["Back to Search", f"Page {self.page_no} (Total results: {len(self.hits)})"]
            nav += (["< Prev"] if self.page_no > 1 else []) + ["Next >"]
            rows = []
            for asin in self._page_hits():
                p = self.shop.products[asin]
                rows += [asin, p["Title"], p["Price"]]
            return SEP.join(nav + rows)
        p = self._product()
        if self.page == "sub":
            body = {"description": [p["Description"]], "features": p["BulletPoints"],
                    "reviews": [r.get("body", "") for r in p.get("Reviews", [])]}[self.sub]
            return SEP.join(["Back to Search", "< Prev"] + [t for t in body if t])
        parts = [f"You have clicked {v}." for v in self.options.values()]
        parts += ["Back to Search", "< Prev"]
        for group, values in p["options"].items():
            parts += [group] + values
        parts += [p["Title"], f"Price: {p['Price']}", f"Rating: {p['Rating']}",
                  "Description", "Features", "Reviews", "Buy Now"]
        return SEP.join(parts)

    def _observation(self, prefix: str = "") -> Observation:
        return Observation(text=prefix + self.page_text(), goal=self.goal["instruction_text"],
                           admissible=self.admissible(),
                           info={"expert": self.expert_action(), "page": self.page,
                                 "instruction": self.goal["instruction_text"]})

    # ---- acting --------------------------------------------------------------------------

    def step(self, action: str) -> Step:
        if self.shop is None:
            raise RuntimeError("WebShopEnv.step before reset")
        if self.page == "done":
            raise RuntimeError("WebShopEnv.step after the episode ended (buy now)")
        name, arg = split_action(action)
        if name == "search" and arg and self.page == "search" and not arg.startswith("<"):
            self._search(arg)
        elif name == "click" and arg is not None and self._click(arg):
            if self.page == "done":
                return self._bought()
        else:
            return Step(self._observation(f"Invalid action: {action.strip()!r} is not available "
                                          "on this page." + SEP), 0.0, False,
                        {"won": False, "score": 0.0, "invalid": True})
        return Step(self._observation(), 0.0, False, {"won": False, "score": 0.0})

    def _search(self, query: str) -> None:
        self.keywords, self.hits = query, self.shop.index.search(query)
        self.page, self.page_no, self.asin, self.options = "results", 1, None, {}
        self.missed += self.goal.get("asin") not in self.hits

    def _click(self, arg: str) -> bool:
        """Apply a click; False when nothing on this page has that name."""
        if arg == BACK and self.page in ("results", "item", "sub"):
            self.page, self.asin, self.options, self.sub = "search", None, {}, None
            return True
        if self.page == "results":
            return self._click_results(arg)
        if self.page == "item":
            return self._click_item(arg)
        if self.page == "sub" and arg == PREV:
            self.page, self.sub = "item", None
            return True
        return False

    def _click_results(self, arg: str) -> bool:
        if arg == NEXT:
            self.page_no += 1
            return True
        if arg == PREV and self.page_no > 1:
            self.page_no -= 1
            return True
        titles = {self.shop.products[a]["Title"].lower(): a for a in self._page_hits()}
        asins = {a.lower(): a for a in self._page_hits()}
        asin = asins.get(arg) or titles.get(arg)
        if asin is None:
            return False
        self.page, self.asin, self.options = "item", asin, {}
        return True

    def _click_item(self, arg: str) -> bool:
        if arg == PREV:
            self.page, self.asin, self.options = "results", None, {}
            return True
        if arg in SUB_PAGES:
            self.page, self.sub = "sub", arg
            return True
        if arg == BUY:
            self.page = "done"
            return True
        for group, values in self._product()["options"].items():
            if arg in values:
                self.options[group] = arg
                return True
        return False

    def _bought(self) -> Step:
        product = self._product()
        reward, parts = purchase_reward(product, self.goal, product["price"], self.options)
        won = reward >= 1.0 - 1e-9
        text = (f"Thank you for shopping with us! [SEP] Your score (min 0.0, max 1.0) "
                f"[SEP] {reward:.4f}")
        obs = Observation(text, self.goal["instruction_text"], [],
                          {"expert": None, "page": "done"})
        return Step(obs, reward, True, {"won": won, "score": reward, "reward_info": parts,
                                        "asin": self.asin, "options": dict(self.options)})

    # ---- the expert ----------------------------------------------------------------------

    def expert_queries(self) -> list[str]:
        goal = self.goal
        queries = [goal.get("search_query") or "", instruction_without_price(
            goal["instruction_text"]), goal["name"]]
        return [q.lower() for q in dict.fromkeys(queries) if q]

    def expert_action(self) -> str | None:
        """The scripted expert's action from the current state (None once bought, or when its
        searches are used up without finding the product)."""
        target = self.goal.get("asin")
        if self.page == "search":
            queries = self.expert_queries()
            return f"search[{queries[self.missed]}]" if self.missed < len(queries) else None
        if self.page == "results":
            if target not in self.hits:
                return f"click[{BACK}]"
            wanted_page = self.hits.index(target) // self.shop.results_per_page + 1
            if wanted_page == self.page_no:
                return f"click[{target.lower()}]"
            return f"click[{NEXT if wanted_page > self.page_no else PREV}]"
        if self.page == "sub" or (self.page == "item" and self.asin != target):
            return f"click[{PREV}]"
        if self.page == "item":
            options = self._product()["options"]
            for wanted in goal_option_values(self.goal):
                match = best_option(options, wanted)
                if match and self.options.get(match[0]) != match[1]:
                    return f"click[{match[1]}]"
            return f"click[{BUY}]"
        return None
