"""Compose conf/ into checked RunConfigs with Hydra's compose API, and expand a grid into cells.

Everything that is not the ``a2rl run`` Hydra app composes through here: Snakemake's
``workflow/rules/common.smk`` and ``workflow/scripts/``, ``a2rl stage``, ``a2rl leaderboard`` and
the tests. ``a2rl run`` reads the same conf/ directory through ``@hydra.main``.

A cell is one (task, agent, driver, seed); its config is the grid's config with the cell's four
choices as overrides::

    cfg = compose(["grid=paper"])
    for cell in grid_cells(cfg):
        cell_cfg = compose(cell_overrides(cell, ["grid=paper"]))

conf/ is found through ``$A2RL_CONF``, else next to the package in a source checkout
(``src/a2rl/config/../../../conf``), else in the working directory. Each installed plugin's own
``conf/`` folder (a2rl.common.plugins: a task package's ``conf/task/<id>.yaml``, an agent's
``conf/agent/<name>.yaml``) joins Hydra's search path after it, built-ins first, so
``task=<id>`` finds a task wherever its package is installed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from a2rl.common.plugins import GROUPS, PluginError, usable
from a2rl.config.types import DEFAULT_GRID, ConfigError, RunConfig, to_run_config

CONF_ENV = "A2RL_CONF"
CONFIG_NAME = "config"
HYDRA_VERSION_BASE = "1.3"
# the four choices that make a cell, in the order they name a run directory
CELL_AXES = ("task", "agent", "driver", "seed")
# the Hydra initialisation that compositions inside ``composing()`` share (None outside it)
_session: contextlib.ExitStack | None = None


def conf_dir() -> Path:
    """The conf/ directory Hydra composes from."""
    env = os.environ.get(CONF_ENV)
    if env:
        path = Path(env).expanduser().resolve()
        if not (path / f"{CONFIG_NAME}.yaml").is_file():
            raise ConfigError(f"{CONF_ENV}={env!r} has no {CONFIG_NAME}.yaml; expected the "
                              f"a2rl conf/ directory")
        return path
    candidates = (Path(__file__).resolve().parents[3] / "conf", Path.cwd() / "conf")
    for path in candidates:
        if (path / f"{CONFIG_NAME}.yaml").is_file():
            return path
    raise ConfigError(f"no conf/{CONFIG_NAME}.yaml next to the a2rl package or in the working "
                      f"directory ({Path.cwd()}); set {CONF_ENV}=/path/to/conf")


def plugin_conf_dirs() -> list[Path]:
    """The ``conf/`` folders of the installed plugins, built-ins first. A plugin whose module
    cannot be found adds none (``a2rl tasks`` / ``a2rl agents`` report it)."""
    found = []
    for kind in GROUPS:
        for plugin in sorted(usable(kind).values(), key=lambda p: (not p.built_in, p.name)):
            try:
                folder = plugin.folder() / "conf"
            except PluginError:
                continue
            if folder.is_dir() and folder not in found:
                found.append(folder)
    return found


def group_options(group: str) -> list[str]:
    """The options of the config group ``group`` in conf/ and in every installed plugin's conf/
    (``agent``: noop, sft, claude_code, ...), sorted: what ``<group>=<option>`` may choose."""
    return sorted({path.stem for conf in (conf_dir(), *plugin_conf_dirs())
                   for path in (conf / group).glob("*.yaml")})


def searchpath_override() -> str:
    """The Hydra override that puts ``plugin_conf_dirs`` on the config search path."""
    quoted = (str(folder.resolve()).replace("\\", "\\\\").replace("'", "\\'")
              for folder in plugin_conf_dirs())
    return "hydra.searchpath=[" + ",".join(f"'file://{q}'" for q in quoted) + "]"


def compose_dict(overrides: Sequence[str] = ()) -> DictConfig:
    """conf/config.yaml with Hydra ``overrides`` applied, unresolved and unchecked."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException

    overrides = [str(o) for o in overrides]
    hydra_overrides = [*overrides, searchpath_override()]
    try:
        # inside the `a2rl run` app (same conf/) or a `composing()` block that initialised it
        if GlobalHydra.instance().is_initialized():
            return hydra_compose(config_name=CONFIG_NAME, overrides=hydra_overrides)
        initialize = initialize_config_dir(config_dir=str(conf_dir()),
                                           version_base=HYDRA_VERSION_BASE, job_name="a2rl")
        if _session is not None:  # stays initialised for the block's next compositions
            _session.enter_context(initialize)
            return hydra_compose(config_name=CONFIG_NAME, overrides=hydra_overrides)
        with initialize:
            return hydra_compose(config_name=CONFIG_NAME, overrides=hydra_overrides)
    except (HydraException, OmegaConfBaseException) as err:
        raise ConfigError(f"cannot compose conf/ with overrides {overrides}: {err}") from err


@contextlib.contextmanager
def composing():
    """A block whose compositions share one Hydra initialisation, made at the first of them
    (none, and no Hydra import, when every config comes from a cache): initialising Hydra is
    about a fifth of each composition's time. Nested blocks share the outer one's."""
    global _session
    if _session is not None:
        yield
        return
    _session = contextlib.ExitStack()
    try:
        with _session:
            yield
    finally:
        _session = None


