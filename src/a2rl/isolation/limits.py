"""Resource limits for an agent: memory and processes for all its processes together, through a
cgroup of its own where the harness may make one, through rlimits otherwise. (The size of its
/tmp and /dev/shm is bwrap's business: ``a2rl.isolation.sandbox``.)

The harness looks for a cgroup it can make, controller by controller:

- cgroup v2 (the unified hierarchy): a child of the harness's own cgroup with ``memory.max``
  (``memory.swap.max`` 0) and ``pids.max``. The kernel lets a cgroup hand controllers to its
  children only when no process lives in it, so this works when the harness's cgroup is the
  root (a VM, a container with the host's cgroup namespace) or delegated empty to it;
- cgroup v1 (memory and pids hierarchies of their own, as on hybrid systems): a child of the
  harness's cgroup in each, with ``memory.limit_in_bytes`` (and ``memory.memsw.limit_in_bytes``,
  so swap is no way around it) and ``pids.max``;
- otherwise rlimits, set by ``prlimit`` before bwrap starts: ``RLIMIT_DATA`` (per process, and
  only a process's heap and private mappings: a crude bound) and ``RLIMIT_NPROC`` (per uid: a
  real bound under a root harness, where the agent is a throw-away uid of its own; under an
  ordinary user it counts all of that user's processes, so it is not set).

The agent joins its cgroups before bwrap starts (a shell writes its own pid into each
``cgroup.procs`` and execs the rest), so every process of the sandbox is in them from the first.
``pids.max`` and ``RLIMIT_NPROC`` count threads as well as processes. A cgroup's memory includes
the files the agent writes to its tmpfs /tmp and /dev/shm.

The harness can also pause every process of the agent at once (``Confinement.pause``): while a
submission is evaluated and evaluation time is not counted, the agent may not work on (issue
#28: an evaluation the agent makes slow would otherwise buy it time). It freezes a cgroup where
it can make one (v2 ``cgroup.freeze``, which needs no controller, in the agent's v2 cgroup or a
bare one of its own; else a child in the v1 freezer hierarchy), and otherwise stops the agent's
processes with SIGSTOP (a sweep repeated until no new process shows up: one forked between two
sweeps is stopped by the next) and continues them with SIGCONT.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import psutil

from a2rl.config.types import BudgetConfig
from a2rl.isolation.sandbox import Sandbox

MOUNTINFO = Path("/proc/self/mountinfo")
OWN_CGROUPS = Path("/proc/self/cgroup")
CONTROLLERS = ("memory", "pids")
REMOVE_WAIT_S = 5.0
FREEZE_WAIT_S = 2.0
STOP_SWEEPS = 20
FROZEN = {"cgroup.freeze": "1", "freezer.state": "FROZEN"}
THAWED = {"cgroup.freeze": "0", "freezer.state": "THAWED"}
# the agent's share of the machine's memory when the budget names none; the rest is the
# harness's and the grader's, which evaluates submissions while the agent works
DEFAULT_MEMORY_SHARE = 0.75
GIB = 2**30
# the shell that moves itself into each cgroup.procs named before "--", then becomes the rest
JOIN = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 126; shift; done; shift; exec "$@"'


@dataclass(frozen=True)
class ResourceLimits:
    """What all of an agent's processes may use together."""

    memory_bytes: int
    max_processes: int  # threads included
    tmpfs_bytes: int  # each of /tmp and /dev/shm


