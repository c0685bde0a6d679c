"""Running an agent process within its deadline, and making sure nothing it started survives;
ending a code check's sandboxed processes (``kill_namespace_init``, ``kill_group``).

The harness makes itself a child subreaper, so processes the agent detaches (double fork,
setsid) are re-parented to the harness instead of init and can still be found and killed.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable, Iterable, Optional

import psutil

PR_SET_CHILD_SUBREAPER = 36
COPY_CHUNK = 65536
DRAIN_WAIT_S = 5.0  # for the agent's last output once every process has ended
# past its cap, the log keeps the agent's last output (how it ended: a traceback) after the cut
TAIL_BYTES = 65536


def become_subreaper() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


@dataclass
class ProcessOutcome:
    exit_code: Optional[int]
    seconds: float
    killed: bool  # stopped by the harness at the deadline
    survivors_killed: int  # processes still alive after the agent's main process ended
    # the agent's resource limits as applied, and OOM kills (a2rl.isolation.limits.Confinement)
    resources: Optional[dict] = None
    quota_exceeded: bool = False  # stopped by the harness past its disk quota
    log_cut_bytes: int = 0  # the agent's output left out of the log past its cap


def run_until(argv: list[str], env: Optional[dict[str, str]], cwd: Path, log: Path,
              time_left: Callable[[], float], grace_s: float = 5.0,
              on_warning: Optional[Callable[[float], None]] = None,
              poll_s: float = 0.25,
              spare: Callable[[], Iterable[int]] = tuple,
              over_quota: Callable[[int], bool] = lambda pid: False,
              log_cap: Optional[int] = None,
              on_start: Callable[[int], None] = lambda pid: None) -> ProcessOutcome:
    """Run ``argv`` until it exits, ``time_left()`` reaches 0 or ``over_quota(its pid)`` says
    it is past its disk quota; then end it and every descendant (SIGTERM, ``grace_s``,
    SIGKILL; past the quota SIGKILL at once: what it wrote in a grace period would be disk).
    The caller's own children are spared: those it had before, and ``spare()``'s (a grader
    process restarted meanwhile). Its output goes to ``log``, ``log_cap`` bytes of it
    at most (``LogCopy``). ``on_start`` gets the process's pid as soon as it exists."""
    become_subreaper()
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    started = time.monotonic()
    warned = False
    warn_at = min(60.0, 0.1 * time_left())
    with open(log, "ab") as out:
        # a pipe, not the log file: given the file, the agent could truncate or rewrite its own
        # record through its stdout; a pipe it can only append to
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        on_start(proc.pid)
        copy = LogCopy(proc.stdout, out, log_cap)
        drain = threading.Thread(target=copy.run, daemon=True)
        drain.start()
        killed = quota_exceeded = False
        while proc.poll() is None:
            left = time_left()
            if left <= 0:
                killed = True
                break
            if over_quota(proc.pid):
                quota_exceeded = True
                break
            if on_warning and not warned and left < warn_at:
                warned = True
                on_warning(left)
            time.sleep(poll_s)
        survivors = end_tree(proc, 0.0 if quota_exceeded else grace_s,
                             exclude=with_descendants(before | set(spare())))
        # every writer is dead now, so the pipe ends; a descendant that escaped would keep it
        # open, and the log is then closed without the rest
        drain.join(timeout=DRAIN_WAIT_S)
        copy.close()
    return ProcessOutcome(exit_code=proc.returncode, seconds=time.monotonic() - started,
                          killed=killed, survivors_killed=survivors,
                          quota_exceeded=quota_exceeded, log_cut_bytes=copy.cut)


def with_descendants(pids: set[int]) -> set[int]:
    """``pids`` and every process below them (what a spared grader started: code it runs)."""
    found = set(pids)
    for pid in pids:
        try:
            found |= {c.pid for c in psutil.Process(pid).children(recursive=True)}
        except psutil.NoSuchProcess:
            pass
    return found


