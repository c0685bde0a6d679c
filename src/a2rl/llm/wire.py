"""The four LLM wire protocols agent CLIs speak, reduced to what the harness needs of them.

Protocols (``PROTOCOLS``) and the routes they are served on, by the proxy and the replay server:

=================  =============================================  ===============================
protocol           route                                          used by
=================  =============================================  ===============================
openai_chat        POST /v1/chat/completions                      mini-swe-agent, OpenHands
                                                                  (LiteLLM), OpenCode
openai_responses   POST /v1/responses                             Codex CLI
anthropic          POST /v1/messages                              Claude Code
gemini             POST /v1beta/models/{model}:{generateContent,  Gemini CLI
                   streamGenerateContent,countTokens}
=================  =============================================  ===============================

What lives here:

* ``protocol_of(path)``: which protocol a request path belongs to;
* ``usage_of(protocol, body)`` / ``UsageTracker``: token counts of a response, whole or streamed
  (server-sent events), as ``Usage``;
* ``Turn``: one assistant reply (text, tool calls, token counts) independent of protocol, with
  ``render_json`` and ``render_sse`` writing it in a protocol's exact response format (the replay
  server and protocol translation answer with these);
* ``conversation_of(protocol, body)``: the request reduced to tool names and the raw text of the
  history (the replay server reads its position from it);
* ``to_chat_request(protocol, body, model)`` and ``turn_of_chat(body)``: translating a request
  into OpenAI chat completions and its answer back, for an agent whose protocol the driver's
  provider does not speak.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Optional

OPENAI_CHAT = "openai_chat"
OPENAI_RESPONSES = "openai_responses"
ANTHROPIC = "anthropic"
GEMINI = "gemini"
PROTOCOLS = (OPENAI_CHAT, OPENAI_RESPONSES, ANTHROPIC, GEMINI)

GEMINI_PREFIX = "/v1beta/models/"


class WireError(ValueError):
    """A request or response that does not have the shape its protocol requires."""


def protocol_of(path: str) -> Optional[str]:
    """The protocol a request path belongs to, or None for paths no protocol uses."""
    path = "/" + path.lstrip("/")
    if path == "/v1/chat/completions":
        return OPENAI_CHAT
    if path == "/v1/responses":
        return OPENAI_RESPONSES
    if path in ("/v1/messages", "/v1/messages/count_tokens"):
        return ANTHROPIC
    if path.startswith(GEMINI_PREFIX) and ":" in path:
        return GEMINI
    return None


def gemini_method(path: str) -> tuple[str, str]:
    """(model, method) of a Gemini path like /v1beta/models/gemini-2.5-flash:generateContent."""
    model, _, method = path[len(GEMINI_PREFIX):].rpartition(":")
    return model, method


def is_counting(protocol: str, path: str) -> bool:
    """Token-counting calls: answered without generating anything."""
    return path.endswith("/count_tokens") or (protocol == GEMINI
                                              and gemini_method(path)[1] == "countTokens")


def is_streaming(protocol: str, path: str, body: dict[str, Any]) -> bool:
    if protocol == GEMINI:
        return gemini_method(path)[1] == "streamGenerateContent"
    return bool(body.get("stream"))


# ----------------------------------------------------------------------------------- usage

@dataclass
class Usage:
    """Tokens of one call. ``input_tokens`` counts every prompt token, cached ones included;
    ``cached_input_tokens`` is the part read from a prompt cache."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    found: bool = False  # the response reported usage at all

    def cost(self, price_in: float, price_out: float, price_cached: Optional[float]) -> float:
        """USD, from prices per million tokens; cached input at ``price_cached`` (None: the
        input price)."""
        cached_price = price_in if price_cached is None else price_cached
        fresh = max(0, self.input_tokens - self.cached_input_tokens)
        return (fresh * price_in + self.cached_input_tokens * cached_price
                + self.output_tokens * price_out) / 1e6


