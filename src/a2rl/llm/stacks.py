"""LLM-driven agent stacks: how each agent CLI is installed, launched unattended inside the
sandbox, pointed at the run's LLM proxy, and how its transcript is kept.

An agent config (conf/agent/<name>.yaml) names its stack and pins a version::

    name: claude_code
    kind: llm
    stack: claude_code        # a key of STACKS
    version: "2.1.332"        # the package version installed into the tools folder
    network: llm              # only the run's LLM proxy (forwarded into the sandbox)

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
mini-swe-agent writes its trajectory file, turned into JSON lines after the run.

Flags and environment variables were checked against each pinned version's ``--help`` and
sources; tests/test_agent_stacks.py pins the exact command lines, and a version bump must
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
from typing import Any, ClassVar, Optional

from a2rl.common.files import utc_now, write_json_atomic
from a2rl.common.interpreter import base_interpreter
from a2rl.llm.transcript_files import event_lines, take_transcript, trajectory_lines
from a2rl.llm.wire import ANTHROPIC, GEMINI, OPENAI_CHAT, OPENAI_RESPONSES

TRANSCRIPT = "transcript.jsonl"
TOOLS_ENV = "A2RL_AGENT_TOOLS"
INSTALLED = "installed.json"
# where the run's agent folder (transcripts, generated configs) is mounted in the sandbox
AGENT_DIR_VIEW = "/run/a2rl-agent"
# where the stack's tools folder is shown in the sandbox (read-only; its venv, if it has one, at
# CLI_VIEW/venv over its base installation at a neutral path: no host path in its launchers)
CLI_VIEW = "/opt/agent-cli"

PROMPT_HEAD = """\
You are an autonomous ML engineer. Nobody will answer questions or approve anything: work on
your own until the task is done or the time is up, and do not stop to ask for confirmation.
Your working directory is {workspace}. The task and the benchmark's rules follow (they are also
in {workspace}/description.md). Submit models with the `a2rl submit <folder>` command (it is on
your PATH); `a2rl status` shows the time and submissions left.

