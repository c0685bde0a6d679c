"""Everything between an agent CLI and its driver LLM: the recording proxy (``proxy``: the only
way from an agent to its LLM; ``upstream``: where a call goes), the wire protocols (``wire``,
``parse``, ``render``), the local HTTP server of the harness's services (``loopback``), the
scripted offline driver (``replay``), a run's driver session (``drivers``), the agent CLIs
(``stacks``: one module each, the stack plugins) and their transcripts (``transcript_schema``,
``transcript_files``). Imports only ``a2rl.common`` and ``a2rl.config``."""

# ruff: noqa: I001 (a face's imports are wrapped as a grid, sorted by hand: one name a line
# would repeat its callers' import lists line for line)
from .drivers import KEYED_PROVIDERS, DriverKeyMissing, StackRun, check_driver, driver_session
from .loopback import LoopbackServer, Served
from .proxy import LLMProxy, ProxySettings, llm_totals
from .stacks import AgentNotInstalled, UnknownStack, load_stack, stack_of
from .transcript_files import MAX_TRANSCRIPT_BYTES
from .transcript_schema import (
    MAX_OUTPUT, ToolCall, ToolResult, Transcript, TranscriptError, Turn, seconds,
)

__all__ = [
    "KEYED_PROVIDERS", "MAX_OUTPUT", "MAX_TRANSCRIPT_BYTES", "AgentNotInstalled",
    "DriverKeyMissing", "LLMProxy", "LoopbackServer", "ProxySettings", "Served", "StackRun",
    "ToolCall", "ToolResult", "Transcript", "TranscriptError", "Turn", "UnknownStack",
    "check_driver", "driver_session", "llm_totals", "load_stack", "seconds", "stack_of",
]
