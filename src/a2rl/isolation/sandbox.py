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
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

WORKSPACE = "/workspace"
TOOLS = "/opt/a2rl"
GRADER_DIR = "/run/a2rl"
HOME = "/tmp/home"
SANDBOX_UID = 1000

# read-only system paths an agent's programs need (merged-/usr systems link /bin etc. into /usr)
SYSTEM_RO = ["/usr", "/etc/ssl", "/etc/ca-certificates", "/etc/resolv.conf", "/etc/hosts",
             "/etc/nsswitch.conf", "/etc/localtime", "/etc/ld.so.cache", "/etc/alternatives",
             "/etc/passwd", "/etc/group", "/etc/gitconfig", "/etc/pip.conf", "/etc/xdg/pip"]
ROOT_LINKS = ["/bin", "/lib", "/lib64", "/sbin", "/lib32", "/libx32"]
# NVIDIA's device nodes (the GPUs, nvidiactl, nvidia-uvm, ...): the sandbox's fresh /dev has none,
# so the agent sees the host's GPUs only through these; which of them CUDA uses is
# CUDA_VISIBLE_DEVICES's business (a2rl.pipeline.runner passes the harness's on)
GPU_DEVICES = "/dev/nvidia*"
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
        return ["bwrap", *self._namespace_args(), *self._mount_args(), *self._env_args(env),
                "--chdir", WORKSPACE, "--", *argv]

    def host_env(self, env: dict[str, str]) -> dict[str, str] | None:
        """The environment for Popen: bwrap gets its own via --setenv, the host run gets env."""
        return {"PATH": "/usr/bin:/bin"} if self.kind == "bwrap" else dict(env)

    def _namespace_args(self) -> list[str]:
        args = ["--unshare-all", "--die-with-parent", "--new-session",
                "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--hostname", "a2rl"]
        if self.network:
            args.append("--share-net")
        return args

    def _mount_args(self) -> list[str]:
        # the fresh /tmp first: binds of host paths that live under /tmp (a checkout, a venv, the
        # agent tools) must land on top of it, not be hidden by it
        args: list[str] = ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--dir", HOME]
        for device in gpu_devices():
            args += ["--dev-bind", device, device]
        for path in SYSTEM_RO:
            if Path(path).exists():
                args += ["--ro-bind", path, path]
        for link in ROOT_LINKS:
            p = Path(link)
            if p.is_symlink():
                args += ["--symlink", str(p.readlink()), link]
            elif p.is_dir():
                args += ["--ro-bind", link, link]
        for path in python_paths() + [str(p) for p in self.extra_ro]:
            args += ["--ro-bind", path, path]
        args += ["--ro-bind", str(self.workspace), WORKSPACE]
        for area in WRITABLE:
            args += ["--bind", str(self.workspace / area), f"{WORKSPACE}/{area}"]
        args += ["--ro-bind", str(self.tools), TOOLS,
                 "--ro-bind", str(self.grader_dir), GRADER_DIR]
        for view, host in self.extra_rw.items():
            args += ["--bind", str(host), view]
        return args

    @staticmethod
    def _env_args(env: dict[str, str]) -> list[str]:
        args = ["--clearenv"]
        for key, value in env.items():
            args += ["--setenv", key, value]
        return args


def gpu_devices() -> list[str]:
    """The host's NVIDIA device nodes (none on a machine without an NVIDIA GPU)."""
    return sorted(str(p) for p in Path("/").glob(GPU_DEVICES.lstrip("/")))


def python_paths() -> list[str]:
    """Folders the running Python needs (interpreter, stdlib, site-packages), outside /usr."""
    found = {Path(sys.base_prefix), Path(sys.prefix), Path(sys.executable).resolve().parent}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        found.add(Path(sysconfig.get_paths()[key]))
    roots = sorted({str(p) for p in found if p.exists() and not str(p).startswith("/usr/")})
    # keep only top-most folders so nested binds do not repeat
    return [r for r in roots if not any(r != o and r.startswith(o + "/") for o in roots)]
