"""The reference agents' settings (``agent.settings`` in conf) checked against the agents' own
dataclasses (a2rl.agents.settings) and handed to the run's agent as one JSON value.

The check runs wherever a cell is composed to be run or planned (``a2rl run``, ``a2rl stage``,
``a2rl doctor`` and the Snakefile's planning), so a mistyped key fails before any stage starts.
It lives here, not in a2rl.config.compose, because only the pipeline may import the agents
package (the agents are standalone scripts; a2rl.config sits below everything that uses it).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from a2rl.agents.settings import SETTINGS, SETTINGS_ENV
from a2rl.config.checks import require, typed
from a2rl.config.types import RunConfig


def checked_settings(cfg: RunConfig) -> dict[str, Any]:
    """Every entry of ``agent.settings`` as its agent's settings dataclass. Raises ConfigError
    naming the entry: an agent without settings, an unknown key, a value of the wrong type."""
    out = {}
    for agent, raw in cfg.agent.settings.items():
        require(agent in SETTINGS, f"agent.settings.{agent}: agent {agent!r} takes no settings; "
                                   f"the agents that do: {sorted(SETTINGS)}")
        out[agent] = typed(SETTINGS[agent], raw, f"agent.settings.{agent}")
    return out


def check_settings(cfg: RunConfig) -> RunConfig:
    """``cfg`` once its agent settings are checked (ConfigError otherwise)."""
    checked_settings(cfg)
    return cfg


def agent_settings(cfg: RunConfig) -> Any:
    """The settings of the cell's own agent, defaults filled in; None for an agent that takes
    none (noop, the LLM agents)."""
    settings = checked_settings(cfg)
    if cfg.agent.name in settings:
        return settings[cfg.agent.name]
    cls = SETTINGS.get(cfg.agent.name)
    return cls() if cls else None


def settings_env(cfg: RunConfig) -> dict[str, str]:
    """``$A2RL_AGENT_SETTINGS`` for the cell's agent: its settings as one JSON object."""
    settings = agent_settings(cfg)
    return {} if settings is None else {SETTINGS_ENV: json.dumps(asdict(settings))}
