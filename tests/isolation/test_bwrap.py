"""The one bwrap command builder both sandboxes use (a2rl.isolation.bwrap)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from a2rl.isolation.bwrap import (
    PROGRAM_SYSTEM,
    ROOT_LINKS,
    BwrapCommand,
    python_prefixes,
)


def test_mounts_keep_the_order_they_are_added_in():
    argv = (BwrapCommand("--unshare-all").identity(1000).ro_bind("/usr")
            .bind("/tmp/a", "/work").hide(["/usr/lib/x"]).run("/work", ["true"]))
    assert argv == ["bwrap", "--unshare-all", "--uid", "1000", "--gid", "1000",
                    "--ro-bind", "/usr", "/usr", "--bind", "/tmp/a", "/work",
                    "--tmpfs", "/usr/lib/x", "--remount-ro", "/usr/lib/x",
                    "--chdir", "/work", "--", "true"]


def test_a_wrapper_replaces_the_separator_before_the_command():
    argv = BwrapCommand().run("/tmp", ["python"], wrapper=["--cap-add", "X", "--", "setpriv",
                                                            "--"])
    assert argv == ["bwrap", "--chdir", "/tmp", "--cap-add", "X", "--", "setpriv", "--",
                    "python"]


def test_system_binds_what_exists_and_mirrors_the_root_links(tmp_path):
    missing = str(tmp_path / "absent")
    args = BwrapCommand().system(["/usr", missing]).args
    assert ["--ro-bind", "/usr", "/usr"] == args[1:4] and missing not in args
    for link in ROOT_LINKS:
        path = Path(link)
        if path.is_symlink():
            assert ["--symlink", os.readlink(path), link] in _triples(args)
        elif path.is_dir():
            assert ["--ro-bind", link, link] in _triples(args)
        else:
            assert link not in args


def test_environment_is_cleared_before_it_is_set():
    args = BwrapCommand().environment({"A": "1", "B": "two words"}).args
    assert args == ["bwrap", "--clearenv", "--setenv", "A", "1", "--setenv", "B", "two words"]


def test_python_folders_are_outside_usr_and_never_nested():
    roots = python_prefixes()
    assert all(not r.startswith("/usr/") for r in roots)
    assert not [(a, b) for a in roots for b in roots if a != b and a.startswith(b + "/")]


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_a_built_command_runs_under_bwrap_with_only_the_given_environment(monkeypatch):
    monkeypatch.setenv("A2RL_SECRET_PROBE", "leaked")
    argv = (BwrapCommand("--unshare-all", "--die-with-parent").system(PROGRAM_SYSTEM)
            .add("--tmpfs", "/tmp").environment({"GREETING": "hello"})
            .run("/tmp", ["/bin/sh", "-c", 'echo "$GREETING ${A2RL_SECRET_PROBE:-none}"; pwd']))
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["hello none", "/tmp"]


def _triples(args: list[str]) -> list[list[str]]:
    return [args[i:i + 3] for i in range(len(args) - 2)]
