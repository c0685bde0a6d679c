"""Reading an agent's request: ``conversation_of`` reduces it to the tools offered and the
history as text (the replay server reads its position from it); ``to_chat_request`` translates
it into OpenAI chat completions and ``turn_of_chat`` reads that answer back as a ``Turn``, for an
agent whose protocol the driver's provider does not speak.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from a2rl.llm.wire import (
    ANTHROPIC,
    GEMINI,
    OPENAI_CHAT,
    OPENAI_RESPONSES,
    PROTOCOLS,
    ToolCall,
    Turn,
    WireError,
    new_id,
    usage_of,
)

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

def text_of(content: Any) -> str:
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
                    texts.append(text_of(part["content"]))
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


def _chat_turn(role: str, texts: list[str], calls: list[dict[str, Any]],
               keep_empty: bool) -> list[dict[str, Any]]:
    """One turn's text parts and tool calls as Chat Completions messages: an assistant message
    (kept even when empty with ``keep_empty``, as Anthropic turns are), or a user message."""
    if role == "assistant":
        if not (texts or calls or keep_empty):
            return []
        entry: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) or None}
        if calls:
            entry["tool_calls"] = calls
        return [entry]
    return [{"role": "user", "content": "\n".join(texts)}] if texts else []


def _anthropic_to_chat(body: dict[str, Any]):
    messages: list[dict[str, Any]] = []
    system = text_of(body.get("system"))
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
                result = text_of(block.get("content"))
                if block.get("is_error"):
                    result = f"[error] {result}"
                messages.append({"role": "tool", "tool_call_id": block["tool_use_id"],
                                 "content": result})
        messages += _chat_turn(role, texts, calls, keep_empty=True)
    tools = [_chat_tool(t["name"], t.get("description", ""), t.get("input_schema"))
             for t in body.get("tools") or [] if "input_schema" in t]
    return messages, tools, body.get("max_tokens"), body.get("temperature")


def _responses_to_chat(body: dict[str, Any]):
    messages: list[dict[str, Any]] = []
    if body.get("instructions"):
        messages.append({"role": "system", "content": text_of(body["instructions"])})
    items = body.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    for item in items or []:
        kind = item.get("type", "message")
        if kind == "message":
            role = {"developer": "system"}.get(item.get("role"), item.get("role", "user"))
            messages.append({"role": role, "content": text_of(item.get("content"))})
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
                             "content": text_of(item.get("output"))})
    tools = [_chat_tool(t["name"], t.get("description", ""), t.get("parameters"))
             for t in body.get("tools") or [] if t.get("type") == "function"]
    return messages, tools, body.get("max_output_tokens"), body.get("temperature")


def _gemini_to_chat(body: dict[str, Any]):
    messages: list[dict[str, Any]] = []
    system = body.get("systemInstruction") or body.get("system_instruction")
    if system:
        messages.append({"role": "system", "content": text_of((system or {}).get("parts"))})
    pending: dict[str, list[str]] = {}  # function name -> ids of calls not answered yet
    for content in body.get("contents") or []:
        role = "assistant" if content.get("role") == "model" else "user"
        texts, calls = [], []
        for part in content.get("parts") or []:
            if "text" in part and not part.get("thought"):
                texts.append(part["text"])
            elif "functionCall" in part:
                call = part["functionCall"]
                call_id = call.get("id") or new_id("call_")
                pending.setdefault(call["name"], []).append(call_id)
                calls.append({"id": call_id, "type": "function",
                              "function": {"name": call["name"],
                                           "arguments": json.dumps(call.get("args") or {})}})
            elif "functionResponse" in part:
                answer = part["functionResponse"]
                ids = pending.get(answer.get("name"), [])
                call_id = answer.get("id") or (ids.pop(0) if ids else new_id("call_"))
                messages.append({"role": "tool", "tool_call_id": call_id,
                                 "content": json.dumps(answer.get("response"))})
        messages += _chat_turn(role, texts, calls, keep_empty=False)
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
                              new_id("call_")))
    usage = usage_of(OPENAI_CHAT, body)
    return Turn(text=text_of(message.get("content")), tool_calls=calls,
                input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                model=str(body.get("model", "")))