def _int(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def usage_of(protocol: str, body: Any) -> Usage:
    """Usage of a whole (non-streamed) response body; zero, ``found=False`` when absent."""
    if not isinstance(body, dict):
        return Usage()
    if protocol == GEMINI:
        meta = body.get("usageMetadata")
        if not isinstance(meta, dict):
            return Usage()
        return Usage(_int(meta.get("promptTokenCount")),
                     _int(meta.get("candidatesTokenCount")) + _int(meta.get("thoughtsTokenCount")),
                     _int(meta.get("cachedContentTokenCount")), True)
    usage = body.get("usage")
    if not isinstance(usage, dict):
        return Usage()
    if protocol == ANTHROPIC:
        cache_read = _int(usage.get("cache_read_input_tokens"))
        total_in = (_int(usage.get("input_tokens")) + cache_read
                    + _int(usage.get("cache_creation_input_tokens")))
        return Usage(total_in, _int(usage.get("output_tokens")), cache_read, True)
    if protocol == OPENAI_RESPONSES:
        details = usage.get("input_tokens_details") or {}
        return Usage(_int(usage.get("input_tokens")), _int(usage.get("output_tokens")),
                     _int(details.get("cached_tokens")), True)
    details = usage.get("prompt_tokens_details") or {}
    return Usage(_int(usage.get("prompt_tokens")), _int(usage.get("completion_tokens")),
                 _int(details.get("cached_tokens")), True)


class UsageTracker:
    """Reads usage from a stream of server-sent events as they pass through, unchanged.

    Feed it the raw bytes in any chunking; ``usage`` is what the stream reported so far
    (Anthropic: message_start then message_delta; OpenAI chat: the usage chunk; responses:
    response.completed; Gemini: the last chunk's usageMetadata)."""

    def __init__(self, protocol: str):
        self.protocol = protocol
        self.usage = Usage()
        self.events = 0
        self.error: Optional[str] = None
        # set once the protocol's last event has passed: a client that hangs up after it
        # has its whole answer (Codex does) is not an interrupted call
        self.finished = False
        self._buffer = b""

    def feed(self, chunk: bytes) -> None:
        self._buffer += chunk.replace(b"\r\n", b"\n")
        while b"\n\n" in self._buffer:
            raw, self._buffer = self._buffer.split(b"\n\n", 1)
            self._event(raw)

    def close(self) -> None:
        if self._buffer.strip():
            self._event(self._buffer)
        self._buffer = b""

    def _event(self, raw: bytes) -> None:
        data = b"\n".join(line[5:].lstrip() for line in raw.split(b"\n")
                          if line.startswith(b"data:"))
        if data.strip() == b"[DONE]":
            self.finished = True
            return
        if not data:
            return
        try:
            event = json.loads(data)
        except ValueError:
            return
        if not isinstance(event, dict):
            return
        self.events += 1
        if isinstance(event.get("error"), dict):
            self.error = str(event["error"].get("message") or event["error"])[:500]
        if self.protocol == ANTHROPIC:
            kind = event.get("type")
            if kind == "message_start":
                self.usage = usage_of(ANTHROPIC, event.get("message") or {})
            elif kind == "message_delta" and isinstance(event.get("usage"), dict):
                delta = event["usage"]
                if "output_tokens" in delta:
                    self.usage.output_tokens = _int(delta["output_tokens"])
                if "input_tokens" in delta:  # some servers only report input at the end
                    merged = usage_of(ANTHROPIC, {"usage": delta})
                    self.usage.input_tokens = max(self.usage.input_tokens, merged.input_tokens)
                self.usage.found = True
            elif kind == "error":
                self.error = str(event.get("error"))[:500]
            self.finished = self.finished or kind == "message_stop"
        elif self.protocol == OPENAI_RESPONSES:
            if event.get("type") in ("response.completed", "response.incomplete",
                                     "response.failed"):
                self.finished = True
                self.usage = usage_of(OPENAI_RESPONSES, event.get("response") or {})
                failure = (event.get("response") or {}).get("error")
                if failure:
                    self.error = str(failure)[:500]
        else:
            found = usage_of(self.protocol, event)
            if found.found:
                self.usage = found
            if self.protocol == GEMINI:
                self.finished = self.finished or any(
                    isinstance(c, dict) and c.get("finishReason")
                    for c in event.get("candidates") or [])


# ----------------------------------------------------------------------------------- turns

@dataclass
class ToolCall:
    name: str
    arguments: dict[str, Any]
    id: str = field(default_factory=lambda: f"call_{uuid.uuid4().hex[:24]}")


@dataclass
class Turn:
    """One assistant reply in no particular protocol."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    model: str = "replay"


def _new_id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


def _sse(data: Any, event: Optional[str] = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


def render_json(protocol: str, turn: Turn) -> dict[str, Any]:
    """``turn`` as the protocol's non-streamed response body."""
    if protocol == OPENAI_CHAT:
        message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
        if turn.tool_calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function",
                 "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                for c in turn.tool_calls]
        return {"id": _new_id("chatcmpl-"), "object": "chat.completion",
                "created": int(time.time()), "model": turn.model,
                "choices": [{"index": 0, "message": message, "logprobs": None,
                             "finish_reason": "tool_calls" if turn.tool_calls else "stop"}],
                "usage": {"prompt_tokens": turn.input_tokens,
                          "completion_tokens": turn.output_tokens,
                          "total_tokens": turn.input_tokens + turn.output_tokens}}
    if protocol == ANTHROPIC:
        content: list[dict[str, Any]] = [{"type": "text", "text": turn.text}] if turn.text else []
        content += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
                    for c in turn.tool_calls]
        return {"id": _new_id("msg_"), "type": "message", "role": "assistant",
                "model": turn.model, "content": content,
                "stop_reason": "tool_use" if turn.tool_calls else "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": turn.input_tokens,
                          "output_tokens": turn.output_tokens,
                          "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}
    if protocol == OPENAI_RESPONSES:
        return _response_object(turn, _response_items(turn), "completed")
    if protocol == GEMINI:
        return _gemini_chunk(turn, _gemini_parts(turn), final=True)
    raise WireError(f"protocol {protocol!r}; expected one of {PROTOCOLS}")


def render_sse(protocol: str, turn: Turn, include_usage: bool = True) -> Iterator[bytes]:
    """``turn`` as the protocol's streamed response: server-sent events, byte for byte what the
    provider would send (``include_usage``: the OpenAI chat usage chunk)."""
    if protocol == OPENAI_CHAT:
        yield from _chat_sse(turn, include_usage)
    elif protocol == ANTHROPIC:
        yield from _anthropic_sse(turn)
    elif protocol == OPENAI_RESPONSES:
        yield from _responses_sse(turn)
    elif protocol == GEMINI:
        parts = _gemini_parts(turn)
        if turn.text:  # text first, then the rest with the usage, as Gemini streams it
            yield _sse(_gemini_chunk(turn, parts[:1], final=False))
            parts = parts[1:]
        yield _sse(_gemini_chunk(turn, parts, final=True))
    else:
        raise WireError(f"protocol {protocol!r}; expected one of {PROTOCOLS}")


def _chat_sse(turn: Turn, include_usage: bool) -> Iterator[bytes]:
    base = {"id": _new_id("chatcmpl-"), "object": "chat.completion.chunk",
            "created": int(time.time()), "model": turn.model}

    def chunk(delta: dict[str, Any], finish: Optional[str] = None) -> bytes:
        return _sse(base | {"choices": [{"index": 0, "delta": delta, "logprobs": None,
                                         "finish_reason": finish}]})

    yield chunk({"role": "assistant", "content": ""})
    if turn.text:
        yield chunk({"content": turn.text})
    for index, call in enumerate(turn.tool_calls):
        yield chunk({"tool_calls": [{"index": index, "id": call.id, "type": "function",
                                     "function": {"name": call.name, "arguments": ""}}]})
        yield chunk({"tool_calls": [{"index": index,
                                     "function": {"arguments": json.dumps(call.arguments)}}]})
    yield chunk({}, "tool_calls" if turn.tool_calls else "stop")
    if include_usage:
        yield _sse(base | {"choices": [], "usage": {
            "prompt_tokens": turn.input_tokens, "completion_tokens": turn.output_tokens,
            "total_tokens": turn.input_tokens + turn.output_tokens}})
    yield b"data: [DONE]\n\n"


def _anthropic_sse(turn: Turn) -> Iterator[bytes]:
    message = render_json(ANTHROPIC, turn)
    start = message | {"content": [], "stop_reason": None,
                       "usage": message["usage"] | {"output_tokens": 1}}
    yield _sse({"type": "message_start", "message": start}, "message_start")
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            opened, delta = {"type": "text", "text": ""}, {"type": "text_delta",
                                                            "text": block["text"]}
        else:
            opened = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        yield _sse({"type": "content_block_start", "index": index, "content_block": opened},
                   "content_block_start")
        yield _sse({"type": "content_block_delta", "index": index, "delta": delta},
                   "content_block_delta")
        yield _sse({"type": "content_block_stop", "index": index}, "content_block_stop")
    yield _sse({"type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": turn.output_tokens}}, "message_delta")
    yield _sse({"type": "message_stop"}, "message_stop")


