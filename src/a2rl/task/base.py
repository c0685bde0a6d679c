"""The task interface. A task is a package registered as a plugin (entry-point group
``a2rl.tasks``, a2rl.common.plugins; the built-ins live in ``tasks/<name>/`` as
``a2rl_tasks.<name>``) that exposes ``build(cfg: TaskConfig, data_root: Path) -> Task`` and ships
its configs as ``conf/task/<id>.yaml``. The harness never imports a particular task by name in
code; it loads the one the config's ``task.package`` names.
"""

from __future__ import annotations

import importlib
import math
import shutil
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from a2rl.common.layout import Layout, PreparedTaskPaths
from a2rl.common.plugins import Plugin, PluginError, find
from a2rl.config.checks import ConfigError
from a2rl.config.types import DriverConfig, InferenceConfig, ModelConfig, TaskConfig
from a2rl.task import prompts


class TaskNotImplemented(RuntimeError):
    """The grid names a task whose implementation does not exist yet."""


class GradingUnavailable(RuntimeError):
    """Grading could not be done for a reason outside the submission (a judge outage, a used-up
    judge budget). The grader records the submission as ``judge_failed`` and does not count it
    against the agent's submissions; a stage that must have a score fails."""


class GradingBudgetExhausted(GradingUnavailable):
    """The run's budget for a paid grading API (a judge's ``max_usd``) is used up: no later
    submission can be graded in this run. The grader answers the agent so, in words of its own
    (``grading_budget_exhausted``, a2rl.grading.answers), and takes no more submissions."""


class RecordingProxy(Protocol):
    """A started LLM proxy for calls made while grading: clients call ``url`` (with /v1 for
    OpenAI-style chat completions) with ``dummy_key``; the proxy holds the real key, prices and
    logs every call, and answers HTTP 402 once its budget is spent."""

    dummy_key: str

    @property
    def url(self) -> str: ...

    def stop(self) -> None: ...


class Harness(Protocol):
    """What the harness lends a task that needs more than its data to grade (a judge model,
    cached verdicts, a paid API judge). Implemented above the task layer
    (``a2rl.pipeline.harness``), so that a task imports neither a2rl.models nor a2rl.llm."""

    layout: Layout

    def model_folder(self, model: ModelConfig) -> Path:
        """The HF folder of ``model``, provisioned under the layout's models when missing."""
        ...

    def folder_hash(self, folder: Path) -> str:
        """The content hash of a model folder (the same one submissions are keyed by)."""
        ...

    def driver(self, name: str) -> DriverConfig:
        """The composed config of driver ``name`` (conf/driver/<name>.yaml), for a judge: the
        harness composes it, so that grading never runs Hydra itself."""
        ...

    def recording_proxy(self, driver: DriverConfig, calls_log: Path, max_usd: float | None,
                        timeout_s: float) -> RecordingProxy:
        """A started proxy to ``driver`` logging to ``calls_log``; raises GradingUnavailable
        when the driver's key is not in the harness's environment."""
        ...


@dataclass(frozen=True)
class PaidApi:
    """A paid API a task calls while grading one submission: an LLM judge (a conf/driver/ name:
    its key variable and prices are the driver's) or a web search API (its key variable and
    price per call here). The sizes are what one evaluation uses, an estimate whose basis
    ``assumption`` states; ``max_usd`` is the run's cap on it (None: no cap). The pre-flight
    checks its key, ``a2rl plan`` prices it, and the two check its cap against the run's
    submission limit (a2rl.pipeline.spend)."""

    kind: str  # judge | search
    name: str = ""  # what it is called in reports: the judge's driver, the search provider
    driver: str | None = None
    key_env: str | None = None
    calls_per_eval: int = 0
    input_tokens_per_call: int = 0
    output_tokens_per_call: int = 0
    usd_per_call: float = 0.0
    max_usd: float | None = None
    cap_key: str = ""  # the config key of max_usd, for a message that says what to change
    assumption: str = ""


@dataclass
class EvalResult:
    """Scores of one model on one split. ``per_item`` holds each item's score in [0, 1]."""

    per_item: list[float]
    seconds: float = 0.0
    records: list[dict[str, Any]] = field(default_factory=list)
    breakdown: dict[str, float] = field(default_factory=dict)
    # what grading cost outside the model (a judge's calls, tokens, USD); kept apart from the
    # agent's own LLM spending
    usage: dict[str, Any] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.per_item)

    @property
    def score(self) -> float:
        """Mean item score on the 0-100 scale."""
        return 100.0 * sum(self.per_item) / self.n if self.n else 0.0

    @property
    def stderr(self) -> float:
        """Standard error of ``score`` (0-100 scale)."""
        if self.n < 2:
            return 0.0
        mean = sum(self.per_item) / self.n
        var = sum((x - mean) ** 2 for x in self.per_item) / (self.n - 1)
        return 100.0 * math.sqrt(var / self.n)

    def to_dict(self) -> dict[str, Any]:
        out = {"score": self.score, "stderr": self.stderr, "n": self.n,
               "seconds": self.seconds, "breakdown": self.breakdown}
        return out | ({"usage": self.usage} if self.usage else {})


