"""Each agent stack builds exactly the command line and environment it should: non-interactive,
the driver's model, pointed at the run's proxy with the dummy key, never the real one. The install
commands are pinned and stay inside the tools folder; the configs compose and check themselves."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from a2rl.common.interpreter import base_interpreter
from a2rl.common.layout import RunPaths
from a2rl.common.plugins import usable
from a2rl.config.compose import compose, group_options
from a2rl.config.types import ConfigError
from a2rl.isolation.sandbox import RELAY, Sandbox
from a2rl.llm.drivers import DriverKeyMissing, StackRun, check_driver, replay_script
from a2rl.llm.stacks import (
    AGENT_DIR_VIEW,
    CLI_VIEW,
    AgentNotInstalled,
    LaunchContext,
    UnknownStack,
    build_prompt,
    find_python,
    install_stack,
    stack_of,
    tee_transcript,
    tools_dir,
)
from a2rl.llm.wire import ANTHROPIC, GEMINI, OPENAI_CHAT, OPENAI_RESPONSES

TOOLS = "/opt/tools/x/1.0"
PROXY = "http://127.0.0.1:4242"
KEY = "a2rl-dummy"
# the stacks a2rl registers itself (pyproject.toml, entry-point group a2rl.stacks)
BUILT_IN = ("claude_code", "codex", "gemini_cli", "mini_swe_agent", "opencode", "openhands")
STACKS = {name: stack_of(name) for name in BUILT_IN}
LLM_AGENTS = [name for name in group_options("agent")
              if compose([f"agent={name}"]).agent.kind == "llm"]


def context(provider: str = "anthropic", model: str = "the-model") -> LaunchContext:
    return LaunchContext(prompt="PROMPT", model=model, provider=provider, proxy_url=PROXY,
                         api_key=KEY, tools_dir=TOOLS, agent_dir=AGENT_DIR_VIEW,
                         workspace="/workspace", home="/tmp/home", time_limit_s=600.0,
                         args=["--extra"])


def untee(argv: list[str]) -> tuple[list[str], str | None]:
    """(the CLI's own argv, the transcript path) of a tee-wrapped command."""
    if argv[:2] == ["/bin/bash", "-c"]:
        return argv[5:], argv[4]
    return argv, None


def test_the_six_stacks_are_configured():
    assert set(BUILT_IN) <= set(usable("stacks"))
    assert list(BUILT_IN) == LLM_AGENTS
    for name in LLM_AGENTS:
        agent = compose([f"agent={name}"]).agent
        assert (agent.stack, agent.command, agent.network) == (name, [], "llm")
        assert agent.version and agent.version[0].isdigit()  # pinned, not "latest"


def test_claude_code_command_line():
    launch = STACKS["claude_code"].launch(context())
    argv, transcript = untee(launch.argv)
    assert argv == [f"{TOOLS}/node_modules/.bin/claude", "-p", "PROMPT", "--model", "the-model",
                    "--output-format", "stream-json", "--verbose",
                    "--dangerously-skip-permissions", "--extra"]
    assert transcript == f"{AGENT_DIR_VIEW}/transcript.jsonl"
    assert launch.protocol == ANTHROPIC
    assert launch.env["ANTHROPIC_BASE_URL"] == PROXY
    assert launch.env["ANTHROPIC_API_KEY"] == KEY
    for key in ("ANTHROPIC_MODEL", "ANTHROPIC_SMALL_FAST_MODEL", "ANTHROPIC_DEFAULT_HAIKU_MODEL",
                "ANTHROPIC_DEFAULT_SONNET_MODEL", "ANTHROPIC_DEFAULT_OPUS_MODEL",
                "CLAUDE_CODE_SUBAGENT_MODEL"):
        assert launch.env[key] == "the-model"  # side calls use the driver's model too
    assert launch.env["DISABLE_AUTOUPDATER"] == "1"
    assert launch.env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"


def test_codex_command_line():
    launch = STACKS["codex"].launch(context("openai"))
    argv, transcript = untee(launch.argv)
    assert argv == [
        f"{TOOLS}/node_modules/.bin/codex", "exec", "--json", "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox", "--cd", "/workspace",
        "--model", "the-model", "-c", 'model_provider="a2rl"',
        "-c", ('model_providers.a2rl={name="a2rl proxy", base_url="http://127.0.0.1:4242/v1", '
               'env_key="OPENAI_API_KEY", wire_api="responses"}'), "--extra", "PROMPT"]
    assert transcript is not None
    assert launch.protocol == OPENAI_RESPONSES
    assert launch.env == {"OPENAI_API_KEY": KEY}


def test_gemini_cli_command_line():
    launch = STACKS["gemini_cli"].launch(context("gemini"))
    argv, transcript = untee(launch.argv)
    assert argv == [f"{TOOLS}/node_modules/.bin/gemini", "-p", "PROMPT", "--model", "the-model",
                    "--yolo", "--output-format", "stream-json", "--skip-trust", "--extra"]
    assert transcript is not None
    assert launch.protocol == GEMINI
    assert launch.env == {"GEMINI_API_KEY": KEY, "GOOGLE_GEMINI_BASE_URL": PROXY,
                          "GEMINI_CLI_HOME": f"{AGENT_DIR_VIEW}/gemini-home",
                          "GEMINI_CLI_NO_RELAUNCH": "true", "GEMINI_TELEMETRY_ENABLED": "false"}
    assert json.loads(launch.files["gemini-home/.gemini/settings.json"]) == {
        "security": {"auth": {"selectedType": "gemini-api-key"}}}


@pytest.mark.parametrize(("provider", "sdk", "base", "protocol"), [
    ("anthropic", "@ai-sdk/anthropic", f"{PROXY}/v1", ANTHROPIC),
    ("gemini", "@ai-sdk/google", f"{PROXY}/v1beta", GEMINI),
    ("openai", "@ai-sdk/openai-compatible", f"{PROXY}/v1", OPENAI_CHAT),
    ("replay", "@ai-sdk/openai-compatible", f"{PROXY}/v1", OPENAI_CHAT),
])
def test_opencode_command_line_and_provider_config(provider, sdk, base, protocol):
    launch = STACKS["opencode"].launch(context(provider))
    argv, transcript = untee(launch.argv)
    assert argv == [f"{TOOLS}/node_modules/.bin/opencode", "run", "--format", "json", "--auto",
                    "--model", "a2rl/the-model", "--extra", "PROMPT"]
    assert transcript is not None and launch.protocol == protocol
    config = json.loads(launch.env["OPENCODE_CONFIG_CONTENT"])
    assert config["model"] == config["small_model"] == "a2rl/the-model"
    assert config["provider"]["a2rl"] == {
        "npm": sdk, "name": "a2rl proxy", "options": {"baseURL": base, "apiKey": KEY},
        "models": {"the-model": {"name": "the-model", "tool_call": True}}}
    assert config["autoupdate"] is False and config["share"] == "disabled"
    assert launch.env["OPENCODE_DISABLE_AUTOUPDATE"] == "1"


def test_mini_swe_agent_command_line():
    launch = STACKS["mini_swe_agent"].launch(context("openai"))
    assert launch.argv == [
        f"{TOOLS}/venv/bin/mini", "--yolo", "--exit-immediately", "--model", "openai/the-model",
        "--cost-limit", "0", "--output", f"{AGENT_DIR_VIEW}/trajectory.json",
        "-c", "mini.yaml", "-c", f"model.model_kwargs.api_base={PROXY}/v1",
        "-c", "model.cost_tracking=ignore_errors", "-c", "environment.timeout=600",
        "-c", "environment.cwd=/workspace", "--extra", "--task", "PROMPT"]
    assert launch.protocol == OPENAI_CHAT
    assert launch.env["OPENAI_API_KEY"] == KEY
    assert launch.env["MSWEA_CONFIGURED"] == "true"
    assert launch.env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"  # no cost-map download


def test_openhands_command_line():
    launch = STACKS["openhands"].launch(context("openai"))
    argv, transcript = untee(launch.argv)
    assert argv == [f"{TOOLS}/venv/bin/openhands", "--headless", "--json", "--always-approve",
                    "--override-with-envs", "--exit-without-confirmation", "--extra",
                    "--task", "PROMPT"]
    assert transcript is not None and launch.protocol == OPENAI_CHAT
    assert {k: launch.env[k] for k in ("LLM_MODEL", "LLM_BASE_URL", "LLM_API_KEY")} == {
        "LLM_MODEL": "openai/the-model", "LLM_BASE_URL": f"{PROXY}/v1", "LLM_API_KEY": KEY}
    assert STACKS["openhands"].python == "3.12"


@pytest.mark.parametrize("name", sorted(STACKS))
def test_no_stack_sees_a_real_key(name, monkeypatch):
    for variable in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.setenv(variable, "sk-REAL-SECRET")
    launch = STACKS[name].launch(context())
    assert "sk-REAL-SECRET" not in json.dumps([launch.argv, launch.env])
    assert KEY in json.dumps(launch.env)


def test_install_commands_are_pinned_and_local(tmp_path):
    target = tmp_path / "tools"
    assert STACKS["claude_code"].install_commands("2.1.332", target) == [[
        "npm", "install", "--prefix", str(target), "--no-audit", "--no-fund", "--no-save",
        "--loglevel=error", "@anthropic-ai/claude-code@2.1.332"]]
    venv_create, pip_install = STACKS["mini_swe_agent"].install_commands("2.4.6", target)
    assert venv_create == [base_interpreter(), "-m", "venv", str(target / "venv")]
    assert pip_install[0] == str(target / "venv" / "bin" / "python")
    assert pip_install[-1] == "mini-swe-agent==2.4.6"


def test_tools_folder_checks(tmp_path, monkeypatch):
    stack = stack_of("codex")
    folder = tools_dir(tmp_path, "codex", "0.171.0")
    assert folder == tmp_path / "tools" / "codex" / "0.171.0"
    with pytest.raises(AgentNotInstalled, match="install_agents.py codex"):
        stack.check_installed(folder, "0.171.0")
    (folder / "node_modules" / ".bin").mkdir(parents=True)
    (folder / "node_modules" / ".bin" / "codex").write_text("")
    (folder / "installed.json").write_text(json.dumps({"version": "0.1.0"}))
    with pytest.raises(AgentNotInstalled, match="holds codex 0.1.0"):
        stack.check_installed(folder, "0.171.0")
    (folder / "installed.json").write_text(json.dumps({"version": "0.171.0"}))
    stack.check_installed(folder, "0.171.0")
    monkeypatch.setenv("A2RL_AGENT_TOOLS", "/shared/tools")
    assert tools_dir(tmp_path, "codex", "1") == Path("/shared/tools/codex/1")
    with pytest.raises(UnknownStack, match="no stack plugin 'aider' is installed.*codex"):
        stack_of("aider")


def fake_python(folder: Path, name: str, version: str, status: int = 0) -> Path:
    """An executable that answers the version probe like an interpreter (or a broken shim)."""
    exe = folder / name
    exe.write_text(f"#!/bin/sh\necho {version}\nexit {status}\n")
    exe.chmod(0o755)
    return exe


def test_find_python_runs_each_candidate(tmp_path, monkeypatch):
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert find_python(None) == find_python(here) == base_interpreter()
    # a pyenv shim on PATH for a version pyenv has but does not select exits 127: skipped
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path))
    fake_python(tmp_path, "python3.99", "3.99", status=127)
    with pytest.raises(AgentNotInstalled, match="pyenv install 3.99.*A2RL_PYTHON"):
        find_python("3.99")
    pyenv = tmp_path / ".pyenv" / "versions" / "3.99.1" / "bin"
    pyenv.mkdir(parents=True)
    found = fake_python(pyenv, "python3.99", "3.99")
    assert find_python("3.99") == str(found)
    configured = fake_python(tmp_path, "mine", "3.99")
    monkeypatch.setenv("A2RL_PYTHON", str(configured))
    assert find_python("3.99") == str(configured)
    monkeypatch.setenv("A2RL_PYTHON", str(tmp_path / "missing"))
    assert find_python("3.99") == str(found)  # a bad setting does not hide a good one
    monkeypatch.delenv("HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "nowhere"))
    with pytest.raises(AgentNotInstalled, match="A2RL_PYTHON=.*missing is not a working"):
        find_python("3.99")


def test_install_stack_runs_the_commands_and_marks_the_version(tmp_path, monkeypatch):
    ran = []

    def fake_run(command, check, cwd):
        ran.append(command)
        bin_dir = Path(command[3]) / "node_modules" / ".bin"
        bin_dir.mkdir(parents=True)
        (bin_dir / "gemini").write_text("")

    monkeypatch.setattr(subprocess, "run", fake_run)
    folder = install_stack("gemini_cli", "0.61.0", tmp_path, log=lambda _: None)
    assert json.loads((folder / "installed.json").read_text())["version"] == "0.61.0"
    assert ran[0][-1] == "@google/gemini-cli@0.61.0"
    install_stack("gemini_cli", "0.61.0", tmp_path, log=lambda _: None)
    assert len(ran) == 1  # already installed: nothing to do


def test_tee_keeps_the_exit_status_and_the_stdout(tmp_path):
    transcript = tmp_path / "t.jsonl"
    script = 'echo \'{"a": 1}\'; echo oops >&2; exit 3'
    done = subprocess.run(tee_transcript(["/bin/sh", "-c", script], str(transcript)),
                          capture_output=True, text=True, check=False)
    assert done.returncode == 3
    assert transcript.read_text() == '{"a": 1}\n'
    assert done.stdout == '{"a": 1}\n' and "oops" in done.stderr


def test_mini_trajectory_becomes_json_lines(tmp_path):
    (tmp_path / "trajectory.json").write_text(json.dumps({
        "info": {"exit_status": "Submitted"},
        "messages": [{"role": "system", "content": "s"}, {"role": "assistant", "content": "a"}]}))
    dest = tmp_path / "transcript.jsonl"
    assert STACKS["mini_swe_agent"].collect_transcript(tmp_path, dest)
    lines = [json.loads(line) for line in dest.read_text().splitlines()]
    assert [line["role"] for line in lines] == ["system", "assistant", "info"]
    assert not STACKS["mini_swe_agent"].collect_transcript(tmp_path / "missing", dest)


def test_prompt_holds_the_instructions_and_the_description():
    prompt = build_prompt("# Task\nDo it.", "/workspace")
    assert "Nobody will answer questions" in prompt and "a2rl submit" in prompt
    assert prompt.endswith("# Task\nDo it.")


def test_drivers_need_their_key_and_llm_agents_need_a_driver(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(DriverKeyMissing, match=r"\$ANTHROPIC_API_KEY"):
        check_driver(compose(["agent=claude_code", "driver=claude_opus_4_6"]))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-x")
    check_driver(compose(["agent=claude_code", "driver=claude_opus_4_6"]))
    with pytest.raises(DriverKeyMissing, match="needs a driver"):
        check_driver(compose(["agent=claude_code", "driver=none"]))
    check_driver(compose(["agent=mini_swe_agent", "driver=replay"]))  # replay needs no key
    check_driver(compose(["agent=sft", "driver=none"]))


@pytest.mark.parametrize(("override", "message"), [
    ("driver.provider=smoke", "provider"),
    ("driver.api_key_env=null", "api_key_env"),
    ("driver.model=null", "model and base_url"),
    ("agent.version=null", "pinned version"),
    ("agent.command=[python]", "command is"),
])
def test_bad_agent_and_driver_configs_fail_naming_the_key(override, message):
    with pytest.raises(ConfigError, match=message):
        compose(["agent=codex", "driver=gpt_5_4", override])


def test_packaged_replay_script_trains_and_submits():
    script = replay_script(compose(["driver=replay"]))
    shells = "\n".join(step.shell or "" for step in script.steps)
    assert "code/train.py" in shells and "a2rl submit output/ckpt-1" in shells
    assert script.steps[-1].shell is None  # ends with a plain answer


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_stack_run_mounts_tools_read_only_and_the_agent_folder_writable(tmp_path, monkeypatch):
    monkeypatch.setenv("A2RL_AGENT_TOOLS", str(tmp_path / "tools"))
    cfg = compose(["agent=opencode", "driver=replay"])
    run = RunPaths(tmp_path / "run")
    with pytest.raises(AgentNotInstalled):
        StackRun.prepare(cfg, run)
    folder = tmp_path / "tools" / "opencode" / cfg.agent.version
    (folder / "node_modules" / ".bin").mkdir(parents=True)
    (folder / "node_modules" / ".bin" / "opencode").write_text("")
    (folder / "installed.json").write_text(json.dumps({"version": cfg.agent.version}))
    stack_run = StackRun.prepare(cfg, run)
    for name in ("workspace/code", "workspace/output", "tools", "grader"):
        (tmp_path / "run" / name).mkdir(parents=True, exist_ok=True)
    sandbox = Sandbox("bwrap", run.workspace, tmp_path / "run" / "tools",
                      tmp_path / "run" / "grader", cfg.agent.network, **stack_run.mounts())
    sandbox.forwards = {41234: "/run/a2rl/llm.sock"}
    argv = sandbox.command(["true"], {})
    pairs = list(zip(argv, argv[1:], argv[2:], strict=False))
    assert ("--ro-bind", str(folder), CLI_VIEW) in pairs  # a neutral path: no host path
    assert (str(folder), str(folder)) not in list(zip(argv, argv[1:], strict=False))
    assert ("--bind", str(run.agent_files), AGENT_DIR_VIEW) in pairs
    # network llm: a network namespace of its own (--unshare-net, or --unshare-all without
    # --share-net), the proxy's port forwarded to its socket before the agent command
    assert "--share-net" not in argv and ("--unshare-net" in argv or "--unshare-all" in argv)
    assert argv[-5:] == ["-I", RELAY, "41234=/run/a2rl/llm.sock", "--", "true"]
