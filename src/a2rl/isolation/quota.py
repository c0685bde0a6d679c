"""The agent's disk quota: what the host folders it may write (workspace/code, workspace/output
and an LLM agent CLI's folder: ``Sandbox.writable``) may hold together, in bytes and in files
(``budget.disk_gb``, ``budget.disk_files``). Without one an agent filled the host's disk (3 GB in
11 s) and its inodes (200 000 files in 3 s) (issue #28, finding 9).

The strongest of two mechanisms the machine allows; run.json's ``resources.enforced_by.disk``
says which:

- ``loop`` (a root harness where loop mounts work): the folders live on an ext4 file system of
  their own, a sparse image in the run folder (the quota's bytes, ``disk_files`` inodes),
  loop-mounted on the host and bound over each folder, so the grader and the code recorder read
  them where they always did. A write past the quota fails with ENOSPC, as on a full disk: the
  agent may delete files and go on (a ``disk_full`` event, ``disk_exceeded`` in run.json). It is
  mounted ``discard``, so what the agent deletes goes back to the host. After the run the
  folders' contents are copied back onto the host disk (the integrity scan and people read them
  there) and the image is removed. Nothing the agent does reaches past the image: files it
  deleted but holds open are inside it too.
- ``watchdog`` (a harness that is not root, a container without loop devices): the harness
  measures the folders (blocks allocated and entries, a walk that stops once past the quota)
  and the deleted files the agent's processes hold open or mapped, and stops the agent past the
  quota (status disk_quota_exceeded). It walks every WATCH_INTERVAL_S (or ten times as long as
  a walk takes, whichever is longer), and at once when the host file system's free blocks or
  inodes fell by more than the room the last walk left; the runner asks every Watchdog.poll_s,
  so the agent writes past the quota for about one such poll before it is stopped (SIGKILL:
  a grace period would be more disk).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import stat
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

import psutil

from a2rl.config.types import BudgetConfig
from a2rl.isolation.limits import MOUNTINFO, unescape

log = logging.getLogger(__name__)

GIB = 2**30
# beside workspace/ in the run folder: the sandbox never mounts it
IMAGE = "agent-disk.img"
MOUNT_POINT = "agent-disk"
INODE_BYTES = 256  # ext4's inode: the image holds its inode table on top of the quota's bytes
FULL_MARGIN = 2**20  # a loop disk with less free than this (or a thousandth of it) is full
WATCH_INTERVAL_S = 1.0
WALK_SHARE = 10  # the watchdog spends at most a tenth of the time walking
COMMAND_TIMEOUT_S = 120.0
Emit = Callable[..., None]


@dataclass(frozen=True)
class DiskQuota:
    bytes: int
    files: int  # files, folders and links


def quota_of(budget: BudgetConfig) -> Optional[DiskQuota]:
    """The budget's quota; None when ``disk_gb`` is null (no quota)."""
    if budget.disk_gb is None:
        return None
    return DiskQuota(int(budget.disk_gb * GIB), budget.disk_files)


@dataclass
class Usage:
    bytes: int = 0
    files: int = 0

    def past(self, quota: DiskQuota) -> Optional[str]:
        """Which of the quota's limits this usage is past: bytes, files or None."""
        if self.bytes > quota.bytes:
            return "bytes"
        if self.files > quota.files:
            return "files"
        return None

    def most(self, other: Usage) -> Usage:
        return Usage(max(self.bytes, other.bytes), max(self.files, other.files))


