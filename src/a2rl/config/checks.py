"""The checks every configuration dataclass shares: the run's config (a2rl.config.types), each
task's ``params`` (tasks/<name>/params.py) and the reference agents' settings.

A field documents itself in its metadata, TRL style::

    steps: int = field(default=20, metadata={"help": "SFT steps per round"})

``help_of`` reads those texts back (tests check that every field has one).
"""

from __future__ import annotations

import re
from dataclasses import fields, is_dataclass
from typing import Any

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

# names that become folders
FOLDER_NAME = re.compile(r"[A-Za-z0-9_.-]+")


class ConfigError(ValueError):
    """A configuration value is missing or outside what it may be."""


def require(ok: bool, message: str) -> None:
    """Raise ConfigError(message) unless ``ok``; ``message`` names the key and what it may be."""
    if not ok:
        raise ConfigError(message)


def require_folder_name(value: str, key: str) -> None:
    """``value`` of ``key`` can name a folder (results/runs/<task>/<agent>/<driver>/,
    resources/models/<model>/)."""
    require(bool(FOLDER_NAME.fullmatch(str(value))),
            f"{key}={value!r}; expected letters, digits, '_', '.' or '-' (it names a folder)")


def check_keys(cls: type, given: dict[str, Any], where: str) -> None:
    """Every key of ``given`` is a field of dataclass ``cls``; else the unknown ones are named."""
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(given) - known)
    require(not unknown, f"{where}: unknown key(s) {unknown}; expected some of {sorted(known)}")


def plain(raw: Any, where: str) -> dict[str, Any]:
    """``raw`` (a dict, an OmegaConf node or None) as a plain dict with interpolations resolved."""
    if OmegaConf.is_config(raw):
        raw = OmegaConf.to_container(raw, resolve=True)
    raw = {} if raw is None else raw
    require(isinstance(raw, dict), f"{where}={raw!r}; expected a mapping")
    return dict(raw)


def from_mapping(cls: type, raw: Any, where: str) -> Any:
    """Dataclass ``cls`` built from the mapping ``raw``; unknown keys fail naming them, and the
    values are checked by ``cls`` itself (its ``__post_init__``)."""
    raw = plain(raw, where)
    check_keys(cls, raw, where)
    return cls(**raw)


def typed(cls: type, raw: Any, where: str) -> Any:
    """Like ``from_mapping``, and each value must also have its field's type (converted where
    OmegaConf converts, e.g. ``"8"`` to 8 for an int); a wrong one fails naming the key."""
    raw = plain(raw, where)
    check_keys(cls, raw, where)
    try:
        return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(cls), raw))
    except OmegaConfBaseException as err:
        raise ConfigError(f"{where}: {err}") from err


def help_of(cls: type) -> dict[str, str]:
    """Field name -> its help text ("" when it has none), nested dataclasses' fields as
    ``outer.inner``."""
    out: dict[str, str] = {}
    for f in fields(cls):
        out[f.name] = f.metadata.get("help", "")
        default = f.default_factory() if callable(f.default_factory) else f.default
        if is_dataclass(default):
            out |= {f"{f.name}.{k}": v for k, v in help_of(type(default)).items()}
    return out
