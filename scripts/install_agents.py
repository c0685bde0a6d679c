"""Install the LLM agents' CLIs, pinned, into resources/tools/<stack>/<version>/.

    python scripts/install_agents.py                   # every LLM agent config
    python scripts/install_agents.py mini_swe_agent claude_code
    python scripts/install_agents.py --list            # what is configured and installed
    python scripts/install_agents.py --force codex     # reinstall

The LLM agents are the agent configs of kind llm, wherever Hydra finds them: conf/agent/ and the
conf/agent/ of each installed plugin (the built-in stacks' beside src/a2rl/llm/stacks/). The
version is the one the agent's config pins (its ``version``); how it is installed is its stack's
(the stack plugin named by ``stack``, a2rl.llm.stacks.stack_of). npm packages
are installed with ``npm install --prefix`` and Python ones into a virtual environment in that
folder; nothing goes into the user's global environment. Needs npm (Node.js 20+) for the npm
agents and, for openhands, a Python 3.12 interpreter.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from a2rl.common.layout import Layout
from a2rl.config.compose import compose, group_options
from a2rl.llm.stacks import AgentNotInstalled, install_stack, stack_of, tools_dir


def llm_agents() -> list[str]:
    return [n for n in group_options("agent") if compose([f"agent={n}"]).agent.kind == "llm"]


def du(path: Path) -> int:
    """Bytes on disk under ``path``, each hard-linked file once."""
    sizes = {(s.st_dev, s.st_ino): s.st_size for p in path.rglob("*")
             if p.is_file() and not p.is_symlink() for s in [p.stat()]}
    return sum(sizes.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("agents", nargs="*", help="agent config names (default: every LLM agent)")
    parser.add_argument("--force", action="store_true", help="reinstall even if present")
    parser.add_argument("--list", action="store_true", help="show configured agents and stop")
    args = parser.parse_args(argv)
    known = llm_agents()
    chosen = args.agents or known
    unknown = [a for a in chosen if a not in known]
    if unknown:
        parser.error(f"not LLM agent configs: {unknown}; expected some of {known}")
    failed = []
    for name in chosen:
        cfg = compose([f"agent={name}"])
        resources = Layout.from_paths(cfg.paths).resources
        stack, version = stack_of(cfg.agent.stack), cfg.agent.version
        target = tools_dir(resources, stack.name, version)
        if args.list:
            try:
                stack.check_installed(target, version)
                state = f"installed ({du(target) / 2**20:.0f} MiB)"
            except AgentNotInstalled:
                state = "not installed"
            print(f"{name:16} {stack.installer:4} {stack.package}=={version:10} {state}")
            continue
        try:
            install_stack(stack.name, version, resources, force=args.force)
            print(f"{name}: {stack.package} {version} in {target} ({du(target) / 2**20:.0f} MiB)")
        except Exception as err:  # report every agent, then fail
            print(f"{name}: install failed: {type(err).__name__}: {err}", file=sys.stderr)
            failed.append(name)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
