"""Typed configuration for one grid cell; Hydra composes YAML from conf/ into these dataclasses.

These dataclasses are the one definition of the config: every field documents itself (the
attribute docstring below it, a2rl.config.checks) and every dataclass checks its own values in
``__post_init__``, so a bad config fails at compose time with the offending key named, not an
hour into a run. OmegaConf refuses unknown keys and values of the wrong type while merging into
them (``to_run_config``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from omegaconf import OmegaConf

from a2rl.common.hardware import PRECISIONS
from a2rl.config.checks import ConfigError, require, require_choice, require_folder_name
from a2rl.config.cluster import ClusterConfig, ResourcesConfig
from a2rl.config.prices import PricesConfig
from a2rl.config.task import BACKENDS, InferenceConfig, ModelConfig, TaskConfig

# ConfigError is raised by every check here, importable from this module as before; the cluster,
# prices and task dataclasses are part of RunConfig (the task group's in a2rl.config.task)
__all__ = ["BACKENDS", "ClusterConfig", "ConfigError", "InferenceConfig", "ModelConfig",
           "PricesConfig", "ResourcesConfig", "TaskConfig"]

SANDBOXES = ("bwrap", "none")
AGENT_KINDS = ("reference", "llm")
# what an agent's sandbox may reach (docs/sandbox.md): nothing, the run's LLM proxy, that and
# agent.allowlist's hosts through the egress proxy, or the host's whole network
NETWORK_POLICIES = ("none", "llm", "allowlist", "open")
# the package and model hubs; the egress proxy still refuses those that serve the task's sealed
# split publicly (task.public_sources) unless the grid sets agent.allow_public_sources
DEFAULT_ALLOWLIST = ("pypi.org", "files.pythonhosted.org", "huggingface.co",
                     "cdn-lfs.huggingface.co", "registry.npmjs.org")
# the grid `snakemake --cores all` and `a2rl doctor` run unless told otherwise; conf/config.yaml
# chooses the same one for a composition (tests/config/test_config.py checks they agree)
DEFAULT_GRID = "quick"
PROVIDERS = ("none", "anthropic", "openai", "gemini", "openai_compatible", "local", "replay")
# how the local driver serves its model: vLLM (a GPU), transformers (CPU), auto picks
SERVE_ENGINES = ("auto", "vllm", "transformers")


@dataclass
class AgentConfig:
    """An agent stack: the command run inside the sandbox and what it may reach.

    Reference agents give ``command`` and the agent plugin (``package``) whose scripts it runs;
    LLM-driven agents name a ``stack`` (a stack plugin, a2rl.llm.stacks, that builds the
    command line) and pin its package ``version``, installed into
    resources/tools/<stack>/<version>/ by scripts/install_agents.py."""

    name: str = "noop"
    """Names the agent in run paths and the leaderboard; equals the file name."""
    kind: str = "reference"
    """reference (a scripted baseline agent) or llm (an LLM-driven agent system)."""
    package: Optional[str] = None
    """For reference agents: the agent plugin (entry-point group a2rl.agents; the built-ins are
    src/a2rl/agents/) whose package folder's scripts the sandbox shows at {agents}; null: the plugin
    called like the agent (agent.name). llm agents run no plugin's scripts."""
    command: list[str] = field(default_factory=lambda: ["{python}", "{agents}/noop.py"])
    """argv run in the sandbox for reference agents; the runner expands {python} (the interpreter)
    and {agents} (the read-only copy of agent.package's scripts). Empty for llm agents, whose stack
    builds the command line."""
    network: str = "none"
    """What the sandbox may reach: none (reference agents), llm (only the run's LLM proxy; LLM
    agents), allowlist (the proxy and agent.allowlist's hosts through an egress proxy, logged to
    egress.jsonl) or open (the host's network)."""
    allowlist: list[str] = field(default_factory=lambda: list(DEFAULT_ALLOWLIST))
    """Host names reachable under network=allowlist (a leading dot: any subdomain)."""
    allow_public_sources: bool = False
    """Under network=allowlist, let the agent reach the hosts of task.public_sources (where the
    task's sealed split is public) that agent.allowlist names. false (the default): the egress proxy
    refuses them; a grid opts in with agent: {allow_public_sources: true}."""
    env: dict[str, str] = field(default_factory=dict)
    """Extra environment variables for the agent process."""
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Reference agents' settings by agent name, e.g. {sft: {steps: 40}}; each entry is checked
    against that agent's dataclass (a2rl/agents/settings.py) before a run starts, and the run's own
    agent gets its entry as $A2RL_AGENT_SETTINGS (JSON). Keyed by agent so that one grid_task file
    can tune several agents."""
    torch_threads: int = 0
    """torch CPU threads inside the sandbox; 0 leaves torch's default."""
    precision: str = "auto"
    """Training precision handed to the agent as A2RL_PRECISION (a2rl.common.hardware): auto (bf16
    only where the device computes it natively; emulated bf16 is 4-11x slower), bf16 or fp32."""
    stack: Optional[str] = None
    """The agent CLI for llm agents: a stack plugin's name (entry-point group a2rl.stacks; the
    built-ins claude_code, codex, gemini_cli, opencode, openhands, mini_swe_agent are
    a2rl.llm.stacks.<name>); null for reference agents."""
    version: Optional[str] = None
    """The stack's pinned package version, installed into resources/tools/<stack>/<version>/ by
    scripts/install_agents.py."""
    args: list[str] = field(default_factory=list)
    """Extra command-line arguments appended to the stack's CLI."""
    resources: ResourcesConfig = field(default_factory=ResourcesConfig)
    """What the agent's run asks a cluster for (a cell's job, run_cell, gets the larger of this and
    task.resources)."""

    def __post_init__(self) -> None:
        require_folder_name(self.name, "agent.name")
        require_choice(self.precision, PRECISIONS, f"agent {self.name!r}: precision")
        require_choice(self.kind, AGENT_KINDS, f"agent {self.name!r}: kind")
        require_choice(self.network, NETWORK_POLICIES, f"agent {self.name!r}: network",
                       " (true/false are no longer accepted)")
        require(self.kind != "llm" or self.network != "none",
                f"agent {self.name!r} is kind llm: network none leaves its LLM unreachable")
        require(self.torch_threads >= 0,
                f"agent.torch_threads={self.torch_threads}; expected >= 0")
        if self.kind == "llm":
            require(bool(self.stack) and bool(self.version),
                    f"agent {self.name!r} is kind llm: it needs a stack and a pinned version")
            require(not self.command, f"agent {self.name!r} has a stack; its command is "
                                      f"built by the adapter, so leave command empty")
        else:
            require(bool(self.command), f"agent {self.name!r} has an empty command")
            require(self.stack is None, f"agent {self.name!r}: a reference agent has no stack")


