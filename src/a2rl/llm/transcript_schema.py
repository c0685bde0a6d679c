"""The common transcript schema (``Transcript``, ``Turn``, ``ToolCall``, ``ToolResult``) and
the helpers the per-stack transcript readers build it with. It lives in a2rl.llm, below the
analysis that reads transcripts, so that a stack's module can hold its reader beside its
launch (a2rl.analysis.transcripts re-exports the schema)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Optional

MAX_OUTPUT = 4000  # characters of a tool's output kept (head and tail)
# tools whose arguments are a shell command, and the argument that holds it
SHELL_ARGUMENTS = ("command", "cmd")
SHELL_TOOLS = {"bash", "shell", "exec_command", "run_shell_command", "execute_bash",
               "terminal", "local_shell"}


class TranscriptError(ValueError):
    """A transcript that is not the stack's format (or a stack without a normaliser)."""


@dataclass
class ToolCall:
    id: Optional[str]
    name: str
    arguments: dict[str, Any]
    command: Optional[str] = None  # the shell command, for a shell tool


@dataclass
class ToolResult:
    call_id: Optional[str]
    output: str
    exit_code: Optional[int] = None
    error: bool = False
    truncated: bool = False  # ``output`` was cut to MAX_OUTPUT characters


@dataclass
class Turn:
    role: str  # assistant | tool | user | system
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_results: list[ToolResult] = field(default_factory=list)
    time: Optional[str] = None
    input_tokens: Optional[int] = None
    output_tokens: Optional[int] = None
    llm_call: Optional[int] = None  # llm_calls.jsonl "call" number
    response_id: Optional[str] = None  # the CLI's id of the model response (merging only)


@dataclass
class Transcript:
    stack: str
    turns: list[Turn]

    @property
    def commands(self) -> list[str]:
        """Every shell command the agent asked to run, in order."""
        return [c.command for t in self.turns for c in t.tool_calls if c.command is not None]

    def to_json(self) -> dict[str, Any]:
        return {"stack": self.stack, "turns": [asdict(t) for t in self.turns]}


# ------------------------------------------------------------------------------ helpers

def cut(text: Any) -> tuple[str, bool]:
    """``text`` as a string of at most MAX_OUTPUT characters (head and tail kept)."""
    text = text if isinstance(text, str) else json.dumps(text)
    if len(text) <= MAX_OUTPUT:
        return text, False
    half = MAX_OUTPUT // 2
    return f"{text[:half]}\n… [{len(text) - MAX_OUTPUT} characters cut] …\n{text[-half:]}", True


def result(call_id: Optional[str], output: Any, exit_code: Optional[int] = None,
           error: bool = False) -> ToolResult:
    text, truncated = cut(output if output is not None else "")
    if exit_code is not None and exit_code != 0:
        error = True
    return ToolResult(call_id, text, exit_code, error, truncated)


def call(call_id: Optional[str], name: str, arguments: Any) -> ToolCall:
    """A tool call; ``command`` is set when the tool is a shell (by name or argument)."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            arguments = {"input": arguments}
    arguments = arguments if isinstance(arguments, dict) else {"input": arguments}
    command = None
    if name.lower() in SHELL_TOOLS or any(k in arguments for k in SHELL_ARGUMENTS):
        value = next((arguments[k] for k in SHELL_ARGUMENTS if k in arguments), None)
        if isinstance(value, list):  # codex's shell tool: ["bash", "-lc", "..."]
            value = value[-1] if value[:2] in (["bash", "-lc"], ["bash", "-c"]) else \
                " ".join(map(str, value))
        command = value if isinstance(value, str) else None
    return ToolCall(call_id, name, arguments, command)


def iso(value: Any) -> Optional[str]:
    """An ISO 8601 UTC time from an ISO string, epoch seconds or epoch milliseconds."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        seconds = value / 1000 if value > 1e11 else value
        return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds")[:-6] + "Z"
    return str(value)


def seconds(time: Optional[str]) -> Optional[float]:
    """Epoch seconds of an ISO 8601 time (None when there is none or it does not parse)."""
    if not time:
        return None
    try:
        return datetime.fromisoformat(time.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def text_of(content: Any) -> str:
    """The text of a message content: a string or a list of text blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content
                         if isinstance(b, dict) and b.get("type") in ("text", None, "output_text"))
    return ""


def assistant_turn(turns: list[Turn], response_id: Optional[str], time: Optional[str]) -> Turn:
    """The open assistant turn of ``response_id`` (the last turn when it is that response's),
    else a new one."""
    if turns and turns[-1].role == "assistant" and (
            response_id is None or turns[-1].response_id == response_id):
        return turns[-1]
    turns.append(Turn("assistant", time=time, response_id=response_id))
    return turns[-1]


def tool_turn(turns: list[Turn], time: Optional[str]) -> Turn:
    if turns and turns[-1].role == "tool":
        return turns[-1]
    turns.append(Turn("tool", time=time))
    return turns[-1]


def add_text(turn: Turn, text: str) -> None:
    if text:
        turn.text = f"{turn.text}\n{text}" if turn.text else text


def unwrap_shell(command: str) -> str:
    """codex reports ``/bin/bash -lc '<command>'``; the command the model wrote is inside."""
    import shlex

    try:
        parts = shlex.split(command)
    except ValueError:
        return command
    if len(parts) == 3 and parts[0].endswith("bash") and parts[1] in ("-lc", "-c"):
        return parts[2]
    return command
