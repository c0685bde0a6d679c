"""Where an agent runs: under bubblewrap, as uid 1000, seeing only its workspace (read-write
code/ and output/, everything else read-only), the Python installation, a few system paths, the
harness's tools (/opt/a2rl) and the grader's socket (/run/a2rl). Test splits, the ledger, other
runs and the repository are simply not mounted.

Inside the sandbox uid 1000 is mapped to the invoking user by a user namespace; what protects the
harness is what is mounted and how (read-only binds cannot be remounted without capabilities,
which bwrap drops), not host file permissions.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from a2rl.isolation.bwrap import AGENT_SYSTEM, BwrapCommand, python_paths

WORKSPACE = "/workspace"
TOOLS = "/opt/a2rl"
GRADER_DIR = "/run/a2rl"
HOME = "/tmp/home"
SANDBOX_UID = 1000

# areas of the workspace the agent may write; the rest of it is mounted read-only
WRITABLE = ("code", "output")


class SandboxUnavailable(RuntimeError):
    """bubblewrap is needed but missing, and ``sandbox: none`` was not chosen."""


@dataclass
class Sandbox:
    """How to run an agent command. ``kind`` is ``bwrap`` or ``none`` (host, no isolation)."""

    kind: str
    workspace: Path
    tools: Path
    grader_dir: Path
    network: bool = False
    extra_ro: list[Path] = field(default_factory=list)
    # extra writable folders: path inside the sandbox -> host folder (an agent CLI's files)
    extra_rw: dict[str, Path] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind == "bwrap" and shutil.which("bwrap") is None:
            raise SandboxUnavailable(
                "bubblewrap (bwrap) is not installed: install it (Debian: apt-get install "
                "bubblewrap) or set sandbox=none to run agents without isolation")

    # paths as the agent sees them
    @property
    def workspace_view(self) -> str:
        return WORKSPACE if self.kind == "bwrap" else str(self.workspace)

    @property
    def tools_view(self) -> str:
        return TOOLS if self.kind == "bwrap" else str(self.tools)

    @property
    def grader_dir_view(self) -> str:
        return GRADER_DIR if self.kind == "bwrap" else str(self.grader_dir)

    def command(self, argv: list[str], env: dict[str, str]) -> list[str]:
        """The full command line; with ``none`` it is ``argv`` itself."""
        if self.kind == "none":
            return list(argv)
        bwrap = BwrapCommand("--unshare-all", "--die-with-parent", "--new-session")
        bwrap.identity(SANDBOX_UID).add("--hostname", "a2rl")
        if self.network:
            bwrap.add("--share-net")
        return self._mount(bwrap).environment(env).run(WORKSPACE, argv)

    def host_env(self, env: dict[str, str]) -> dict[str, str] | None:
        """The environment for Popen: bwrap gets its own via --setenv, the host run gets env."""
        return {"PATH": "/usr/bin:/bin"} if self.kind == "bwrap" else dict(env)

    def _mount(self, bwrap: BwrapCommand) -> BwrapCommand:
        # the fresh /tmp first: binds of host paths that live under /tmp (a checkout, a venv, the
        # agent tools) must land on top of it, not be hidden by it
        bwrap.add("--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--dir", HOME)
        bwrap.system(AGENT_SYSTEM)
        for path in python_paths() + [str(p) for p in self.extra_ro]:
            bwrap.ro_bind(path)
        bwrap.ro_bind(self.workspace, WORKSPACE)
        for area in WRITABLE:
            bwrap.bind(self.workspace / area, f"{WORKSPACE}/{area}")
        bwrap.ro_bind(self.tools, TOOLS).ro_bind(self.grader_dir, GRADER_DIR)
        for view, host in self.extra_rw.items():
            bwrap.bind(host, view)
        return bwrap