@dataclass
class ServeConfig:
    """The ``local`` driver's model server, started by the harness for one run
    (a2rl.llm.local_driver) and reached, like a paid API, through the recording proxy only."""

    model: ModelConfig = field(default_factory=ModelConfig)
    """The open-weight model served, provisioned like a base model (model.source: smollm2_gguf, hf,
    path) under resources/models/."""
    engine: str = "auto"
    """vllm (vLLM's OpenAI server; needs a GPU), transformers (a2rl.llm.local_server: CPU, no tool
    calls) or auto (vllm where vLLM and a GPU are present)."""
    max_context: int = 4096
    """Tokens of prompt and reply the server takes (the transformers server keeps a longer prompt's
    last tokens; vLLM gets it as --max-model-len)."""
    max_new_tokens: int = 512
    """The most tokens one reply may have (transformers server)."""
    threads: Optional[int] = None
    """CPU threads the transformers server computes with; null: torch's default."""
    vllm_args: list[str] = field(default_factory=list)
    """Extra arguments of `vllm serve`, e.g. [--enable-auto-tool-choice, --tool-call-parser, hermes]
    for a model that calls tools."""
    start_timeout_s: float = 900.0
    """Seconds the server may take to load the model and answer."""

    def __post_init__(self) -> None:
        require(self.engine in SERVE_ENGINES,
                f"driver.serve.engine={self.engine!r}; expected one of {SERVE_ENGINES}")
        require(self.max_context > self.max_new_tokens > 0,
                f"driver.serve: max_context ({self.max_context}) must exceed max_new_tokens "
                f"({self.max_new_tokens}) > 0")
        require(self.threads is None or self.threads >= 1,
                f"driver.serve.threads={self.threads}; expected >= 1 or null")