@dataclass
class ReplyScore:
    """One reply's score in [0, 1], the task's verdict word for it and why."""

    score: float
    verdict: str
    reason: str = ""


def score_by_group(groups: list[str], scores: list[float], prefix: str) -> dict[str, float]:
    """100 x the mean score of each group (keys ``<prefix>_<group>``) and its size
    (``n_<group>``): an interactive task's breakdown by goal type or category."""
    members: dict[str, list[float]] = {}
    for group, score in zip(groups, scores, strict=True):
        members.setdefault(group, []).append(score)
    out = {}
    for group in sorted(members):
        out[f"{prefix}_{group}"] = 100.0 * sum(members[group]) / len(members[group])
        out[f"n_{group}"] = float(len(members[group]))
    return out


# the file in a task's data folder that declares how agents train online on it: the rollouts
# of their own model and the reward (a Rollouts or a SingleTurn declaration, ``to_dict``)
ROLLOUTS_FILE = "rollouts.json"
REWARDS = ("won", "score")


@dataclass(frozen=True)
class Rollouts:
    """How agents roll out their own model in an interactive task's train games, read from
    ``data/rollouts.json`` (the reference ``grpo`` / ``sft_grpo`` agents do): ``module``, a module
    or package in data/ with ``PROMPT`` and ``load_games(folder)``; its environment class
    ``env`` (``a2rl.task.envs.TextEnv``, made with a game id); the train games' folder in data/;
    and the episode outcome that is the reward: ``won`` (0 or 1) or ``score`` (in [0, 1])."""

    module: str
    env: str
    reward: str = "won"
    games: str = "games"
    # the grader's prompt format (``PromptFormat`` fields), so that rollouts prompt as the
    # grader does whatever the task's params chose; None: the module's PROMPT
    prompt: dict[str, Any] | None = None
    actions: str = "closest"  # how a reply becomes an action (prompts.parse_action), as graded
    # episodes played at once (0: all), as the grader plays them (inference.live_episodes): a
    # group of long ALFWorld episodes all live at once held most of an agent's memory
    live: int = 0

    def __post_init__(self):
        if self.reward not in REWARDS:
            raise ValueError(f"Rollouts.reward={self.reward!r}: expected one of {REWARDS}")
        if self.actions not in prompts.ACTION_PROTOCOLS:
            raise ValueError(f"Rollouts.actions={self.actions!r}: expected one of "
                             f"{prompts.ACTION_PROTOCOLS}")
        if self.live < 0:
            raise ValueError(f"Rollouts.live={self.live}: expected >= 0 (0: all at once)")

    def to_dict(self) -> dict[str, Any]:
        out = {"kind": "episodes", "module": self.module, "env": self.env,
               "reward": self.reward, "games": self.games, "actions": self.actions}
        return out | ({"prompt": self.prompt} if self.prompt else {}) | (
            {"live": self.live} if self.live else {})


@dataclass
class EpisodePromptParams:
    """The prompt options every interactive task's params share (a base of their dataclass)."""

    prompt_format: str = "append"
    """append: a chat that only grows (each step appends the action and the next observation with
    the actions admissible then; a model reuses each episode's KV cache); rewrite: one user turn
    rewritten every step (the format of the baselines before 2026-12-04)."""
    window_chars: int = 16_000
    """append: when an episode's chat passes this many characters, its oldest steps are dropped
    until it is under half (deterministic; the cache is rebuilt)."""
    step_actions: str = "all"
    """append: the admissible actions a step's turn lists: all, only the changes since the last
    step, or (``first``) none after the first turn; the first turn always lists them all."""

    def episode_prompt(self, **fields: Any) -> prompts.PromptFormat:
        """The task's PromptFormat with these options; a bad value is a ConfigError."""
        if self.prompt_format not in prompts.PROMPT_STYLES:
            raise ConfigError(f"task.params.prompt_format={self.prompt_format!r}; expected one "
                              f"of {prompts.PROMPT_STYLES}")
        try:
            return prompts.PromptFormat(style=self.prompt_format, window_chars=self.window_chars,
                                        step_actions=self.step_actions, **fields)
        except ValueError as err:
            raise ConfigError(f"task.params: {err}") from err


def text_key(text: str) -> str:
    """The key two items' texts are compared by when splits must share no item: the text with
    case and spacing aside."""
    return " ".join(text.casefold().split())


