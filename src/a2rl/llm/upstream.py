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
)

# the protocols each provider speaks natively
PROVIDER_PROTOCOLS: dict[str, frozenset[str]] = {
    "anthropic": frozenset({ANTHROPIC}),
    "openai": frozenset({OPENAI_CHAT, OPENAI_RESPONSES}),
    "gemini": frozenset({GEMINI}),
    "openai_compatible": frozenset({OPENAI_CHAT, OPENAI_RESPONSES}),
    "replay": frozenset(PROTOCOLS),
}
ANTHROPIC_VERSION = "2023-06-01"
# request headers never forwarded (auth is the proxy's; the rest are per-connection)
DROPPED_REQUEST_HEADERS = {"host", "content-length", "authorization", "x-api-key",
                           "x-goog-api-key", "api-key", "connection", "accept-encoding",
                           "transfer-encoding", "keep-alive", "proxy-authorization"}


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
    """The provider URL for a call to ``path``. OpenAI-style bases carry the version (/v1);
    Anthropic and Gemini bases and the replay server's do not."""
    base = base.rstrip("/")
    if route != "native":
        return f"{base}/chat/completions"
    if protocol == GEMINI:
        _, method = gemini_method(path)
        params = "&".join(f"{k}={v}" for k, v in query.items() if k != "key")
        return f"{base}{GEMINI_PREFIX}{model}:{method}" + (f"?{params}" if params else "")
    if protocol in (OPENAI_CHAT, OPENAI_RESPONSES) and provider != "replay":
        return base + path.removeprefix("/v1")
    return base + path


def upstream_headers(protocol: str, route: str, settings: ProxySettings,
                     client_headers: dict[str, str]) -> dict[str, str]:
    headers = {k: v for k, v in client_headers.items()
               if k.lower() not in DROPPED_REQUEST_HEADERS}
    headers["accept-encoding"] = "identity"
    key = settings.api_key
    if route == "native" and protocol == ANTHROPIC:
        headers.setdefault("anthropic-version", ANTHROPIC_VERSION)
        if key:
            headers["x-api-key"] = key
    elif route == "native" and protocol == GEMINI:
        if key:
            headers["x-goog-api-key"] = key
    else:
        if route != "native":  # a translated call carries none of the client's protocol
            headers = {k: v for k, v in headers.items()
                       if not k.lower().startswith(("anthropic-", "x-goog", "openai-"))}
        if key:
            headers["authorization"] = f"Bearer {key}"
    headers["content-type"] = "application/json"
    return headers
