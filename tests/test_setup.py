"""scripts/setup.sh on a stock machine: a project environment (.venv/) from the lockfiles, never
the system Python, and one clear line, before anything slow, for each missing prerequisite.

The refusals are run for real: the script in a copy of its checkout, under a PATH that lacks
what is being tested (a Python >= 3.11, bwrap) or as an unprivileged user (a checkout it cannot
write). No Python older than 3.11 can be installed here (Debian 12 has none and pyenv cannot
download), so that one is a script answering the version query as Python 3.10 would.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from checkout import REPO

SETUP = REPO / "scripts" / "setup.sh"
VENV = REPO / ".venv"
NOBODY = 65534
# what setup.sh installs outside the locks: torch by name (the machine's own build) and a2rl
UNLOCKED = {"torch", "a2rl"}


def lock_pins(*locks: Path) -> dict[str, str]:
    """{package: version} of the lockfiles' entries whose markers hold on this interpreter."""
    env = default_environment()
    pins = {}
    for lock in locks:
        for line in lock.read_text().splitlines():
            if not line or line[0] in " #-":
                continue
            requirement = Requirement(line.rstrip(" \\"))
            if requirement.marker is None or requirement.marker.evaluate(env):
                pins[canonicalize_name(requirement.name)] = str(requirement.specifier)[2:]
    return pins


def installed(python: Path) -> dict[str, str]:
    """{package: version} of every distribution ``python``'s environment holds."""
    code = ("import importlib.metadata as m, json; print(json.dumps({d.metadata['Name']: "
            "d.version for d in m.distributions()}))")
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True)
    return {canonicalize_name(name): version for name, version in json.loads(out.stdout).items()}


def assert_matches_lock(found: dict[str, str], pins: dict[str, str]) -> None:
    wrong = {name: (found.get(name), version) for name, version in pins.items()
             if found.get(name) != version}
    assert not wrong, f"installed vs locked: {wrong}"
    extra = set(found) - set(pins) - UNLOCKED
    assert not extra, f"installed but not in the lock: {sorted(extra)}"


requirements = REPO / "requirements"


def test_the_tests_run_in_the_project_environment():
    assert Path(sys.prefix) == VENV, f"run the tests with {VENV}/bin/python (README)"
    assert sys.prefix != sys.base_prefix


def test_the_harness_environment_is_exactly_its_lockfiles():
    """What `pip freeze` of .venv holds is what requirements/ pins, version for version, and
    nothing else but torch (installed by name: the machine's CPU or CUDA build) and a2rl."""
    pins = lock_pins(requirements / "bootstrap.lock", requirements / "harness.lock",
                     requirements / "harness-nodeps.lock")
    # read by a fresh interpreter: once setuptools is imported (some earlier test may have),
    # it appends its _vendor folder to sys.path, and this process would list the copies of
    # packaging, wheel and others vendored there as if they were installed
    found = installed(Path(sys.executable))
    assert_matches_lock(found, pins)
    assert found["torch"].split("+")[0] == "2.13.0"


def test_the_agents_environment_is_exactly_its_lockfile():
    from checkout import AGENT_PYTHON

    python = AGENT_PYTHON / "bin" / "python"
    if not python.exists():
        pytest.skip(f"{AGENT_PYTHON} is not built (scripts/setup.sh)")
    pins = lock_pins(requirements / "bootstrap.lock", requirements / "agents.lock")
    found = installed(python)
    assert_matches_lock(found, pins)
    assert "a2rl" not in found  # the harness's code (its task packages hold sealed data)


def test_the_agents_lock_agrees_with_the_harness_lock():
    """Packages in both environments are at one version: the agents train with what the
    harness grades with."""
    harness = lock_pins(requirements / "harness.lock")
    agents = lock_pins(requirements / "agents.lock")
    differ = {n: (harness[n], agents[n]) for n in set(harness) & set(agents)
              if harness[n] != agents[n]}
    assert not differ


def test_every_locked_package_carries_hashes():
    for lock in requirements.glob("*.lock"):
        text = lock.read_text()
        entries = [line for line in text.splitlines() if line and line[0] not in " #-"]
        assert entries, lock
        assert text.count("--hash=sha256:") >= len(entries), lock


