"""The replay driver: a local LLM server that answers from a script, in the real wire protocols.

It lets a real agent CLI run end to end without a paid API. Only the model is scripted: the
agent process, the sandbox, the recording proxy, the grader and the ledger are the real ones.
The proxy forwards to it exactly as to a provider (``ReplayServer.url`` is the driver's base
URL), so streaming, usage accounting and ``llm_calls.jsonl`` are exercised as well.

A script (YAML) is a list of assistant turns::

    turns:
      - text: "I look at the workspace first."     # what the assistant says (optional)
        shell: "ls -la && head -40 description.md" # a shell command, as a call of the agent's
                                                   # own shell tool (Bash, bash, shell, ...)
      - tool: {name: Read, arguments: {file_path: /workspace/description.md}}
      - text: "Done."                              # no call: the agent's final answer

Each reply carries its step number, as ``[replay step K]`` in the text and ``replayK_`` in tool
call ids, so the server knows its position from the conversation the agent sends back (no
server-side state; side calls of a CLI, e.g. title generation, do not advance the script).
Requests that offer no tools are side calls and get a short plain answer. After the last turn
the server keeps answering with a final message and no tool call.

Shell commands become a call of the first tool the request offers among ``SHELL_TOOLS`` (else
any tool with a ``command`` or ``cmd`` argument); the arguments are built from the tool's JSON
schema (a string or an argv list, generous timeouts, required descriptions filled in).
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import yaml
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from a2rl.llm.loopback import LoopbackServer, Served
from a2rl.llm.parse import conversation_of
from a2rl.llm.render import (
    count_tokens_answer,
    estimate_tokens,
    render_error,
    turn_response,
)
from a2rl.llm.wire import (
    OPENAI_CHAT,
    ToolCall,
    Turn,
    is_counting,
    is_streaming,
    protocol_of,
)

# shell tools of the agent CLIs, in the order they are preferred
SHELL_TOOLS = ("Bash", "bash", "run_shell_command", "exec_command", "shell", "shell_command",
               "execute_bash", "terminal", "execute_command")
STEP_TEXT = re.compile(r"\[replay step (\d+)\]")
STEP_ID = re.compile(r"replay(\d+)_")
LONG_MS = 600_000  # ten minutes, the longest most CLIs accept for one command
SIDE_ANSWER = "OK."


class ReplayScriptError(ValueError):
    """A replay script that is missing or malformed."""


@dataclass
class ReplayStep:
    text: str = ""
    shell: Optional[str] = None
    tool: Optional[dict[str, Any]] = None

    @classmethod
    def from_dict(cls, raw: Any, index: int) -> "ReplayStep":
        if not isinstance(raw, dict) or not set(raw) <= {"text", "shell", "tool"}:
            raise ReplayScriptError(f"turn {index}: {raw!r}; expected a mapping with text, "
                                    f"shell and/or tool")
        if raw.get("shell") is not None and raw.get("tool") is not None:
            raise ReplayScriptError(f"turn {index} has both shell and tool; use two turns")
        tool = raw.get("tool")
        if tool is not None and (not isinstance(tool, dict) or "name" not in tool):
            raise ReplayScriptError(f"turn {index}: tool={tool!r}; expected "
                                    f"{{name: ..., arguments: {{...}}}}")
        return cls(text=str(raw.get("text") or ""), shell=raw.get("shell"), tool=tool)


@dataclass
class ReplayScript:
    steps: list[ReplayStep]
    source: str = "<inline>"

    @classmethod
    def load(cls, path: Path) -> "ReplayScript":
        path = Path(path)
        if not path.is_file():
            raise ReplayScriptError(f"replay script {path} does not exist")
        return cls.parse(yaml.safe_load(path.read_text()), str(path))

    @classmethod
    def parse(cls, raw: Any, source: str = "<inline>") -> "ReplayScript":
        turns = raw.get("turns") if isinstance(raw, dict) else None
        if not isinstance(turns, list) or not turns:
            raise ReplayScriptError(f"{source}: expected a mapping with a non-empty list "
                                    f"`turns`")
        return cls([ReplayStep.from_dict(t, i) for i, t in enumerate(turns)], source)


def shell_arguments(schema: dict[str, Any], command: str) -> dict[str, Any]:
    """Arguments for a shell tool with JSON schema ``schema`` that run ``command``."""
    props = schema.get("properties") or {}
    key = "command" if "command" in props or "cmd" not in props else "cmd"
    wants_list = (props.get(key) or {}).get("type") == "array"
    args: dict[str, Any] = {key: ["bash", "-lc", command] if wants_list else command}
    for name in ("timeout", "timeout_ms", "yield_time_ms"):
        if (props.get(name) or {}).get("type") in ("integer", "number"):
            args[name] = LONG_MS
    for name in schema.get("required") or []:
        if name not in args:
            args[name] = placeholder(schema, props.get(name) or {})
    return args


def placeholder(schema: dict[str, Any], prop: dict[str, Any]) -> Any:
    """A valid value for a required argument the script does not set: an enum's first value
    (OpenHands' ``security_risk`` is one, often behind a ``$ref``), else one of its type."""
    ref = prop.get("$ref", "")
    if ref.startswith("#/"):
        target: Any = schema
        for part in ref[2:].split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        prop = {**target, **{k: v for k, v in prop.items() if k != "$ref"}}
    if prop.get("enum"):
        return prop["enum"][0]
    return {"boolean": False, "integer": 0, "number": 0}.get(prop.get("type"), "replay step")


def pick_shell_tool(tools: dict[str, dict[str, Any]]) -> Optional[str]:
    for name in SHELL_TOOLS:
        if name in tools:
            return name
    for name, schema in tools.items():
        if {"command", "cmd"} & set((schema or {}).get("properties") or {}):
            return name
    return None


@dataclass
class ServedCall:
    protocol: str
    path: str
    step: Optional[int]  # None for side calls and counting calls
    tool: Optional[str] = None


@dataclass
class ReplayBackend:
    """The script's answers, without HTTP (the server below wraps it)."""

    script: ReplayScript
    model: str = "replay"
    served: list[ServedCall] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, protocol: str, path: str, body: dict[str, Any]) -> Turn:
        conversation = conversation_of(protocol, body)
        tokens_in = estimate_tokens(conversation.text)
        if not conversation.tools:
            self._note(ServedCall(protocol, path, None))
            return Turn(text=SIDE_ANSWER, input_tokens=tokens_in, output_tokens=1,
                        model=self.model)
        seen = [int(n) for n in STEP_TEXT.findall(conversation.text)
                + STEP_ID.findall(conversation.text)]
        step = max(seen) + 1 if seen else 0
        marker = f"[replay step {step}]"
        if step >= len(self.script.steps):
            self._note(ServedCall(protocol, path, step))
            return Turn(text=f"{marker} The replay script has no more steps; stopping.",
                        input_tokens=tokens_in, output_tokens=12, model=self.model)
        planned = self.script.steps[step]
        calls: list[ToolCall] = []
        if planned.shell is not None:
            name = pick_shell_tool(conversation.tools)
            if name is None:
                raise ReplayScriptError(
                    f"step {step} runs a shell command but the agent offers no shell tool "
                    f"(tools: {sorted(conversation.tools)})")
            calls.append(ToolCall(name, shell_arguments(conversation.tools[name],
                                                        planned.shell),
                                  f"call_replay{step}_{len(self.served)}"))
        elif planned.tool is not None:
            calls.append(ToolCall(str(planned.tool["name"]),
                                  dict(planned.tool.get("arguments") or {}),
                                  f"call_replay{step}_{len(self.served)}"))
        if protocol == "anthropic":
            for call in calls:
                call.id = "toolu_" + call.id
        text = f"{marker} {planned.text}".strip()
        self._note(ServedCall(protocol, path, step, calls[0].name if calls else None))
        return Turn(text=text, tool_calls=calls, input_tokens=tokens_in,
                    output_tokens=estimate_tokens(text + json.dumps(
                        [c.arguments for c in calls])), model=self.model)

    def _note(self, call: ServedCall) -> None:
        with self._lock:
            self.served.append(call)


