"""Agent and stack plugins as the harness uses them (a2rl.common.plugins): the scripts a reference
agent's sandbox runs, and ``a2rl agents``, the list of every installed agent and stack with the
package that registers it and whether it can be used.

An agent plugin (entry-point group ``a2rl.agents``) names a Python package whose folder holds the
agent's scripts and its config, ``conf/agent/<name>.yaml`` (on Hydra's search path, so
``agent=<name>`` composes). The runner copies the folder's scripts into the sandbox
(/opt/a2rl/agents, ``{agents}`` in the agent's command): they run in the agents' Python
environment and import nothing from the harness, like the built-in reference agents
(src/a2rl/agents/, registered the same way). A stack plugin (``a2rl.stacks``) names an
``AgentStack`` subclass (a2rl.llm.stacks).
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

from a2rl.common.plugins import Plugin, PluginError, find, plugins
from a2rl.config.types import RunConfig
from a2rl.llm.stacks import load_stack

AGENT_CONF = Path("conf") / "agent"


def agent_scripts(cfg: RunConfig) -> Optional[Path]:
    """The folder whose scripts the sandbox shows at ``{agents}``: that of the agent plugin
    ``agent.package`` names (``agent.name`` when null); None for an LLM agent, whose stack
    builds its command. PluginError, naming the plugin's package, when it cannot run."""
    if cfg.agent.kind == "llm":
        return None
    return agent_folder(cfg.agent.package or cfg.agent.name)


def agent_folder(name: str) -> Path:
    """The package folder of the agent plugin ``name``, once ``check_agent`` accepts it."""
    plugin = find("agents", name)
    check_agent(plugin)
    return plugin.folder()


def check_agent(plugin: Plugin) -> None:
    """PluginError unless the agent plugin's package imports and holds its config, and no
    built-in stack has its name: an agent whose package is broken is not run, whatever its
    scripts would do."""
    stack = plugins("stacks").get(plugin.name)
    if stack is not None and stack.built_in and not plugin.built_in:
        # the stacks' agent configs share conf/agent/, built-ins first: agent=<name> would
        # compose the built-in stack's config and this agent could never run
        raise PluginError(plugin.describe(f"the name {plugin.name!r} is already taken by the "
                                          f"built-in stack from package {stack.package!r}"))
    plugin.load()
    config = AGENT_CONF / f"{plugin.name}.yaml"
    if not (plugin.folder() / config).is_file():
        raise PluginError(plugin.describe(f"its package folder {plugin.folder()} has no "
                                          f"{config}"))


# what makes a plugin of each kind usable, by a2rl.common.plugins kind
CHECKS = {"agents": check_agent, "stacks": load_stack}
KIND_NAMES = {"agents": "agent", "stacks": "stack"}


@dataclass(frozen=True)
class Listed:
    """One row of ``a2rl agents``: ``problem`` is None for a usable plugin."""

    name: str
    kind: str
    package: str
    problem: Optional[str]


def listing() -> list[Listed]:
    """Every agent and stack plugin, usable or not, each checked on its own: one that cannot
    be loaded is listed with its problem and the others are listed as usual."""
    return [Listed(plugin.name, KIND_NAMES[kind], plugin.package, problem_of(plugin))
            for kind in CHECKS for plugin in plugins(kind).values()]


def problem_of(plugin: Plugin) -> Optional[str]:
    """Why ``plugin`` cannot be used (the message names its package), or None."""
    if plugin.error:
        return plugin.describe(plugin.error)
    try:
        CHECKS[plugin.kind](plugin)
    except PluginError as err:
        return str(err)
    return None


def main(args: list[str]) -> int:
    """``a2rl agents [--json]``: the table (or JSON), then one line per broken plugin saying
    why; exit 1 when one is broken, as ``a2rl tasks`` does."""
    if args not in ([], ["--json"]):
        print("usage: a2rl agents [--json]", file=sys.stderr)
        return 2
    rows = listing()
    if args:
        print(json.dumps([asdict(row) for row in rows], indent=1))
    else:
        from tabulate import tabulate

        print(tabulate([[r.name, r.kind, r.package, "broken" if r.problem else "ok"]
                        for r in rows], headers=["name", "kind", "package", "status"]))
        for row in (r for r in rows if r.problem):
            print(f"\nbroken: {row.name} ({row.package}): {row.problem}")
    return 1 if any(row.problem for row in rows) else 0
