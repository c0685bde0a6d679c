"""The reference agents' settings: one documented dataclass per agent (a2rl.agents.settings),
checked against conf before a run and handed to the agent as one JSON value."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from a2rl.agents import settings as agent_settings_module
from a2rl.agents.settings import SETTINGS, SETTINGS_ENV, SftGrpoSettings, SftSettings, load
from a2rl.config.checks import help_of
from a2rl.config.compose import compose
from a2rl.config.types import ConfigError
from a2rl.pipeline.agent_settings import agent_settings, check_settings, settings_env

AGENTS = Path(agent_settings_module.__file__).parent


@pytest.mark.parametrize("cls", sorted(SETTINGS.values(), key=lambda c: c.__name__))
def test_every_setting_documents_itself(cls):
    assert [key for key, text in help_of(cls).items() if not text.strip()] == []


def test_the_smoke_grids_household_settings_reach_each_agent():
    sft = check_settings(compose(["grid=smoke", "task=household", "agent=sft"]))
    assert (agent_settings(sft).steps, agent_settings(sft).max_rounds) == (40, 1)
    both = agent_settings(compose(["grid=smoke", "task=household", "agent=sft_grpo"]))
    assert isinstance(both, SftGrpoSettings)
    assert (both.warmup_steps, both.rounds, both.iters, both.games) == (40, 2, 2, 8)
    # the same grid_task file tunes sft and sft_grpo; noop takes no settings and gets none
    noop = check_settings(compose(["grid=smoke", "task=household", "agent=noop"]))
    assert agent_settings(noop) is None and settings_env(noop) == {}


def test_the_smoke_grids_gsm8k_arith_settings_reach_grpo():
    grpo = agent_settings(check_settings(compose(["grid=smoke", "task=gsm8k_arith",
                                                  "agent=grpo"])))
    assert (grpo.rounds, grpo.iters, grpo.games, grpo.group, grpo.reply_tokens, grpo.kl) == (
        1, 40, 4, 4, 48, 0.0)


def test_the_agent_reads_the_json_the_harness_writes(monkeypatch):
    cfg = compose(["grid=ci", "agent=sft", "++agent.settings.sft.steps=7",
                   "++agent.settings.sft.lora=true"])
    env = settings_env(cfg)
    assert json.loads(env[SETTINGS_ENV]) == {**vars(SftSettings()), "steps": 7, "lora": True}
    monkeypatch.setenv(SETTINGS_ENV, env[SETTINGS_ENV])
    assert load(SftSettings) == SftSettings(steps=7, lora=True)
    monkeypatch.delenv(SETTINGS_ENV)
    assert load(SftSettings) == SftSettings()  # run by hand: the defaults


@pytest.mark.parametrize(("override", "message"), [
    ("++agent.settings.sft.stepz=3", r"agent.settings.sft: unknown key\(s\) \['stepz'\]"),
    ("++agent.settings.sft.steps=many", "steps"),
    ("++agent.settings.sft.lr=[1]", "lr"),
    ("++agent.settings.noop.steps=3", "agent 'noop' takes no settings"),
    ("++agent.settings.sft_grpo.max_rounds=2", r"unknown key\(s\) \['max_rounds'\]"),
])
def test_a_bad_setting_fails_before_the_run_naming_it(override, message):
    cfg = compose(["agent=sft", override])  # any agent's entry is checked, not only the run's
    with pytest.raises(ConfigError, match=message):
        check_settings(cfg)


def load_script(name: str):
    spec = importlib.util.spec_from_file_location(f"script_{name}", AGENTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("script", ["sft_train", "grpo_train", "grpo_single_train"])
def test_training_scripts_have_no_second_default(script, capsys):
    """The knobs' one default is the agent's settings: the scripts require them."""
    with pytest.raises(SystemExit):
        load_script(script).arguments().parse_args(["--model", "m", "--data", "d", "--out", "o"])
    assert "required" in capsys.readouterr().err