def create_app(backend: ReplayBackend) -> FastAPI:
    app = FastAPI(title="a2rl replay driver", docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/v1/models")
    def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": backend.model, "object": "model",
                                             "owned_by": "a2rl-replay"}]}

    @app.post("/{path:path}")
    async def generate(path: str, request: Request):
        path = "/" + path
        protocol = protocol_of(path)
        if protocol is None:
            return JSONResponse({"error": {"message": f"no such route {path}"}}, 404)
        try:
            body = json.loads(await request.body() or b"{}")
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return JSONResponse(render_error(protocol, 400, "the body must be a JSON object",
                                             "invalid_request_error"), 400)
        if is_counting(protocol, path):
            return JSONResponse(count_tokens_answer(protocol, body))
        try:
            turn = backend.answer(protocol, path, body)
        except ReplayScriptError as err:
            return JSONResponse(render_error(protocol, 400, str(err),
                                             "invalid_request_error"), 400)
        include_usage = protocol != OPENAI_CHAT or bool(
            (body.get("stream_options") or {}).get("include_usage"))
        return turn_response(protocol, turn, is_streaming(protocol, path, body),
                             request.query_params.get("alt") == "sse", include_usage)

    return app


class ReplayServer(Served):
    """A ReplayBackend served on 127.0.0.1 (free port) from a thread; ``url`` is the base URL
    a driver gives its provider (OpenAI-style clients add /v1)."""

    def __init__(self, script: ReplayScript, model: str = "replay"):
        self.backend = ReplayBackend(script, model)
        self._server = LoopbackServer(create_app(self.backend), "a2rl-replay")