"""


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
    return PROMPT_HEAD.format(workspace=workspace) + description


class AgentStack:
    """One agent CLI. Subclasses set the class attributes and ``launch``."""

    name: str = ""
    installer: str = ""  # npm or pip
    package: str = ""
    binary: str = ""  # relative to the tools folder
    python: Optional[str] = None  # pip stacks: the interpreter version they need ("3.12")
    home_page: str = ""

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

    def _bin(self, ctx: LaunchContext) -> str:
        return str(Path(ctx.tools_dir) / self.binary)

    def _transcript(self, ctx: LaunchContext) -> str:
        return f"{ctx.agent_dir}/{TRANSCRIPT}"


class ClaudeCode(AgentStack):
    name, installer, package = "claude_code", "npm", "@anthropic-ai/claude-code"
    binary = "node_modules/.bin/claude"
    home_page = "https://github.com/anthropics/claude-code"

    def launch(self, ctx: LaunchContext) -> Launch:
        argv = [self._bin(ctx), "-p", ctx.prompt, "--model", ctx.model,
                "--output-format", "stream-json", "--verbose",
                "--dangerously-skip-permissions", *ctx.args]
        model = ctx.model
        env = {"ANTHROPIC_BASE_URL": ctx.proxy_url, "ANTHROPIC_API_KEY": ctx.api_key,
               "ANTHROPIC_MODEL": model, "ANTHROPIC_SMALL_FAST_MODEL": model,
               "ANTHROPIC_DEFAULT_OPUS_MODEL": model, "ANTHROPIC_DEFAULT_SONNET_MODEL": model,
               "ANTHROPIC_DEFAULT_HAIKU_MODEL": model, "CLAUDE_CODE_SUBAGENT_MODEL": model,
               "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1",
               "DISABLE_ERROR_REPORTING": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
               "BASH_DEFAULT_TIMEOUT_MS": "600000", "BASH_MAX_TIMEOUT_MS": "3600000"}
        return Launch(tee_transcript(argv, self._transcript(ctx)), env, ANTHROPIC)


class Codex(AgentStack):
    name, installer, package = "codex", "npm", "@openai/codex"
    binary = "node_modules/.bin/codex"
    home_page = "https://github.com/openai/codex"

    def launch(self, ctx: LaunchContext) -> Launch:
        provider = (f'{{name="a2rl proxy", base_url="{ctx.proxy_url}/v1", '
                    f'env_key="OPENAI_API_KEY", wire_api="responses"}}')
        argv = [self._bin(ctx), "exec", "--json", "--skip-git-repo-check",
                "--dangerously-bypass-approvals-and-sandbox", "--cd", ctx.workspace,
                "--model", ctx.model, "-c", 'model_provider="a2rl"',
                "-c", f"model_providers.a2rl={provider}", *ctx.args, ctx.prompt]
        env = {"OPENAI_API_KEY": ctx.api_key}
        return Launch(tee_transcript(argv, self._transcript(ctx)), env, OPENAI_RESPONSES)


class GeminiCli(AgentStack):
    name, installer, package = "gemini_cli", "npm", "@google/gemini-cli"
    binary = "node_modules/.bin/gemini"
    home_page = "https://github.com/google-gemini/gemini-cli"
    HOME = "gemini-home"  # GEMINI_CLI_HOME: where the CLI keeps .gemini/ (settings, sessions)

    def launch(self, ctx: LaunchContext) -> Launch:
        argv = [self._bin(ctx), "-p", ctx.prompt, "--model", ctx.model, "--yolo",
                "--output-format", "stream-json", "--skip-trust", *ctx.args]
        # with GOOGLE_GEMINI_BASE_URL alone the CLI picks its "gateway" auth, which headless
        # mode refuses; the settings select plain API-key auth (the base URL still holds)
        settings = {"security": {"auth": {"selectedType": "gemini-api-key"}}}
        env = {"GEMINI_API_KEY": ctx.api_key, "GOOGLE_GEMINI_BASE_URL": ctx.proxy_url,
               "GEMINI_CLI_HOME": f"{ctx.agent_dir}/{self.HOME}",
               "GEMINI_CLI_NO_RELAUNCH": "true", "GEMINI_TELEMETRY_ENABLED": "false"}
        return Launch(tee_transcript(argv, self._transcript(ctx)), env, GEMINI,
                      files={f"{self.HOME}/.gemini/settings.json": json.dumps(settings)})


class OpenCode(AgentStack):
    name, installer, package = "opencode", "npm", "opencode-ai"
    binary = "node_modules/.bin/opencode"
    home_page = "https://github.com/sst/opencode"
    # provider -> (AI SDK package bundled in opencode, base URL suffix, protocol)
    SDKS: ClassVar[dict[str, tuple[str, str, str]]] = {
        "anthropic": ("@ai-sdk/anthropic", "/v1", ANTHROPIC),
        "gemini": ("@ai-sdk/google", "/v1beta", GEMINI)}
    DEFAULT_SDK = ("@ai-sdk/openai-compatible", "/v1", OPENAI_CHAT)

    def config(self, ctx: LaunchContext) -> tuple[dict[str, Any], str]:
        sdk, suffix, protocol = self.SDKS.get(ctx.provider, self.DEFAULT_SDK)
        model = f"a2rl/{ctx.model}"
        return {"$schema": "https://opencode.ai/config.json", "model": model,
                "small_model": model, "autoupdate": False, "share": "disabled",
                "provider": {"a2rl": {
                    "npm": sdk, "name": "a2rl proxy",
                    "options": {"baseURL": ctx.proxy_url + suffix, "apiKey": ctx.api_key},
                    "models": {ctx.model: {"name": ctx.model, "tool_call": True}}}}}, protocol

    def launch(self, ctx: LaunchContext) -> Launch:
        config, protocol = self.config(ctx)
        argv = [self._bin(ctx), "run", "--format", "json", "--auto",
                "--model", config["model"], *ctx.args, ctx.prompt]
        env = {"OPENCODE_CONFIG_CONTENT": json.dumps(config),
               "OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1",
               "OPENCODE_DISABLE_SHARE": "1", "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
               "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1"}
        return Launch(tee_transcript(argv, self._transcript(ctx)), env, protocol)


class MiniSweAgent(AgentStack):
    name, installer, package = "mini_swe_agent", "pip", "mini-swe-agent"
    binary = "venv/bin/mini"
    home_page = "https://github.com/SWE-agent/mini-swe-agent"
    TRAJECTORY = "trajectory.json"

    def launch(self, ctx: LaunchContext) -> Launch:
        timeout = max(1, int(ctx.time_limit_s))
        argv = [self._bin(ctx), "--yolo", "--exit-immediately", "--model",
                f"openai/{ctx.model}", "--cost-limit", "0",
                "--output", f"{ctx.agent_dir}/{self.TRAJECTORY}",
                "-c", "mini.yaml", "-c", f"model.model_kwargs.api_base={ctx.proxy_url}/v1",
                "-c", "model.cost_tracking=ignore_errors",
                "-c", f"environment.timeout={timeout}", "-c", f"environment.cwd={ctx.workspace}",
                *ctx.args, "--task", ctx.prompt]
        env = {"OPENAI_API_KEY": ctx.api_key, "MSWEA_CONFIGURED": "true",
               "MSWEA_COST_TRACKING": "ignore_errors", "MSWEA_SILENT_STARTUP": "1",
               "MSWEA_GLOBAL_CONFIG_DIR": f"{ctx.home}/.config/mini-swe-agent",
               "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_TELEMETRY": "False"}
        return Launch(argv, env, OPENAI_CHAT)

    def collect_transcript(self, agent_dir: Path, dest: Path) -> bool:
        """One JSON line per message of mini's trajectory (its ``info`` as a last line)."""
        return take_transcript(agent_dir, self.TRAJECTORY, dest, trajectory_lines)


