"""The agents' Python environment (a2rl.isolation.agent_python, scripts/agent_python.py): its
packages are the harness's pins, an unfinished one is refused, and its base installation is the
one the sandbox mounts without packages."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from a2rl.isolation.agent_python import (
    AGENT_PACKAGES,
    ENV_EXTRAS,
    MARKER,
    AgentPythonMissing,
    base_installation,
    extra_requirements,
    interpreter,
    pinned_requirements,
)
from checkout import REPO, child_env


def test_the_packages_are_the_harness_pins(tmp_path):
    pins = pinned_requirements(REPO / "pyproject.toml")
    assert [p.split("==")[0] for p in pins] == list(AGENT_PACKAGES)
    assert all("==" in p for p in pins)
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\ndependencies = ["torch==2.13.0", "py_stemmer>=3"]\n')
    # names compare as pip compares them
    assert pinned_requirements(pyproject, ["Py-Stemmer", "torch"]) == ["py_stemmer>=3",
                                                                       "torch==2.13.0"]
    with pytest.raises(ValueError, match="pins no version of trl, peft"):
        pinned_requirements(pyproject, ["torch", "trl", "peft"])


def test_the_optional_groups_come_whole_and_a_missing_one_is_named(tmp_path):
    """ALFWorld's engine (pyproject's alfworld group) is the agents' too."""
    assert ENV_EXTRAS == ("alfworld",)
    assert "textworld[pddl]==1.7.0" in extra_requirements(REPO / "pyproject.toml")
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\ndependencies = []\n'
                         '[project.optional-dependencies]\nengine = ["a==1", "b[x]==2"]\n')
    assert extra_requirements(pyproject, ["engine"]) == ["a==1", "b[x]==2"]
    with pytest.raises(ValueError, match="no optional-dependency group alfworld"):
        extra_requirements(pyproject)


def test_an_unfinished_environment_is_refused(tmp_path):
    venv = tmp_path / "agent-python"
    with pytest.raises(AgentPythonMissing, match="scripts/setup.sh"):
        interpreter(venv)
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    with pytest.raises(AgentPythonMissing, match="missing or incomplete"):  # no marker yet
        interpreter(venv)
    (venv / MARKER).write_text("{}")
    assert interpreter(venv) == venv / "bin" / "python"


def test_the_base_installation_is_read_from_pyvenv_cfg(tmp_path, agent_python):
    assert base_installation(agent_python) == Path(sys.base_prefix).resolve()
    (tmp_path / "pyvenv.cfg").write_text("version = 3.11.7\n")
    with pytest.raises(AgentPythonMissing, match="names no home"):
        base_installation(tmp_path)


def test_the_build_script_keeps_an_environment_with_the_same_pins(tmp_path):
    venv = tmp_path / "agent-python"
    venv.mkdir()
    pyproject = REPO / "pyproject.toml"
    pins = pinned_requirements(pyproject) + extra_requirements(pyproject)
    (venv / MARKER).write_text(json.dumps({"requirements": pins}))
    env = child_env()
    env.pop("A2RL_AGENT_PYTHON")
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "agent_python.py"),
                           "--resources", str(tmp_path)], capture_output=True, text=True,
                          env=env, timeout=120, check=True)
    assert done.stdout.strip() == f"agent python: {venv} is up to date"
    assert sorted(p.name for p in venv.iterdir()) == [MARKER]  # nothing was rebuilt
