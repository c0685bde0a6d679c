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
* ``Turn``: one assistant reply (text, tool calls, token counts) independent of protocol.

Writing a ``Turn`` in a protocol's exact response format is ``a2rl.llm.render``'s (the replay
server and protocol translation answer with it); reading requests (``conversation_of``) and
translating them into OpenAI chat completions and the answer back is ``a2rl.llm.parse``'s.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any, Optional

OPENAI_CHAT = "openai_chat"
OPENAI_RESPONSES = "openai_responses"
ANTHROPIC = "anthropic"
GEMINI = "gemini"
PROTOCOLS = (OPENAI_CHAT, OPENAI_RESPONSES, ANTHROPIC, GEMINI)

GEMINI_PREFIX = "/v1beta/models/"
# the Gemini methods an agent may call; with the model one path segment, a path that is not
# exactly ``/v1beta/models/<model>:<method>`` (one with ``/..`` or an encoded slash after the
# method, which an HTTP client would resolve into another endpoint) is no Gemini call
GEMINI_METHODS = ("generateContent", "streamGenerateContent", "countTokens")
GEMINI_PATH = re.compile(re.escape(GEMINI_PREFIX) + r"([^/:]+):(" + "|".join(GEMINI_METHODS)
                         + ")")


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
    if GEMINI_PATH.fullmatch(path):
        return GEMINI
    return None


def gemini_method(path: str) -> tuple[str, str]:
    """(model, method) of a Gemini path like /v1beta/models/gemini-2.5-flash:generateContent;
    ("", "") for a path that is not a Gemini call."""
    match = GEMINI_PATH.fullmatch("/" + path.lstrip("/"))
    return (match[1], match[2]) if match else ("", "")


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


def new_id(prefix: str) -> str:
    """A fresh id in a provider's style: ``prefix`` and 24 hex digits."""
    return f"{prefix}{uuid.uuid4().hex[:24]}"
