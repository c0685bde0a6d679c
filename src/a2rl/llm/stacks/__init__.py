"""LLM-driven agent stacks: how each agent CLI is installed, launched unattended inside the
sandbox, pointed at the run's LLM proxy, and how its transcript is kept and read.

Each stack is one module holding an ``AgentStack`` subclass (its install recipe, launch and
transcript reader), registered as a plugin under the entry-point group ``a2rl.stacks``
(a2rl.common.plugins); the six built-ins are the modules of this package, and their agent
configs are its ``conf/agent/<name>.yaml``. This module is what they share. An agent config
names its stack and pins a version::

    name: claude_code
    kind: llm
    stack: claude_code        # a stack plugin's name (``stack_of``)
    version: "2.1.332"        # the package version installed into the tools folder
    network: llm              # only the run's LLM proxy (forwarded into the sandbox)

so a new CLI is one module and one YAML, in this package or in an installed one (docs/agents.md,
"Agent and stack plugins").

Installing (``install_stack`` / ``scripts/install_agents.py``) puts the package into
``resources/tools/<stack>/<version>/`` (or ``$A2RL_AGENT_TOOLS/<stack>/<version>/``), never into
the user's global environment: npm packages with ``npm install --prefix``, Python packages into a
virtual environment there. The sandbox shows the folder read-only at ``CLI_VIEW``, a neutral
path (the venv's launchers rewritten for it: a2rl.isolation.agent_python.stage_view).

Launching (``AgentStack.launch``) builds the argv and environment from a ``LaunchContext``: the
prompt (the task's description.md and the benchmark's rules), the driver's model, the proxy's
URL and the per-run dummy key. Real keys never reach the agent. Each CLI runs in the workspace
with the flags that let it work without a person: no approval prompts, no interactive UI, no
auto-update, telemetry off where a switch exists.

Transcripts: CLIs with a structured stdout mode (stream-json, --json) are run through ``tee``
into ``transcript.jsonl`` in the run's agent folder (their stdout also reaches agent.log);
mini-swe-agent writes its trajectory file, turned into JSON lines after the run. Each stack's
``read_transcript`` turns those lines into the common schema (a2rl.llm.transcript_schema).

Flags and environment variables were checked against each pinned version's ``--help`` and
sources; tests/llm/test_agent_stacks.py pins the exact command lines, and a version bump must
re-check them (the replay end-to-end tests run every installed stack).
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from a2rl.common.contract import prompt_head
from a2rl.common.files import utc_now, write_json_atomic
from a2rl.common.interpreter import base_interpreter
from a2rl.common.plugins import Plugin, PluginError, find
from a2rl.llm.transcript_files import take_transcript, transcript_text
from a2rl.llm.transcript_schema import Turn

TRANSCRIPT = "transcript.jsonl"
TOOLS_ENV = "A2RL_AGENT_TOOLS"
INSTALLED = "installed.json"
# where the run's agent folder (transcripts, generated configs) is mounted in the sandbox
AGENT_DIR_VIEW = "/run/a2rl-agent"
# where the stack's tools folder is shown in the sandbox (read-only; its venv, if it has one, at
# CLI_VIEW/venv over its base installation at a neutral path: no host path in its launchers)
CLI_VIEW = "/opt/agent-cli"



class AgentNotInstalled(RuntimeError):
    """The agent's tools folder is missing or holds another version (a harness failure)."""


class UnknownStack(ValueError):
    """An agent config names a stack that has no adapter."""


@dataclass
class LaunchContext:
    """What a launch needs to know; paths are as the agent sees them."""

    prompt: str
    model: str
    provider: str
    proxy_url: str
    api_key: str
    tools_dir: str
    agent_dir: str
    workspace: str
    home: str
    time_limit_s: float
    args: list[str] = field(default_factory=list)


@dataclass
class Launch:
    """The command, its extra environment, the protocol it speaks to the proxy, and files to
    write into the agent folder before it starts."""

    argv: list[str]
    env: dict[str, str]
    protocol: str
    files: dict[str, str] = field(default_factory=dict)


