"""Where an agent runs: under bubblewrap, as an unprivileged uid, seeing only its workspace
(read-write code/ and output/, everything else read-only), the agents' own Python environment
(never the harness's: a2rl.isolation.agent_python), a few system paths, the harness's tools
(/opt/a2rl) and the grader's socket (/run/a2rl). Test splits, the ledger, other runs and the
repository are simply not mounted.

Who the agent is on the host decides what its writes can do there:

- a harness run by an ordinary user: bwrap makes a user namespace in which the agent is uid 1000,
  mapped to the invoking user, who is unprivileged already;
- a harness run by root (CI, most containers): a user namespace would map the agent to host
  root, whose files and writes count as root's for the kernel (``/proc/sys``, setuid files). So
  bwrap makes no user namespace and the agent runs as a throw-away unprivileged host uid of its
  own (``setpriv``: no capability in any set, no_new_privs); the writable areas are handed to
  that uid before it starts.

The network (``network``, a2rl.config.types.NETWORK_POLICIES): under every policy but ``open``
the sandbox has its own network namespace, a loopback only; the run's LLM proxy and egress
proxy are unix sockets in /run/a2rl, which ``forwards`` relays to 127.0.0.1 ports inside
(a2rl/isolation/netrelay.py, started before the agent command). ``open`` shares the host's.

Either way: no capability survives, ``/proc/sys`` is read-only, every bind is nosuid and nodev
(bwrap's default), and ``/etc/passwd`` and ``/etc/group`` name only root, the agent and nobody.
"""

from __future__ import annotations

import os
import secrets
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from a2rl.config.types import NETWORK_POLICIES
from a2rl.isolation.agent_python import (
    BASE_VIEW,
    VIEW,
    VIEW_FILES,
    base_installation,
    interpreter,
    outside_usr,
    python_view,
    stage_view,
)
from a2rl.isolation.bwrap import (
    AGENT_SYSTEM,
    BwrapCommand,
    drop_to,
    package_dirs,
    python_prefixes,
)

WORKSPACE = "/workspace"
TOOLS = "/opt/a2rl"
GRADER_DIR = "/run/a2rl"
RELAY = "/opt/relay/relay.py"  # the port forwarder inside the sandbox (netrelay.py)
HOME = "/tmp/home"
SANDBOX_UID = 1000  # the agent's uid inside its user namespace (non-root harness)
# A root harness runs each agent as a random uid from this range: no user, file or process on a
# normal system has one, so two runs never share files or per-uid limits. (The code checker's
# throw-away uids, a2rl.isolation.codeexec, start at 1_900_000_000.)
AGENT_UID_BASE = 1_800_000_000
AGENT_UID_SPAN = 10_000_000
AGENT_USER = "agent"
# the sandbox's own passwd and group: tools that look their user up (node's os.userInfo, git)
# find it, and the host's user list stays out
IDENTITY_DIR = "sandbox-etc"  # next to the workspace, never mounted writable

# NVIDIA's device nodes (the GPUs, nvidiactl, nvidia-uvm, ...): the sandbox's fresh /dev has none,
# so the agent sees the host's GPUs only through these; which of them CUDA uses is
# CUDA_VISIBLE_DEVICES's business (a2rl.pipeline.runner passes the harness's on)
GPU_DEVICES = "/dev/nvidia*"
# areas of the workspace the agent may write; the rest of it is mounted read-only
WRITABLE = ("code", "output")


class SandboxUnavailable(RuntimeError):
    """bubblewrap is needed but missing, and ``sandbox: none`` was not chosen."""


def agent_host_uid() -> int:
    """The host uid an agent runs as: the caller's own, unless the caller is root."""
    if os.geteuid() != 0:
        return os.geteuid()
    return AGENT_UID_BASE + secrets.randbelow(AGENT_UID_SPAN)


