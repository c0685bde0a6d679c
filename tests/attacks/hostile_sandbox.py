"""Running a hostile program in the real agent sandbox, the way the harness runs an agent.

``make_cell`` lays out a run directory as the harness does (a provisioned workspace, a sealed test
split beside it, a ledger, tools and the grader's folder); ``attack`` runs a Python program in
that cell's ``a2rl.isolation.sandbox.Sandbox`` through ``a2rl.isolation.procs.run_until`` (so
its output reaches agent.log through the harness's pipe) and returns what the program reported:
the JSON object it prints last, as ``{"name of an attempt": "ok" or the error's name}``.

Every hostile program starts with ``PRELUDE``: ``attempt(name, fn)`` records how an attempt
ended, ``report()`` prints the record.
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass
from pathlib import Path

from a2rl.isolation.limits import ResourceLimits, confine
from a2rl.isolation.procs import ProcessOutcome, run_until
from a2rl.isolation.sandbox import Sandbox
from a2rl.isolation.workspace import provision_workspace
from checkout import AGENT_PYTHON

PRELUDE = r'''
import ctypes, errno, json, os, stat, sys
out = {}
def attempt(name, fn):
    try:
        value = fn()
        out[name] = "ok" if value is None else value
    except OSError as err:
        out[name] = errno.errorcode.get(err.errno, type(err).__name__)
    except Exception as err:
        out[name] = type(err).__name__
def report():
    print(json.dumps(out), flush=True)
libc = ctypes.CDLL(None, use_errno=True)
def libc_call(name, *args):
    if getattr(libc, name)(*args) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
'''

# what an attempt that the sandbox stopped ends with
REFUSED = {"EACCES", "EPERM", "EROFS", "ENOENT", "EXDEV", "EINVAL", "ENXIO", "ESRCH", "ESPIPE"}
SEALED_TEXT = '{"question": "sealed-question-7f3a", "answer": "42"}\n'
LEDGER_TEXT = '{"submission_id": 1}\n'


@dataclass
class Cell:
    """A run directory as the harness lays it out, and the sandbox its agent runs in."""

    root: Path  # what stands for the repository's results/
    run: Path
    sandbox: Sandbox
    limits: ResourceLimits | None = None  # the budget's memory, processes and tmpfs, if any

    @property
    def workspace(self) -> Path:
        return self.run / "workspace"

    @property
    def sealed(self) -> Path:
        return self.root / "prepared" / "t" / "sealed" / "test.jsonl"

    @property
    def ledger(self) -> Path:
        return self.run / "ledger.jsonl"

    @property
    def log(self) -> Path:
        return self.run / "agent.log"


@dataclass
class Attack:
    """What a hostile program reported, its whole log and how it ended."""

    result: dict
    log: str
    outcome: ProcessOutcome


def make_cell(tmp: Path, limits: ResourceLimits | None = None) -> Cell:
    root = tmp / "results"
    prepared = root / "prepared" / "t"
    (prepared / "data").mkdir(parents=True)
    (prepared / "data" / "train.jsonl").write_text('{"q": 1}\n')
    (prepared / "sealed").mkdir()
    (prepared / "sealed" / "test.jsonl").write_text(SEALED_TEXT)
    model = root / "models" / "m"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    run = root / "runs" / "t" / "a" / "d" / "seed0"
    provision_workspace(run / "workspace", prepared / "data", model, "describe", link_model=True)
    (run / "workspace" / "scores.json").write_text('{"best": 1}')
    (run / "ledger.jsonl").write_text(LEDGER_TEXT)
    for sub in ("tools/bin", "grader"):
        (run / sub).mkdir(parents=True)
    (run / "tools" / "bin" / "a2rl").write_text("#!/bin/sh\n")
    # the agents' own Python environment, as in a real run
    sandbox = Sandbox("bwrap", run / "workspace", run / "tools", run / "grader",
                      python=AGENT_PYTHON, tmpfs_bytes=limits.tmpfs_bytes if limits else None)
    return Cell(root, run, sandbox, limits)


def attack(cell: Cell, program: str, *args: str, timeout_s: float = 60) -> Attack:
    """Run ``PRELUDE + program`` as the cell's agent; its last output line is its report."""
    outcome = run_hostile(cell, program, *args, timeout_s=timeout_s)
    log = cell.log.read_text(errors="replace")
    lines = log.strip().splitlines()
    assert outcome.exit_code == 0 and lines, f"the program failed ({outcome}):\n{log[-3000:]}"
    return Attack(json.loads(lines[-1]), log, outcome)


def run_hostile(cell: Cell, program: str, *args: str, timeout_s: float = 60) -> ProcessOutcome:
    """Run ``PRELUDE + program`` as the cell's agent, under the cell's limits if it has any
    (as a2rl.pipeline.runner does); ``outcome.resources`` says how they were applied."""
    argv = cell.sandbox.command([cell.sandbox.interpreter, "-c", PRELUDE + program, *args],
                                {"PATH": "/usr/bin:/bin", "HOME": "/tmp/home"}, conceal=True)
    end = time.monotonic() + timeout_s
    if cell.limits is None:
        return run_until(argv, cell.sandbox.host_env({}), cell.workspace, cell.log,
                         lambda: end - time.monotonic(), grace_s=1.0)
    with confine(cell.limits, cell.sandbox) as confinement:
        outcome = run_until(confinement.wrap(argv), cell.sandbox.host_env({}), cell.workspace,
                            cell.log, lambda: end - time.monotonic(), grace_s=1.0)
        outcome.resources = confinement.record()
    return outcome


def assert_refused(result: dict, *names: str) -> None:
    """Each attempt in ``names`` ended with an error the sandbox gives, not "ok"."""
    for name in names:
        assert result[name] in REFUSED, (name, result)


def agent_command_override(program: str) -> str:
    """A Python program as the agent's command, a Hydra override for a real cell: the program
    travels base64-encoded (no quotes to escape)."""
    code = base64.b64encode(program.encode()).decode()
    return "agent.command=" + json.dumps(
        ["{python}", "-c", f"import base64; exec(base64.b64decode('{code}'))"])
