"""A hostile agent against the real recording proxy (issue #28, finding 6): the proxy holds the
real API key, so every request it sends upstream must be one of its protocol's calls and carry
only headers on its allowlist. The agent writes its requests byte for byte on a real socket
(an HTTP client of its own would resolve ``..`` before sending); the provider is a local fake
on a real socket that speaks the real protocols, answers any path it is sent (as a provider's
file API would) and records the raw path, query and headers of each request."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from a2rl.llm.loopback import LoopbackServer
from a2rl.llm.proxy import LLMProxy
from a2rl.llm.render import render_json, render_sse
from a2rl.llm.upstream import ProxySettings
from a2rl.llm.wire import ANTHROPIC, GEMINI, OPENAI_CHAT, OPENAI_RESPONSES, Turn

REAL_KEY = "sk-real-provider-key"
DUMMY = "a2rl-dummy-key"
MODEL = "driver-model"
# the calls each provider may be sent, and nothing else (paths as the provider reads them)
ALLOWED_PATHS = {
    "gemini": {f"/v1beta/models/{MODEL}:{method}"
               for method in ("generateContent", "streamGenerateContent", "countTokens")},
    "openai": {"/v1/chat/completions", "/v1/responses"},
    "anthropic": {"/v1/messages", "/v1/messages/count_tokens"},
}
# the agent's side of each protocol: the provider the proxy drives, its base (as the driver's
# settings give it) and a legitimate call
PROTOCOLS = {
    GEMINI: ("gemini", "", f"/v1beta/models/gemini-pro:generateContent?key={DUMMY}",
             {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}),
    OPENAI_CHAT: ("openai", "/v1", "/v1/chat/completions",
                  {"model": "x", "messages": [{"role": "user", "content": "hi"}]}),
    OPENAI_RESPONSES: ("openai", "/v1", "/v1/responses", {"model": "x", "input": "hi"}),
    ANTHROPIC: ("anthropic", "", "/v1/messages",
                {"model": "x", "max_tokens": 8, "messages": [{"role": "user",
                                                              "content": "hi"}]}),
}
# where a hostile agent sends its calls instead: ``..`` after the call's path, plain, with
# encoded slashes, encoded dots, double-encoded, and other methods than the protocol's
ESCAPES = ["/../../../v1beta/files", "%2F..%2F..%2F..%2Fv1beta%2Ffiles",
           "/%2e%2e/%2e%2e/%2e%2e/v1beta/files", "/%2E%2E/%2E%2E/%2E%2E/v1beta/files",
           "%252F..%252F..%252F..%252Fv1beta%252Ffiles",
           "/%252e%252e/%252e%252e/%252e%252e/v1beta/files", "/..%2F..%2F..%2Fv1/files",
           "/.%2e/.%2e/.%2e/v1/files", ";/../../../v1/files"]
HOSTILE_PATHS = {
    GEMINI: [f"/v1beta/models/m:{method}{escape}"
             for method in ("generateContent", "streamGenerateContent", "countTokens")
             for escape in ESCAPES]
    + ["/v1beta/models/m:embedContent", "/v1beta/models/m:batchGenerateContent",
       "/v1beta/models/m:generateContent:x", "/v1beta/models/../../v1beta/files:countTokens",
       "/v1beta/models/m%2F..%2F..%2Fv1beta%2Ffiles:generateContent",
       "/v1beta/files:generateContent", "/v1beta/models/m:generatecontent",
       "//v1beta/models/m:generateContent/../../../v1beta/files"],
    OPENAI_CHAT: [f"/v1/chat/completions{escape}" for escape in ESCAPES]
    + ["/v1/chat/completions/", "//v1/chat/completions/../../files", "/v1/files"],
    OPENAI_RESPONSES: [f"/v1/responses{escape}" for escape in ESCAPES]
    + ["/v1/responses/resp_1/cancel", "/v1/responses/../files"],
    ANTHROPIC: [f"/v1/messages{escape}" for escape in ESCAPES]
    + [f"/v1/messages/count_tokens{escape}" for escape in ESCAPES]
    + ["/v1/messages/batches", "/v1/files"],
}


class RecordingProvider:
    """A provider on loopback that answers any POST: a protocol's call with a turn in that
    protocol, any other path with 200 (as a real API's other endpoints would), recording the
    raw path, the query and the headers of each request."""

    def __init__(self):
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        app = FastAPI()

        @app.post("/{path:path}")
        async def answer(path: str, request: Request):
            with self.lock:
                self.requests.append({"raw_path": request.scope["raw_path"].decode(),
                                      "path": request.url.path,
                                      "query": request.scope["query_string"].decode(),
                                      "headers": dict(request.headers)})
            turn = Turn(text="hello", input_tokens=10, output_tokens=2, model="upstream")
            if request.url.path.endswith(("count_tokens", ":countTokens")):
                return JSONResponse({"input_tokens": 7, "totalTokens": 7})
            if request.url.path.endswith(":streamGenerateContent"):
                return Response(b"".join(render_sse(GEMINI, turn)),
                                media_type="text/event-stream")
            for protocol, (_, _, call, _) in PROTOCOLS.items():
                if protocol != GEMINI and request.url.path == call:
                    return JSONResponse(render_json(protocol, turn))
            if request.url.path.endswith(":generateContent"):
                return JSONResponse(render_json(GEMINI, turn))
            return JSONResponse({"reached": request.url.path})

        self.server = LoopbackServer(app, "recording-provider")


@pytest.fixture(scope="module")
def provider():
    fake = RecordingProvider()
    fake.server.start()
    yield fake
    fake.server.stop()


def start_proxy(tmp_path: Path, protocol: str, provider: RecordingProvider) -> LLMProxy:
    kind, version, _, _ = PROTOCOLS[protocol]
    settings = ProxySettings(provider=kind, model=MODEL, base_url=provider.server.url + version,
                             api_key=REAL_KEY)
    return LLMProxy(settings, tmp_path / f"{protocol}_calls.jsonl", DUMMY).start()


def raw_post(proxy: LLMProxy, target: str, body: dict[str, Any],
             headers: dict[str, str] | None = None) -> int:
    """POST ``target`` exactly as written (no client normalises it) with the dummy key; the
    answer's status."""
    data = json.dumps(body).encode()
    head = {"Host": "127.0.0.1", "Authorization": f"Bearer {DUMMY}",
            "Content-Type": "application/json", "Content-Length": str(len(data)),
            "Connection": "close"} | (headers or {})
    request = (f"POST {target} HTTP/1.1\r\n"
               + "".join(f"{k}: {v}\r\n" for k, v in head.items()) + "\r\n").encode() + data
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=30) as conn:
        conn.sendall(request)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    return int(answer.split(b" ", 2)[1])


