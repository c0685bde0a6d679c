"""Where the proxy sends an agent's call: the driver's provider, its settings and route, and
the URL and headers of the upstream request (``a2rl.llm.proxy``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from a2rl.llm.wire import (
    ANTHROPIC,
    GEMINI,
    GEMINI_PREFIX,
    OPENAI_CHAT,
    OPENAI_RESPONSES,
    PROTOCOLS,
    gemini_method,
    is_counting,
)

# the protocols each provider speaks natively
PROVIDER_PROTOCOLS: dict[str, frozenset[str]] = {
    "anthropic": frozenset({ANTHROPIC}),
    "openai": frozenset({OPENAI_CHAT, OPENAI_RESPONSES}),
    "gemini": frozenset({GEMINI}),
    "openai_compatible": frozenset({OPENAI_CHAT, OPENAI_RESPONSES}),
    # the local driver's servers: chat completions (vLLM's responses API is left out, so every
    # agent meets the same server, the CPU one included; a2rl.llm.local_driver)
    "local": frozenset({OPENAI_CHAT}),
    "replay": frozenset(PROTOCOLS),
}
ANTHROPIC_VERSION = "2023-06-01"
# the agent's request headers passed on to the provider, an allowlist: what any call may carry,
# and on a native call what its protocol needs (Claude Code's API version and beta features).
# Everything else stays at the proxy: a key of the agent's, an organisation or project to bill
# (openai-organization, x-goog-user-project), cookies, forwarding and per-connection headers.
FORWARDED_HEADERS = frozenset({"accept", "user-agent"})
FORWARDED_NATIVE_HEADERS = {ANTHROPIC: frozenset({"anthropic-version", "anthropic-beta"})}


class ProxyError(RuntimeError):
    """The proxy cannot be configured as asked."""


@dataclass
class ProxySettings:
    """Where calls go and what they cost. ``base_url`` is the provider's API root as its own
    SDK takes it: with the version for OpenAI-style APIs (``https://api.openai.com/v1``),
    without it for Anthropic and Gemini (``https://api.anthropic.com``)."""

    provider: str
    model: str
    base_url: str
    api_key: Optional[str] = None
    openai_base_url: Optional[str] = None
    price_in_per_mtok: float = 0.0
    price_out_per_mtok: float = 0.0
    price_cached_in_per_mtok: Optional[float] = None
    max_tokens: Optional[int] = None
    max_usd: Optional[float] = None
    timeout_s: float = 900.0

    def __post_init__(self) -> None:
        if self.provider not in PROVIDER_PROTOCOLS:
            raise ProxyError(f"driver provider {self.provider!r}; expected one of "
                             f"{sorted(PROVIDER_PROTOCOLS)}")
        if not self.base_url:
            raise ProxyError(f"driver provider {self.provider!r} needs a base_url")

    def route(self, protocol: str) -> tuple[str, str]:
        """(route, base URL) for an agent speaking ``protocol``."""
        if protocol in PROVIDER_PROTOCOLS[self.provider]:
            return "native", self.base_url
        if self.openai_base_url:
            return ("openai_compatible" if protocol == OPENAI_CHAT else "translated",
                    self.openai_base_url)
        if OPENAI_CHAT in PROVIDER_PROTOCOLS[self.provider]:
            return "translated", self.base_url
        raise ProxyError(f"provider {self.provider!r} does not speak {protocol} and has no "
                         f"openai_base_url to translate through")


def upstream_url(protocol: str, route: str, base: str, path: str, model: str,
                 query: dict[str, str], provider: str = "") -> str:
    """The provider URL for a call to ``path`` (a path ``protocol_of`` accepted). It is made of
    the call's fixed path and the driver's model, never of the agent's path, so nothing the
    agent writes in it (``/..``, an encoded slash) can name another endpoint; of its query only
    Gemini's ``alt=sse`` (a stream as server-sent events) goes on. OpenAI-style bases carry the
    version (/v1); Anthropic and Gemini bases and the replay server's do not."""
    return base.rstrip("/") + upstream_path(protocol, route, path, model, provider) + (
        "?alt=sse" if route == "native" and protocol == GEMINI and query.get("alt") == "sse"
        else "")


def upstream_path(protocol: str, route: str, path: str, model: str, provider: str) -> str:
    if route != "native":
        return "/chat/completions"
    if protocol == GEMINI:
        return f"{GEMINI_PREFIX}{model}:{gemini_method(path)[1]}"
    if protocol == ANTHROPIC:
        return "/v1/messages/count_tokens" if is_counting(protocol, path) else "/v1/messages"
    version = "/v1" if provider == "replay" else ""
    return version + ("/chat/completions" if protocol == OPENAI_CHAT else "/responses")


def upstream_headers(protocol: str, route: str, settings: ProxySettings,
                     client_headers: dict[str, str]) -> dict[str, str]:
    forwarded = FORWARDED_HEADERS | (FORWARDED_NATIVE_HEADERS.get(protocol, frozenset())
                                     if route == "native" else frozenset())
    headers = {k: v for k, v in client_headers.items() if k.lower() in forwarded}
    headers["accept-encoding"] = "identity"
    key = settings.api_key
    if route == "native" and protocol == ANTHROPIC:
        headers.setdefault("anthropic-version", ANTHROPIC_VERSION)
        if key:
            headers["x-api-key"] = key
    elif route == "native" and protocol == GEMINI:
        if key:
            headers["x-goog-api-key"] = key
    elif key:
        headers["authorization"] = f"Bearer {key}"
    headers["content-type"] = "application/json"
    return headers
