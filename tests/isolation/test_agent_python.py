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
    BASE_VIEW,
    ENV_EXTRAS,
    MARKER,
    VIEW,
    AgentPythonMissing,
    base_installation,
    extra_requirements,
    interpreter,
    locks_digest,
    pinned_requirements,
    python_view,
    stage_view,
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
    marker = {"requirements": pins, "lock_sha256": locks_digest(REPO / "requirements")}
    (venv / MARKER).write_text(json.dumps(marker))
    env = child_env()
    env.pop("A2RL_AGENT_PYTHON")
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "agent_python.py"),
                           "--resources", str(tmp_path)], capture_output=True, text=True,
                          env=env, timeout=120, check=True)
    assert done.stdout.strip() == f"agent python: {venv} is up to date"
    assert sorted(p.name for p in venv.iterdir()) == [MARKER]  # nothing was rebuilt


def test_the_sandbox_view_names_no_host_path(tmp_path):
    """stage_view rewrites bin/ and pyvenv.cfg for /opt/agent-python over /opt/python: the
    python link, the scripts' #! lines, activate's VIRTUAL_ENV and ``home``; binaries and
    relative links are kept as they are."""
    base, venv = tmp_path / "pyenv" / "3.11.7", tmp_path / "resources" / "agent-python"
    (base / "bin").mkdir(parents=True)
    (base / "bin" / "python3.11").write_bytes(b"\x7fELF\0binary")
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(f"home = {base}/bin\nversion = 3.11.7\n"
                                     f"command = {base}/bin/python -m venv {venv}\n")
    (venv / "bin" / "python").symlink_to(base / "bin" / "python3.11")
    (venv / "bin" / "python3").symlink_to("python")
    (venv / "bin" / "pip").write_text(f"#!{venv}/bin/python\nimport pip\n")
    (venv / "bin" / "pip").chmod(0o755)
    (venv / "bin" / "activate").write_text(f'VIRTUAL_ENV="{venv}"\n')
    (venv / "bin" / "tool").write_bytes(b"\x7fELF\0" + str(venv).encode())

    out = stage_view(venv, tmp_path / "staging")

    assert base_installation(venv) == base.resolve()
    assert (out / "bin" / "python").readlink() == Path(f"{BASE_VIEW}/bin/python3.11")
    assert (out / "bin" / "python3").readlink() == Path("python")
    assert (out / "bin" / "pip").read_text() == f"#!{VIEW}/bin/python\nimport pip\n"
    assert (out / "bin" / "pip").stat().st_mode & 0o777 == 0o755
    assert (out / "bin" / "activate").read_text() == f'VIRTUAL_ENV="{VIEW}"\n'
    assert (out / "bin" / "tool").read_bytes() == (venv / "bin" / "tool").read_bytes()
    assert (out / "pyvenv.cfg").read_text() == (
        f"home = {BASE_VIEW}/bin\nversion = 3.11.7\n"
        f"command = {BASE_VIEW}/bin/python -m venv {VIEW}\n")


def test_a_cli_venv_is_staged_for_its_own_views_and_its_base_named_by_version(tmp_path):
    """The same rewriting for an LLM agent CLI's venv: shown at /opt/agent-cli/venv over its
    base at /opt/python3.12 (lib/python3.12's version); a base without one lib/python3.X is
    refused."""
    base, venv = tmp_path / "pyenv" / "3.12.1", tmp_path / "tools" / "openhands" / "venv"
    (base / "bin").mkdir(parents=True)
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(f"home = {base}/bin\n")
    (venv / "bin" / "python").symlink_to(base / "bin" / "python3.12")
    (venv / "bin" / "openhands").write_text(f"#!{venv}/bin/python\n")
    with pytest.raises(AgentPythonMissing, match="0 lib/python3.. folders"):
        python_view(base)
    (base / "lib" / "python3.12").mkdir(parents=True)
    assert python_view(base) == "/opt/python3.12"

    out = stage_view(venv, tmp_path / "staging", "/opt/agent-cli/venv", python_view(base),
                     "cli")
    assert out == tmp_path / "staging" / "cli"
    assert (out / "bin" / "python").readlink() == Path("/opt/python3.12/bin/python3.12")
    assert (out / "bin" / "openhands").read_text() == "#!/opt/agent-cli/venv/bin/python\n"
    assert (out / "pyvenv.cfg").read_text() == "home = /opt/python3.12/bin\n"
