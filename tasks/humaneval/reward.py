"""The reward agents train on online (the task's ``SingleTurn`` declaration): a reply scores 1.0
when the code the grader would take from it (``extract.py``) passes the train problem's own
tests, else 0.0.

prepare() copies this file, as ``__init__.py``, and extract.py into the agent's data folder
(``data/reward/``), so it imports nothing but extract.py beside it and the standard library.

Each program runs in a child Python of its own (the agent's interpreter, isolated mode, in an
empty temporary folder, its own process group) with ``TIMEOUT_S`` seconds and ``MEMORY_MB`` of
address space (the child caps its own: no preexec_fn in the reward's threads), and the whole
group is killed when it overruns. That is all the isolation: it
runs in the agent's own sandbox, where a harmful program only harms the agent's run. The tests
run in the program's process (the grader runs them in another and calls the function across a
pipe), so the one way to pass without passing the tests, exiting early with status 0, is
closed by a token the child prints only after ``check`` returned: the token is read from stdin
before the program runs and is not in the program's namespace. Replies whose functions return
objects that are not plain data can pass here and fail at the grader.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .extract import extract_code, program_of

TIMEOUT_S = 5.0  # per program: the train problems' tests take well under a second
MEMORY_MB = 1024  # address space per program, as the grader's default limit
WORKERS = 2  # programs at a time (the reference agents train on two cores)

# the child (reward_child.py, shipped beside this module): caps its memory, runs the program
# and the tests, then prints the token
CHILD = Path(__file__).with_name("reward_child.py")


def passes(program: str, test: str, entry_point: str) -> bool:
    """Whether ``program`` followed by ``test`` runs ``check(<entry_point>)`` to the end
    within ``TIMEOUT_S``."""
    token = secrets.token_hex(16)
    job = json.dumps({"program": program, "test": test, "entry_point": entry_point,
                      "token": token, "memory_mb": MEMORY_MB})
    with tempfile.TemporaryDirectory(prefix="reward-") as folder:
        child = subprocess.Popen([sys.executable, "-I", str(CHILD)], cwd=folder,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            out, _ = child.communicate(job.encode(), timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            out = b""
        finally:  # the program may have left children of its own
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            child.wait()
    return child.returncode == 0 and out.decode(errors="replace").strip().endswith(token)


def score(reply: str, code_prompt: str, test: str, entry_point: str) -> float:
    """One reply scored against one problem, 1.0 or 0.0 (no code in the reply: 0.0)."""
    extraction = extract_code(reply, entry_point)
    if extraction.method == "empty":
        return 0.0
    return float(passes(program_of(code_prompt, extraction), test, entry_point))


def reward(completions: list[str], code_prompt: list[str], test: list[str],
           entry_point: list[str], **_: object) -> list[float]:
    """``completions[i]`` scored against the train problem in row i (its ``code_prompt``,
    ``test`` and ``entry_point`` fields); other fields are ignored."""
    jobs = list(zip(completions, code_prompt, test, entry_point, strict=True))
    with ThreadPoolExecutor(WORKERS) as pool:
        return list(pool.map(lambda job: score(*job), jobs))