def test_the_proxy_never_forwards_a_path_outside_the_model_method(provider, tmp_path):
    """Each protocol's legitimate call reaches its one provider path; every hostile path is
    answered 404 by the proxy and never sent upstream (with the real key or at all)."""
    for protocol, hostile in HOSTILE_PATHS.items():
        kind, _, call, body = PROTOCOLS[protocol]
        provider.requests.clear()
        with start_proxy(tmp_path, protocol, provider) as proxy:
            assert raw_post(proxy, call, body) == 200, protocol
            assert len(provider.requests) == 1, (protocol, provider.requests)
            refused = {target: raw_post(proxy, target, body) for target in hostile}
        sent = [(r["raw_path"], r["path"]) for r in provider.requests]
        outside = [s for s in sent if s[0] not in ALLOWED_PATHS[kind]
                   or s[1] not in ALLOWED_PATHS[kind]]
        assert not outside, (protocol, outside)
        assert len(sent) == 1, (protocol, sent)
        assert all(status == 404 for status in refused.values()), (protocol, refused)


def test_the_proxy_forwards_only_the_gemini_stream_query(provider, tmp_path):
    """Of the agent's query a Gemini call keeps ``alt=sse`` only: no parameter it smuggles
    (another key, an upload, a field mask) reaches the provider."""
    provider.requests.clear()
    body = PROTOCOLS[GEMINI][3]
    with start_proxy(tmp_path, GEMINI, provider) as proxy:
        target = (f"/v1beta/models/m:streamGenerateContent?alt=sse&key={DUMMY}"
                  "&uploadType=resumable&%24fields=x&x=1%26upload%3D1")
        assert raw_post(proxy, target, body) == 200
    [sent] = provider.requests
    assert sent["raw_path"] == f"/v1beta/models/{MODEL}:streamGenerateContent"
    assert sent["query"] == "alt=sse", sent


