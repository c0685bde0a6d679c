"""Composed configs kept between Snakemake runs, so that planning composes with Hydra only when
something it depends on changed.

Every ``snakemake`` command parses the workflow, and so does every job a cluster executor
starts (each runs ``python -m snakemake`` for its one rule): without this cache each of them
composes the grid's tasks, agents and drivers again, a tenth of a second each. A cached config
is keyed by everything a composition reads: the overrides, every file under conf/ (its path and
bytes), the environment variables conf/ interpolates (``${oc.env:NAME}``), the code that composes
and checks (the a2rl.config package and the agents' settings check) and the Hydra and OmegaConf
versions. Any change gives a new key; the old entry is left behind, unused.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import re
from collections.abc import Callable, Sequence
from importlib.metadata import version
from pathlib import Path

from a2rl.agents import settings as settings_module
from a2rl.config import types as types_module
from a2rl.config.compose import compose, conf_dir, plugin_conf_dirs
from a2rl.config.types import RunConfig
from a2rl.pipeline import agent_settings as agent_settings_module
from a2rl.pipeline.agent_settings import check_settings

ENV_INTERPOLATION = re.compile(rb"oc\.env:([A-Za-z_][A-Za-z0-9_]*)")


def compose_checked(overrides: Sequence[str]) -> RunConfig:
    """What planning accepts: the composed config with the reference agents' settings checked."""
    return check_settings(compose(overrides))


def code_files() -> list[Path]:
    """The code a checked composition runs besides Hydra and OmegaConf."""
    config_package = sorted(Path(types_module.__file__).parent.glob("*.py"))
    return [*config_package, Path(agent_settings_module.__file__), Path(settings_module.__file__)]


def inputs_digest() -> str:
    """A digest of what every composition reads besides its overrides."""
    digest = hashlib.sha256()
    names = set()
    for conf in (conf_dir(), *plugin_conf_dirs()):  # a plugin's configs are composed too
        digest.update(str(conf).encode() + b"\0")
        for path in sorted(p for p in conf.rglob("*") if p.is_file()):
            content = path.read_bytes()
            names.update(ENV_INTERPOLATION.findall(content))
            digest.update(str(path.relative_to(conf)).encode() + b"\0" + content + b"\0")
    for name in sorted(names):
        digest.update(name + b"=" + os.environ.get(name.decode(), "<unset>").encode() + b"\0")
    for source in code_files():
        digest.update(source.read_bytes() + b"\0")
    digest.update(f"hydra {version('hydra-core')} omegaconf {version('omegaconf')}".encode())
    return digest.hexdigest()


class ComposeCache:
    """``checked(overrides)`` results under ``folder``, keyed by the overrides and
    ``inputs_digest``; a config is stored only after ``checked`` accepted it."""

    def __init__(self, folder: Path,
                 checked: Callable[[list[str]], RunConfig] = compose_checked):
        self.folder = folder
        self.digest = inputs_digest()
        self.checked = checked

    def path_of(self, overrides: Sequence[str]) -> Path:
        key = hashlib.sha256("\0".join([self.digest, *overrides]).encode()).hexdigest()
        return self.folder / f"{key}.pickle"

    def __call__(self, overrides: Sequence[str]) -> RunConfig:
        overrides = [str(o) for o in overrides]
        path = self.path_of(overrides)
        try:
            with path.open("rb") as fh:
                return pickle.load(fh)
        except (OSError, EOFError, AttributeError, pickle.UnpicklingError):
            pass  # not cached yet: compose
        cfg = self.checked(overrides)
        self.folder.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        with partial.open("wb") as fh:
            pickle.dump(cfg, fh)
        partial.replace(path)  # atomic: a concurrent reader sees the whole file or none
        return cfg
