"""Composed configs cached between Snakemake runs (a2rl.pipeline.plancache): reused while
nothing a composition reads changed, composed again when something did."""

from __future__ import annotations

import shutil

import pytest

from a2rl.config.compose import compose, conf_dir
from a2rl.pipeline.plancache import ComposeCache


class Counting:
    """compose, counting its calls."""

    def __init__(self):
        self.calls = 0

    def __call__(self, overrides):
        self.calls += 1
        return compose(overrides)


def test_cached_until_conf_or_environment_changes(tmp_path, monkeypatch):
    conf = shutil.copytree(conf_dir(), tmp_path / "conf")
    monkeypatch.setenv("A2RL_CONF", str(conf))
    monkeypatch.setenv("A2RL_DATA", "/data/one")
    composed = Counting()

    def cache():  # a new cache object per Snakemake run, as common.smk makes one
        return ComposeCache(tmp_path / "cache", composed)

    first = cache()(["grid=ci", "agent=sft"])
    again = cache()(["grid=ci", "agent=sft"])
    assert composed.calls == 1 and again == first
    assert again.paths.data == "/data/one"

    cache()(["grid=ci", "agent=noop"])  # other overrides: another entry
    assert composed.calls == 2

    budget = conf / "budget" / "ci.yaml"
    budget.write_text(budget.read_text().replace("time_limit_s: 120", "time_limit_s: 121"))
    assert cache()(["grid=ci", "agent=sft"]).budget.time_limit_s == 121
    assert composed.calls == 3

    monkeypatch.setenv("A2RL_DATA", "/data/two")  # conf/paths interpolates ${oc.env:A2RL_DATA}
    assert cache()(["grid=ci", "agent=sft"]).paths.data == "/data/two"
    assert composed.calls == 4


def test_a_refused_config_is_not_cached(tmp_path):
    def refuse(overrides):
        raise ValueError("no")

    cache = ComposeCache(tmp_path / "cache", refuse)
    for _ in range(2):
        with pytest.raises(ValueError, match="no"):
            cache(["grid=ci"])
    assert not (tmp_path / "cache").exists()
