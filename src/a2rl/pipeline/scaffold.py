"""``a2rl new task|agent NAME``: write a working plugin package outside the repository, from the
templates in ``a2rl/templates/new_<kind>/`` (Jinja2; ``__package__`` and ``__name__`` in a
template's path become the package's module and the plugin's name). Installed
(``pip install -e DIR``) it is a plugin like the built-ins:

- a task: a tiny static single-turn task, or with ``--interactive`` a tiny interactive one (a
  text environment the agents can roll out); ``a2rl tasks`` lists it and
  ``a2rl run grid=ci task=NAME agent=sft`` runs it;
- an agent: a scripted agent (its script submits the base model) with its config;
  ``a2rl agents`` lists it and ``a2rl run grid=ci task=gsm8k_arith agent=NAME`` runs it.

docs/plugins.md walks through both.

    a2rl new task NAME [--interactive] [--dir DIR]
    a2rl new agent NAME [--dir DIR]
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Optional

TEMPLATES = Path(__file__).parents[1] / "templates"
NAME = re.compile(r"[a-z][a-z0-9_]{1,39}")
# the plugin kinds (a2rl.common.plugins) whose names a new package of each kind may not take
# (agents and stacks share conf/agent/), and the command that lists each
TAKEN_BY = {"task": ("tasks",), "agent": ("agents", "stacks")}
LISTED_BY = {"tasks": "a2rl tasks", "agents": "a2rl agents", "stacks": "a2rl agents"}


class ScaffoldError(ValueError):
    """The package cannot be written as asked."""


def names_for(kind: str, name: str) -> dict[str, str]:
    """The templates' variables for a ``kind`` plugin called ``name``."""
    return {"name": name, "package": f"a2rl_{kind}_{name}",
            "distribution": f"a2rl-{kind}-{name.replace('_', '-')}",
            "cls": "".join(part.title() for part in name.split("_")) + kind.title()}


def new_task(name: str, folder: Path, interactive: bool = False) -> Path:
    """Write the package for task ``name`` into ``folder/<distribution>/``; returns that path."""
    variables = names_for("task", name) | {"kind_note": (
        "a few rooms per game, the key in one of them." if interactive else
        "made-up words from seeded random letters.")}
    source = TEMPLATES / "new_task" / ("interactive" if interactive else "static")
    return write_package("task", source, Path(folder), variables)


def new_agent(name: str, folder: Path) -> Path:
    """Write the package for agent ``name`` into ``folder/<distribution>/``; returns that
    path."""
    return write_package("agent", TEMPLATES / "new_agent", Path(folder),
                         names_for("agent", name))


def write_package(kind: str, source: Path, folder: Path, variables: dict[str, str]) -> Path:
    """Render every template under ``source`` into ``folder/<distribution>/`` once the name and
    the place are checked."""
    from jinja2 import Environment, StrictUndefined

    name = variables["name"]
    check_name(kind, name)
    dest = folder.resolve() / variables["distribution"]
    check_place(dest)
    env = Environment(keep_trailing_newline=True, undefined=StrictUndefined)
    for template in sorted(p for p in source.rglob("*.j2") if p.is_file()):
        relative = str(template.relative_to(source))[:-len(".j2")]
        relative = relative.replace("__package__", variables["package"])
        target = dest / relative.replace("__name__", name)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(env.from_string(template.read_text()).render(**variables))
    return dest


def check_name(kind: str, name: str) -> None:
    from a2rl.common.plugins import plugins

    if not NAME.fullmatch(name):
        raise ScaffoldError(f"{kind} name {name!r}: expected lower-case letters, digits and _, "
                            f"starting with a letter (it becomes a {kind} name and a package "
                            f"name)")
    for group in TAKEN_BY[kind]:
        if name in plugins(group):
            raise ScaffoldError(f"{'an' if group == 'agents' else 'a'} {group[:-1]} plugin "
                                f"called {name!r} is already installed (`{LISTED_BY[group]}` "
                                f"lists them); choose another name")


def check_place(dest: Path) -> None:
    if dest.exists():
        raise ScaffoldError(f"{dest} already exists; remove it or pass another --dir")
    checkout = source_checkout()
    if checkout is not None and dest.is_relative_to(checkout):
        raise ScaffoldError(f"{dest} is inside the a2rl checkout {checkout}: a plugin is a "
                            f"package of its own; pass --dir outside it")


def source_checkout() -> Optional[Path]:
    """The a2rl checkout this code runs from (None for an installed a2rl)."""
    root = Path(__file__).resolve().parents[3]
    return root if (root / "pyproject.toml").is_file() and (root / "src" / "a2rl").is_dir() \
        else None


def main(args: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="a2rl new", description=__doc__.split("\n\n")[0])
    ap.add_argument("kind", choices=["task", "agent"])
    ap.add_argument("name")
    ap.add_argument("--interactive", action="store_true",
                    help="a task: an interactive one (a text environment) instead of a static one")
    ap.add_argument("--dir", default=".", help="where the package folder goes (default: here)")
    a = ap.parse_args(args)
    if a.interactive and a.kind != "task":
        ap.error("--interactive is for tasks")
    try:
        dest = (new_task(a.name, Path(a.dir), a.interactive) if a.kind == "task" else
                new_agent(a.name, Path(a.dir)))
    except ScaffoldError as err:
        print(f"a2rl new: {err}")
        return 1
    run = (f"a2rl run grid=ci task={a.name} agent=sft" if a.kind == "task" else
           f"a2rl run grid=ci task=gsm8k_arith agent={a.name}")
    print(f"wrote {dest}\nnext: pip install -e {dest}   (into a2rl's environment)\n"
          f"      a2rl {a.kind}s\n      {run}")
    return 0
