"""The interpreter that makes the virtual environments the sandbox shows (the agents' own,
an LLM agent CLI's): the running one's installation, not the harness's .venv/ itself."""

from __future__ import annotations

import sys


def base_interpreter() -> str:
    """The running interpreter's installation's own (a venv's base): a venv made by it records
    no path of the harness's .venv/ in its pyvenv.cfg (``command``), which the sandbox shows."""
    return getattr(sys, "_base_executable", None) or sys.executable