@dataclass
class DriverConfig:
    """The LLM that drives an agent; ``none`` for the reference agents."""

    name: str = "none"
    """Names the driver in run paths and the leaderboard; equals the file name."""
    provider: str = "none"
    """The provider's API: anthropic, openai, gemini, openai_compatible (any OpenAI-style server,
    e.g. vLLM), local (a model server the harness starts for the run: driver.serve), replay (a
    scripted local server, for tests) or none."""
    model: Optional[str] = None
    """The provider's model id."""
    base_url: Optional[str] = None
    """The provider's API root as its SDK takes it (with /v1 for OpenAI-style APIs, without for
    Anthropic and Gemini); the recording proxy forwards there."""
    api_key_env: Optional[str] = None
    """Name of the environment variable holding the API key (never the key); read by the harness's
    proxy only."""
    openai_base_url: Optional[str] = None
    """The provider's OpenAI-compatible endpoint; agents whose protocol the provider does not speak
    are passed through or translated to OpenAI chat completions there."""
    prices: PricesConfig = field(default_factory=PricesConfig)
    """USD per million input, cached-input and output tokens with the date and page they were read
    from, or free: true (a2rl.config.prices); every provider but none declares them."""
    script: Optional[str] = None
    """The replay driver's script (YAML turns), relative to paths.root; null uses the packaged
    train-and-submit script."""
    serve: Optional[ServeConfig] = None
    """The local driver's server: the model, the engine and its limits."""

    def __post_init__(self) -> None:
        require_folder_name(self.name, "driver.name")
        require_choice(self.provider, PROVIDERS, f"driver {self.name!r}: provider")
        require((self.provider == "local") == (self.serve is not None),
                f"driver {self.name!r}: driver.serve is for provider local, and it needs one")
        if self.provider == "local":
            require(bool(self.model), f"driver {self.name!r} (local) needs model (the name "
                                      f"the server answers to)")
        elif self.provider not in ("none", "replay"):
            require(bool(self.model) and bool(self.base_url),
                    f"driver {self.name!r} ({self.provider}) needs model and base_url")
        if self.provider in ("anthropic", "openai", "gemini"):
            require(bool(self.api_key_env),
                    f"driver {self.name!r} ({self.provider}) needs api_key_env")
        require(self.provider == "replay" or self.script is None,
                f"driver {self.name!r}: only the replay provider takes a script")
        if self.provider != "none":  # no LLM, nothing to price
            self.prices.check_for(self.name)


