"""What every other package shares, and nothing that knows a task, an agent or a grid: small
file helpers (``files``), the records a run leaves (``records``), where things live (``layout``),
the run's event log (``events``), the budget's clock (``clock``), the agent's contract
(``contract``: the workspace template's rules and a task's description inside them), the
machine and its precision
(``hardware``), the Python that makes the sandbox's venvs (``interpreter``), plugins found
through entry points (``plugins``) and reading a tree the agent controls (``beneath``).
Standard library and pydantic only; imports nothing of a2rl."""

# ruff: noqa: I001 (a face's imports are wrapped as a grid, sorted by hand: one name a line
# would repeat its callers' import lists line for line)
from .beneath import (
    DIR_FLAGS, Limits, Refused, TreeReader, Walked, copy_file, kind_of, open_beneath, read_file,
    read_link, refusal, shown, walk_files,
)
from .clock import BudgetClock
from .contract import prompt_head, render_description, render_text
from .events import EventLog
from .files import (
    append_jsonl, iter_jsonl, print_report, read_json, utc_now, write_json_atomic,
    write_jsonl_atomic, write_text_atomic,
)
from .hardware import AGENT_DEVICE, PRECISIONS, describe, one_line, resolve_precision, torch_dtype
from .interpreter import base_interpreter
from .layout import Layout, PreparedTaskPaths, RunPaths, cell_path
from .plugins import GROUPS, Plugin, PluginError, find, usable
from .records import (
    ANSWER, MIRROR, Budget, FinalRecord, LedgerEntry, ProcessMetrics, RunRecord, RunSummary,
    SubmissionItem, Submissions, read_ledger,
)

__all__ = [
    "AGENT_DEVICE", "ANSWER", "DIR_FLAGS", "GROUPS", "MIRROR", "PRECISIONS", "Budget",
    "BudgetClock", "EventLog", "FinalRecord", "Layout", "LedgerEntry", "Limits", "Plugin",
    "PluginError", "PreparedTaskPaths", "ProcessMetrics", "Refused", "RunPaths", "RunRecord",
    "RunSummary", "SubmissionItem", "Submissions", "TreeReader", "Walked", "append_jsonl",
    "base_interpreter", "cell_path", "copy_file", "describe", "find", "iter_jsonl", "kind_of",
    "one_line", "open_beneath", "print_report", "prompt_head", "read_file", "read_json",
    "read_ledger", "read_link", "refusal", "render_description", "render_text",
    "resolve_precision", "shown", "torch_dtype", "usable", "utc_now", "walk_files",
    "write_json_atomic", "write_jsonl_atomic", "write_text_atomic",
]