def _response_items(turn: Turn) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if turn.text:
        items.append({"type": "message", "id": _new_id("msg_"), "status": "completed",
                      "role": "assistant",
                      "content": [{"type": "output_text", "text": turn.text,
                                   "annotations": []}]})
    items += [{"type": "function_call", "id": _new_id("fc_"), "call_id": c.id,
               "name": c.name, "arguments": json.dumps(c.arguments), "status": "completed"}
              for c in turn.tool_calls]
    return items


def _response_object(turn: Turn, output: list[dict[str, Any]], status: str,
                     response_id: Optional[str] = None) -> dict[str, Any]:
    return {"id": response_id or _new_id("resp_"), "object": "response",
            "created_at": int(time.time()), "status": status, "model": turn.model,
            "output": output, "error": None, "incomplete_details": None,
            "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "usage": None if status != "completed" else {
                "input_tokens": turn.input_tokens, "output_tokens": turn.output_tokens,
                "total_tokens": turn.input_tokens + turn.output_tokens,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0}}}


def _responses_sse(turn: Turn) -> Iterator[bytes]:
    response_id = _new_id("resp_")
    items = _response_items(turn)
    sequence = iter(range(10**6))

    def event(kind: str, **data: Any) -> bytes:
        return _sse({"type": kind, "sequence_number": next(sequence), **data}, kind)

    yield event("response.created",
                response=_response_object(turn, [], "in_progress", response_id))
    yield event("response.in_progress",
                response=_response_object(turn, [], "in_progress", response_id))
    for index, item in enumerate(items):
        if item["type"] == "message":
            text = item["content"][0]["text"]
            yield event("response.output_item.added", output_index=index,
                        item=item | {"status": "in_progress", "content": []})
            part = {"type": "output_text", "text": "", "annotations": []}
            yield event("response.content_part.added", item_id=item["id"],
                        output_index=index, content_index=0, part=part)
            yield event("response.output_text.delta", item_id=item["id"], output_index=index,
                        content_index=0, delta=text)
            yield event("response.output_text.done", item_id=item["id"], output_index=index,
                        content_index=0, text=text)
            yield event("response.content_part.done", item_id=item["id"], output_index=index,
                        content_index=0, part=part | {"text": text})
        else:
            yield event("response.output_item.added", output_index=index,
                        item=item | {"status": "in_progress", "arguments": ""})
            yield event("response.function_call_arguments.delta", item_id=item["id"],
                        output_index=index, delta=item["arguments"])
            yield event("response.function_call_arguments.done", item_id=item["id"],
                        output_index=index, arguments=item["arguments"])
        yield event("response.output_item.done", output_index=index, item=item)
    yield event("response.completed",
                response=_response_object(turn, items, "completed", response_id))


