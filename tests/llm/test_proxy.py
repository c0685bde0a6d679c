"""The recording LLM proxy against a fake provider: it forwards with the real key only, pins the
model, passes streams through byte for byte, records usage and cost per call, translates between
protocols, enforces budgets, and records every failure as such."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from a2rl.llm.loopback import LoopbackServer
from a2rl.llm.parse import to_chat_request
from a2rl.llm.proxy import LLMProxy, llm_totals
from a2rl.llm.render import render_json, render_sse
from a2rl.llm.upstream import ProxySettings
from a2rl.llm.wire import (
    ANTHROPIC,
    GEMINI,
    OPENAI_CHAT,
    OPENAI_RESPONSES,
    ToolCall,
    Turn,
    UsageTracker,
    usage_of,
)

REAL_KEY = "sk-real-provider-key"
DUMMY = "a2rl-dummy-key"
PROTOCOL_OF_PATH = {"/v1/chat/completions": OPENAI_CHAT, "/chat/completions": OPENAI_CHAT,
                    "/v1/responses": OPENAI_RESPONSES, "/responses": OPENAI_RESPONSES,
                    "/v1/messages": ANTHROPIC, "/compat/chat/completions": OPENAI_CHAT}


class FakeProvider:
    """A provider on loopback: records each request, answers ``turn`` in the protocol of the
    path (streamed when asked), or ``fail_with`` as status code."""

    def __init__(self):
        self.requests: list[dict[str, Any]] = []
        self.turn = self.default_turn()
        self.fail_with: int | None = None
        # bytes of a stream to send before holding the connection open (-1: all of it)
        self.hang_after: int | None = None
        self.lock = threading.Lock()
        app = FastAPI()

        @app.post("/{path:path}")
        async def answer(path: str, request: Request):
            path = "/" + path
            body = json.loads(await request.body())
            with self.lock:
                self.requests.append({"path": path, "query": dict(request.query_params),
                                      "headers": dict(request.headers), "body": body})
            if self.fail_with:
                return JSONResponse({"error": {"message": "provider exploded"}}, self.fail_with)
            if path.endswith("count_tokens"):
                return JSONResponse({"input_tokens": 7})
            if path.startswith("/v1beta/models/"):
                protocol = GEMINI
                stream = ":streamGenerateContent" in path
            else:
                protocol = PROTOCOL_OF_PATH[path]
                stream = bool(body.get("stream"))
            if stream and self.hang_after is not None:
                raw = b"".join(render_sse(protocol, self.turn))
                return StreamingResponse(hang(raw[:self.hang_after] if self.hang_after >= 0
                                              else raw), media_type="text/event-stream")
            if stream:
                return Response(b"".join(render_sse(protocol, self.turn)),
                                media_type="text/event-stream")
            return JSONResponse(render_json(protocol, self.turn))

        self.server = LoopbackServer(app, "fake-provider")

    @staticmethod
    def default_turn() -> Turn:
        return Turn(text="hello", tool_calls=[ToolCall("bash", {"command": "ls"}, "c1")],
                    input_tokens=1000, output_tokens=200, model="upstream-model")

    @property
    def url(self) -> str:
        return self.server.url


async def hang(head: bytes):
    yield head
    await asyncio.sleep(30)


@pytest.fixture(scope="module")
def provider():
    fake = FakeProvider()
    fake.server.start()
    yield fake
    fake.server.stop()


@pytest.fixture
def fresh(provider):
    provider.requests.clear()
    provider.fail_with = None
    provider.hang_after = None
    provider.turn = provider.default_turn()
    return provider


def start_proxy(tmp_path: Path, provider_kind: str, base_url: str, **settings: Any) -> LLMProxy:
    prices = {"price_in_per_mtok": 2.0, "price_out_per_mtok": 10.0,
              "price_cached_in_per_mtok": 0.5} | settings
    proxy = LLMProxy(ProxySettings(provider=provider_kind, model="driver-model",
                                   base_url=base_url, api_key=REAL_KEY, **prices),
                     tmp_path / "llm_calls.jsonl", DUMMY)
    return proxy.start()


def calls(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "llm_calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


CHAT_TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}}}}}]


def test_chat_passthrough_uses_the_real_key_pins_the_model_and_prices_the_call(fresh, tmp_path):
    with start_proxy(tmp_path, "openai", f"{fresh.url}/v1") as proxy:
        answer = httpx.post(f"{proxy.url}/v1/chat/completions",
                            headers={"Authorization": f"Bearer {DUMMY}"},
                            json={"model": "gpt-cheap", "messages": [{"role": "user",
                                                                      "content": "hi"}]})
    assert answer.status_code == 200
    assert answer.json()["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "bash"
    sent = fresh.requests[-1]
    assert sent["path"] == "/v1/chat/completions"
    assert sent["headers"]["authorization"] == f"Bearer {REAL_KEY}"
    assert DUMMY not in json.dumps(sent["headers"])
    assert sent["body"]["model"] == "driver-model"
    [call] = calls(tmp_path)
    assert call | {"time": None, "latency_s": None} == {
        "call": 1, "time": None, "protocol": OPENAI_CHAT, "path": "/v1/chat/completions",
        "model": "driver-model", "route": "native", "requested_model": "gpt-cheap",
        "stream": False, "status": 200, "outcome": "ok", "latency_s": None, "error": None,
        "input_tokens": 1000, "output_tokens": 200, "cached_input_tokens": 0,
        "usage_reported": True, "cost_usd": round((1000 * 2.0 + 200 * 10.0) / 1e6, 6)}


def test_anthropic_stream_passes_through_byte_for_byte(fresh, tmp_path):
    fresh.turn.input_tokens, fresh.turn.output_tokens = 5000, 300
    request = {"model": "claude-haiku", "max_tokens": 64, "stream": True,
               "messages": [{"role": "user", "content": "hi"}]}
    headers = {"x-api-key": DUMMY, "anthropic-version": "2023-06-01",
               "anthropic-beta": "tools-2024"}
    with start_proxy(tmp_path, "anthropic", fresh.url) as proxy, \
            httpx.stream("POST", f"{proxy.url}/v1/messages", headers=headers,
                         json=request) as answer:
        received = b"".join(answer.iter_raw())
    tracker = UsageTracker(ANTHROPIC)
    tracker.feed(received)
    assert tracker.events >= 6 and tracker.usage.input_tokens == 5000
    assert b"input_json_delta" in received and b"message_stop" in received
    sent = fresh.requests[-1]
    assert sent["headers"]["x-api-key"] == REAL_KEY
    assert sent["headers"]["anthropic-beta"] == "tools-2024"  # the client's headers go along
    assert "authorization" not in sent["headers"]
    [call] = calls(tmp_path)
    assert (call["stream"], call["input_tokens"], call["output_tokens"], call["outcome"]) == (
        True, 5000, 300, "ok")
    assert call["cost_usd"] == pytest.approx((5000 * 2.0 + 300 * 10.0) / 1e6)


def test_gemini_stream_rewrites_the_model_and_the_key(fresh, tmp_path):
    with start_proxy(tmp_path, "gemini", fresh.url) as proxy:
        answer = httpx.post(
            f"{proxy.url}/v1beta/models/gemini-pro:streamGenerateContent?alt=sse&key={DUMMY}",
            json={"contents": [{"role": "user", "parts": [{"text": "hi"}]}]})
    assert answer.status_code == 200 and b"functionCall" in answer.content
    sent = fresh.requests[-1]
    assert sent["path"] == "/v1beta/models/driver-model:streamGenerateContent"
    assert sent["query"] == {"alt": "sse"}
    assert sent["headers"]["x-goog-api-key"] == REAL_KEY
    [call] = calls(tmp_path)
    assert (call["requested_model"], call["output_tokens"], call["stream"]) == (
        "gemini-pro", 200, True)


def test_responses_stream_usage_comes_from_response_completed(fresh, tmp_path):
    with start_proxy(tmp_path, "openai", f"{fresh.url}/v1") as proxy:
        answer = httpx.post(f"{proxy.url}/v1/responses",
                            headers={"Authorization": f"Bearer {DUMMY}"},
                            json={"model": "x", "input": "hi", "stream": True})
    assert b"response.completed" in answer.content
    assert fresh.requests[-1]["path"] == "/v1/responses"
    [call] = calls(tmp_path)
    assert (call["protocol"], call["input_tokens"], call["output_tokens"]) == (
        OPENAI_RESPONSES, 1000, 200)


def read_until(proxy: LLMProxy, marker: bytes) -> bytes:
    seen = b""
    with httpx.stream("POST", f"{proxy.url}/v1/responses", timeout=20,
                      headers={"Authorization": f"Bearer {DUMMY}"},
                      json={"model": "x", "input": "hi", "stream": True}) as answer:
        for chunk in answer.iter_raw():
            seen += chunk
            if marker in seen:
                break
    return seen


def wait_for_calls(tmp_path: Path, count: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 20
    while len(calls(tmp_path)) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return calls(tmp_path)


def test_hanging_up_after_the_last_event_is_ok_and_before_it_is_not(fresh, tmp_path):
    # Codex closes the connection as soon as response.completed arrives
    with start_proxy(tmp_path, "openai", f"{fresh.url}/v1") as proxy:
        fresh.hang_after = -1
        assert b"response.completed" in read_until(proxy, b"response.completed")
        [whole] = wait_for_calls(tmp_path, 1)
        fresh.hang_after = 40
        assert b"response.completed" not in read_until(proxy, b"response.created")
        cut = wait_for_calls(tmp_path, 2)[1]
    assert (whole["outcome"], whole["output_tokens"]) == ("ok", 200)
    assert cut["outcome"] == "client_closed"


def test_wrong_or_missing_key_is_refused_and_never_forwarded(fresh, tmp_path):
    with start_proxy(tmp_path, "openai", f"{fresh.url}/v1") as proxy:
        for headers in ({}, {"Authorization": f"Bearer {REAL_KEY}"}, {"x-api-key": "guess"}):
            answer = httpx.post(f"{proxy.url}/v1/chat/completions", headers=headers,
                                json={"messages": []})
            assert answer.status_code == 401
    assert fresh.requests == []
    assert calls(tmp_path) == []  # not the run's agent: nothing of it in the run's log


def test_token_budget_stops_further_calls(fresh, tmp_path):
    seen = []
    proxy = LLMProxy(ProxySettings(provider="openai", model="m", base_url=f"{fresh.url}/v1",
                                   api_key=REAL_KEY, max_tokens=1500),
                     tmp_path / "llm_calls.jsonl", DUMMY, on_exhausted=seen.append)
    with proxy:
        body = {"messages": [{"role": "user", "content": "hi"}]}
        headers = {"Authorization": f"Bearer {DUMMY}"}
        first = httpx.post(f"{proxy.url}/v1/chat/completions", headers=headers, json=body)
        assert first.status_code == 200 and not proxy.exhausted  # 1200 tokens < 1500
        second = httpx.post(f"{proxy.url}/v1/chat/completions", headers=headers, json=body)
        assert second.status_code == 200 and proxy.exhausted  # the call reaching it completes
        third = httpx.post(f"{proxy.url}/v1/chat/completions", headers=headers, json=body)
    assert third.status_code == 402 and "budget" in third.json()["error"]["message"]
    assert len(fresh.requests) == 2
    assert [c["outcome"] for c in calls(tmp_path)] == ["ok", "ok", "budget_exhausted"]
    assert len(seen) == 1 and seen[0]["tokens"] == 2400
    totals = llm_totals(tmp_path)
    assert (totals["calls"], totals["failed_calls"], totals["budget_exhausted"],
            totals["input_tokens"], totals["output_tokens"]) == (3, 1, True, 2000, 400)


def test_dollar_budget(fresh, tmp_path):
    proxy = start_proxy(tmp_path, "openai", f"{fresh.url}/v1", max_usd=0.004)
    with proxy:
        for _ in range(2):  # 0.004 USD a call
            httpx.post(f"{proxy.url}/v1/chat/completions",
                       headers={"Authorization": f"Bearer {DUMMY}"}, json={"messages": []})
        assert proxy.exhausted


def test_anthropic_agent_on_an_openai_driver_is_translated(fresh, tmp_path):
    request = {
        "model": "claude-x", "max_tokens": 100, "stream": True, "system": "be brief",
        "tools": [{"name": "Bash", "description": "run", "input_schema": {
            "type": "object", "properties": {"command": {"type": "string"}}}}],
        "messages": [
            {"role": "user", "content": "list files"},
            {"role": "assistant", "content": [
                {"type": "text", "text": "ok"},
                {"type": "tool_use", "id": "toolu_1", "name": "Bash",
                 "input": {"command": "ls"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt"}]}]}
    with start_proxy(tmp_path, "openai", f"{fresh.url}/v1") as proxy:
        answer = httpx.post(f"{proxy.url}/v1/messages", headers={"x-api-key": DUMMY},
                            json=request)
    sent = fresh.requests[-1]
    assert sent["path"] == "/v1/chat/completions" and sent["body"]["stream"] is False
    assert sent["headers"]["authorization"] == f"Bearer {REAL_KEY}"
    assert sent["body"]["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "list files"},
        {"role": "assistant", "content": "ok", "tool_calls": [
            {"id": "toolu_1", "type": "function",
             "function": {"name": "Bash", "arguments": '{"command": "ls"}'}}]},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "a.txt"}]
    assert sent["body"]["tools"][0]["function"]["name"] == "Bash"
    assert sent["body"]["max_completion_tokens"] == 100
    tracker = UsageTracker(ANTHROPIC)
    tracker.feed(answer.content)
    assert tracker.usage.output_tokens == 200
    assert b'"type": "tool_use"' in answer.content and b'"name": "bash"' in answer.content
    [call] = calls(tmp_path)
    assert (call["route"], call["protocol"], call["output_tokens"]) == (
        "translated", ANTHROPIC, 200)


def test_gemini_and_responses_agents_translate_through_an_openai_compatible_endpoint(
        fresh, tmp_path):
    with start_proxy(tmp_path, "anthropic", fresh.url,
                     openai_base_url=f"{fresh.url}/compat") as proxy:
        gemini = httpx.post(
            f"{proxy.url}/v1beta/models/g:generateContent", headers={"x-goog-api-key": DUMMY},
            json={"systemInstruction": {"parts": [{"text": "sys"}]},
                  "contents": [{"role": "user", "parts": [{"text": "hi"}]},
                               {"role": "model", "parts": [{"functionCall": {
                                   "name": "run_shell_command", "args": {"command": "ls"}}}]},
                               {"role": "user", "parts": [{"functionResponse": {
                                   "name": "run_shell_command", "response": {"output": "x"}}}]}],
                  "tools": [{"functionDeclarations": [{"name": "run_shell_command",
                                                       "parameters": {"type": "object"}}]}]})
        responses = httpx.post(
            f"{proxy.url}/v1/responses", headers={"Authorization": f"Bearer {DUMMY}"},
            json={"instructions": "sys", "input": [
                {"type": "message", "role": "user",
                 "content": [{"type": "input_text", "text": "hi"}]},
                {"type": "function_call", "call_id": "c9", "name": "shell",
                 "arguments": '{"command": ["ls"]}'},
                {"type": "function_call_output", "call_id": "c9", "output": "x"}],
                  "tools": [{"type": "function", "name": "shell", "parameters": {}}]})
        chat = httpx.post(f"{proxy.url}/v1/chat/completions",
                          headers={"Authorization": f"Bearer {DUMMY}"},
                          json={"messages": [{"role": "user", "content": "hi"}]})
    assert gemini.json()["candidates"][0]["content"]["parts"][1]["functionCall"]["name"] == "bash"
    assert responses.json()["output"][1]["type"] == "function_call"
    assert chat.status_code == 200
    gemini_sent, responses_sent, chat_sent = fresh.requests[-3:]
    assert all(r["path"] == "/compat/chat/completions" for r in fresh.requests[-3:])
    roles = [m["role"] for m in gemini_sent["body"]["messages"]]
    assert roles == ["system", "user", "assistant", "tool"]
    call_id = gemini_sent["body"]["messages"][2]["tool_calls"][0]["id"]
    assert gemini_sent["body"]["messages"][3]["tool_call_id"] == call_id
    assert [m["role"] for m in responses_sent["body"]["messages"]] == [
        "system", "user", "assistant", "tool"]
    assert chat_sent["headers"]["authorization"] == f"Bearer {REAL_KEY}"
    assert [c["route"] for c in calls(tmp_path)] == ["translated", "translated",
                                                     "openai_compatible"]


def test_count_tokens_is_forwarded_natively_and_estimated_otherwise(fresh, tmp_path):
    body = {"model": "m", "messages": [{"role": "user", "content": "x" * 400}]}
    with start_proxy(tmp_path, "anthropic", fresh.url) as proxy:
        native = httpx.post(f"{proxy.url}/v1/messages/count_tokens",
                            headers={"x-api-key": DUMMY}, json=body)
    with start_proxy(tmp_path, "openai", f"{fresh.url}/v1") as proxy:
        local = httpx.post(f"{proxy.url}/v1/messages/count_tokens",
                           headers={"x-api-key": DUMMY}, json=body)
    assert native.json() == {"input_tokens": 7}
    assert local.json()["input_tokens"] > 100
    assert [c["route"] for c in calls(tmp_path)] == ["native", "local"]
    assert all(c["input_tokens"] == 0 for c in calls(tmp_path))  # counting is not spending


def test_provider_errors_and_unreachable_providers_are_recorded(fresh, tmp_path):
    fresh.fail_with = 529
    with start_proxy(tmp_path, "anthropic", fresh.url) as proxy:
        overloaded = httpx.post(f"{proxy.url}/v1/messages", headers={"x-api-key": DUMMY},
                                json={"messages": []})
    with start_proxy(tmp_path, "anthropic", "http://127.0.0.1:9") as proxy:
        unreachable = httpx.post(f"{proxy.url}/v1/messages", headers={"x-api-key": DUMMY},
                                 json={"messages": []})
        # once the run is over and the harness stops its own model server (driver local), a
        # call it cuts is the run's end, not the provider's failure
        proxy.log.run_ended = True
        httpx.post(f"{proxy.url}/v1/messages", headers={"x-api-key": DUMMY},
                   json={"messages": []})
    assert overloaded.status_code == 529
    assert unreachable.status_code == 502
    assert unreachable.json()["error"]["type"] == "api_error"
    failed = calls(tmp_path)
    assert [(c["status"], c["outcome"]) for c in failed] == [(529, "upstream_error"),
                                                              (502, "connection_error"),
                                                              (502, "client_closed")]
    assert "provider exploded" in failed[0]["error"]
    assert failed[2]["error"].startswith("the run ended before the reply")
    assert llm_totals(tmp_path)["failed_calls"] == 3


def test_unknown_routes_and_bodies(fresh, tmp_path):
    with start_proxy(tmp_path, "openai", f"{fresh.url}/v1") as proxy:
        key = {"Authorization": f"Bearer {DUMMY}"}
        assert httpx.post(f"{proxy.url}/v2/other", json={}, headers=key).status_code == 404
        bad = httpx.post(f"{proxy.url}/v1/chat/completions", content=b"[1, 2]", headers=key)
        models = httpx.get(f"{proxy.url}/v1/models", headers=key).json()
    assert bad.status_code == 400
    assert models["data"][0]["id"] == "driver-model"
    assert [c["outcome"] for c in calls(tmp_path)] == ["unsupported", "bad_request"]


def test_usage_tracker_reads_streams_in_any_chunking():
    turn = Turn(text="t", input_tokens=321, output_tokens=45)
    for protocol in (OPENAI_CHAT, OPENAI_RESPONSES, ANTHROPIC, GEMINI):
        raw = b"".join(render_sse(protocol, turn))
        tracker = UsageTracker(protocol)
        for i in range(0, len(raw), 7):
            assert not tracker.finished, protocol
            tracker.feed(raw[i:i + 7])
        tracker.close()
        assert tracker.finished, protocol
        assert (tracker.usage.input_tokens, tracker.usage.output_tokens) == (321, 45), protocol
        assert usage_of(protocol, render_json(protocol, turn)).output_tokens == 45


def test_anthropic_cache_tokens_count_as_input_and_are_priced_as_cached():
    usage = usage_of(ANTHROPIC, {"usage": {"input_tokens": 100, "output_tokens": 10,
                                           "cache_read_input_tokens": 900,
                                           "cache_creation_input_tokens": 50}})
    assert (usage.input_tokens, usage.cached_input_tokens) == (1050, 900)
    assert usage.cost(3.0, 15.0, 0.3) == pytest.approx((150 * 3.0 + 900 * 0.3 + 10 * 15) / 1e6)
    assert usage.cost(3.0, 15.0, None) == pytest.approx((1050 * 3.0 + 10 * 15) / 1e6)


def test_llm_totals_of_a_run_without_calls(tmp_path):
    assert llm_totals(tmp_path) == {"calls": 0, "failed_calls": 0, "input_tokens": 0,
                                    "output_tokens": 0, "cached_input_tokens": 0,
                                    "cost_usd": 0.0, "usage_missing": 0,
                                    "budget_exhausted": False, "models": []}


def test_translation_keeps_chat_requests_and_rejects_unknown_protocols():
    body = {"model": "a", "messages": [], "stream": True}
    assert to_chat_request(OPENAI_CHAT, body, "b") == {"model": "b", "messages": [],
                                                       "stream": False}
    with pytest.raises(ValueError, match="protocol"):
        to_chat_request("smoke_signals", body, "b")


def test_each_call_of_a_driver_session_becomes_an_llm_call_event(tmp_path):
    """The replay driver's session (a2rl.llm.drivers) behind the real proxy: every call is a line
    of llm_calls.jsonl and an llm_call event of events.jsonl with the same number."""
    from a2rl.common.events import EventLog
    from a2rl.common.files import iter_jsonl
    from a2rl.common.layout import RunPaths
    from a2rl.config.compose import compose
    from a2rl.llm.drivers import driver_session

    cfg = compose(["agent=mini_swe_agent", "driver=replay", f"paths.root={tmp_path}"])
    run = RunPaths(tmp_path / "run")
    run.root.mkdir()
    events = EventLog(run.events)
    with driver_session(cfg, run, events) as proxy:
        headers = {"authorization": f"Bearer {proxy.dummy_key}"}
        body = {"messages": [{"role": "user", "content": "go"}]}
        ok = httpx.post(f"{proxy.url}/v1/chat/completions", json=body, headers=headers)
        refused = httpx.post(f"{proxy.url}/v1/chat/completions", json=body)
    assert (ok.status_code, refused.status_code) == (200, 401)
    calls = list(iter_jsonl(run.llm_calls))
    logged = [e for e in iter_jsonl(run.events) if e["kind"] == "llm_call"]
    assert [e["call"] for e in logged] == [c["call"] for c in calls] == [1]  # refused: not
    first, = logged
    assert (first["outcome"], first["status"], first["model"]) == ("ok", 200, "replay")
    assert first["input_tokens"] == calls[0]["input_tokens"] > 0
    assert first["latency_s"] == calls[0]["latency_s"]
    assert "wrong API key" in refused.json()["error"]["message"]
