"""Writing a ``Turn`` (``a2rl.llm.wire``) in a protocol's exact response format: a whole JSON
body (``render_json``), server-sent events byte for byte as the provider streams them
(``render_sse``), an error body clients show (``render_error``), and the answer to a
token-counting call.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any, Optional

from fastapi.responses import JSONResponse, Response, StreamingResponse

from a2rl.llm.wire import (
    ANTHROPIC,
    GEMINI,
    OPENAI_CHAT,
    OPENAI_RESPONSES,
    PROTOCOLS,
    Turn,
    WireError,
    new_id,
)


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
        return {"id": new_id("chatcmpl-"), "object": "chat.completion",
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
        return {"id": new_id("msg_"), "type": "message", "role": "assistant",
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
    base = {"id": new_id("chatcmpl-"), "object": "chat.completion.chunk",
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
        items.append({"type": "message", "id": new_id("msg_"), "status": "completed",
                      "role": "assistant",
                      "content": [{"type": "output_text", "text": turn.text,
                                   "annotations": []}]})
    items += [{"type": "function_call", "id": new_id("fc_"), "call_id": c.id,
               "name": c.name, "arguments": json.dumps(c.arguments), "status": "completed"}
              for c in turn.tool_calls]
    return items


def _response_object(turn: Turn, output: list[dict[str, Any]], status: str,
                     response_id: Optional[str] = None) -> dict[str, Any]:
    return {"id": response_id or new_id("resp_"), "object": "response",
            "created_at": int(time.time()), "status": status, "model": turn.model,
            "output": output, "error": None, "incomplete_details": None,
            "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "usage": None if status != "completed" else {
                "input_tokens": turn.input_tokens, "output_tokens": turn.output_tokens,
                "total_tokens": turn.input_tokens + turn.output_tokens,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0}}}


def _responses_sse(turn: Turn) -> Iterator[bytes]:
    response_id = new_id("resp_")
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
            "modelVersion": turn.model, "responseId": new_id("")}


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


def turn_response(protocol: str, turn: Turn, stream: bool, gemini_sse: bool,
                  include_usage: bool = True) -> Response:
    """The HTTP answer carrying ``turn``: an event stream when the request streams, the same
    events in one body for Gemini's ``alt=sse``, else one JSON object."""
    if stream:
        return StreamingResponse(render_sse(protocol, turn, include_usage),
                                 media_type="text/event-stream")
    if protocol == GEMINI and gemini_sse:
        return Response(b"".join(render_sse(protocol, turn)), media_type="text/event-stream")
    return JSONResponse(render_json(protocol, turn))