@dataclass
class Confinement:
    """The limits as applied to one agent: which mechanism enforces each, the cgroups made for
    it (removed by ``release``) and what the kernel did there."""

    limits: ResourceLimits
    memory: str = "none"  # cgroup2 | cgroup1 | rlimit | none
    processes: str = "none"
    tmpfs: str = "none"  # bwrap (a sized tmpfs) | none (no sandbox: the host's /tmp)
    cgroups: list[Path] = field(default_factory=list)
    rlimits: list[str] = field(default_factory=list)  # prlimit options
    oom_counter: Optional[Path] = None  # memory.events (v2) or memory.oom_control (v1)
    freezer: Optional[Path] = None  # cgroup.freeze (v2) or freezer.state (v1)
    root_pid: Optional[int] = None  # the agent's first process, for pausing by signals
    paused: Optional[str] = None  # freezer | signals, while paused

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` started inside the cgroups and under the rlimits."""
        if self.rlimits:
            argv = ["prlimit", *self.rlimits, "--", *argv]
        if self.cgroups:
            argv = ["sh", "-c", JOIN, "a2rl-join",
                    *[str(c / "cgroup.procs") for c in self.cgroups], "--", *argv]
        return argv

    def oom_kills(self) -> int:
        """Processes the kernel killed for going past the memory limit (cgroups only)."""
        if self.oom_counter is None:
            return 0
        try:
            for line in self.oom_counter.read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except OSError:
            pass
        return 0

    def record(self) -> dict:
        """What run.json and the events say: the limits and what enforced each."""
        return {"memory_bytes": self.limits.memory_bytes,
                "max_processes": self.limits.max_processes,
                "tmpfs_bytes": self.limits.tmpfs_bytes,
                "enforced_by": {"memory": self.memory, "processes": self.processes,
                                "tmpfs": self.tmpfs, "pause": self.pause_mechanism()},
                "oom_kills": self.oom_kills()}

    def __enter__(self) -> Confinement:
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def pause_mechanism(self) -> str:
        if self.freezer is None:
            return "signals"
        return "cgroup2" if self.freezer.name == "cgroup.freeze" else "cgroup1"

    def pause(self) -> None:
        """Stop every process of the agent until ``resume``; returns once they are stopped
        (or, for a freezer the kernel is slow to finish, after FREEZE_WAIT_S). A freezer that
        cannot be written (its cgroup gone) falls back to signals."""
        if self.freezer is not None:
            try:
                self.freezer.write_text(FROZEN[self.freezer.name])
                self.paused = "freezer"
                deadline = time.monotonic() + FREEZE_WAIT_S
                while not self._frozen() and time.monotonic() < deadline:
                    time.sleep(0.01)
                return
            except OSError:
                pass
        self.paused = "signals"
        stop_family(self.root_pid)

    def resume(self) -> None:
        if self.paused == "freezer":
            with contextlib.suppress(OSError):
                self.freezer.write_text(THAWED[self.freezer.name])
        elif self.paused == "signals":
            signal_family(self.root_pid, signal.SIGCONT)
        self.paused = None

    def _frozen(self) -> bool:
        if self.freezer.name == "cgroup.freeze":
            events = (self.freezer.parent / "cgroup.events").read_text()
            return "frozen 1" in events.splitlines()
        return self.freezer.read_text().strip() == "FROZEN"

    def release(self) -> None:
        """Kill whatever is left in the cgroups and remove them (thawed first: a process in a
        frozen v1 cgroup does not die of SIGKILL until it thaws)."""
        self.resume()
        for group in self.cgroups:
            remove_cgroup(group)
        self.cgroups = []


def limits_of(budget: BudgetConfig) -> ResourceLimits:
    """The budget's limits in bytes; ``memory_gb`` null: a share of this machine's memory."""
    memory = (int(psutil.virtual_memory().total * DEFAULT_MEMORY_SHARE)
              if budget.memory_gb is None else int(budget.memory_gb * GIB))
    return ResourceLimits(memory, budget.max_processes, int(budget.tmpfs_gb * GIB))


def confine(limits: ResourceLimits, sandbox: Sandbox) -> Confinement:
    """Make the cgroups (or choose the rlimits) that hold ``limits`` for an agent run in
    ``sandbox``; ``Confinement.release`` (or leaving it as a context) removes them. A per-uid
    process limit is set only where the agent is a uid of its own (bwrap under root)."""
    own_uid = sandbox.kind == "bwrap" and sandbox.as_root
    conf = Confinement(limits, tmpfs="bwrap" if sandbox.kind == "bwrap" else "none")
    name = f"a2rl-agent-{os.getpid()}-{secrets.token_hex(4)}"
    made = cgroup_v2(name, limits) or cgroup_v1(name, limits)
    for one in made:
        conf.cgroups.append(one.group)
        if "memory" in one.controllers:
            conf.memory, conf.oom_counter = one.mechanism, one.oom_counter
        if "pids" in one.controllers:
            conf.processes = one.mechanism
    v2 = next((one.group for one in made if one.mechanism == "cgroup2"), None)
    if v2 is not None:
        conf.freezer = v2 / "cgroup.freeze"
    else:
        group = freezer_v2(name) or freezer_v1(name)
        if group is not None:
            conf.cgroups.append(group)
            conf.freezer = group / ("cgroup.freeze" if (group / "cgroup.freeze").exists()
                                    else "freezer.state")
    if conf.memory == "none" and shutil.which("prlimit"):
        conf.memory = "rlimit"
        conf.rlimits.append(f"--data={limits.memory_bytes}")
    if conf.processes == "none" and own_uid and shutil.which("prlimit"):
        conf.processes = "rlimit"
        conf.rlimits.append(f"--nproc={limits.max_processes}")
    return conf


@dataclass(frozen=True)
class Made:
    """A cgroup made for the agent."""

    mechanism: str  # cgroup2 | cgroup1
    controllers: tuple[str, ...]
    group: Path
    oom_counter: Optional[Path]


def cgroup_v2(name: str, limits: ResourceLimits) -> list[Made]:
    """A v2 child cgroup of the harness's own with both limits, or [] when none can be made."""
    mount = next((m for m in cgroup_mounts() if m[2] == "cgroup2"), None)
    own = own_cgroup_paths().get("")
    if mount is None or own is None:
        return []
    parent = under_mount(mount, own)
    if parent is None:
        return []
    try:
        available = set((parent / "cgroup.controllers").read_text().split())
        if not set(CONTROLLERS) <= available:
            return []
        enabled = set((parent / "cgroup.subtree_control").read_text().split())
        missing = [c for c in CONTROLLERS if c not in enabled]
        if missing:  # refused (EBUSY) when processes live in the harness's cgroup
            (parent / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in missing))
        group = parent / name
        group.mkdir()
    except OSError:
        return []
    try:
        (group / "memory.max").write_text(str(limits.memory_bytes))
        with contextlib.suppress(OSError):  # no swap accounting: nothing to close
            (group / "memory.swap.max").write_text("0")
        (group / "pids.max").write_text(str(limits.max_processes))
    except OSError:
        remove_cgroup(group)
        return []
    return [Made("cgroup2", CONTROLLERS, group, group / "memory.events")]


def cgroup_v1(name: str, limits: ResourceLimits) -> list[Made]:
    """A v1 child cgroup in each of the memory and pids hierarchies the harness may write."""
    own = own_cgroup_paths()
    made = []
    for controller in CONTROLLERS:
        mount = next((m for m in cgroup_mounts()
                      if m[2] == "cgroup" and controller in m[3]), None)
        if mount is None or controller not in own:
            continue
        parent = under_mount(mount, own[controller])
        if parent is None:
            continue
        group = parent / name
        try:
            group.mkdir()
        except OSError:
            continue
        try:
            if controller == "memory":
                (group / "memory.limit_in_bytes").write_text(str(limits.memory_bytes))
                swap = group / "memory.memsw.limit_in_bytes"
                if swap.exists():  # memory and swap together: swap is no way around the limit
                    swap.write_text(str(limits.memory_bytes))
                made.append(Made("cgroup1", ("memory",), group, group / "memory.oom_control"))
            else:
                (group / "pids.max").write_text(str(limits.max_processes))
                made.append(Made("cgroup1", ("pids",), group, None))
        except OSError:
            remove_cgroup(group)
    return made


def freezer_v2(name: str) -> Optional[Path]:
    """A bare v2 child of the harness's cgroup (cgroup.freeze needs no controller), or None."""
    mount = next((m for m in cgroup_mounts() if m[2] == "cgroup2"), None)
    own = own_cgroup_paths().get("")
    parent = None if mount is None or own is None else under_mount(mount, own)
    return None if parent is None else make_group(parent / name, "cgroup.freeze")


def freezer_v1(name: str) -> Optional[Path]:
    """A child of the harness's cgroup in the v1 freezer hierarchy, or None."""
    mount = next((m for m in cgroup_mounts() if m[2] == "cgroup" and "freezer" in m[3]), None)
    own = own_cgroup_paths().get("freezer")
    parent = None if mount is None or own is None else under_mount(mount, own)
    return None if parent is None else make_group(parent / name, "freezer.state")


def make_group(group: Path, needed: str) -> Optional[Path]:
    """mkdir ``group``; None (and nothing left behind) unless it came with the file ``needed``."""
    try:
        group.mkdir()
    except OSError:
        return None
    if (group / needed).exists():
        return group
    remove_cgroup(group)
    return None


def family(root_pid: Optional[int]) -> list[psutil.Process]:
    """``root_pid`` and every process below it, as far as they can be seen now."""
    try:
        root = psutil.Process(root_pid)
        return [root, *root.children(recursive=True)]
    except (psutil.Error, TypeError, ValueError):
        return []


def signal_family(root_pid: Optional[int], signum: int) -> set[int]:
    """Send ``signum`` to ``root_pid``'s family; returns the pids it reached."""
    reached = set()
    for proc in family(root_pid):
        with contextlib.suppress(psutil.Error):
            proc.send_signal(signum)
            reached.add(proc.pid)
    return reached


def stop_family(root_pid: Optional[int]) -> None:
    """SIGSTOP ``root_pid``'s family, sweeping again until a sweep finds no new process (a
    process forked while the last sweep ran is in the next one)."""
    stopped: set[int] = set()
    for _ in range(STOP_SWEEPS):
        reached = signal_family(root_pid, signal.SIGSTOP)
        if reached <= stopped:
            return
        stopped |= reached


def cgroup_mounts() -> list[tuple[Path, str, str, set[str]]]:
    """(mount point, root within the hierarchy, fs type, super options) of each cgroup mount."""
    found = []
    for line in MOUNTINFO.read_text().splitlines():
        fields, _, rest = line.partition(" - ")
        parts, tail = fields.split(), rest.split()
        if len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
            found.append((Path(unescape(parts[4])), unescape(parts[3]), tail[0],
                          set(tail[2].split(","))))
    return found


def own_cgroup_paths() -> dict[str, str]:
    """The harness's cgroup per v1 controller, and its v2 cgroup under the key ''."""
    own = {}
    for line in OWN_CGROUPS.read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            own[controller] = path
    return own


def under_mount(mount: tuple[Path, str, str, set[str]], path: str) -> Optional[Path]:
    """Where the cgroup ``path`` is under ``mount``; None when the mount does not show it."""
    point, root = mount[0], mount[1].rstrip("/")
    if path != root and not path.startswith(root + "/"):
        return None
    folder = point / path[len(root):].lstrip("/")
    return folder if folder.is_dir() else None


def unescape(text: str) -> str:
    """A mountinfo field: spaces, tabs and newlines are octal escapes there."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        text = text.replace(code, char)
    return text


def remove_cgroup(group: Path) -> None:
    """SIGKILL every process left in ``group`` and remove it (best effort: a cgroup still
    holding a dying process is retried for a few seconds, then left)."""
    deadline = time.monotonic() + REMOVE_WAIT_S
    while True:
        with contextlib.suppress(OSError):
            for pid in (group / "cgroup.procs").read_text().split():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(int(pid), signal.SIGKILL)
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                return
            time.sleep(0.05)
