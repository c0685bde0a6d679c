"""The DeepSearchQA task's options (``task.params`` in conf/task/deepsearchqa*.yaml), one typed
dataclass per concern, each field with its default and a help text (as TRL's argument classes).

Two configurations are shipped: the offline world (``source: world``, the local BM25 backend,
the set matcher; conf/task/deepsearchqa_world.yaml) and the paper's cell (``source: dsqa``, the
web backend, the LLM judge; conf/task/deepsearchqa.yaml).
"""

from __future__ import annotations

from dataclasses import MISSING, asdict, dataclass, field, fields, is_dataclass
from typing import Any

from omegaconf import OmegaConf

from a2rl.task import ConfigError, EpisodePromptParams

from .world import WorldSize

SOURCES = ("world", "dsqa")
BACKENDS = ("local", "web")
GRADERS = ("match", "judge")
HEADLINES = ("fully_correct", "f1")


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


@dataclass
class DsqaData:
    """Where the real questions come from and how they are split (the paper's split)."""

    path: str | None = None
    """the questions, relative to paths.data: the official DSQA-full.csv (problem, problem_category,
    answer, answer_type; example_id optional, else the row's position) or a JSON list / jsonl of the
    same fields. null: deepsearchqa/DSQA-full.csv, else deepsearchqa/DSQA-full.json (`a2rl data
    fetch deepsearchqa`)"""
    hf_id: str | None = None
    """read this Hugging Face dataset instead (google/deepsearchqa; needs the Hub)"""
    hf_split: str = "eval"
    """its split"""
    shuffle_seed: int = 42
    """seed of the shuffle before the split"""
    train_size: int = 100
    """items for the agent"""
    test_size: int = 200
    """sealed items, after the train ones"""


@dataclass
class WebParams:
    """A search API over HTTP and page fetching. ``provider`` picks a preset of the other
    fields (``web.PROVIDERS``: brave, serper); any field set here overrides it."""

    provider: str = "brave"
    """preset: brave | serper | custom"""
    endpoint: str | None = None
    """the search URL"""
    method: str | None = None
    """GET (query in the URL) or POST (a JSON body)"""
    key_env: str | None = None
    """environment variable holding the API key (never written anywhere)"""
    key_header: str | None = None
    """header carrying the key"""
    query_field: str | None = None
    """query parameter name"""
    count_field: str | None = None
    """result-count parameter"""
    results_path: str | None = None
    """dotted path of the result list in the answer (web.results)"""
    title_field: str | None = None
    """a result's title field"""
    url_field: str | None = None
    """a result's URL field"""
    snippet_field: str | None = None
    """a result's snippet"""
    price_per_search_usd: float | None = None
    """USD per search request (the provider's price page)"""
    max_usd: float | None = None
    """the search API's spending limit over one run's gradings (null: none); then grading stops and
    the agent is told grading_budget_exhausted"""
    timeout_s: float = 20.0
    """per request"""
    retries: int = 2
    """retries of a failed search (5xx, 429, timeouts) before grading fails"""
    max_page_bytes: int = 3_000_000
    """larger pages are cut"""
    user_agent: str = "a2rl-deepsearchqa/0.1 (research benchmark)"
    """sent with every request"""


@dataclass
class JudgeParams:
    """The LLM judge of the real questions: a conf/driver/ provider reached through a recording
    proxy the harness lends (it holds the key, prices and logs each call; judge.py)."""

    driver: str = "gemini_2_5_flash"
    """a conf/driver/ name (the DeepSearchQA paper's autorater is Gemini 2.5 Flash); its key
    variable, model and prices are the driver's"""
    max_usd: float | None = 20.0
    """the judge's spending limit over one run's gradings; then grading fails"""
    max_tokens: int = 2048
    """the judge's answer length"""
    retries: int = 4
    """retries of a failed or malformed answer, with exponential backoff"""
    timeout_s: float = 120.0
    """per call"""
    concurrency: int = 4
    """calls in flight at once"""


