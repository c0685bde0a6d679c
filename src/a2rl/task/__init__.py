"""The task interface, and the one door for task authors: a task plugin (``tasks/<name>/``)
imports from ``a2rl.task`` only. This package owns the interface a task implements (``base``:
``Task``, its results, the ``Harness`` it is lent, the online-training protocols ``Rollouts``
and ``SingleTurn``), the text environments and their policy runner (``envs``, shipped into the
agent's data as ``a2rl_envs.py``) with the episode prompts and reply parsing it imports
(``prompts``, shipped beside it), generation with a model (``inference``, ``batching``), one
chat completion for judges (``chat``) and ``a2rl tasks`` (``listing``). It also re-exports what a
task needs from the packages below it (config types and checks, file helpers, the code runner),
so that a task's imports name one package."""

# ruff: noqa: I001 (a face's imports are wrapped as a grid, sorted by hand: one name a line
# would repeat its callers' import lists line for line)
from a2rl.common.files import iter_jsonl, write_jsonl_atomic
from a2rl.common.hardware import torch_dtype
from a2rl.common.layout import PreparedTaskPaths
from a2rl.common.progress import progress
from a2rl.config.checks import ConfigError, check_keys, from_mapping, require
from a2rl.config.task import InferenceConfig, ModelConfig, TaskConfig
from a2rl.config.types import DriverConfig
from a2rl.isolation.codeexec import ISOLATIONS, CodeRunner, ExecLimits, ExecResult, ProgramWithTests
from .base import (
    ENVS_NAME, ROLLOUTS_FILE, EpisodePromptParams, EvalResult,
    GradingBudgetExhausted, GradingUnavailable, Harness, PaidApi, RecordingProxy, ReplyScore,
    Rollouts, SingleTurn, Task, TaskNotImplemented, load_task, render_readme,
    require_test_feedback, score_by_group, ship_envs, ship_episode_modules, ship_package,
    task_command, text_key,
)
from .batching import common_prefix_len
from .chat import complete
from .envs import (
    Choice, EpisodeView, ExpertPolicy, GeneratorPolicy, Observation, RandomPolicy, Step, TextEnv,
    play, success_rate,
)
from .inference import HFGenerator, chat_replies, format_chat, load_generator
from .prompts import (
    ACTION_PROTOCOLS, STEP_ACTIONS, ChatTokens, PromptFormat, encode_prompt, is_template,
    render_chat,
)

__all__ = [
    # the interface a task implements, and what the harness lends it
    "ENVS_NAME", "ROLLOUTS_FILE", "EpisodePromptParams", "EvalResult",
    "GradingBudgetExhausted", "GradingUnavailable", "Harness", "PaidApi", "RecordingProxy",
    "ReplyScore", "Rollouts", "SingleTurn",
    "Task", "TaskNotImplemented", "load_task", "render_readme", "require_test_feedback",
    "score_by_group", "ship_envs", "ship_episode_modules", "ship_package", "task_command",
    "text_key",
    # text environments, the episode prompt and the policy runner
    "ACTION_PROTOCOLS", "ChatTokens", "Choice", "EpisodeView", "ExpertPolicy", "GeneratorPolicy",
    "Observation", "PromptFormat", "RandomPolicy", "STEP_ACTIONS", "Step", "TextEnv",
    "is_template", "play", "render_chat", "success_rate",
    # generation with a model, and a judge's chat completion
    "HFGenerator", "chat_replies", "common_prefix_len", "complete", "encode_prompt", "format_chat",
    "load_generator",
    # re-exported for task authors from a2rl.common, a2rl.config and a2rl.isolation
    "CodeRunner", "ConfigError", "DriverConfig", "ExecLimits", "ExecResult", "ISOLATIONS",
    "InferenceConfig", "ModelConfig", "PreparedTaskPaths", "ProgramWithTests", "TaskConfig",
    "check_keys", "from_mapping", "iter_jsonl", "progress", "require", "torch_dtype",
    "write_jsonl_atomic",
]
