"""Typed configuration for one grid cell; Hydra composes YAML from conf/ into these dataclasses.

These dataclasses are the one definition of the config: every field documents itself
(``metadata["help"]``) and every dataclass checks its own values in ``__post_init__``, so a bad
config fails at compose time with the offending key named, not an hour into a run. OmegaConf
refuses unknown keys and values of the wrong type while merging into them (``to_run_config``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from omegaconf import OmegaConf

from a2rl.common.hardware import PRECISIONS
from a2rl.config.checks import ConfigError, require, require_folder_name
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
PROVIDERS = ("none", "anthropic", "openai", "gemini", "openai_compatible", "replay")


@dataclass
class AgentConfig:
    """An agent stack: the command run inside the sandbox and what it may reach.

    Reference agents give ``command`` and the agent plugin (``package``) whose scripts it runs;
    LLM-driven agents name a ``stack`` (a stack plugin, a2rl.llm.stacks, that builds the
    command line) and pin its package ``version``, installed into
    resources/tools/<stack>/<version>/ by scripts/install_agents.py."""

    name: str = field(default="noop", metadata={
        "help": "Names the agent in run paths and the leaderboard; equals the file name."})
    kind: str = field(default="reference", metadata={
        "help": "reference (a scripted baseline agent) or llm (an LLM-driven agent system)."})
    package: Optional[str] = field(default=None, metadata={
        "help": "For reference agents: the agent plugin (entry-point group a2rl.agents; the "
                "built-ins are src/a2rl/agents/) whose package folder's scripts the sandbox shows "
                "at {agents}; null: the plugin called like the agent (agent.name). llm agents "
                "run no plugin's scripts."})
    command: list[str] = field(default_factory=lambda: ["{python}", "{agents}/noop.py"],
                               metadata={
        "help": "argv run in the sandbox for reference agents; the runner expands {python} (the "
                "interpreter) and {agents} (the read-only copy of agent.package's scripts). "
                "Empty for llm agents, whose stack builds the command line."})
    network: str = field(default="none", metadata={
        "help": "What the sandbox may reach: none (reference agents), llm (only the run's LLM "
                "proxy; LLM agents), allowlist (the proxy and agent.allowlist's hosts through "
                "an egress proxy, logged to egress.jsonl) or open (the host's network)."})
    allowlist: list[str] = field(default_factory=lambda: list(DEFAULT_ALLOWLIST), metadata={
        "help": "Host names reachable under network=allowlist (a leading dot: any subdomain)."})
    allow_public_sources: bool = field(default=False, metadata={
        "help": "Under network=allowlist, let the agent reach the hosts of task.public_sources "
                "(where the task's sealed split is public) that agent.allowlist names. false "
                "(the default): the egress proxy refuses them; a grid opts in with "
                "agent: {allow_public_sources: true}."})
    env: dict[str, str] = field(default_factory=dict, metadata={
        "help": "Extra environment variables for the agent process."})
    settings: dict[str, dict[str, Any]] = field(default_factory=dict, metadata={
        "help": "Reference agents' settings by agent name, e.g. {sft: {steps: 40}}; each "
                "entry is checked against that agent's dataclass (a2rl/agents/settings.py) "
                "before a run starts, and the run's own agent gets its entry as "
                "$A2RL_AGENT_SETTINGS (JSON). Keyed by agent so that one grid_task file can "
                "tune several agents."})
    torch_threads: int = field(default=0, metadata={
        "help": "torch CPU threads inside the sandbox; 0 leaves torch's default."})
    precision: str = field(default="auto", metadata={
        "help": "Training precision handed to the agent as A2RL_PRECISION "
                "(a2rl.common.hardware): auto (bf16 only where the device computes it natively; "
                "emulated bf16 is 4-11x slower), bf16 or fp32."})
    stack: Optional[str] = field(default=None, metadata={
        "help": "The agent CLI for llm agents: a stack plugin's name (entry-point group "
                "a2rl.stacks; the built-ins claude_code, codex, gemini_cli, opencode, openhands, "
                "mini_swe_agent are a2rl.llm.stacks.<name>); null for reference agents."})
    version: Optional[str] = field(default=None, metadata={
        "help": "The stack's pinned package version, installed into "
                "resources/tools/<stack>/<version>/ by scripts/install_agents.py."})
    args: list[str] = field(default_factory=list, metadata={
        "help": "Extra command-line arguments appended to the stack's CLI."})
    resources: ResourcesConfig = field(default_factory=ResourcesConfig, metadata={
        "help": "What the agent's run asks a cluster for (a cell's job, run_cell, gets "
                "the larger of this and task.resources)."})

    def __post_init__(self) -> None:
        require_folder_name(self.name, "agent.name")
        require(self.precision in PRECISIONS,
                f"agent {self.name!r}: precision={self.precision!r}; expected one of "
                f"{PRECISIONS}")
        require(self.kind in AGENT_KINDS,
                f"agent {self.name!r}: kind={self.kind!r}; expected one of {AGENT_KINDS}")
        require(isinstance(self.network, str) and self.network in NETWORK_POLICIES,
                f"agent {self.name!r}: network={self.network!r}; expected one of "
                f"{NETWORK_POLICIES} (true/false are no longer accepted)")
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
class DriverConfig:
    """The LLM that drives an agent; ``none`` for the reference agents."""

    name: str = field(default="none", metadata={
        "help": "Names the driver in run paths and the leaderboard; equals the file name."})
    provider: str = field(default="none", metadata={
        "help": "The provider's API: anthropic, openai, gemini, openai_compatible (any "
                "OpenAI-style server, e.g. vLLM), replay (a scripted local server, for tests) "
                "or none."})
    model: Optional[str] = field(default=None, metadata={"help": "The provider's model id."})
    base_url: Optional[str] = field(default=None, metadata={
        "help": "The provider's API root as its SDK takes it (with /v1 for OpenAI-style APIs, "
                "without for Anthropic and Gemini); the recording proxy forwards there."})
    api_key_env: Optional[str] = field(default=None, metadata={
        "help": "Name of the environment variable holding the API key (never the key); read "
                "by the harness's proxy only."})
    openai_base_url: Optional[str] = field(default=None, metadata={
        "help": "The provider's OpenAI-compatible endpoint; agents whose protocol the provider "
                "does not speak are passed through or translated to OpenAI chat completions "
                "there."})
    prices: PricesConfig = field(default_factory=PricesConfig, metadata={
        "help": "USD per million input, cached-input and output tokens with the date and page "
                "they were read from, or free: true (a2rl.config.prices); every provider but "
                "none declares them."})
    script: Optional[str] = field(default=None, metadata={
        "help": "The replay driver's script (YAML turns), relative to paths.root; null uses "
                "the packaged train-and-submit script."})

    def __post_init__(self) -> None:
        require_folder_name(self.name, "driver.name")
        require(self.provider in PROVIDERS,
                f"driver {self.name!r}: provider={self.provider!r}; expected one of "
                f"{PROVIDERS}")
        if self.provider not in ("none", "replay"):
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

    name: str = field(default="quick", metadata={"help": "Names the budget; equals the file name."})
    time_limit_s: float = field(default=600.0, metadata={
        "help": "Wall-clock seconds the agent may run; the baseline is measured before."})
    max_submissions: int = field(default=10, metadata={
        "help": "Submissions the grader accepts in one run."})
    count_eval_time: bool = field(default=True, metadata={
        "help": "Whether time spent scoring submissions counts against time_limit_s; when "
                "it does not, the agent is paused while a submission is evaluated."})
    kill_grace_s: float = field(default=5.0, metadata={
        "help": "Seconds between SIGTERM and SIGKILL when the budget runs out."})
    llm_max_tokens: Optional[int] = field(default=None, metadata={
        "help": "Driver LLM tokens (input + output) the agent may use; the proxy "
                "(a2rl.llm.proxy) refuses further calls and the agent is stopped once reached. "
                "null for no limit."})
    llm_max_usd: Optional[float] = field(default=None, metadata={
        "help": "Driver LLM spend in USD, enforced like llm_max_tokens. null for no limit."})
    eval_timeout_s: Optional[float] = field(default=3600.0, metadata={
        "help": "Seconds one evaluation of a submission may take; past it the grader abandons "
                "it and records eval_timeout, which counts as a submission and whose time is "
                "charged (a submission can hang its evaluation). null for "
                "no limit."})
    max_store_gb: Optional[float] = field(default=200.0, metadata={
        "help": "GiB all stored copies of submitted artifacts may take together (the grader's "
                "store/); past it submissions are refused. null for no quota."})
    max_invalid_submissions: int = field(default=100, metadata={
        "help": "Invalid submissions recorded in the ledger; further ones are refused and "
                "only counted (no ledger line, no scores.json rewrite)."})
    invalid_per_minute: float = field(default=30.0, metadata={
        "help": "Invalid submissions the grader processes a minute (a burst of as many); "
                "past it requests are refused up front with 429."})
    grader_restarts: int = field(default=3, metadata={
        "help": "Times the harness restarts the grader's process when it dies during a run "
                "(the submission it was evaluating is recorded as interrupted); one more death "
                "makes the run infra_failed (grader_died)."})
    memory_gb: Optional[float] = field(default=None, metadata={
        "help": "GiB of memory all the agent's processes may use together (files in its /tmp "
                "and /dev/shm included); past it the kernel kills one. null: three quarters of "
                "the machine's memory, the rest left to the harness and the grader "
                "(a2rl.isolation.limits)."})
    max_processes: int = field(default=4096, metadata={
        "help": "Processes and threads the agent may have at once (a fork bomb stops here)."})
    tmpfs_gb: float = field(default=4.0, metadata={
        "help": "GiB each of the sandbox's /tmp and /dev/shm holds; a write past it fails "
                "with ENOSPC."})
    max_agent_log_mb: float = field(default=100.0, metadata={
        "help": "MiB of the agent's output kept in agent.log as it comes; past it the output "
                "is still read (the agent never blocks) but only counted, and its last 64 KiB "
                "follow a line saying how many bytes were cut (run.json log_cut_bytes)."})
    max_egress_log_lines: int = field(default=100_000, metadata={
        "help": "Connections through the egress proxy (agent.network=allowlist) logged in "
                "egress.jsonl; later ones are counted per outcome and summed up in one last "
                "line (run.json network.egress_unlogged)."})
    disk_gb: Optional[float] = field(default=100.0, metadata={
        "help": "GiB the host folders the agent writes (workspace/code, workspace/output, an "
                "LLM agent CLI's folder) may hold together: their own file system where the "
                "harness may make one (a write past it fails with ENOSPC), else a watchdog "
                "that stops the agent past it (status disk_quota_exceeded; "
                "a2rl.isolation.quota). Raise it for 7B models saved in fp32. null for no "
                "quota."})
    disk_files: int = field(default=500_000, metadata={
        "help": "Files and folders those host folders may hold together, enforced with "
                "disk_gb (the file system's inode count, or the watchdog)."})

    def __post_init__(self) -> None:
        require(self.time_limit_s > 0, f"budget.time_limit_s={self.time_limit_s}; expected > 0")
        require(self.llm_max_tokens is None or self.llm_max_tokens > 0,
                f"budget.llm_max_tokens={self.llm_max_tokens}; expected > 0 or null")
        require(self.llm_max_usd is None or self.llm_max_usd > 0,
                f"budget.llm_max_usd={self.llm_max_usd}; expected > 0 or null")
        require(self.max_submissions >= 1,
                f"budget.max_submissions={self.max_submissions}; expected >= 1")
        require(self.kill_grace_s >= 0, f"budget.kill_grace_s={self.kill_grace_s}; expected >= 0")
        for key in ("eval_timeout_s", "max_store_gb"):
            value = getattr(self, key)
            require(value is None or value > 0, f"budget.{key}={value}; expected > 0 or null")
        require(self.max_invalid_submissions >= 1,
                f"budget.max_invalid_submissions={self.max_invalid_submissions}; expected >= 1")
        require(self.invalid_per_minute > 0,
                f"budget.invalid_per_minute={self.invalid_per_minute}; expected > 0")
        require(self.grader_restarts >= 0,
                f"budget.grader_restarts={self.grader_restarts}; expected >= 0")
        require(self.memory_gb is None or self.memory_gb > 0,
                f"budget.memory_gb={self.memory_gb}; expected > 0 or null")
        require(self.max_processes >= 16,
                f"budget.max_processes={self.max_processes}; expected >= 16 (the sandbox "
                "itself takes a few)")
        require(self.tmpfs_gb > 0, f"budget.tmpfs_gb={self.tmpfs_gb}; expected > 0")
        require(self.max_agent_log_mb > 0,
                f"budget.max_agent_log_mb={self.max_agent_log_mb}; expected > 0")
        require(self.max_egress_log_lines >= 1,
                f"budget.max_egress_log_lines={self.max_egress_log_lines}; expected >= 1")
        require(self.disk_gb is None or self.disk_gb > 0,
                f"budget.disk_gb={self.disk_gb}; expected > 0 or null")
        require(self.disk_files >= 1, f"budget.disk_files={self.disk_files}; expected >= 1")


@dataclass
class PathsConfig:
    """Every path the harness writes or reads, defined once (a2rl.common.layout)."""

    root: str = field(default=".", metadata={
        "help": "Base of results and resources; the working directory by default."})
    results: str = field(default="results", metadata={
        "help": "Prepared data, runs, logs and leaderboards, relative to root: conf/ puts "
                "them in results/<grid name>/, the workflow in results/<grid label>/."})
    resources: str = field(default="resources", metadata={
        "help": "Prepared base models, relative to root."})
    data: str = field(default="data", metadata={
        "help": "Local data sources of the tasks ($A2RL_DATA overrides)."})


@dataclass
class GridConfig:
    """Which cells a Snakemake / DVC run covers."""

    name: str = field(default=DEFAULT_GRID, metadata={
        "help": "Names the grid; equals the file name."})
    label: str = field(default="", metadata={
        "help": "The grid as its runs are filed and labelled: results/<label>/ holds its runs, "
                "leaderboard and report, and every table row names it. The workflow sets it to "
                "the name, plus a short hash of the command line's overrides when there are "
                "any (a2rl.config.compose.grid_label), so two grids, or one grid under other "
                "overrides, never share a run. Empty: the name."})
    tasks: list[str] = field(default_factory=lambda: ["gsm8k"], metadata={
        "help": "Task ids (conf/task/<id>.yaml of an installed task package; `a2rl tasks` "
                "lists them)."})
    agents: list[str] = field(default_factory=lambda: ["noop", "sft"], metadata={
        "help": "Agent names (conf/agent/ file names)."})
    drivers: list[str] = field(default_factory=lambda: ["none"], metadata={
        "help": "Driver names (conf/driver/ file names) for the agents that take one."})
    seeds: list[int] = field(default_factory=lambda: [0], metadata={
        "help": "Seeds; every (task, agent, driver) runs once per seed."})
    reference_agents: list[str] = field(
        default_factory=lambda: ["noop", "sft", "dpo", "grpo", "sft_grpo"], metadata={
            "help": "Agents that need no LLM: they run with driver none only, whatever "
                    "drivers says."})
    agent_tasks: dict[str, list[str]] = field(default_factory=dict, metadata={
        "help": "Agents that only make sense on some tasks (sft_grpo needs an environment): "
                "agent -> task ids; others run on all. An entry for an agent the grid does not "
                "run is ignored (grid.agents may be overridden)."})

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

    task: TaskConfig = field(default_factory=TaskConfig, metadata={
        "help": "The benchmark task of the cell (a task package's conf/task/<id>.yaml)."})
    agent: AgentConfig = field(default_factory=AgentConfig, metadata={
        "help": "The agent stack run in the sandbox (conf/agent/<name>.yaml)."})
    driver: DriverConfig = field(default_factory=DriverConfig, metadata={
        "help": "The LLM that drives the agent (conf/driver/<name>.yaml); none for reference "
                "agents."})
    budget: BudgetConfig = field(default_factory=BudgetConfig, metadata={
        "help": "Limits of one agent run (conf/budget/<name>.yaml)."})
    grid: GridConfig = field(default_factory=GridConfig, metadata={
        "help": "Which cells a Snakemake or DVC run covers (conf/grid/<name>.yaml)."})
    paths: PathsConfig = field(default_factory=PathsConfig, metadata={
        "help": "Every path the harness reads or writes (conf/paths/default.yaml)."})
    cluster: ClusterConfig = field(default_factory=ClusterConfig, metadata={
        "help": "Where the grid's jobs run, for Snakemake's executor plugins "
                "(conf/cluster/<name>.yaml); the profile in profiles/ chooses the executor."})
    seed: int = field(default=0, metadata={
        "help": "The cell's seed (the agent's and the harness's randomness)."})
    sandbox: str = field(default="bwrap", metadata={
        "help": "How the agent is isolated: bwrap (bubblewrap) or none (development only)."})

    def __post_init__(self) -> None:
        require(self.seed >= 0, f"seed={self.seed}; expected >= 0")
        require(self.sandbox in SANDBOXES,
                f"sandbox={self.sandbox!r}; expected one of {SANDBOXES}")


def to_run_config(cfg: Any) -> RunConfig:
    """Turn a composed DictConfig into a checked RunConfig (raises ConfigError)."""
    merged = OmegaConf.merge(OmegaConf.structured(RunConfig), cfg)
    if not OmegaConf.select(cfg, "grid.label", default=""):
        # the structured defaults ran GridConfig's __post_init__ on the default grid, so an
        # unset label would stay the default grid's name, whatever grid was chosen
        merged.grid.label = merged.grid.name
    return OmegaConf.to_object(merged)