def test_nothing_was_installed_into_the_system_python():
    system = Path("/usr/bin/python3")
    if not system.exists():
        pytest.skip("no distribution Python here")
    code = ("import importlib.util as u; print(' '.join(n for n in ('a2rl', 'torch', "
            "'snakemake', 'transformers', 'trl') if u.find_spec(n)))")
    out = subprocess.run([str(system), "-I", "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == ""


# ------------------------------------------------------------------- refusals, before anything


def open_folder() -> Path:
    """A new folder under /tmp that every user can enter (pytest's tmp_path is root's only)."""
    root = Path(tempfile.mkdtemp(prefix="a2rl-setup-"))
    root.chmod(0o755)
    return root


def checkout_copy(owner: int | None = None) -> Path:
    """A checkout holding setup.sh and what it reads, in a folder every user can enter."""
    root = open_folder()
    (root / "scripts").mkdir()
    shutil.copy2(SETUP, root / "scripts" / "setup.sh")
    shutil.copytree(requirements, root / "requirements")
    shutil.copy2(REPO / "pyproject.toml", root)
    if owner is not None:
        for path in [root, *root.rglob("*")]:
            os.chown(path, owner, owner)
    return root


def path_without(tmp: Path, *names: str) -> str:
    """A PATH with every command of this machine's /usr/bin and /bin but ``names`` (globs),
    as links in ``tmp``."""
    for folder in ("/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"):
        for tool in Path(folder).iterdir():
            link = tmp / tool.name
            if not any(tool.match(n) for n in names) and not link.is_symlink():
                link.symlink_to(tool)
    return str(tmp)


def run_setup(root: Path, path: str, user: int | None = None, **env: str):
    argv = ["bash", str(root / "scripts" / "setup.sh")]
    if user is not None:
        argv = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *argv]
    clean = {"PATH": path, "HOME": str(root), "LANG": "C.UTF-8", **env}
    return subprocess.run(argv, cwd=root, env=clean, capture_output=True, text=True,
                          timeout=120, check=False)


def assert_refused(result, *words: str) -> None:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1, result.stderr
    for word in words:
        assert word in lines[0], lines[0]


@pytest.fixture
def checkout():
    root = checkout_copy()
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def bin_dir():
    """A folder for a PATH's links that an unprivileged user can read."""
    root = open_folder()
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_an_old_python_gets_one_line_saying_what_to_install(checkout, bin_dir):
    fake = bin_dir / "fake"
    fake.mkdir()
    (fake / "python3").write_text("#!/bin/sh\necho 3.10\n")
    (fake / "python3").chmod(0o755)
    (bin_dir / "tools").mkdir()
    path = f"{fake}:{path_without(bin_dir / 'tools', 'python*')}"
    result = run_setup(checkout, path)
    assert_refused(result, "needs Python >= 3.11", "found python3=3.10", "apt-get install")
    assert not (checkout / ".venv").exists()
    named = run_setup(checkout, path, PYTHON=str(fake / "python3"))
    assert_refused(named, f"PYTHON={fake / 'python3'} is Python 3.10")


def test_a_read_only_checkout_gets_one_line(tmp_path):
    root = checkout_copy(owner=0)  # root's, 755: the unprivileged user below cannot write it
    try:
        result = run_setup(root, os.environ["PATH"], user=NOBODY)
        assert_refused(result, "is not writable", "Clone it where you can write")
        assert not (root / ".venv").exists()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_missing_bwrap_gets_one_line_saying_what_to_install(bin_dir):
    """A user who is not root (and may not sudo) is told the apt command; nothing is built."""
    root = checkout_copy(owner=NOBODY)
    try:
        result = run_setup(root, path_without(bin_dir, "bwrap"), user=NOBODY)
        assert_refused(result, "missing: bubblewrap", "sudo apt-get install -y bubblewrap")
        assert not (root / ".venv").exists()
    finally:
        shutil.rmtree(root, ignore_errors=True)