HOSTILE_HEADERS = {"OpenAI-Organization": "org-victim", "OpenAI-Project": "proj-victim",
                   "X-Goog-User-Project": "victim-project", "Cookie": "session=stolen",
                   "X-Forwarded-For": "10.0.0.1", "X-Goog-Api-Client": "hostile/1",
                   "X-Stainless-Helper": "hostile", "Anthropic-Dangerous-Direct-Browser-Access":
                   "true", "OpenAI-Beta": "assistants=v2", "Proxy-Authorization": "Basic eA==",
                   "X-Api-Key": DUMMY, "Api-Key": DUMMY, "Host": "evil.example"}
# what the provider may see: the connection's own headers, the proxy's auth and the allowlist
CONNECTION = {"host", "accept", "accept-encoding", "connection", "content-length",
              "content-type", "user-agent"}
AUTH = {GEMINI: "x-goog-api-key", ANTHROPIC: "x-api-key", OPENAI_CHAT: "authorization",
        OPENAI_RESPONSES: "authorization"}
PROTOCOL_HEADERS = {ANTHROPIC: {"anthropic-version", "anthropic-beta"}}


def test_the_proxy_forwards_only_allowlisted_headers(provider, tmp_path):
    """For each protocol the provider sees the connection's headers, the real key in the
    protocol's auth header and the allowlisted ones the agent sent (Anthropic's version and
    beta features); none of the agent's other headers (a project or organisation to bill, a
    cookie, a forwarded address, its own key in another header)."""
    allowed = {"User-Agent": "agent-cli/1.0", "Accept": "application/json",
               "Anthropic-Version": "2023-06-01", "Anthropic-Beta": "prompt-caching-2024-07-31"}
    for protocol, (_, _, call, body) in PROTOCOLS.items():
        provider.requests.clear()
        with start_proxy(tmp_path, protocol, provider) as proxy:
            headers = HOSTILE_HEADERS | allowed
            headers.pop("Host")
            assert raw_post(proxy, call, body, headers) == 200, protocol
        [sent] = provider.requests
        expected = CONNECTION | {AUTH[protocol]} | PROTOCOL_HEADERS.get(protocol, set())
        assert set(sent["headers"]) <= expected, (protocol, set(sent["headers"]) - expected)
        assert sent["headers"][AUTH[protocol]].removeprefix("Bearer ") == REAL_KEY
        assert sent["headers"]["user-agent"] == "agent-cli/1.0"
        if protocol == ANTHROPIC:
            assert sent["headers"]["anthropic-beta"] == "prompt-caching-2024-07-31"
        shown = json.dumps(sent["headers"])
        for value in ("victim", "stolen", "10.0.0.1", "hostile", DUMMY, "evil.example"):
            assert value not in shown, (protocol, value, shown)
        assert urlsplit(provider.server.url).port == int(sent["headers"]["host"].split(":")[1])


def test_a_neighbour_without_the_key_gets_nothing_and_leaves_nothing(tmp_path):
    """Under the open network policy another run's agent shares loopback: every route of this
    run's proxy refuses it (health and the model list too) and its calls are not in this run's
    llm_calls.jsonl."""
    import httpx

    settings = ProxySettings(provider="openai", model=MODEL, base_url="http://127.0.0.1:9/v1",
                             api_key=REAL_KEY)
    with LLMProxy(settings, tmp_path / "llm_calls.jsonl", DUMMY).start() as proxy:
        for method, path in (("GET", "/health"), ("GET", "/v1/models"),
                             ("POST", "/v1/chat/completions"), ("POST", "/v2/anything")):
            answer = httpx.request(method, f"{proxy.url}{path}", json={"messages": []})
            assert answer.status_code == 401, (path, answer.text)
            assert MODEL not in answer.text
        assert httpx.get(f"{proxy.url}/health",
                         headers={"Authorization": f"Bearer {DUMMY}"}).status_code == 200
    log = tmp_path / "llm_calls.jsonl"
    assert not log.exists() or log.read_text() == ""
