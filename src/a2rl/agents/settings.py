"""The reference agents' settings: one dataclass per agent, each field documented.

Set them in conf under ``agent.settings.<agent>`` (e.g. ``++agent.settings.sft.steps=40``). The
harness checks every entry against its agent's dataclass before a run starts
(``a2rl.pipeline.agent_settings``: an unknown key or a value of the wrong type fails there, naming
it) and hands the run's agent its settings, defaults filled in, as one JSON object in
``$A2RL_AGENT_SETTINGS``; the agent reads them with ``load``. Agents run alone in the sandbox,
so this module imports nothing from a2rl.
"""

import json
import os
from dataclasses import dataclass

SETTINGS_ENV = "A2RL_AGENT_SETTINGS"
# one SFT round's defaults, for the sft agent and sft_grpo's warm-up
SFT_BATCH = 8
SFT_LR = 5e-5
SFT_MAX_LEN = 512


@dataclass
class AgentSettings:
    """What every reference agent that trains takes: its planning against the deadline."""

    reserve_s: float = 45.0
    """Seconds kept free before the end of the budget to save and submit a model; a submission
    received before the end is graded even if grading runs past it."""


@dataclass
class SftSettings(AgentSettings):
    """Agent ``sft``: TRL SFT in rounds, each round submitted (sft.py)."""

    steps: int = 20
    """Training steps per round (with lora, round k trains k x steps from the base)."""
    batch: int = SFT_BATCH
    """Rows per training step."""
    lr: float = SFT_LR
    """Learning rate."""
    max_len: int = SFT_MAX_LEN
    """Tokens per training row; household prompts with their history run past 256."""
    lora: bool = False
    """Train LoRA adapters (merged on save) instead of every weight."""
    max_rounds: int = 5
    """Rounds at most; a later round runs only if enough of its steps fit."""


@dataclass
class GrpoSettings(AgentSettings):
    """Agent ``grpo``: online GRPO rounds in the train games of an interactive task, or on the
    train prompts of a single-turn task (grpo.py; the task's data/rollouts.json says which).
    Fields marked "interactive" only apply to the first."""

    rounds: int = 4
    """GRPO rounds, each one submitted."""
    iters: int = 3
    """GRPO iterations per round (single-turn tasks: TRL GRPO steps per round)."""
    games: int = 8
    """Train games played per iteration (single-turn: train prompts per step)."""
    group: int = 4
    """Episodes per game (single-turn: replies per prompt); advantages are relative to the group's
    mean."""
    lr: float = 1e-5
    """Learning rate."""
    temp: float = 1.0
    """Sampling temperature of the rollouts."""
    train_layers: int = 15
    """Top layers trained (with the final norm); the rest stay frozen."""
    minibatch: int = 16
    """Samples per optimizer step (interactive; a single-turn step is one optimizer step on all its
    replies)."""
    step_cost: float = 0.01
    """Return lost per step taken (episode return = won - step_cost x steps; interactive)."""
    expert_bonus: float = 0.0
    """Return bonus x the share of steps that took the game's expert action (interactive)."""
    max_steps: int = 12
    """Actions per episode at most (interactive)."""
    max_new_tokens: int = 16
    """Tokens per sampled action (a WebShop search[...] needs about 15; interactive)."""
    # 64: a GSM8K-style arithmetic answer with a line of working fits; sampling dominates a CPU
    # step, and its cost grows with this
    reply_tokens: int = 64
    """Tokens per sampled reply on a single-turn task at most; a longer reply is cut (and usually
    scores 0)."""
    # 0.05: the order of DeepSeekMath's / TRL's GRPO beta (0.04) on the same per-token k3 scale,
    # enough to pull back the second-round drift without outweighing unit-std advantages
    kl: float = 0.05
    """KL penalty coefficient to the starting model (for sft_grpo: the SFT policy; single-turn:
    TRL's beta, to each round's starting model); 0 disables it."""


@dataclass
class SftGrpoSettings(GrpoSettings):
    """Agent ``sft_grpo``: an SFT warm-up on the expert trajectories, then GRPO rounds
    (sft_grpo.py); the GRPO fields are ``grpo``'s."""

    warmup_steps: int = 40
    """SFT steps per warm-up round."""
    warmup_rounds: int = 1
    """SFT warm-up rounds."""
    warmup_batch: int = SFT_BATCH
    """Rows per warm-up training step."""
    warmup_lr: float = SFT_LR
    """Warm-up learning rate."""
    warmup_max_len: int = SFT_MAX_LEN
    """Tokens per warm-up training row."""


@dataclass
class DpoSettings(AgentSettings):
    """Agent ``dpo``: TRL DPO in rounds, the row's target reply chosen and the current model's
    own sampled reply rejected, each round submitted (dpo.py)."""

    steps: int = 20
    """DPO steps per round."""
    batch: int = 4
    """Preference pairs per training step."""
    lr: float = 5e-6
    """Learning rate."""
    beta: float = 0.1
    """DPO's beta: how far the policy may move from the reference model."""
    max_len: int = 768
    """Tokens per pair (prompt and reply)."""
    sample_tokens: int = 128
    """Tokens at most in each sampled (rejected) reply."""
    temperature: float = 0.8
    """Sampling temperature of the rejected replies."""
    lora: bool = False
    """Train LoRA adapters (merged on save) instead of every weight."""
    max_rounds: int = 3
    """Rounds at most."""


# by agent name (conf/agent/<name>.yaml here), which is also the agent's script (<name>.py)
SETTINGS = {"sft": SftSettings, "dpo": DpoSettings, "grpo": GrpoSettings,
            "sft_grpo": SftGrpoSettings}


def load(cls):
    """The settings the harness handed this agent; the defaults when it runs by hand."""
    return cls(**json.loads(os.environ.get(SETTINGS_ENV) or "{}"))
