"""Provisioning the agent's workspace (the paper's layout):

workspace/
  description.md   the task's description and the benchmark's rules, rendered for this run
  data/            training data (read-only)
  base_model/      the base model (read-only)
  code/ output/    the agent's (read-write)
  scores.json      read-only mirror of the ledger
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

READ_ONLY_FILE = 0o444
READ_ONLY_DIR = 0o555


def provision_workspace(workspace: Path, data: Path, base_model: Path, description: str,
                        link_model: bool) -> None:
    """Create ``workspace`` afresh. ``link_model`` hard-links the base model's files instead of
    copying them (safe only when the sandbox mounts base_model/ read-only)."""
    if workspace.exists():
        make_writable(workspace)
        shutil.rmtree(workspace)
    workspace.mkdir(parents=True)
    for area in ("code", "output"):
        (workspace / area).mkdir()
        (workspace / area).chmod(0o755)  # the agent's own (handed over by the sandbox when root)
    shutil.copytree(data, workspace / "data")
    _copy_model(base_model, workspace / "base_model", link_model)
    (workspace / "description.md").write_text(description)
    for area in ("data", "base_model"):
        make_read_only(workspace / area)
    (workspace / "description.md").chmod(READ_ONLY_FILE)


def _copy_model(src: Path, dest: Path, link: bool) -> None:
    def link_or_copy(s: str, d: str) -> None:
        try:
            os.link(s, d)
        except OSError:
            shutil.copy2(s, d)

    shutil.copytree(src, dest, copy_function=link_or_copy if link else shutil.copy2)


def make_read_only(root: Path) -> None:
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames:
            os.chmod(os.path.join(dirpath, name), READ_ONLY_FILE)
        os.chmod(dirpath, READ_ONLY_DIR)


def make_writable(root: Path) -> None:
    """Every folder under ``root`` writable, so that it can be removed. Walked by file
    descriptors, not paths: an agent can build a tree deeper than PATH_MAX, which a path-based
    walk cannot chmod (issue #28: every retry of the cell then failed on it). A folder is
    opened to be listed only after it is made readable; links are not followed."""
    if not os.path.islink(root):
        os.chmod(root, 0o755)
    for _, dirnames, _, dirfd in os.fwalk(root, onerror=lambda err: None):
        for name in dirnames:
            with contextlib.suppress(OSError):
                os.chmod(name, 0o755, dir_fd=dirfd)

