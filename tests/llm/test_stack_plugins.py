"""The stack registry (a2rl.llm.stacks, entry-point group a2rl.stacks): each built-in stack is
one module holding its install recipe, launch and transcript reader, with its agent config
beside it; a stack from another installed package is one module and one YAML, and composes,
launches, pins its install and reads its transcript like the built-ins."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from a2rl.analysis.transcripts import normalise
from a2rl.common.plugins import PluginError, find, usable
from a2rl.config.compose import compose, group_options
from a2rl.llm.stacks import AgentStack, LaunchContext, load_stack, stack_of
from a2rl.llm.wire import OPENAI_CHAT
from plugin_packages import put_on_path, unique

BUILT_IN = ("claude_code", "codex", "gemini_cli", "mini_swe_agent", "opencode", "openhands")

ECHO_STACK = '''
from a2rl.llm.stacks import AgentStack, Launch, tee_transcript
from a2rl.llm.transcript_schema import Turn, call
from a2rl.llm.wire import OPENAI_CHAT


class Echo(AgentStack):
    installer, package, binary = "pip", "echo-cli", "venv/bin/echo-cli"

    def launch(self, ctx):
        argv = [self.binary_path(ctx), "--model", ctx.model, ctx.prompt]
        return Launch(tee_transcript(argv, self.transcript_path(ctx)),
                      {"ECHO_BASE_URL": ctx.proxy_url, "ECHO_KEY": ctx.api_key}, OPENAI_CHAT)

    def read_transcript(self, lines):
        return [Turn("assistant", line["say"], tool_calls=[call(None, "bash", {"command": c})
                                                           for c in line.get("run", [])])
                for line in lines if "say" in line]
'''


def context() -> LaunchContext:
    return LaunchContext(prompt="PROMPT", model="m", provider="openai",
                         proxy_url="http://127.0.0.1:1", api_key="dummy", tools_dir="/opt/cli",
                         agent_dir="/run/agent", workspace="/workspace", home="/home/agent",
                         time_limit_s=60.0)


@pytest.mark.parametrize("name", BUILT_IN)
def test_each_built_in_stack_is_one_module_with_its_config_beside_it(name):
    plugin = find("stacks", name)
    assert plugin.built_in and plugin.module == f"a2rl.llm.stacks.{name}"
    stack = stack_of(name)
    assert stack.name == name and type(stack).__module__ == plugin.module
    assert stack.read_transcript([]) == []  # each has its own reader
    config = yaml.safe_load((plugin.folder() / "conf" / "agent" / f"{name}.yaml").read_text())
    assert (config["name"], config["stack"], config["kind"]) == (name, name, "llm")


@pytest.fixture
def echo(tmp_path, monkeypatch) -> str:
    """A stack ``echo_<id>`` from a package of its own: one module, one YAML."""
    name, module = unique("echo"), unique("plugtest_echo")
    put_on_path(monkeypatch, tmp_path / "site", "a2rl-test-echo-stack",
                {"a2rl.stacks": {name: f"{module}.stack:Echo"}}, {
                    f"{module}/__init__.py": "",
                    f"{module}/stack.py": ECHO_STACK,
                    f"{module}/conf/agent/{name}.yaml": (
                        f"name: {name}\nkind: llm\nstack: {name}\nversion: '1.2.3'\n"
                        f"command: []\nnetwork: llm\n")})
    return name


def test_a_stack_from_an_installed_package_works_like_the_built_ins(echo, tmp_path):
    assert echo in usable("stacks") and echo in group_options("agent")
    agent = compose([f"agent={echo}", "driver=replay"]).agent
    assert (agent.stack, agent.version, agent.kind) == (echo, "1.2.3", "llm")

    stack = stack_of(echo)
    assert stack.name == echo
    launch = stack.launch(context())
    assert launch.argv[-4:] == ["/opt/cli/venv/bin/echo-cli", "--model", "m", "PROMPT"]
    assert launch.argv[4] == "/run/agent/transcript.jsonl" and launch.protocol == OPENAI_CHAT
    assert stack.install_commands("1.2.3", tmp_path)[-1][-1] == "echo-cli==1.2.3"

    transcript = tmp_path / "transcript.jsonl"
    transcript.write_text(json.dumps({"say": "training", "run": ["python code/train.py"]})
                          + "\nnot json\n" + json.dumps({"say": "done"}) + "\n")
    read = normalise(echo, transcript)
    assert [t.text for t in read.turns] == ["training", "done"]
    assert read.commands == ["python code/train.py"]


def test_a_stack_entry_must_name_an_agent_stack_class(echo):
    plugin = find("stacks", echo)
    assert isinstance(load_stack(plugin), AgentStack)
    wrong = type(plugin)(plugin.kind, plugin.name, f"{plugin.module}:Launch", plugin.package)
    with pytest.raises(PluginError, match="from package 'a2rl-test-echo-stack'.*not an"):
        load_stack(wrong)
    assert Path(plugin.folder(), "conf", "agent", f"{echo}.yaml").is_file()
