"""The two programs of a code check (``a2rl.isolation.codeexec``), kept as module files.

Both sandboxed processes run ``python -I -S -u -B -c <source>`` and read their job (JSON) from
stdin. A source is the text of ``a2rl/isolation/plaindata.py``, then ``common.py``, then the
process's own part: ``candidate.py`` (untrusted: runs the program, answers calls) or
``checker.py`` (trusted: runs the tests, writes the verdict). Nothing of a2rl is importable in
the sandbox, so the texts are joined rather than imported; tests import the files as modules.
"""
from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).parent
PARTS = ("candidate", "checker")


def source(part: str) -> str:
    """The program text of one process: plaindata, common and ``part``."""
    if part not in PARTS:
        raise ValueError(f"part={part!r}; expected one of {PARTS}")
    return "".join(path.read_text() for path in (
        _HERE.parent / "plaindata.py", _HERE / "common.py", _HERE / f"{part}.py"))


CANDIDATE_SOURCE = source("candidate")
CHECKER_SOURCE = source("checker")
