"""The run's configuration: the typed dataclasses Hydra composes conf/ into (``types``: the only
schema; ``task``: the task group; ``cluster``: jobs' resources; ``prices``: what a driver's LLM
costs), the checks they share (``checks``) and composing conf/ into a checked ``RunConfig`` or a
grid into cells (``compose``). Imports only ``a2rl.common``."""

# ruff: noqa: I001 (a face's imports are wrapped as a grid, sorted by hand: one name a line
# would repeat its callers' import lists line for line)
from .checks import ConfigError, check_keys, from_mapping, require, typed
from .cluster import ClusterConfig, ResourcesConfig
from .compose import (
    CONFIG_NAME, HYDRA_VERSION_BASE, cell_overrides, compose, composing, conf_dir, grid_cells,
    grid_label, grid_overrides, plugin_conf_dirs, searchpath_override, selects_cells,
    task_overrides, to_checked,
)
from .task import InferenceConfig, ModelConfig, TaskConfig
from .types import (
    DEFAULT_GRID, NETWORK_POLICIES, AgentConfig, BudgetConfig, DriverConfig, PathsConfig, RunConfig,
    config_record,
)

__all__ = [
    "AgentConfig", "CONFIG_NAME", "DEFAULT_GRID", "HYDRA_VERSION_BASE", "NETWORK_POLICIES",
    "BudgetConfig", "PathsConfig", "config_record",
    "ClusterConfig", "ConfigError", "DriverConfig", "InferenceConfig", "ModelConfig",
    "ResourcesConfig", "RunConfig", "TaskConfig", "cell_overrides", "check_keys", "compose",
    "composing", "conf_dir", "from_mapping", "grid_cells", "grid_label", "grid_overrides",
    "plugin_conf_dirs", "require", "searchpath_override", "selects_cells", "task_overrides",
    "to_checked",
    "typed",
]