class LogCopy:
    """Copies the agent's output (``source``, a pipe) into its log as it comes, the first
    ``cap`` bytes of it (None: all). Past the cap it keeps reading, so that the agent never
    blocks on a full pipe, but only counts, holding the last TAIL_BYTES; ``close`` then ends
    the log with a line saying how many bytes were cut (``cut``) and that tail."""

    def __init__(self, source: BinaryIO, sink: BinaryIO, cap: Optional[int] = None):
        self.source, self.sink, self.cap = source, sink, cap
        self.written = 0
        self.cut = 0  # past the cap, not in the tail
        self.tail = b""
        self._lock = threading.Lock()
        self._closed = False

    def run(self) -> None:
        """Copy until the pipe ends (or ``close``: the run is over)."""
        try:
            while chunk := self.source.read1(COPY_CHUNK):
                with self._lock:
                    if self._closed:
                        break
                    self._take(chunk)
        except ValueError:  # the sink was closed
            pass
        finally:
            self.source.close()
        self.close()

    def _take(self, chunk: bytes) -> None:
        room = len(chunk) if self.cap is None else max(0, self.cap - self.written)
        if room:
            self.sink.write(chunk[:room])
            self.sink.flush()
            self.written += min(room, len(chunk))
        over = chunk[room:]
        if over:
            kept = self.tail + over
            self.cut += max(0, len(kept) - TAIL_BYTES)
            self.tail = kept[-TAIL_BYTES:]

    def close(self) -> None:
        """Write the cut's line and the tail (once), and stop copying."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if not self.tail:
                return
            note = (f"\n[a2rl] agent.log holds the agent's first {self.written} bytes of "
                    f"output: {self.cut} bytes after them were cut; its last "
                    f"{len(self.tail)} bytes follow\n")
            with contextlib.suppress(ValueError):
                self.sink.write(note.encode() + self.tail)
                self.sink.flush()


def end_tree(proc: subprocess.Popen, grace_s: float, exclude: set[int] = frozenset()) -> int:
    """Terminate ``proc``, its process group and all descendants; returns how many processes
    other than ``proc`` had to be ended."""
    victims = _family(proc, exclude)
    others = [p for p in victims if p.pid != proc.pid and _running(p)]
    for p in victims:
        _signal(p, signal.SIGTERM)
    _signal_group(proc.pid, signal.SIGTERM)
    gone, alive = psutil.wait_procs(victims, timeout=grace_s)
    for p in alive + [p for p in _family(proc, exclude) if p not in victims]:
        _signal(p, signal.SIGKILL)
    _signal_group(proc.pid, signal.SIGKILL)
    gone += psutil.wait_procs(alive, timeout=5)[0]
    # psutil may have reaped ``proc`` above; Popen.wait() would then report 0, not its status
    codes = {p.pid: p.returncode for p in gone if p.returncode is not None}
    if proc.returncode is None and proc.pid in codes:
        proc.returncode = int(codes[proc.pid])
    proc.wait()
    _reap()
    return len(others)


def kill_namespace_init(proc: subprocess.Popen, wait_s: float) -> None:
    """End a bwrap started with ``--as-pid-1``: SIGKILL the namespace's init, whose death takes
    every process inside with it, and let bwrap reap it and exit; SIGKILL bwrap's process group
    as well when it does not exit at once, reaping an init re-parented to a subreaper caller."""
    try:
        inner = psutil.Process(proc.pid).children()
    except psutil.Error:
        inner = []
    for p in inner:
        try:
            p.kill()
        except psutil.Error:
            pass
    try:
        proc.wait(timeout=1.0 if inner else 0.0)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    _await_gone(inner, wait_s)


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL ``proc``, its process group and its descendants at once, and reap it."""
    try:
        family = psutil.Process(proc.pid).children(recursive=True)
    except psutil.Error:
        family = []
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    for p in family:
        with contextlib.suppress(psutil.Error):
            p.kill()
    proc.kill()
    proc.wait()


def _await_gone(procs: list[psutil.Process], timeout: float) -> None:
    """Wait until ``procs`` have exited; reap those re-parented to us (a subreaper caller),
    leave the zombies of others to their new parent."""
    deadline = time.monotonic() + timeout
    for p in procs:
        while time.monotonic() < deadline:
            try:
                if p.ppid() == os.getpid():
                    os.waitpid(p.pid, 0)
                    break
                if p.status() == psutil.STATUS_ZOMBIE:
                    break
            except (psutil.Error, ChildProcessError):
                break
            time.sleep(0.01)


def _family(proc: subprocess.Popen, exclude: set[int]) -> list[psutil.Process]:
    found: dict[int, psutil.Process] = {}
    try:
        root = psutil.Process(proc.pid)
        found[root.pid] = root
        for child in root.children(recursive=True):
            found[child.pid] = child
    except psutil.NoSuchProcess:
        pass
    # detached descendants re-parented to us (subreaper) are our direct children now
    for child in psutil.Process().children(recursive=True):
        if child.pid not in exclude:
            found[child.pid] = child
    return list(found.values())


def _running(p: psutil.Process) -> bool:
    """Alive and not a zombie (an exited process that only waits to be reaped)."""
    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _signal(p: psutil.Process, sig: int) -> None:
    try:
        p.send_signal(sig)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        pass


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _reap() -> None:
    """Collect exit statuses of re-parented orphans so they do not linger as zombies."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