def _gemini_parts(turn: Turn) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = [{"text": turn.text}] if turn.text else []
    parts += [{"functionCall": {"id": c.id, "name": c.name, "args": c.arguments}}
              for c in turn.tool_calls]
    return parts or [{"text": ""}]


def _gemini_chunk(turn: Turn, parts: list[dict[str, Any]], final: bool) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if final:
        candidate["finishReason"] = "STOP"
    return {"candidates": [candidate],
            "usageMetadata": {"promptTokenCount": turn.input_tokens,
                              "candidatesTokenCount": turn.output_tokens if final else 0,
                              "totalTokenCount": turn.input_tokens
                              + (turn.output_tokens if final else 0)},
            "modelVersion": turn.model, "responseId": _new_id("")}


def render_error(protocol: str, status: int, message: str, kind: str) -> dict[str, Any]:
    """An error body in the protocol's own shape, so clients show ``message``."""
    if protocol == ANTHROPIC:
        return {"type": "error", "error": {"type": kind, "message": message}}
    if protocol == GEMINI:
        return {"error": {"code": status, "message": message, "status": kind.upper()}}
    return {"error": {"message": message, "type": kind, "code": kind, "param": None}}


def count_tokens_answer(protocol: str, body: dict[str, Any]) -> dict[str, Any]:
    """An estimate for a token-counting call (about four characters a token)."""
    tokens = estimate_tokens(json.dumps(body))
    if protocol == GEMINI:
        return {"totalTokens": tokens}
    return {"input_tokens": tokens}


def estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4)


# ---------------------------------------------------------------------------- conversations

@dataclass
class Conversation:
    """A request reduced to what replay needs: the tools offered (name -> JSON schema of the
    arguments) and the whole request as text (the history, tool results included)."""

    tools: dict[str, dict[str, Any]]
    text: str


def conversation_of(protocol: str, body: dict[str, Any]) -> Conversation:
    tools: dict[str, dict[str, Any]] = {}
    for tool in body.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        if protocol == OPENAI_CHAT and isinstance(tool.get("function"), dict):
            tools[tool["function"].get("name", "")] = tool["function"].get("parameters") or {}
        elif protocol == OPENAI_RESPONSES and tool.get("type") == "function":
            tools[tool.get("name", "")] = tool.get("parameters") or {}
        elif protocol == ANTHROPIC and "input_schema" in tool:
            tools[tool.get("name", "")] = tool.get("input_schema") or {}
        elif protocol == GEMINI:
            for decl in tool.get("functionDeclarations") or []:
                tools[decl.get("name", "")] = (decl.get("parametersJsonSchema")
                                               or decl.get("parameters") or {})
    return Conversation(tools=tools, text=json.dumps(body))


# ------------------------------------------------------------------------------ translation

def _text_of(content: Any) -> str:
    """Plain text of a content value: a string or a list of typed parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict):
                if isinstance(part.get("text"), str):
                    texts.append(part["text"])
                elif "content" in part:
                    texts.append(_text_of(part["content"]))
        return "\n".join(t for t in texts if t)
    if isinstance(content, dict):
        return json.dumps(content)
    return "" if content is None else str(content)


def _chat_tool(name: str, description: str, parameters: Any) -> dict[str, Any]:
    return {"type": "function",
            "function": {"name": name, "description": description or "",
                         "parameters": parameters or {"type": "object", "properties": {}}}}


def to_chat_request(protocol: str, body: dict[str, Any], model: str,
                    path: str = "") -> dict[str, Any]:
    """An OpenAI chat completions request (not streamed) equivalent to ``body``."""
    if protocol == OPENAI_CHAT:
        return body | {"model": model, "stream": False}
    converters = {ANTHROPIC: _anthropic_to_chat, OPENAI_RESPONSES: _responses_to_chat,
                  GEMINI: _gemini_to_chat}
    if protocol not in converters:
        raise WireError(f"protocol {protocol!r}; expected one of {PROTOCOLS}")
    messages, tools, max_tokens, temperature = converters[protocol](body)
    request: dict[str, Any] = {"model": model, "messages": messages, "stream": False}
    if tools:
        request["tools"] = tools
    if max_tokens:
        request["max_completion_tokens"] = int(max_tokens)
    if isinstance(temperature, (int, float)):
        request["temperature"] = temperature
    return request


def _anthropic_to_chat(body: dict[str, Any]):
    messages: list[dict[str, Any]] = []
    system = _text_of(body.get("system"))
    if system:
        messages.append({"role": "system", "content": system})
    for message in body.get("messages") or []:
        role, content = message.get("role"), message.get("content")
        if isinstance(content, str):
            messages.append({"role": role, "content": content})
            continue
        texts, calls = [], []
        for block in content or []:
            kind = block.get("type")
            if kind == "text":
                texts.append(block.get("text", ""))
            elif kind == "tool_use":
                calls.append({"id": block["id"], "type": "function",
                              "function": {"name": block["name"],
                                           "arguments": json.dumps(block.get("input") or {})}})
            elif kind == "tool_result":
                result = _text_of(block.get("content"))
                if block.get("is_error"):
                    result = f"[error] {result}"
                messages.append({"role": "tool", "tool_call_id": block["tool_use_id"],
                                 "content": result})
        if role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) or None}
            if calls:
                entry["tool_calls"] = calls
            messages.append(entry)
        elif texts:
            messages.append({"role": "user", "content": "\n".join(texts)})
    tools = [_chat_tool(t["name"], t.get("description", ""), t.get("input_schema"))
             for t in body.get("tools") or [] if "input_schema" in t]
    return messages, tools, body.get("max_tokens"), body.get("temperature")


def _responses_to_chat(body: dict[str, Any]):
    messages: list[dict[str, Any]] = []
    if body.get("instructions"):
        messages.append({"role": "system", "content": _text_of(body["instructions"])})
    items = body.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    for item in items or []:
        kind = item.get("type", "message")
        if kind == "message":
            role = {"developer": "system"}.get(item.get("role"), item.get("role", "user"))
            messages.append({"role": role, "content": _text_of(item.get("content"))})
        elif kind in ("function_call", "custom_tool_call"):
            arguments = item.get("arguments", item.get("input", ""))
            call = {"id": item["call_id"], "type": "function",
                    "function": {"name": item["name"], "arguments": arguments
                                 if isinstance(arguments, str) else json.dumps(arguments)}}
            if messages and messages[-1]["role"] == "assistant":
                messages[-1].setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind in ("function_call_output", "custom_tool_call_output"):
            messages.append({"role": "tool", "tool_call_id": item["call_id"],
                             "content": _text_of(item.get("output"))})
    tools = [_chat_tool(t["name"], t.get("description", ""), t.get("parameters"))
             for t in body.get("tools") or [] if t.get("type") == "function"]
    return messages, tools, body.get("max_output_tokens"), body.get("temperature")


def _gemini_to_chat(body: dict[str, Any]):
    messages: list[dict[str, Any]] = []
    system = body.get("systemInstruction") or body.get("system_instruction")
    if system:
        messages.append({"role": "system", "content": _text_of((system or {}).get("parts"))})
    pending: dict[str, list[str]] = {}  # function name -> ids of calls not answered yet
    for content in body.get("contents") or []:
        role = "assistant" if content.get("role") == "model" else "user"
        texts, calls = [], []
        for part in content.get("parts") or []:
            if "text" in part and not part.get("thought"):
                texts.append(part["text"])
            elif "functionCall" in part:
                call = part["functionCall"]
                call_id = call.get("id") or _new_id("call_")
                pending.setdefault(call["name"], []).append(call_id)
                calls.append({"id": call_id, "type": "function",
                              "function": {"name": call["name"],
                                           "arguments": json.dumps(call.get("args") or {})}})
            elif "functionResponse" in part:
                answer = part["functionResponse"]
                ids = pending.get(answer.get("name"), [])
                call_id = answer.get("id") or (ids.pop(0) if ids else _new_id("call_"))
                messages.append({"role": "tool", "tool_call_id": call_id,
                                 "content": json.dumps(answer.get("response"))})
        if role == "assistant" and (texts or calls):
            entry: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) or None}
            if calls:
                entry["tool_calls"] = calls
            messages.append(entry)
        elif texts:
            messages.append({"role": "user", "content": "\n".join(texts)})
    tools = [_chat_tool(d["name"], d.get("description", ""),
                        d.get("parametersJsonSchema") or d.get("parameters"))
             for t in body.get("tools") or [] for d in t.get("functionDeclarations") or []]
    config = body.get("generationConfig") or {}
    return messages, tools, config.get("maxOutputTokens"), config.get("temperature")


def turn_of_chat(body: dict[str, Any]) -> Turn:
    """The assistant reply of an OpenAI chat completions response."""
    try:
        message = body["choices"][0]["message"]
    except (KeyError, IndexError, TypeError) as err:
        raise WireError(f"not a chat completions response: {str(body)[:300]}") from err
    calls = []
    for call in message.get("tool_calls") or []:
        try:
            arguments = json.loads(call["function"].get("arguments") or "{}")
        except ValueError:
            arguments = {"_raw": call["function"].get("arguments")}
        calls.append(ToolCall(call["function"]["name"], arguments, call.get("id") or
                              _new_id("call_")))
    usage = usage_of(OPENAI_CHAT, body)
    return Turn(text=_text_of(message.get("content")), tool_calls=calls,
                input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                model=str(body.get("model", "")))