def to_checked(cfg: DictConfig, overrides: Sequence[str] = ()) -> RunConfig:
    """``a2rl.config.types.to_run_config`` with OmegaConf's errors (unknown key, wrong type) turned
    into ConfigError; every message names the offending key."""
    try:
        return to_run_config(cfg)
    except ConfigError:
        raise
    except OmegaConfBaseException as err:
        where = f" (overrides {list(overrides)})" if overrides else ""
        raise ConfigError(f"invalid config{where}: {err}") from err


def compose(overrides: Sequence[str] = ()) -> RunConfig:
    """The checked RunConfig for ``overrides`` (Hydra syntax: ``task=gsm8k``, ``seed=1``,
    ``budget.time_limit_s=60``). Raises ConfigError naming the bad key or option."""
    return to_checked(compose_dict(overrides), overrides)


def command_grid(args: Sequence[str], flags: Sequence[str] = ()
                 ) -> tuple[str, list[str], set[str]]:
    """A grid command's arguments (``a2rl plan``, ``a2rl doctor``): the grid ``grid=NAME`` names
    (the default grid otherwise), the other overrides, and which of ``flags`` were given."""
    given = {a for a in args if a in flags}
    rest = [a for a in args if a not in flags]
    grid = next((a.split("=", 1)[1] for a in rest if a.startswith("grid=")), DEFAULT_GRID)
    return grid, [a for a in rest if not a.startswith("grid=")], given


def grid_overrides(grid: str, extra: Iterable[str] = ()) -> list[str]:
    """Overrides selecting conf/grid/<grid>.yaml, followed by ``extra`` ones for every cell.
    ``extra`` must not choose a cell axis (task=, agent=, driver=, seed=)."""
    extra = [str(o) for o in extra]
    for override in extra:
        key = override.split("=", 1)[0].lstrip("+~")
        if key in CELL_AXES or key == "grid":
            raise ConfigError(f"override {override!r} chooses {key!r}, which the grid decides; "
                              f"change conf/grid/{grid}.yaml or run one cell with `a2rl run`")
    return [f"grid={grid}", *extra]


def grid_label(grid: str, extra: Iterable[str] = ()) -> str:
    """How a grid's runs are filed (``GridConfig.label``, results/<label>/): the grid's name,
    and when the command line adds overrides, a short hash of them in their order (Hydra applies
    them in order), so ``grid=smoke`` with a reduced budget never shares runs with ``smoke``.
    Overrides that change no cell's result are left out: the ``cluster`` group only says where
    jobs run (a grid run on Slurm and the same grid run here are filed alike), and the grid's
    axes only select which of its cells run (``grid.tasks=[gsm8k_arith]`` is part of the grid)."""
    extra = [str(o) for o in extra if not leaves_results_alone(str(o))]
    if not extra:
        return grid
    digest = hashlib.sha256(json.dumps(extra).encode()).hexdigest()[:8]
    return f"{grid}-{digest}"


# the grid's keys that only choose cells, never what a cell computes
CELL_SELECTION = ("grid.tasks", "grid.agents", "grid.drivers", "grid.seeds", "grid.agent_tasks",
                  "grid.reference_agents")


def selects_cells(override: str) -> bool:
    """Whether ``override`` only chooses which of the grid's cells run (``CELL_SELECTION``)."""
    return override.split("=", 1)[0].lstrip("+~") in CELL_SELECTION


def leaves_results_alone(override: str) -> bool:
    """Whether ``override`` only places jobs (the ``cluster`` group: partitions, sbatch flags)
    or selects cells (``CELL_SELECTION``), so that no cell's result depends on it."""
    key = override.split("=", 1)[0].lstrip("+~")
    return key == "cluster" or key.startswith("cluster.") or selects_cells(override)


def grid_cells(cfg: RunConfig) -> list[dict[str, Any]]:
    """The grid's cells, task x agent x driver x seed, in that nesting order. Agents listed in
    ``grid.reference_agents`` need no LLM and get driver ``none`` only, whatever ``grid.drivers``
    says; an agent in ``grid.agent_tasks`` runs on the tasks listed there only; repeated names
    give one cell."""
    grid = cfg.grid
    cells: list[dict[str, Any]] = []
    seen: set[tuple[str, str, str, int]] = set()
    for task in grid.tasks:
        for agent in (a for a in grid.agents if grid.runs(a, task)):
            drivers = ["none"] if agent in grid.reference_agents else list(grid.drivers)
            for driver in drivers:
                for seed in grid.seeds:
                    key = (str(task), str(agent), str(driver), int(seed))
                    if key not in seen:
                        seen.add(key)
                        cells.append(dict(zip(CELL_AXES, key)))
    return cells


def cell_overrides(cell: dict[str, Any], base: Sequence[str] = ()) -> list[str]:
    """The overrides composing one cell: ``base`` (e.g. ``grid_overrides(...)``), then the
    cell's task, agent, driver and seed."""
    return [*base, *(f"{axis}={cell[axis]}" for axis in CELL_AXES)]


def task_overrides(task: str, base: Sequence[str] = ()) -> list[str]:
    """The overrides composing the grid's config for one task (model, data and baseline depend
    on the task alone)."""
    return [*base, f"task={task}"]
