"""Keeping hostile code in its place: the agent's sandbox (``sandbox``, built on ``bwrap``), its
workspace (``workspace``), its Python (``agent_python``), its limits (``limits``: memory and
processes; ``quota``: disk), its deadline and leftover processes (``procs``), its network
(``egress``: the allowlist proxy; ``netrelay``: the port forwarder that runs inside the sandbox)
and untrusted programs run against their tests (``codeexec`` with ``sandboxed/``, ``pipes``
and ``plaindata``). Imports only ``a2rl.common`` and ``a2rl.config``."""

# ruff: noqa: I001 (a face's imports are wrapped as a grid, sorted by hand: one name a line
# would repeat its callers' import lists line for line)
from .agent_python import AgentPythonMissing, agent_python_dir, interpreter
from .codeexec import (
    ISOLATIONS, CodeRunner, ExecLimits, ExecResult, ProgramWithTests, SandboxError,
    measure_overhead,
)
from .egress import UNLOGGED, EgressProxy, unlogged_connections
from .limits import GIB, ResourceLimits, confine, limits_of
from .procs import ProcessOutcome, run_until
from .quota import DiskGuard, guard_disk, quota_of, unmount_below
from .sandbox import GRADER_DIR, HOME, TOOLS, Sandbox, SandboxUnavailable
from .workspace import make_writable, provision_workspace

__all__ = [
    "GIB", "GRADER_DIR", "HOME", "ISOLATIONS", "TOOLS", "UNLOGGED", "AgentPythonMissing",
    "CodeRunner", "DiskGuard", "EgressProxy", "ExecLimits", "ExecResult", "ProcessOutcome",
    "ProgramWithTests", "ResourceLimits", "Sandbox", "SandboxError", "SandboxUnavailable",
    "agent_python_dir", "confine", "guard_disk", "interpreter", "limits_of", "make_writable",
    "measure_overhead", "provision_workspace", "quota_of", "run_until", "unlogged_connections",
    "unmount_below",
]