class DiskGuard:
    """No quota (``budget.disk_gb`` null): nothing enforced, nothing measured. The guards below
    share its interface: ``check`` while the agent runs, ``release`` once the grader and the
    code recorder are done with the folders, ``record`` for run.json's resources."""

    enforced_by = "none"
    poll_s = 0.25  # how often the runner calls ``check``

    def __init__(self, quota: Optional[DiskQuota], folders: Iterable[Path], emit: Emit):
        self.quota, self.folders, self.emit = quota, [Path(f) for f in folders], emit
        self.peak = Usage()
        self.exceeded: Optional[str] = None  # bytes | files | unreadable: the quota was reached

    def check(self, agent_pid: int) -> bool:
        """Called at every poll while the agent runs; True: stop it, it is past the quota."""
        return False

    def release(self) -> None:
        """Undo what the guard set up (nothing here)."""

    def record(self) -> dict[str, Any]:
        """run.json's resources: the quota, the most the agent used, whether it was reached."""
        if self.quota is None:
            return {"disk_bytes": None, "disk_files": None}
        return {"disk_bytes": self.quota.bytes, "disk_files": self.quota.files,
                "disk_used": {"bytes": self.peak.bytes, "files": self.peak.files},
                "disk_exceeded": self.exceeded}


def guard_disk(quota: Optional[DiskQuota], folders: Iterable[Path], run_root: Path,
               emit: Emit) -> DiskGuard:
    """The strongest guard this machine allows over ``folders`` (empty or not): a loop disk
    where the harness is root and may mount one, else the watchdog."""
    if quota is None:
        return DiskGuard(None, folders, emit)
    if loop_possible():
        try:
            return LoopDisk(quota, folders, run_root, emit).start()
        except LoopUnavailable as err:  # a container without loop devices or CAP_SYS_ADMIN
            log.warning("no loop disk for the agent's folders, a watchdog instead: %s", err)
    return Watchdog(quota, folders, emit)


def loop_possible() -> bool:
    return os.geteuid() == 0 and all(shutil.which(t) for t in ("mkfs.ext4", "mount", "umount"))


class LoopUnavailable(RuntimeError):
    """The loop disk could not be made or mounted here."""