class OpenHands(AgentStack):
    """The OpenHands agent through its headless CLI. PyPI ``openhands`` is the OpenHands CLI
    (V1, on the OpenHands agent SDK); ``openhands-ai`` 1.x is the web application server and
    no longer has a headless entry point."""

    name, installer, package = "openhands", "pip", "openhands"
    binary = "venv/bin/openhands"
    python = "3.12"
    home_page = "https://github.com/OpenHands/OpenHands-CLI"

    def launch(self, ctx: LaunchContext) -> Launch:
        argv = [self._bin(ctx), "--headless", "--json", "--always-approve",
                "--override-with-envs", "--exit-without-confirmation", *ctx.args,
                "--task", ctx.prompt]
        env = {"LLM_MODEL": f"openai/{ctx.model}", "LLM_BASE_URL": f"{ctx.proxy_url}/v1",
               "LLM_API_KEY": ctx.api_key, "OPENHANDS_WORK_DIR": ctx.workspace,
               "OPENHANDS_PERSISTENCE_DIR": f"{ctx.home}/.openhands",
               "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_TELEMETRY": "False"}
        return Launch(tee_transcript(argv, self._transcript(ctx)), env, OPENAI_CHAT)

    def collect_transcript(self, agent_dir: Path, dest: Path) -> bool:
        """The event lines of ``--json`` output: each agent-SDK event is one JSON object per
        line among the CLI's own status messages and summary box (those stay in agent.log)."""
        return take_transcript(agent_dir, TRANSCRIPT, dest, event_lines)


STACKS: dict[str, AgentStack] = {s.name: s for s in (ClaudeCode(), Codex(), GeminiCli(),
                                                      OpenCode(), MiniSweAgent(), OpenHands())}


def stack_of(name: str) -> AgentStack:
    if name not in STACKS:
        raise UnknownStack(f"agent stack {name!r}; expected one of {sorted(STACKS)}")
    return STACKS[name]


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