@dataclass
class DeepSearchParams(EpisodePromptParams):
    source: str = "world"
    """world: the offline knowledge world; dsqa: the 900 real questions"""
    backend: str = "local"
    """local: BM25 over the world's pages; web: a search API and page fetching"""
    grader: str = "match"
    """match: the deterministic set matcher; judge: the DeepSearchQA LLM judge"""
    headline: str = "fully_correct"
    """the item score: fully_correct (1 when every expected item is found and nothing else;
    DeepSearchQA's headline) or f1 (the item's F1 of precision and recall, DeepSearchQA's F1
    metric); the other stays in the breakdown"""
    max_steps: int = 10
    """actions per episode (the reference code uses 6; the world's 4-hop questions need 9 with one
    search per hop)"""
    results_per_search: int = 5
    """results listed per search"""
    page_chars: int = 700
    """characters of a page shown per open / next page"""
    snippet_chars: int = 160
    """characters of a result snippet"""
    history: int = 2
    """prompt_format=rewrite: previous steps in the prompt"""
    max_observation_chars: int = 900
    """observations in the prompt are clipped to this"""
    max_new_tokens: int = 48
    """reply length per action"""
    # the world
    world_seed: int = 0
    """seed of the world's entities"""
    world: WorldSize = field(default_factory=WorldSize)
    """entities of each kind in the world"""
    train_questions: int = 300
    """world questions for the agent"""
    test_questions: int = 60
    """sealed world questions"""
    train_seed: int = 1_000_003
    """seed of the train questions"""
    test_seed: int = 7_340_117
    """seed of the test questions"""
    # the real questions
    dsqa: DsqaData = field(default_factory=DsqaData)
    """the real questions"""
    web: WebParams = field(default_factory=WebParams)
    """the web backend"""
    judge: JudgeParams = field(default_factory=JudgeParams)
    """the LLM judge"""

    def __post_init__(self) -> None:
        _require(self.source in SOURCES, f"task.params.source={self.source!r}; expected one of "
                                          f"{SOURCES}")
        _require(self.backend in BACKENDS, f"task.params.backend={self.backend!r}; expected "
                                            f"one of {BACKENDS}")
        _require(self.grader in GRADERS, f"task.params.grader={self.grader!r}; expected one of "
                                          f"{GRADERS}")
        _require(self.headline in HEADLINES, f"task.params.headline={self.headline!r}; "
                                              f"expected one of {HEADLINES}")
        _require(self.source == "dsqa" or self.backend == "local",
                 "task.params.source=world is served by backend=local only (the world is not "
                 "on the web)")
        _require(self.source == "world" or self.backend == "web",
                 "task.params.source=dsqa needs backend=web (the real questions need the open "
                 "web; the local corpus is the world's)")
        _require(self.source == "world" or self.grader == "judge",
                 "task.params.source=dsqa needs grader=judge (free-form answers to real "
                 "questions need the LLM judge)")
        for name in ("max_steps", "results_per_search", "page_chars", "snippet_chars",
                     "max_new_tokens", "max_observation_chars", "train_questions",
                     "test_questions"):
            _require(getattr(self, name) >= 1, f"task.params.{name}={getattr(self, name)}; "
                                                "expected >= 1")
        _require(self.history >= 0, f"task.params.history={self.history}; expected >= 0")
        _require(self.train_seed != self.test_seed,
                 "task.params.train_seed and test_seed must differ")
        _require(self.dsqa.train_size >= 1 and self.dsqa.test_size >= 1,
                 "task.params.dsqa.train_size and test_size must be >= 1")

    @classmethod
    def from_dict(cls, params: Any) -> DeepSearchParams:
        raw = OmegaConf.to_container(params, resolve=True) if OmegaConf.is_config(params) \
            else dict(params or {})
        return _build(cls, raw, "task.params")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _build(cls: type, raw: dict[str, Any], where: str) -> Any:
    """``cls`` from a dict, nested dataclasses included; unknown keys are an error."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} must be a mapping, got {raw!r}")
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(raw) - set(known))
    _require(not unknown, f"{where} has unknown keys {unknown}; expected some of "
                          f"{sorted(known)}")
    values = {}
    for name, value in raw.items():
        f = known[name]
        default = f.default_factory() if f.default_factory is not MISSING else f.default
        values[name] = _build(type(default), value, f"{where}.{name}") \
            if is_dataclass(default) else value
    try:
        return cls(**values)
    except ConfigError:
        raise
    except (TypeError, ValueError) as err:  # a nested class's own check, or a wrong type
        raise ConfigError(f"{where}: {err}") from err
