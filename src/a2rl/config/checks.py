"""The checks every configuration dataclass shares: the run's config (a2rl.config.types), each
task's ``params`` (tasks/<name>/params.py) and the reference agents' settings.

A field documents itself in the string right below it (an attribute docstring, as Sphinx's
autodoc and pydantic read them)::

    steps: int = 20
    \"\"\"SFT steps per round.\"\"\"

``help_of`` reads those texts back from the class's source (tests check that every field has
one); a field's line stays a plain default, so that the many config classes do not repeat the
``field(default=..., metadata={"help": ...})`` scaffolding around each value.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
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


def require_choice(value: Any, choices: tuple, key: str, note: str = "") -> None:
    """``value`` of ``key`` is one of ``choices`` (``key`` may name its owner first:
    "agent 'sft': precision")."""
    require(value in choices,
            f"{key}={value!r}; expected one of {choices}{note}")


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


def field_docs(cls: type) -> dict[str, str]:
    """Field name -> the string literal right below it in the class body (whitespace collapsed),
    the base classes' first so that a subclass's own text wins."""
    docs: dict[str, str] = {}
    for klass in reversed([k for k in cls.__mro__ if is_dataclass(k)]):
        body = ast.parse(textwrap.dedent(inspect.getsource(klass))).body[0].body
        for node, after in zip(body, body[1:]):
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                    and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant) \
                    and isinstance(after.value.value, str):
                docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def help_of(cls: type) -> dict[str, str]:
    """Field name -> its help text ("" when it has none), nested dataclasses' fields as
    ``outer.inner``."""
    out: dict[str, str] = {}
    docs = field_docs(cls)
    for f in fields(cls):
        out[f.name] = docs.get(f.name, "")
        default = f.default_factory() if callable(f.default_factory) else f.default
        if is_dataclass(default):
            out |= {f"{f.name}.{k}": v for k, v in help_of(type(default)).items()}
    return out
