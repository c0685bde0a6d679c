"""``a2rl new task NAME``: write a working task plugin package outside the repository, from the
templates in ``a2rl/templates/new_task/`` (Jinja2): a tiny static single-turn task, or with
``--interactive`` a tiny interactive one (a text environment the agents can roll out). Installed
(``pip install -e DIR``) it is a task like the built-ins: ``a2rl tasks`` lists it and
``a2rl run grid=ci task=NAME agent=sft`` runs it. docs/plugins.md walks through it.

    a2rl new task NAME [--interactive] [--dir DIR]
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

TEMPLATES = Path(__file__).parents[1] / "templates" / "new_task"
NAME = re.compile(r"[a-z][a-z0-9_]{1,39}")


class ScaffoldError(ValueError):
    """The package cannot be written as asked."""


def names_for(name: str) -> dict[str, str]:
    """The template's variables for a task called ``name``."""
    return {"name": name, "package": f"a2rl_task_{name}",
            "distribution": f"a2rl-task-{name.replace('_', '-')}",
            "cls": "".join(part.title() for part in name.split("_")) + "Task"}


def new_task(name: str, folder: Path, interactive: bool = False) -> Path:
    """Write the package for task ``name`` into ``folder/<distribution>/``; returns that path."""
    from jinja2 import Environment, StrictUndefined

    from a2rl.common.plugins import plugins

    if not NAME.fullmatch(name):
        raise ScaffoldError(f"task name {name!r}: expected lower-case letters, digits and _, "
                            "starting with a letter (it becomes a task id and a package name)")
    if name in plugins("tasks"):
        raise ScaffoldError(f"a task plugin called {name!r} is already installed "
                            f"(`a2rl tasks` lists them); choose another name")
    variables = names_for(name) | {"kind_note": (
        "a few rooms per game, the key in one of them." if interactive else
        "made-up words from seeded random letters.")}
    dest = Path(folder) / variables["distribution"]
    if dest.exists():
        raise ScaffoldError(f"{dest} already exists; remove it or pass another --dir")
    source = TEMPLATES / ("interactive" if interactive else "static")
    env = Environment(keep_trailing_newline=True, undefined=StrictUndefined)
    for template in sorted(p for p in source.rglob("*.j2") if p.is_file()):
        relative = str(template.relative_to(source))[:-len(".j2")]
        relative = relative.replace("__package__", variables["package"])
        target = dest / relative.replace("__name__", name)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(env.from_string(template.read_text()).render(**variables))
    return dest


def main(args: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="a2rl new", description=__doc__.split("\n\n")[0])
    ap.add_argument("kind", choices=["task"])
    ap.add_argument("name")
    ap.add_argument("--interactive", action="store_true",
                    help="an interactive task (a text environment) instead of a static one")
    ap.add_argument("--dir", default=".", help="where the package folder goes (default: here)")
    a = ap.parse_args(args)
    try:
        dest = new_task(a.name, Path(a.dir), a.interactive)
    except ScaffoldError as err:
        print(f"a2rl new: {err}")
        return 1
    print(f"wrote {dest}\nnext: pip install -e {dest}   (into a2rl's environment)\n"
          f"      a2rl tasks\n      a2rl run grid=ci task={a.name} agent=sft")
    return 0