class LoopDisk(DiskGuard):
    """The folders on an ext4 image of the quota's size, mounted on the host (module doc)."""

    enforced_by = "loop"

    def __init__(self, quota: DiskQuota, folders: Iterable[Path], run_root: Path, emit: Emit):
        super().__init__(quota, folders, emit)
        self.image = Path(run_root) / IMAGE
        self.mount_point = Path(run_root) / MOUNT_POINT
        self.areas = {f: self.mount_point / area_name(f, Path(run_root)) for f in self.folders}
        self.base = Usage()  # ext4's own use of the empty file system
        self.bound: list[Path] = []
        self.mounted = False

    def start(self) -> LoopDisk:
        try:
            self._make()
            self._mount()
            for folder in self.folders:
                self._bind(folder)
        except (OSError, subprocess.SubprocessError) as err:
            self.release()
            raise LoopUnavailable(str(err)) from err
        return self

    def _make(self) -> None:
        with open(self.image, "wb") as image:  # sparse: the host gives blocks as they are used
            image.truncate(self.quota.bytes + self.quota.files * INODE_BYTES)
        # no journal: the file system lives for one run; no blocks kept back for root
        command("mkfs.ext4", "-q", "-F", "-N", str(self.quota.files), "-m", "0",
                "-O", "^has_journal", "-E", "lazy_itable_init=1", str(self.image))

    def _mount(self) -> None:
        self.mount_point.mkdir()
        command("mount", "-o", "loop,nosuid,nodev,noatime,discard", str(self.image),
                str(self.mount_point))
        self.mounted = True
        self.base = self._used()

    def _bind(self, folder: Path) -> None:
        """The folder's area of the disk, with the folder's owner, mode and entries, bound over
        the folder."""
        area = self.areas[folder]
        area.mkdir()
        info = folder.stat()
        os.chown(area, info.st_uid, info.st_gid)
        os.chmod(area, stat.S_IMODE(info.st_mode))
        for entry in folder.iterdir():
            shutil.move(entry, area / entry.name)
        command("mount", "--bind", str(area), str(folder))
        self.bound.append(folder)

    def _used(self) -> Usage:
        st = os.statvfs(self.mount_point)
        return Usage((st.f_blocks - st.f_bfree) * st.f_frsize - self.base.bytes,
                     st.f_files - st.f_ffree - self.base.files)

    def _full(self) -> Optional[str]:
        st = os.statvfs(self.mount_point)
        if st.f_favail <= 0:
            return "files"
        if st.f_bavail * st.f_frsize < max(FULL_MARGIN, self.quota.bytes // 1000):
            return "bytes"
        return None

    def check(self, agent_pid: int) -> bool:
        """Record the most the agent used, and when the disk was full (a disk_full event once);
        the agent goes on: its writes fail."""
        if not self.mounted:
            return False
        self.peak = self.peak.most(self._used())
        full = self._full()
        if full and self.exceeded is None:
            self.exceeded = full
            self.emit("disk_full", limit=full, quota_bytes=self.quota.bytes,
                      quota_files=self.quota.files, used_bytes=self.peak.bytes,
                      used_files=self.peak.files)
        return False

    def release(self) -> None:
        """Unbind each folder and copy its area back into it, then unmount and remove the
        image."""
        self.check(0)
        for folder in reversed(self.bound):
            unmount(folder)
            self._copy_back(self.areas[folder], folder)
        self.bound = []
        if self.mounted:
            unmount(self.mount_point)
            self.mounted = False
        with contextlib.suppress(OSError):
            self.mount_point.rmdir()
        self.image.unlink(missing_ok=True)

    def _copy_back(self, area: Path, folder: Path) -> None:
        # cp -a: links stay links, owners and modes kept, holes kept, any depth; bounded by
        # the quota, so by the disk it took
        done = subprocess.run(["cp", "-a", "--", f"{area}/.", str(folder)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            self.emit("error", message=f"the agent's files in {folder.name}/ were not all "
                      f"copied back from its disk: {done.stderr[-500:]}")


def area_name(folder: Path, run_root: Path) -> str:
    """The loop disk's folder for ``folder``: its path in the run folder, one component."""
    try:
        return "-".join(folder.relative_to(run_root).parts)
    except ValueError:
        return "-".join(folder.parts[1:])


def command(*argv: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    if done.returncode != 0:
        raise OSError(f"{' '.join(argv[:2])} failed ({done.returncode}): {done.stderr.strip()}")


def unmount(path: Path) -> None:
    """Unmount ``path``; lazily when something still holds it (an escaped process): it is
    detached at once and freed when let go."""
    if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def unmount_below(root: Path) -> None:
    """Unmount whatever is mounted in ``root`` (a loop disk a killed harness left), deepest
    first, so that the folder can be removed."""
    root_text = str(Path(root).resolve())
    try:
        lines = MOUNTINFO.read_text().splitlines()
    except OSError:
        return
    points = [unescape(line.split()[4]) for line in lines]
    for point in sorted((p for p in points if p.startswith(root_text + "/")), reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True)


class Watchdog(DiskGuard):
    """Measures the folders and stops the agent past the quota (module doc)."""

    enforced_by = "watchdog"
    # between walks a check is one statvfs (microseconds), and the agent writes past the quota
    # for about one poll: 4 GB/s into the page cache (measured) is 80 MB in 20 ms
    poll_s = 0.02

    def __init__(self, quota: DiskQuota, folders: Iterable[Path], emit: Emit):
        super().__init__(quota, folders, emit)
        self.devices = {os.stat(f).st_dev for f in self.folders}
        self.last = Usage()
        self.free = self._free()
        self.next_walk = 0.0

    def _free(self) -> Usage:
        """Free blocks (in bytes) and inodes of the file systems the folders are on."""
        free = Usage()
        for folder in {os.stat(f).st_dev: f for f in self.folders}.values():
            st = os.statvfs(folder)
            free.bytes += st.f_bfree * st.f_frsize
            free.files += st.f_ffree
        return free

    def _host_fell(self) -> bool:
        """The host's free space fell by more than the room the last walk left: walk now."""
        now = self._free()
        return (self.last.bytes + self.free.bytes - now.bytes > self.quota.bytes
                or self.last.files + self.free.files - now.files > self.quota.files)

    def check(self, agent_pid: int) -> bool:
        started = time.monotonic()
        if started < self.next_walk and not self._host_fell():
            return False
        free = self._free()  # before the walk: what is written meanwhile counts twice, not never
        usage, unreadable = measure(self.folders, self.quota)
        usage.bytes += unlinked_bytes(family(agent_pid), self.devices)
        took = time.monotonic() - started
        self.next_walk = time.monotonic() + max(WATCH_INTERVAL_S, WALK_SHARE * took)
        self.last, self.free = usage, free
        self.peak = self.peak.most(usage)
        past = "unreadable" if unreadable else usage.past(self.quota)
        if past and self.exceeded is None:
            self.exceeded = past
            self.emit("disk_quota_exceeded", limit=past, quota_bytes=self.quota.bytes,
                      quota_files=self.quota.files, used_bytes=usage.bytes,
                      used_files=usage.files)
        return past is not None


def measure(folders: Iterable[Path], limit: Optional[DiskQuota] = None) -> tuple[Usage, bool]:
    """The blocks allocated to the entries below ``folders`` and how many there are (links
    not followed), stopping once past ``limit``; and whether a folder could not be read (one
    the agent made unreadable to its owner, under a harness of its uid: what it holds is
    unknown)."""
    usage, unreadable = Usage(), False
    stack = [str(f) for f in folders]
    while stack:
        try:
            with os.scandir(stack.pop()) as listing:
                for entry in listing:  # one at a time: a folder may hold millions
                    _count(entry, usage, stack)
                    if limit and usage.past(limit):
                        return usage, unreadable
        except PermissionError:
            unreadable = True
        except OSError:  # removed meanwhile
            continue
    return usage, unreadable


def _count(entry: os.DirEntry, usage: Usage, stack: list[str]) -> None:
    try:
        info = entry.stat(follow_symlinks=False)
    except OSError:
        return
    usage.bytes += info.st_blocks * 512
    usage.files += 1
    if stat.S_ISDIR(info.st_mode):
        stack.append(entry.path)


def family(pid: int) -> list[int]:
    """``pid`` and its descendants (every process of a bwrap sandbox: its pid namespace keeps
    orphans)."""
    if pid <= 0:
        return []
    try:
        return [pid] + [c.pid for c in psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return []


def unlinked_bytes(pids: Iterable[int], devices: set[int]) -> int:
    """The blocks of files on ``devices`` that ``pids`` hold open or mapped after deleting
    them: no walk finds them, yet they take the disk until let go. A mapping the harness may
    not follow (not root: /proc/<pid>/map_files) counts as its length."""
    held: dict[tuple[int, int], int] = {}
    for pid in pids:
        for path in _listing(f"/proc/{pid}/fd"):
            try:
                info = os.stat(path)
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode) and info.st_nlink == 0 and info.st_dev in devices:
                held[(info.st_dev, info.st_ino)] = info.st_blocks * 512
        for key, size in _deleted_mappings(pid, devices):
            held.setdefault(key, size)
    return sum(held.values())


def _listing(folder: str) -> list[str]:
    try:
        return [f"{folder}/{name}" for name in os.listdir(folder)]
    except OSError:
        return []


def _deleted_mappings(pid: int, devices: set[int]) -> list[tuple[tuple[int, int], int]]:
    """((device, inode), bytes) of the deleted files on ``devices`` that ``pid`` maps."""
    found = []
    try:
        with open(f"/proc/{pid}/maps") as maps:
            lines = [line for line in maps if line.endswith(" (deleted)\n")]
    except OSError:
        return []
    for line in lines:
        span, _, _, dev, inode = line.split()[:5]
        major, minor = (int(part, 16) for part in dev.split(":"))
        device = os.makedev(major, minor)
        if device not in devices:
            continue
        start, end = (int(part, 16) for part in span.split("-"))
        try:
            size = os.stat(f"/proc/{pid}/map_files/{span}").st_blocks * 512
        except OSError:
            size = end - start
        found.append(((device, int(inode)), size))
    return found