@dataclass
class BudgetConfig:
    """Limits for one agent run. The baseline is measured before the clock starts."""

    name: str = "quick"
    """Names the budget; equals the file name."""
    time_limit_s: float = 600.0
    """Wall-clock seconds the agent may run; the baseline is measured before."""
    max_submissions: int = 10
    """Submissions the grader accepts in one run."""
    count_eval_time: bool = True
    """Whether time spent scoring submissions counts against time_limit_s; when it does not, the
    agent is paused while a submission is evaluated."""
    kill_grace_s: float = 5.0
    """Seconds between SIGTERM and SIGKILL when the budget runs out."""
    llm_max_tokens: Optional[int] = None
    """Driver LLM tokens (input + output) the agent may use; the proxy (a2rl.llm.proxy) refuses
    further calls and the agent is stopped once reached. null for no limit."""
    llm_max_usd: Optional[float] = None
    """Driver LLM spend in USD, enforced like llm_max_tokens. null for no limit."""
    eval_timeout_s: Optional[float] = 3600.0
    """Seconds one evaluation of a submission may take; past it the grader abandons it and records
    eval_timeout, which counts as a submission and whose time is charged (a submission can hang its
    evaluation). null for no limit."""
    max_store_gb: Optional[float] = 200.0
    """GiB all stored copies of submitted artifacts may take together (the grader's store/); past it
    submissions are refused. null for no quota."""
    max_invalid_submissions: int = 100
    """Invalid submissions recorded in the ledger; further ones are refused and only counted (no
    ledger line, no scores.json rewrite)."""
    invalid_per_minute: float = 30.0
    """Invalid submissions the grader processes a minute (a burst of as many); past it requests are
    refused up front with 429."""
    grader_restarts: int = 3
    """Times the harness restarts the grader's process when it dies during a run (the submission it
    was evaluating is recorded as interrupted); one more death makes the run infra_failed
    (grader_died)."""
    memory_gb: Optional[float] = None
    """GiB of memory all the agent's processes may use together (files in its /tmp and /dev/shm
    included); past it the kernel kills one. null: three quarters of the machine's memory, the rest
    left to the harness and the grader (a2rl.isolation.limits)."""
    max_processes: int = 4096
    """Processes and threads the agent may have at once (a fork bomb stops here)."""
    tmpfs_gb: float = 4.0
    """GiB each of the sandbox's /tmp and /dev/shm holds; a write past it fails with ENOSPC."""
    max_agent_log_mb: float = 100.0
    """MiB of the agent's output kept in agent.log as it comes; past it the output is still read
    (the agent never blocks) but only counted, and its last 64 KiB follow a line saying how many
    bytes were cut (run.json log_cut_bytes)."""
    max_egress_log_lines: int = 100_000
    """Connections through the egress proxy (agent.network=allowlist) logged in egress.jsonl; later
    ones are counted per outcome and summed up in one last line (run.json
    network.egress_unlogged)."""
    disk_gb: Optional[float] = 100.0
    """GiB the host folders the agent writes (workspace/code, workspace/output, an LLM agent CLI's
    folder) may hold together: their own file system where the harness may make one (a write past it
    fails with ENOSPC), else a watchdog that stops the agent past it (status disk_quota_exceeded;
    a2rl.isolation.quota). Raise it for 7B models saved in fp32. null for no quota."""
    disk_files: int = 500_000
    """Files and folders those host folders may hold together, enforced with disk_gb (the file
    system's inode count, or the watchdog)."""

    # the budget's bounds, each checked with a message naming the key and what it may be
    AT_LEAST = {"max_submissions": 1, "kill_grace_s": 0, "max_invalid_submissions": 1,
                "grader_restarts": 0, "max_egress_log_lines": 1, "disk_files": 1}
    POSITIVE = ("time_limit_s", "invalid_per_minute", "tmpfs_gb", "max_agent_log_mb")
    POSITIVE_OR_NULL = ("llm_max_tokens", "llm_max_usd", "eval_timeout_s", "max_store_gb",
                        "memory_gb", "disk_gb")

    def __post_init__(self) -> None:
        for key in self.POSITIVE:
            value = getattr(self, key)
            require(value > 0, f"budget.{key}={value}; expected > 0")
        for key in self.POSITIVE_OR_NULL:
            value = getattr(self, key)
            require(value is None or value > 0, f"budget.{key}={value}; expected > 0 or null")
        for key, low in self.AT_LEAST.items():
            value = getattr(self, key)
            require(value >= low, f"budget.{key}={value}; expected >= {low}")
        require(self.max_processes >= 16,
                f"budget.max_processes={self.max_processes}; expected >= 16 (the sandbox "
                "itself takes a few)")


@dataclass
class PathsConfig:
    """Every path the harness writes or reads, defined once (a2rl.common.layout)."""

    root: str = "."
    """Base of results and resources; the working directory by default."""
    results: str = "results"
    """Prepared data, runs, logs and leaderboards, relative to root: conf/ puts them in
    results/<grid name>/, the workflow in results/<grid label>/."""
    resources: str = "resources"
    """Prepared base models, relative to root."""
    data: str = "data"
    """Local data sources of the tasks ($A2RL_DATA overrides)."""