def tee_transcript(argv: list[str], transcript: str) -> list[str]:
    """``argv`` with its stdout copied to ``transcript``; the exit status stays argv's."""
    return ["/bin/bash", "-c", 'set -o pipefail; out="$1"; shift; "$@" | tee "$out"',
            "a2rl-agent", transcript, *argv]


def build_prompt(description: str, workspace: str) -> str:
    """The agent's prompt: the contract's head (a2rl.common.contract), then description.md."""
    return prompt_head(workspace) + description


class AgentStack:
    """One agent CLI: how it is installed (the class attributes, ``install_commands``),
    launched (``launch``), and how its transcript is kept (``collect_transcript``) and read
    (``read_transcript``). Each stack is one module holding its subclass, registered under the
    entry-point group ``a2rl.stacks`` (the built-ins are a2rl.llm.stacks.<name>); the entry's
    name is the stack's ``name``, which agent configs give as ``agent.stack``."""

    installer: str = ""  # npm or pip
    package: str = ""
    binary: str = ""  # relative to the tools folder
    python: Optional[str] = None  # pip stacks: the interpreter version they need ("3.12")
    home_page: str = ""

    def __init__(self, name: str) -> None:
        self.name = name

    # ---- install ----------------------------------------------------------------------
    def install_commands(self, version: str, target: Path) -> list[list[str]]:
        if self.installer == "npm":
            return [["npm", "install", "--prefix", str(target), "--no-audit", "--no-fund",
                     "--no-save", "--loglevel=error", f"{self.package}@{version}"]]
        python = find_python(self.python)
        venv = target / "venv"
        return [[python, "-m", "venv", str(venv)],
                [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
                 "--disable-pip-version-check", f"{self.package}=={version}"]]

    def executable(self, tools_dir: Path) -> Path:
        return Path(tools_dir) / self.binary

    def venvs(self, tools_dir: Path) -> list[Path]:
        """The stack's virtual environment, if it has one: the sandbox mounts the installation
        it was made from without that installation's packages (a2rl.isolation.sandbox)."""
        venv = Path(tools_dir) / "venv"
        return [venv] if (venv / "pyvenv.cfg").exists() else []

    def check_installed(self, tools_dir: Path, version: str) -> None:
        marker = Path(tools_dir) / INSTALLED
        hint = f"install it with: python scripts/install_agents.py {self.name}"
        if not marker.exists() or not self.executable(tools_dir).exists():
            raise AgentNotInstalled(f"agent {self.name} {version} is not installed in "
                                    f"{tools_dir}; {hint}")
        found = json.loads(marker.read_text()).get("version")
        if found != version:
            raise AgentNotInstalled(f"{tools_dir} holds {self.name} {found}, the config pins "
                                    f"{version}; {hint}")

    # ---- launch -----------------------------------------------------------------------
    def launch(self, ctx: LaunchContext) -> Launch:
        raise NotImplementedError

    def collect_transcript(self, agent_dir: Path, dest: Path) -> bool:
        """Put the native transcript at ``dest`` (JSON lines); False when there is none."""
        return take_transcript(agent_dir, TRANSCRIPT, dest)

    def transcript_so_far(self, agent_dir: Path) -> Optional[str]:
        """The transcript as ``collect_transcript`` would keep it, while the agent still runs
        (``a2rl view``): read, not taken; None when there is none yet."""
        return transcript_text(agent_dir, TRANSCRIPT)

    def read_transcript(self, lines: list[dict]) -> list[Turn]:
        """The turns of a collected transcript (its JSON objects, in order) in the common
        schema (a2rl.llm.transcript_schema); a2rl.analysis.transcripts reads runs with it."""
        raise NotImplementedError

    def binary_path(self, ctx: LaunchContext) -> str:
        """The CLI's executable as the agent sees it."""
        return str(Path(ctx.tools_dir) / self.binary)

    def transcript_path(self, ctx: LaunchContext) -> str:
        """Where ``tee_transcript`` writes the CLI's output, as the agent sees it."""
        return f"{ctx.agent_dir}/{TRANSCRIPT}"


