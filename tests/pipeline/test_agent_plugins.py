"""Agent plugins (a2rl.pipeline.agent_plugins) and ``a2rl agents``: the built-in reference
agents register as plugins; a package of broken plugins (an import error, a missing entry, a
missing config, names clashing with built-ins) is listed with its package name and every other
plugin still lists and runs; a reference agent's sandbox gets its own plugin's scripts; and
``a2rl new agent`` refuses what it must not write. (tests/pipeline/test_agent_package.py
installs a generated agent with pip and runs it end to end.)"""

from __future__ import annotations

import pytest

from a2rl.common.plugins import PluginError, plugins
from a2rl.config.compose import compose
from a2rl.llm.stacks import UnknownStack, stack_of
from a2rl.llm.stacks.codex import Codex
from a2rl.pipeline import cli
from a2rl.pipeline.agent_plugins import agent_folder, agent_scripts, listing
from a2rl.pipeline.runner import infra_reason, write_tools
from a2rl.pipeline.scaffold import ScaffoldError, new_agent
from checkout import REPO
from plugin_packages import put_on_path, unique

REFERENCE_AGENTS = ("dpo", "grpo", "noop", "sft", "sft_grpo")
BROKEN_PACKAGE = "a2rl-test-broken-plugins"


def test_the_reference_agents_are_plugins_of_a2rl():
    found = plugins("agents")
    assert set(REFERENCE_AGENTS) <= set(found)
    for name in REFERENCE_AGENTS:
        assert (found[name].package, found[name].value) == ("a2rl", "a2rl.agents")
        assert agent_folder(name) == REPO / "src" / "a2rl" / "agents"
        cfg = compose([f"agent={name}"])
        assert (cfg.agent.name, cfg.agent.package) == (name, name)
        assert agent_scripts(cfg) == agent_folder(name)
    assert agent_scripts(compose(["agent=codex", "driver=replay"])) is None  # an llm agent
    # a renamed agent (the attack tests' agent.name=hostile) still runs its plugin's scripts
    assert agent_scripts(compose(["agent=noop", "agent.name=hostile"])) == agent_folder("noop")


@pytest.fixture
def broken_and_good(tmp_path, monkeypatch) -> dict[str, str]:
    """A package registering one good agent and, beside it, plugins that cannot be used."""
    good, broken, bare = unique("good"), unique("plugtest_broken"), unique("plugtest_bare")
    module = unique("plugtest_good")
    put_on_path(monkeypatch, tmp_path / "site", BROKEN_PACKAGE, {
        "a2rl.agents": {good: module, "broken_import": broken, "no_config": bare,
                        "no_module": unique("plugtest_missing"), "noop": module,
                        "opencode": module},
        "a2rl.stacks": {"broken_stack": f"{broken}:Stack", "not_a_stack": f"{module}:THING",
                        "missing_entry": f"{module}:Nowhere", "codex": f"{module}:THING"},
    }, {
        f"{module}/__init__.py": "THING = 'not an AgentStack'\n",
        f"{module}/agent.py": "print('the good agent')\n",
        f"{module}/helper.json": "{}\n",
        f"{module}/conf/agent/{good}.yaml": (
            f"name: {good}\nkind: reference\npackage: {good}\n"
            f"command: ['{{python}}', '{{agents}}/agent.py']\nnetwork: none\n"),
        f"{broken}/__init__.py": "raise ImportError('needs a library that is not installed')\n",
        f"{bare}/__init__.py": "",
    })
    return {"good": good, "module": module}


def test_broken_plugins_are_reported_with_their_package_and_the_others_still_list(
        broken_and_good, capsys):
    good = broken_and_good["good"]
    rows = {(row.kind, row.name, row.package): row.problem for row in listing()}
    for name in REFERENCE_AGENTS:
        assert rows[("agent", name, "a2rl")] is None
    for name in ("claude_code", "codex", "gemini_cli", "mini_swe_agent", "opencode", "openhands"):
        assert rows[("stack", name, "a2rl")] is None
    assert rows[("agent", good, BROKEN_PACKAGE)] is None
    expected = {
        ("agent", "broken_import"): "needs a library that is not installed",
        ("agent", "no_config"): "has no conf/agent/no_config.yaml",
        ("agent", "no_module"): "No module named",
        ("agent", "noop"): "already taken by the built-in agent from package 'a2rl'",
        ("agent", "opencode"): "already taken by the built-in stack from package 'a2rl'",
        ("stack", "broken_stack"): "needs a library that is not installed",
        ("stack", "not_a_stack"): "is not an a2rl.llm.stacks.AgentStack subclass",
        ("stack", "missing_entry"): "has no 'Nowhere'",
        ("stack", "codex"): "already taken by the built-in stack from package 'a2rl'",
    }
    for (kind, name), problem in expected.items():
        message = rows[(kind, name, BROKEN_PACKAGE)]
        assert message and problem in message and f"package '{BROKEN_PACKAGE}'" in message, \
            (kind, name, message)

    assert cli.main(["agents"]) == 1  # something is broken, and the listing still came
    out = capsys.readouterr().out
    assert good in out and "claude_code" in out
    assert out.count("broken: ") == out.count(f"from package '{BROKEN_PACKAGE}'") == \
        len(expected)


def test_broken_plugins_do_not_run_and_the_others_do(broken_and_good, tmp_path):
    good = broken_and_good["good"]
    with pytest.raises(PluginError, match=f"'broken_import' from package '{BROKEN_PACKAGE}'"):
        agent_folder("broken_import")
    with pytest.raises(PluginError, match="no_config.yaml"):
        agent_folder("no_config")
    assert infra_reason(PluginError("x")).startswith("agent_not_installed: PluginError")
    with pytest.raises(UnknownStack, match=f"from package '{BROKEN_PACKAGE}'"):
        stack_of("not_a_stack")
    # the clashing entries leave the built-ins in place
    assert agent_folder("noop") == REPO / "src" / "a2rl" / "agents"
    assert isinstance(stack_of("codex"), Codex)
    # the good agent composes from its package's conf/ and its sandbox gets its scripts only
    cfg = compose([f"agent={good}"])
    folder = agent_scripts(cfg)
    assert folder == tmp_path / "site" / broken_and_good["module"]
    tools = tmp_path / "tools"
    write_tools(tools, "/usr/bin/python3", "/opt/a2rl", folder)
    assert sorted(p.name for p in (tools / "agents").iterdir()) == ["agent.py", "helper.json"]


def test_new_agent_refuses_what_it_must_not_write(tmp_path):
    for name in ("Bad-Name", "1st", "sft", "codex"):
        with pytest.raises(ScaffoldError):
            new_agent(name, tmp_path)
    with pytest.raises(ScaffoldError, match="inside the a2rl checkout"):
        new_agent(unique("mine"), REPO / "tests")
    folder = new_agent("mine", tmp_path)
    assert (folder / "a2rl_agent_mine" / "conf" / "agent" / "mine.yaml").is_file()
    with pytest.raises(ScaffoldError, match="already exists"):
        new_agent("mine", tmp_path)
    assert not list((REPO / "tests").glob("a2rl-agent-*"))  # nothing written in the checkout
