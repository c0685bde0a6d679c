"""Plugin packages made by a test (a2rl.common.plugins): ``put_on_path`` writes a distribution,
its modules and its ``<name>.dist-info`` (METADATA and entry_points.txt), into a folder it puts
first on ``sys.path``. That is what importlib.metadata reads an installed distribution's entry
points from, so the plugins are found as a pip-installed package's are, without installing
anything into the environment (tests/pipeline/test_agent_package.py installs one with pip).

Module names carry a per-test suffix: an imported module stays in ``sys.modules``, and the
next test's package must not find the last one's.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest


def unique(prefix: str) -> str:
    """A module or plugin name no other test uses."""
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def put_on_path(monkeypatch: pytest.MonkeyPatch, site: Path, distribution: str,
                entry_points: dict[str, dict[str, str]], files: dict[str, str]) -> Path:
    """Write ``files`` (path under ``site`` -> text) and the metadata of ``distribution``
    registering ``entry_points`` (group -> {name: value}) into ``site``, and put ``site`` on
    ``sys.path`` for the rest of the test; returns ``site``."""
    info = site / f"{distribution.replace('-', '_')}-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\n"
                                   f"Version: 0.1.0\n")
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in entries.items()) + "\n"
        for group, entries in entry_points.items()))
    for path, text in files.items():
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_text(text)
    monkeypatch.syspath_prepend(str(site))  # invalidates the import system's caches too
    return site