@dataclass
class Sandbox:
    """How to run an agent command. ``kind`` is ``bwrap`` or ``none`` (host, no isolation)."""

    kind: str
    workspace: Path
    tools: Path
    grader_dir: Path
    network: str = "none"  # none, llm, allowlist or open (a2rl.config.types.NETWORK_POLICIES)
    extra_ro: list[Path] = field(default_factory=list)
    # the agents' Python environment (resources/agent-python, a2rl.isolation.agent_python):
    # first on PATH and ``{python}`` of an agent's command; None: the base interpreter alone
    python: Optional[Path] = None
    # read-only folders shown at neutral paths: path inside the sandbox -> host folder (an LLM
    # agent CLI's tools folder)
    ro_views: dict[str, Path] = field(default_factory=dict)
    # other virtual environments the agent runs (an LLM agent CLI's): path inside the sandbox
    # -> host venv, shown there over its base installation at a neutral path (``base_views``)
    venvs: dict[str, Path] = field(default_factory=dict)
    # extra writable folders: path inside the sandbox -> host folder (an agent CLI's files)
    extra_rw: dict[str, Path] = field(default_factory=dict)
    host_uid: int = field(default_factory=agent_host_uid)
    tmpfs_bytes: Optional[int] = None  # the size of each of /tmp and /dev/shm; None: the kernel's
    # port inside the sandbox -> unix socket inside it (under /run/a2rl), relayed by netrelay.py
    forwards: dict[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.network not in NETWORK_POLICIES:  # True/False of old callers included
            raise ValueError(f"sandbox network={self.network!r}; expected one of "
                             f"{NETWORK_POLICIES}")
        if self.kind != "bwrap":
            return
        missing = [tool for tool in ("bwrap", "setpriv") if shutil.which(tool) is None
                   and (tool == "bwrap" or self.as_root)]
        if missing:
            raise SandboxUnavailable(
                f"{' and '.join(missing)} not installed: install it (Debian: apt-get install "
                "bubblewrap util-linux) or set sandbox=none to run agents without isolation")

    @property
    def as_root(self) -> bool:
        """The harness is root: the agent must not get a user namespace mapped to root."""
        return os.geteuid() == 0

    @property
    def uid(self) -> int:
        """The agent's uid as it sees it."""
        return self.host_uid if self.as_root else SANDBOX_UID

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

    @property
    def interpreter(self) -> str:
        """The agent's python: its environment's, else the harness's base interpreter (which
        sees the standard library only)."""
        if self.python is not None:
            host = interpreter(self.python)
            return f"{VIEW}/bin/python" if self.kind == "bwrap" else str(host)
        return str(Path(sys.executable).resolve())

    @property
    def writable(self) -> list[Path]:
        """The host folders the agent may write."""
        return [self.workspace / area for area in WRITABLE] + list(self.extra_rw.values())

    def command(self, argv: list[str], env: dict[str, str], conceal: bool = False) -> list[str]:
        """The full command line; with ``none`` it is ``argv`` itself. Under bwrap it first
        writes the sandbox's passwd and group and, for a root caller, hands the writable
        areas to the agent's uid. ``conceal``: bwrap reads its mounts and environment from a
        file beside them (``bwrap.args``), so that its command line, /proc/1/cmdline inside,
        shows no host path (the harness runs it so; the whole line is for inspection)."""
        if self.kind == "none":
            return list(argv)
        self._prepare_host()
        if self.as_root:  # no user namespace: it would map the agent to host root
            bwrap = BwrapCommand("--unshare-ipc", "--unshare-pid", "--unshare-uts",
                                 "--unshare-cgroup-try", "--die-with-parent", "--new-session",
                                 open_parents=True)
            if not self.shares_network:
                bwrap.add("--unshare-net")
        else:
            bwrap = BwrapCommand("--unshare-all", "--die-with-parent", "--new-session",
                                 "--cap-drop", "ALL")
            bwrap.identity(SANDBOX_UID)
            if self.shares_network:
                bwrap.add("--share-net")
        bwrap.add("--hostname", "a2rl")
        self._mount(bwrap).environment(self._library_path(env))
        return bwrap.run(WORKSPACE, self._relayed(argv),
                         wrapper=drop_to(self.host_uid) if self.as_root else (),
                         args_file=self.workspace.parent / IDENTITY_DIR / "bwrap.args"
                         if conceal else None)

    def _library_path(self, env: dict[str, str]) -> dict[str, str]:
        """``env`` with the base installation's lib/ first on LD_LIBRARY_PATH: its interpreter
        (built --enable-shared, as pyenv's) finds libpython by a RUNPATH naming its host
        path, which the sandbox does not have."""
        libs = [f"{view}/lib" for view in self.base_views().values()]
        if not libs:
            return env
        paths = [*libs, *filter(None, env.get("LD_LIBRARY_PATH", "").split(":"))]
        return env | {"LD_LIBRARY_PATH": ":".join(paths)}

    def base_views(self) -> dict[str, str]:
        """host base installation -> where the sandbox shows it, for the venvs' bases outside
        /usr (a system Python's is mounted with /usr): the agents' at BASE_VIEW, another at
        ``python_view`` (``/opt/python3.12``); two bases may not share a view."""
        views: dict[str, str] = {}
        if self.python is not None and outside_usr(base_installation(self.python)):
            views[str(base_installation(self.python))] = BASE_VIEW
        for venv in self.venvs.values():
            base = base_installation(venv)
            if outside_usr(base) and str(base) not in views:
                view = python_view(base)
                if view in views.values():
                    raise ValueError(f"the venvs' base installations {base} and "
                                     f"{[b for b, v in views.items() if v == view]} would both "
                                     f"be shown at {view}: make the venvs from one of them")
                views[str(base)] = view
        return views

    @property
    def shares_network(self) -> bool:
        return self.network == "open"

    def _relayed(self, argv: list[str]) -> list[str]:
        """``argv`` started behind the port forwarder when the sandbox has ports to forward."""
        if not self.forwards or self.shares_network:
            return list(argv)
        pairs = [f"{port}={path}" for port, path in sorted(self.forwards.items())]
        return [self.interpreter, "-I", RELAY, *pairs, "--", *argv]

    def host_env(self, env: dict[str, str]) -> dict[str, str] | None:
        """The environment for Popen: bwrap gets its own via --setenv, the host run gets env."""
        return {"PATH": "/usr/bin:/bin"} if self.kind == "bwrap" else dict(env)

    def unstage(self) -> None:
        """Remove the venvs' bin/ and pyvenv.cfg staged for the sandbox (``_prepare_host``)
        once the agent is done: their links name paths that exist only inside the sandbox,
        and a tool walking the run's folder afterwards (DVC, a copy) fails on dangling links."""
        identity = self.workspace.parent / IDENTITY_DIR
        names = [VIEW_FILES] * (self.python is not None) + [staged_name(v) for v in self.venvs]
        for name in names:
            shutil.rmtree(identity / name, ignore_errors=True)

    def _prepare_host(self) -> None:
        identity = self.workspace.parent / IDENTITY_DIR
        identity.mkdir(exist_ok=True)
        uid = self.uid
        (identity / "passwd").write_text(
            "root:x:0:0:root:/root:/usr/sbin/nologin\n"
            f"{AGENT_USER}:x:{uid}:{uid}:a2rl agent:{HOME}:/bin/sh\n"
            "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
        (identity / "group").write_text(f"root:x:0:\n{AGENT_USER}:x:{uid}:\nnogroup:x:65534:\n")
        shutil.copy(Path(__file__).with_name("netrelay.py"), identity / "relay.py")
        if self.python is not None:
            stage_view(self.python, identity)
        bases = self.base_views()
        for view, venv in self.venvs.items():
            base = str(base_installation(venv))
            stage_view(venv, identity, view, bases.get(base, base), staged_name(view))
        if self.as_root:
            for area in self.writable:
                hand_over(area, self.host_uid)

    def _mount(self, bwrap: BwrapCommand) -> BwrapCommand:
        # /proc/sys read-only whoever the agent is; /dev read-only but for a fresh /dev/shm
        # (the host's NVIDIA device nodes bound in before it turns read-only);
        # /dev/shm and /tmp writable by the agent's uid (a root-made bwrap folder is root's).
        # The fresh /tmp comes before the binds: host paths under /tmp (a checkout, a venv,
        # agent tools) must land on top of it.
        bwrap.add("--proc", "/proc").ro_bind("/proc/sys", "/proc/sys")
        bwrap.add("--dev", "/dev")
        for device in gpu_devices():
            bwrap.add("--dev-bind", device, device)
        size = ["--size", str(self.tmpfs_bytes)] if self.tmpfs_bytes else []
        bwrap.add("--remount-ro", "/dev", "--perms", "1777", *size, "--tmpfs", "/dev/shm",
                  "--perms", "1777", *size, "--tmpfs", "/tmp",
                  # a root harness cannot give bwrap's folder to the agent: it may write it
                  "--perms", "0777" if self.as_root else "0700", "--dir", HOME)
        bwrap.system(AGENT_SYSTEM)
        identity = self.workspace.parent / IDENTITY_DIR
        bwrap.ro_bind(identity / "passwd", "/etc/passwd").ro_bind(identity / "group",
                                                                    "/etc/group")
        bwrap.ro_bind(identity / "relay.py", RELAY)
        for view, host in self.ro_views.items():
            bwrap.ro_bind(host, view)
        self._pythons(bwrap)
        for path in self.extra_ro:
            bwrap.ro_bind(path)
        bwrap.ro_bind(self.workspace, WORKSPACE)
        for area in WRITABLE:
            bwrap.bind(self.workspace / area, f"{WORKSPACE}/{area}")
        bwrap.ro_bind(self.tools, TOOLS).ro_bind(self.grader_dir, GRADER_DIR)
        for view, host in self.extra_rw.items():
            bwrap.bind(host, view)
        # the sandbox's root folder itself: nothing to write there (under a non-root harness
        # the agent would own it, and /dev)
        return bwrap.add("--remount-ro", "/")

    def _pythons(self, bwrap: BwrapCommand) -> None:
        """The venvs at their views, over the standard library of each one's base installation
        (at its neutral view) and of the harness's; no installed package of the harness's or
        of the system's Python (under /usr, mounted whole) is visible: they hold the task
        packages and their data."""
        bases = self.base_views()
        if self.python is None:  # the harness's own interpreter runs the agent's Python
            for prefix in sorted(p for p in python_prefixes() if outside_usr(p)):
                bwrap.python_installation(prefix)
        for base, view in bases.items():
            bwrap.python_installation(base, view)
        identity = self.workspace.parent / IDENTITY_DIR
        if self.python is not None:
            self._venv(bwrap, Path(self.python), VIEW, identity / VIEW_FILES)
        bwrap.hide(package_dirs(Path("/usr")))
        for view, venv in self.venvs.items():
            self._venv(bwrap, Path(venv), view, identity / staged_name(view))

    def _venv(self, bwrap: BwrapCommand, venv: Path, view: str, staged: Path) -> None:
        """A venv at ``view`` (a neutral path: no host path in sys.prefix, sys.path, the mount
        points or its scripts), its bin/ and pyvenv.cfg as ``stage_view`` wrote them into
        ``staged``. Inside a folder of ``ro_views`` (a CLI's tools folder) its other entries
        are there already."""
        inside = any(view.startswith(folder.rstrip("/") + "/") for folder in self.ro_views)
        for entry in sorted(venv.iterdir()):
            path = f"{view}/{entry.name}"
            if entry.name in ("bin", "pyvenv.cfg"):
                bwrap.ro_bind(staged / entry.name, path)
            elif inside:
                continue
            elif entry.is_symlink():  # lib64 -> lib
                bwrap.add("--symlink", os.readlink(entry), path)
            else:
                bwrap.ro_bind(entry.resolve(), path)


def staged_name(view: str) -> str:
    """The folder of the run's staging that holds the bin/ and pyvenv.cfg of the venv shown at
    ``view``: /opt/agent-cli/venv -> venv-opt-agent-cli-venv."""
    return "venv-" + view.strip("/").replace("/", "-")


def hand_over(root: Path, uid: int) -> None:
    """Make ``root`` and everything in it ``uid``'s, owner-writable (links are not followed)."""
    for dirpath, dirnames, filenames in os.walk(root):
        os.chown(dirpath, uid, uid)
        os.chmod(dirpath, 0o755)
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            os.lchown(path, uid, uid)


def gpu_devices() -> list[str]:
    """The host's NVIDIA device nodes (none on a machine without an NVIDIA GPU)."""
    return sorted(str(p) for p in Path("/").glob(GPU_DEVICES.lstrip("/")))
