"""Plugins: what installed packages register through Python entry points, one group per kind
(``GROUPS``). The built-in tasks and agents register the same way (pyproject.toml), so the
harness names none of them in code and a package installed next to a2rl adds its own.

A plugin that cannot be loaded (its module fails to import, its entry is missing, its name is
taken by a built-in) is reported with the package that registers it and left out; the other
plugins of its group still list and run.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# kind -> entry-point group
GROUPS = {"tasks": "a2rl.tasks", "agents": "a2rl.agents", "stacks": "a2rl.stacks"}
# the distribution whose entries are the built-ins (a plugin may not take their names)
BUILT_IN = "a2rl"


class PluginError(RuntimeError):
    """A plugin that cannot be used; the message names its package."""


@dataclass(frozen=True)
class Plugin:
    """One entry point of a group: ``name`` (a task package's or an agent's id), ``value``
    (``module`` or ``module:attribute``), the ``package`` (distribution) that registers it,
    and ``error``, why it cannot be used (None when nothing is known against it)."""

    kind: str
    name: str
    value: str
    package: str
    error: str | None = None

    @property
    def module(self) -> str:
        return self.value.partition(":")[0]

    @property
    def built_in(self) -> bool:
        return self.package == BUILT_IN

    def folder(self) -> Path:
        """The folder of the plugin's module (its package's, for a package), found without
        importing it."""
        try:
            spec = importlib.util.find_spec(self.module)
        except (ImportError, ValueError) as err:
            raise PluginError(self.describe(f"module {self.module!r} cannot be found: "
                                            f"{err}")) from err
        if spec is None or not (spec.origin or spec.submodule_search_locations):
            raise PluginError(self.describe(f"module {self.module!r} is not installed"))
        if spec.submodule_search_locations:
            return Path(list(spec.submodule_search_locations)[0])
        return Path(spec.origin).parent

    def load(self) -> Any:
        """The module, or its attribute for ``module:attribute``."""
        if self.error:
            raise PluginError(self.describe(self.error))
        try:
            obj = importlib.import_module(self.module)
        except Exception as err:
            raise PluginError(self.describe(f"importing {self.module!r} failed: "
                                            f"{type(err).__name__}: {err}")) from err
        attribute = self.value.partition(":")[2]
        for part in filter(None, attribute.split(".")):
            if not hasattr(obj, part):
                raise PluginError(self.describe(f"{self.module!r} has no {attribute!r}"))
            obj = getattr(obj, part)
        return obj

    def describe(self, problem: str) -> str:
        return (f"{self.kind[:-1]} plugin {self.name!r} from package {self.package!r} "
                f"({self.value}): {problem}")


def plugins(kind: str) -> dict[str, Plugin]:
    """Every entry of ``kind``'s group by name, sorted; an entry whose name a built-in already
    has carries that as its error instead of replacing the built-in, and of two plugins with
    one name the first keeps it."""
    group = GROUPS[kind]
    found: dict[str, Plugin] = {}
    clashes: list[Plugin] = []
    entries = sorted(importlib.metadata.entry_points(group=group),
                     key=lambda e: (package_of(e) != BUILT_IN, package_of(e), e.name))
    for entry in entries:
        plugin = Plugin(kind, entry.name, entry.value, package_of(entry))
        if entry.name in found:
            owner = found[entry.name]
            clashes.append(Plugin(kind, entry.name, entry.value, plugin.package,
                                  f"the name {entry.name!r} is already taken by "
                                  f"{'the built-in' if owner.built_in else 'the'} "
                                  f"{kind[:-1]} from package {owner.package!r}"))
            continue
        found[entry.name] = plugin
    return dict(sorted(found.items())) | {f"{p.name}@{p.package}": p for p in clashes}


def usable(kind: str) -> dict[str, Plugin]:
    """The plugins of ``kind`` nothing is known against (name clashes left out)."""
    return {name: p for name, p in plugins(kind).items() if p.error is None}


def find(kind: str, name: str) -> Plugin:
    """The plugin called ``name``; PluginError naming what is installed when there is none."""
    found = usable(kind)
    if name not in found:
        raise PluginError(f"no {kind[:-1]} plugin {name!r} is installed (entry-point group "
                          f"{GROUPS[kind]!r}; installed: {', '.join(found) or 'none'})")
    return found[name]


def package_of(entry: importlib.metadata.EntryPoint) -> str:
    dist = getattr(entry, "dist", None)
    return dist.metadata["Name"] if dist is not None else "?"