@dataclass
class GridConfig:
    """Which cells a Snakemake / DVC run covers."""

    name: str = DEFAULT_GRID
    """Names the grid; equals the file name."""
    label: str = ""
    """The grid as its runs are filed and labelled: results/<label>/ holds its runs, leaderboard and
    report, and every table row names it. The workflow sets it to the name, plus a short hash of the
    command line's overrides when there are any (a2rl.config.compose.grid_label), so two grids, or
    one grid under other overrides, never share a run. Empty: the name."""
    tasks: list[str] = field(default_factory=lambda: ["gsm8k"])
    """Task ids (conf/task/<id>.yaml of an installed task package; `a2rl tasks` lists them)."""
    agents: list[str] = field(default_factory=lambda: ["noop", "sft"])
    """Agent names (conf/agent/ file names)."""
    drivers: list[str] = field(default_factory=lambda: ["none"])
    """Driver names (conf/driver/ file names) for the agents that take one."""
    seeds: list[int] = field(default_factory=lambda: [0])
    """Seeds; every (task, agent, driver) runs once per seed."""
    reference_agents: list[str] = field(
        default_factory=lambda: ["noop", "sft", "dpo", "grpo", "sft_grpo"])
    """Agents that need no LLM: they run with driver none only, whatever drivers says."""
    agent_tasks: dict[str, list[str]] = field(default_factory=dict)
    """Agents that only make sense on some tasks (sft_grpo needs an environment): agent -> task ids;
    others run on all. An entry for an agent the grid does not run is ignored (grid.agents may be
    overridden)."""

    def __post_init__(self) -> None:
        self.label = self.label or self.name
        require(bool(self.tasks) and bool(self.agents) and bool(self.seeds),
                f"grid {self.name!r} must name at least one task, agent and seed")
        require(all(seed >= 0 for seed in self.seeds),
                f"grid.seeds={self.seeds}; expected seeds >= 0")

    def runs(self, agent: str, task: str) -> bool:
        """Whether the grid has cells for ``agent`` on ``task``."""
        return agent not in self.agent_tasks or task in self.agent_tasks[agent]


@dataclass
class RunConfig:
    """One composed configuration: a cell plus the grid it belongs to."""

    task: TaskConfig = field(default_factory=TaskConfig)
    """The benchmark task of the cell (a task package's conf/task/<id>.yaml)."""
    agent: AgentConfig = field(default_factory=AgentConfig)
    """The agent stack run in the sandbox (conf/agent/<name>.yaml)."""
    driver: DriverConfig = field(default_factory=DriverConfig)
    """The LLM that drives the agent (conf/driver/<name>.yaml); none for reference agents."""
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    """Limits of one agent run (conf/budget/<name>.yaml)."""
    grid: GridConfig = field(default_factory=GridConfig)
    """Which cells a Snakemake or DVC run covers (conf/grid/<name>.yaml)."""
    paths: PathsConfig = field(default_factory=PathsConfig)
    """Every path the harness reads or writes (conf/paths/default.yaml)."""
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    """Where the grid's jobs run, for Snakemake's executor plugins (conf/cluster/<name>.yaml); the
    profile in profiles/ chooses the executor."""
    seed: int = 0
    """The cell's seed (the agent's and the harness's randomness)."""
    sandbox: str = "bwrap"
    """How the agent is isolated: bwrap (bubblewrap) or none (development only)."""

    def __post_init__(self) -> None:
        require(self.seed >= 0, f"seed={self.seed}; expected >= 0")
        require_choice(self.sandbox, SANDBOXES, "sandbox")


def to_run_config(cfg: Any) -> RunConfig:
    """Turn a composed DictConfig into a checked RunConfig (raises ConfigError)."""
    merged = OmegaConf.merge(OmegaConf.structured(RunConfig), cfg)
    if not OmegaConf.select(cfg, "grid.label", default=""):
        # the structured defaults ran GridConfig's __post_init__ on the default grid, so an
        # unset label would stay the default grid's name, whatever grid was chosen
        merged.grid.label = merged.grid.name
    return OmegaConf.to_object(merged)


def config_record(cfg: RunConfig) -> dict[str, Any]:
    """``cfg`` as plain JSON values (paths as strings); ``to_run_config`` reads it back."""
    return OmegaConf.to_container(OmegaConf.structured(cfg), resolve=True)
