"""The WebShop task's options (``task.params`` in conf/task/webshop.yaml), one field each with
its help text (as TRL's argument dataclasses do).

``source: procedural`` (the offline default) generates the catalog and instructions
(``catalog.py``); ``source: webshop`` loads WebShop's own files by path (the small catalog:
``items_shuffle_1000.json``, ``items_ins_v2_1000.json``, ``items_human_ins.json``; the full one
works the same way)::

    params:
      source: webshop
      product_file: ${paths.data}/webshop/items_shuffle_1000.json
      attribute_file: ${paths.data}/webshop/items_ins_v2_1000.json
      human_instruction_file: ${paths.data}/webshop/items_human_ins.json
      query_file: ${paths.data}/webshop/goal_query_map.json
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from a2rl.task import EpisodePromptParams, from_mapping, require

SOURCES = ("procedural", "webshop")


@dataclass
class WebShopParams(EpisodePromptParams):
    source: str = "procedural"
    """procedural: the generated offline catalog; webshop: WebShop's own data files (product_file,
    attribute_file, human_instruction_file)"""
    train_goals: int | None = 400
    """goals for the agent (procedural: target products made; webshop: a cap on WebShop's train
    goals, null for all)"""
    test_goals: int = 50
    """sealed test goals (webshop: the first of WebShop's 500 test goals)"""
    max_steps: int = 15
    """actions per episode; running out ends it with reward 0. 15 is the WebShop paper's evaluation
    limit (its reference code allows 50-100 in training); the expert needs 3-8"""
    catalog_seed: int = 2022
    """procedural: seed of the catalog (products, instructions) and of its prices"""
    train_seed: int = 1_000_003
    """seed of the train goals' price bounds (procedural: and of which products are train
    targets)"""
    test_seed: int = 7_340_033
    """seed of the test goals' price bounds; must differ from train_seed"""
    near_misses: int = 3
    """procedural: products per target that fail its goal in one way each (a missing attribute, an
    option not offered, over the price bound)"""
    results_per_page: int = 10
    """products per results page: 10 is WebShop's; fewer make shorter prompts (the smoke grid's 5
    halve a results page)"""
    history: int = 3
    """prompt_format=rewrite: previous actions in the prompt (earlier pages are clipped to 80
    characters)"""
    max_new_tokens: int = 32
    """reply length when the grader generates an action (a search query needs about 15 tokens)"""
    random_seeds: int = 3
    """random-policy baseline: mean over this many seeds"""
    trajectories_per_goal: int = 2
    """demonstrations per train goal: the expert's, then ones with detours it recovers from"""
    detour_p: float = 0.3
    """chance per step (first half of an episode) that a perturbed demonstration clicks a wrong
    product, option or page instead of the expert's action"""
    product_file: str | None = None
    """webshop: WebShop's product file (items_shuffle_1000.json or items_shuffle.json)"""
    attribute_file: str | None = None
    """webshop: WebShop's attribute file (items_ins_v2_1000.json or items_ins_v2.json)"""
    human_instruction_file: str | None = None
    """webshop: WebShop's human instructions per product (items_human_ins.json)"""
    query_file: str | None = None
    """webshop, optional: WebShop's goal -> human search query map (goal_query_map.json), the
    expert's first query"""
    num_products: int | None = None
    """webshop: use only the first N products of the product file (null: all)"""
    split_seed: int = 233
    """webshop: the seed WebShop shuffles its goals with before splitting them (test: goals 0-499,
    train: 1500 on)"""

    def __post_init__(self) -> None:
        require(self.source in SOURCES,
                f"task.params.source={self.source!r}; expected one of {SOURCES}")
        for name in ("test_goals", "max_steps", "results_per_page", "history", "max_new_tokens",
                     "random_seeds", "trajectories_per_goal"):
            require(getattr(self, name) >= 1,
                    f"task.params.{name}={getattr(self, name)}; expected >= 1")
        require(self.train_goals is None or self.train_goals >= 1,
                f"task.params.train_goals={self.train_goals}; expected >= 1 or null")
        require(self.near_misses >= 0 and 0.0 <= self.detour_p <= 1.0,
                f"task.params.near_misses={self.near_misses} / detour_p={self.detour_p}: "
                "expected near_misses >= 0, 0 <= detour_p <= 1")
        require(self.train_seed != self.test_seed,
                f"task.params.train_seed and test_seed are both {self.train_seed}; train and "
                "test goals need their own seeds")
        if self.source == "webshop":
            missing = [n for n in ("product_file", "attribute_file", "human_instruction_file")
                       if not getattr(self, n)]
            require(not missing, f"task.params.source=webshop needs {missing}: the paths of "
                                 "WebShop's data files")
            require(self.test_goals <= 500, f"task.params.test_goals={self.test_goals}: "
                                            "WebShop's test split has 500 goals")

    @classmethod
    def from_dict(cls, params: Any) -> WebShopParams:
        """Build from ``TaskConfig.params``; unknown keys are an error that names them."""
        return from_mapping(cls, params, "task.params")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