def stack_of(name: str) -> AgentStack:
    """The stack plugin called ``name`` (a2rl.common.plugins: entry-point group
    ``a2rl.stacks``). UnknownStack when none is installed (naming those that are) or when it
    cannot be loaded (naming its package and why); ``a2rl agents`` lists every stack plugin
    with its problem."""
    try:
        return load_stack(find("stacks", name))
    except PluginError as err:
        raise UnknownStack(str(err)) from err


def load_stack(plugin: Plugin) -> AgentStack:
    """The stack of a plugin: its entry names an ``AgentStack`` subclass, made with the entry's
    name (so the name a stack is known by is written once, in its package's metadata)."""
    cls = plugin.load()
    if not (isinstance(cls, type) and issubclass(cls, AgentStack)):
        raise PluginError(plugin.describe(f"{plugin.value} is not an a2rl.llm.stacks.AgentStack "
                                          f"subclass"))
    return cls(plugin.name)


def tools_dir(resources: Path, stack: str, version: str) -> Path:
    """resources/tools/<stack>/<version>: one folder per pinned version; $A2RL_AGENT_TOOLS
    replaces resources/tools (to share installed agents between checkouts)."""
    root = os.environ.get(TOOLS_ENV)
    return (Path(root) if root else Path(resources) / "tools") / stack / version


PYTHON_ENV = "A2RL_PYTHON"  # a configured interpreter for the pip stacks that need their own


def python_version_of(candidate: str) -> Optional[str]:
    """``candidate``'s "major.minor", or None when it does not run (e.g. a pyenv shim of a
    version that is installed but not selected, which exits 127)."""
    try:
        done = subprocess.run([candidate, "-c", "import sys; print(*sys.version_info[:2], "
                               "sep='.')"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def find_python(version: Optional[str]) -> str:
    """An interpreter of ``version`` ("3.12"): $A2RL_PYTHON, the running one, python<version>
    on PATH, then pyenv's installations; the first that runs and is that version. Each is run
    once to check it, since a pyenv shim is on PATH even when it cannot start that version."""
    if version is None:
        return base_interpreter()
    configured = os.environ.get(PYTHON_ENV)
    pyenv = sorted(glob.glob(str(Path.home() / f".pyenv/versions/{version}.*/bin/python"
                                                f"{version}")), reverse=True)
    candidates = [configured, base_interpreter(), shutil.which(f"python{version}"), *pyenv]
    for candidate in filter(None, candidates):
        if python_version_of(candidate) == version:
            return candidate
    if configured:
        raise AgentNotInstalled(f"${PYTHON_ENV}={configured} is not a working Python {version}")
    raise AgentNotInstalled(
        f"Python {version} is needed and none was found (tried ${PYTHON_ENV}, python{version} on "
        f"PATH and ~/.pyenv/versions/{version}.*); install one (e.g. `pyenv install {version}`) "
        f"or set {PYTHON_ENV} to its path")


def install_stack(name: str, version: str, resources: Path, force: bool = False,
                  log=print) -> Path:
    """Install ``name`` at ``version`` into its tools folder; returns the folder. Already
    installed (same version) is a no-op unless ``force``."""
    stack = stack_of(name)
    target = tools_dir(resources, name, version)
    if not force:
        try:
            stack.check_installed(target, version)
            log(f"{name} {version}: already installed in {target}")
            return target
        except AgentNotInstalled:
            pass
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for command in stack.install_commands(version, target):
        log("$ " + " ".join(command))
        subprocess.run(command, check=True, cwd=target)
    if not stack.executable(target).exists():
        raise AgentNotInstalled(f"installing {name} {version} left no {stack.binary} in "
                                f"{target}")
    write_json_atomic(target / INSTALLED, {"stack": name, "package": stack.package,
                                           "version": version, "installer": stack.installer,
                                           "installed": utc_now()})
    return target