@dataclass(frozen=True)
class SingleTurn:
    """How agents sample and reward their own model's replies on a single-turn task's train
    prompts (GSM8K, HumanEval), read from ``data/rollouts.json`` like ``Rollouts``: the prompts
    file in data/ (jsonl; each row's ``prompt`` is the user turn the grader would send, sent with
    the ``system`` turn, None: the template's default), and the reward, ``function`` of
    ``module`` (a module or package in data/, self-contained: the agent's sandbox has no a2rl):
    ``function(completions, **columns) -> list[float]``, the reply texts and, per keyword, the
    prompt rows' other fields aligned with them, each reply scored in [0, 1] by the task's own
    rule (the grader's extraction and comparison, or its tests run on the reply's code)."""

    module: str = "reward"
    function: str = "reward"
    prompts: str = "train.jsonl"
    system: str | None = None

    def to_dict(self) -> dict[str, str | None]:
        return {"kind": "single_turn", "module": self.module, "function": self.function,
                "prompts": self.prompts, "system": self.system}


def ship_package(folder: Path, init: Path, *modules: Path) -> None:
    """``folder`` as a self-contained package in the agent's data: ``init`` copied as its
    ``__init__.py`` with ``modules`` beside it (``init`` imports them relatively, so the same
    file runs in the task's package and in the sandbox, which has no a2rl)."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    shutil.copyfile(init, folder / "__init__.py")
    for module in modules:
        shutil.copyfile(module, folder / Path(module).name)


def render_readme(template: Path, facts: dict[str, Any]) -> str:
    """The README.md ``prepare`` writes into the agent's data folder: ``template`` (Jinja2,
    beside the task's module) filled from the facts prepare produced (counts, params, the
    grader's prompt), so that its prose stays out of the code (a2rl.common.contract). It may
    include the benchmark's shared parts from src/a2rl/templates/, as the interactive tasks end
    with ``{% include "model_policy.md.j2" %}`` (how to play with one's own model)."""
    from a2rl.common.contract import render_text

    return render_text(Path(template).read_text(), facts)


ENVS_NAME = "a2rl_envs.py"  # the policy runner's name in the agent's data folder
# The modules of this package that ship into an agent's data folder, by their names there (the
# sandbox has no a2rl): the runner, the prompts it imports under that name, the per-episode KV
# caches. Each is standard library only; there the runner imports the prompts by that name.
SHIPPED_MODULES = {"envs": ENVS_NAME, "prompts": "a2rl_prompts.py",
                   "episode_cache": "a2rl_episode_cache.py"}


def ship_envs(data: Path) -> Path:
    """Copy the text environments and policy runner (``a2rl.task.envs``) into the agent's data
    folder as ``a2rl_envs.py``, with the prompts it imports (``a2rl_prompts.py``), for an
    interactive task's environment modules to import there; returns the runner's copy."""
    _ship(data, "envs", "prompts")
    return data / ENVS_NAME


def ship_episode_modules(data: Path) -> None:
    """Copy the runner (``ship_envs``) and the per-episode KV caches (``a2rl_episode_cache.py``)
    into an agent's data folder, beside a task's environment: the reference GRPO script plays
    its rollouts with them, as the grader plays its games."""
    ship_envs(data)
    _ship(data, "episode_cache")


def _ship(data: Path, *modules: str) -> None:
    for module in modules:
        shutil.copyfile(Path(__file__).with_name(f"{module}.py"), data / SHIPPED_MODULES[module])


def require_test_feedback(cfg: TaskConfig) -> None:
    """Refuse ``feedback=validation`` for a task without a validation split."""
    if cfg.feedback != "test":
        raise ConfigError(f"task.feedback={cfg.feedback!r}: the {cfg.id} task has no "
                          "validation split; use feedback=test")


class Task(ABC):
    """One benchmark task: prepares its data, describes itself to the agent, scores models.

    ``find_item`` and ``score_each`` score replies without a model (``a2rl score``); a task
    that has not implemented them yet says so."""

    # the fields an item of a split must have for score_each
    item_fields: tuple[str, ...] = ()
    # what the score is, as `a2rl tasks` lists it (the task's docstring has the definition)
    metric: str = "score"

    def __init__(self, cfg: TaskConfig, data_root: Path):
        self.cfg = cfg
        self.data_root = Path(data_root)
        # set by the harness (a2rl.pipeline.stages.load_task_of), for a task that needs more
        # than its data to grade (a judge model, cached verdicts, an API judge's proxy)
        self.harness: Harness | None = None
        # set by the runner for the agent phase: where calls to paid services made while
        # grading (an API judge) are logged, apart from the agent's llm_calls.jsonl
        self.grading_calls: Path | None = None

    @property
    def name(self) -> str:
        """The implementation's name (``task.package``), shared by the task ids that use it."""
        return self.cfg.package

    @abstractmethod
    def prepare(self, out: PreparedTaskPaths) -> dict[str, Any]:
        """Write agent-visible training data to ``out.data`` and the sealed splits to
        ``out.test`` (and ``out.validation`` when the task has one). Returns facts for the
        manifest (sizes, sources, seeds)."""

    @abstractmethod
    def evaluate(self, model_dir: Path, split: Path, inference: InferenceConfig) -> EvalResult:
        """Score the HF model folder ``model_dir`` on the items of ``split`` (a jsonl file)."""

    def twin_split(self, prepared: PreparedTaskPaths, folder: Path, seed: int) -> Path | None:
        """A fresh split like the test split, as many items from the same generator but from
        ``seed`` (drawn at grading time) and none of train's or test's, written into
        ``folder``; the split file, or None for a task whose test split is a fixed pool. A
        model far better on test than on its twin learnt the test items, not the task
        (a2rl.grading.twin)."""
        return None

    def grading_settings(self) -> dict[str, Any]:
        """What decides how ``evaluate`` plays a split beyond the split and the inference
        settings (an interactive task's prompt format and action protocol), so that a cached
        baseline score is never reused under another prompt; empty for a task without such."""
        return {}

    def data_files(self) -> list[Path]:
        """The local files or folders ``prepare`` reads (paths.data and the task's params decide
        where); none for a task that makes its data or ships it in its package."""
        return []

    def paid_apis(self) -> list[PaidApi]:
        """The paid APIs grading one submission calls (a judge, a search engine); none for a
        task graded offline."""
        return []

    def data_status(self) -> str:
        """Whether ``prepare`` has what it reads, in a few words (``a2rl tasks``)."""
        files = self.data_files()
        missing = [str(f) for f in files if not f.exists()]
        if missing:
            return "missing: " + ", ".join(missing)
        return "ready" if files else "made by prepare or shipped with the task"

    def rollouts(self) -> Rollouts | SingleTurn | None:
        """How agents train online on this task (the harness writes it to
        ``data/rollouts.json``): the environment an interactive task copies into data/
        (``Rollouts``), or a single-turn task's prompts and reward (``SingleTurn``); None for
        a task that ships neither."""
        return None

    def find_item(self, item_id: str) -> dict[str, Any]:
        """The item ``item_id`` of any split, in the split files' format; KeyError if the task
        has no such item."""
        raise NotImplementedError(f"task {self.name!r} cannot look up items by id yet")

    def score_each(self, items: list[dict[str, Any]], replies: list[str]) -> list[ReplyScore]:
        """``replies[i]`` scored as the answer to ``items[i]``, exactly as ``evaluate`` scores a
        model's reply (extraction, execution, comparison)."""
        raise NotImplementedError(f"task {self.name!r} cannot score replies yet")

    @abstractmethod
    def description(self) -> str:
        """The task's own part of the agent's description.md: a Jinja2 template that extends
        the workspace template (``{% extends "workspace.md.j2" %}``, src/a2rl/templates/, which
        holds the layout, submitting, budget and rules) and fills its blocks ``title``, ``goal``,
        ``data_rows``, ``about`` and optionally ``submit_notes`` and ``tips``. Values it may
        use: {{ workspace }}, {{ base_model }}, {{ data_dir }}, {{ feedback }}, {{ grader_url }}
        (a2rl.common.contract)."""


def task_command(cfg: TaskConfig) -> Callable[[list[str]], int] | None:
    """A task's own scoring command (``main(args)`` of its package's ``score`` module), for
    inputs other than replies (e.g. AlpacaEval's judge annotations); None when it has none."""
    name = f"{task_plugin(cfg).module}.score"
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as err:
        if err.name and (name == err.name or name.startswith(err.name + ".")):
            return None  # a task without a command of its own
        raise
    return getattr(module, "main", None)


def task_plugin(cfg: TaskConfig) -> Plugin:
    """The installed plugin that implements ``cfg.package``."""
    try:
        return find("tasks", cfg.package)
    except PluginError as err:
        raise TaskNotImplemented(f"task {cfg.id!r}: {err}") from err


def load_task(cfg: TaskConfig, data_root: Path) -> Task:
    """Build the task the config names, or say clearly that it does not exist yet."""
    if not cfg.implemented:
        raise TaskNotImplemented(
            f"task {cfg.package!r} is configured but not implemented yet "
            f"(task.implemented=false)")
    plugin = task_plugin(cfg)
    try:
        build = plugin.load().build
    except PluginError as err:
        raise TaskNotImplemented(str(err)) from err
    except AttributeError as err:
        raise TaskNotImplemented(plugin.describe("no build(cfg, data_root)")) from err
    return build(cfg, Path(data_root))
