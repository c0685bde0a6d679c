"""The local driver's CPU server (a2rl.llm.local_server), started as the harness starts it
(a2rl.llm.local_driver: its own process, a per-run key) and called over a real socket in the
OpenAI chat-completions protocol, whole and streamed, on the tiny model."""

from __future__ import annotations

import json

import httpx
import pytest

from a2rl.config.checks import ConfigError
from a2rl.config.compose import compose
from a2rl.config.types import ServeConfig
from a2rl.llm.local_driver import LocalModelServer, resolve_engine
from a2rl.llm.local_server import chat_messages
from a2rl.llm.wire import OPENAI_CHAT, UsageTracker

TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}]


@pytest.fixture(scope="module")
def server(tiny_model, tmp_path_factory):
    serve = ServeConfig(engine="transformers", max_context=256, max_new_tokens=8, threads=1,
                        start_timeout_s=120)
    log = tmp_path_factory.mktemp("local") / "local_server.log"
    with LocalModelServer(serve, tiny_model, "tiny-chat", log) as running:
        yield running
    assert not running.running  # stopped with the run


def post(server, body, key=None):
    return httpx.post(f"{server.url}/chat/completions", json=body, timeout=120,
                      headers={"authorization": f"Bearer {key or server.key}"})


def test_it_answers_only_its_key(server):
    assert server.engine == "transformers" and server.url.endswith("/v1")
    models = httpx.get(f"{server.url}/models", headers={"authorization": f"Bearer {server.key}"})
    assert models.json()["data"][0]["id"] == "tiny-chat"
    for headers in ({}, {"authorization": "Bearer a2rl-local-guess"}):
        refused = httpx.get(f"{server.url}/models", headers=headers)
        assert refused.status_code == 401
        assert refused.json()["error"]["code"] == "invalid_api_key"
    assert post(server, {"messages": [{"role": "user", "content": "hi"}]},
                key="wrong").status_code == 401


def test_a_whole_reply_is_the_models_own(server):
    answer = post(server, {"model": "anything", "max_tokens": 4, "messages": [
        {"role": "system", "content": "You add numbers."},
        {"role": "user", "content": [{"type": "text", "text": "2 + 3 ="}]}]})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["object"] == "chat.completion" and body["model"] == "tiny-chat"
    usage = body["usage"]
    assert usage["prompt_tokens"] > 5 and 1 <= usage["completion_tokens"] <= 4
    assert body["choices"][0]["finish_reason"] == "stop"


def test_a_request_with_tools_gets_plain_content(server):
    """The model calls no tool: the answer is content, in the protocol's terms."""
    body = post(server, {"messages": [{"role": "user", "content": "list files"}],
                         "tools": TOOLS}).json()
    message = body["choices"][0]["message"]
    assert "tool_calls" not in message and body["choices"][0]["finish_reason"] == "stop"


def test_a_streamed_reply_is_server_sent_events_with_usage(server):
    answer = post(server, {"stream": True, "stream_options": {"include_usage": True},
                           "messages": [{"role": "user", "content": "count: 1 2 3"}]})
    assert answer.headers["content-type"].startswith("text/event-stream")
    assert answer.content.endswith(b"data: [DONE]\n\n")
    tracker = UsageTracker(OPENAI_CHAT)
    tracker.feed(answer.content)
    assert tracker.finished and tracker.usage.found and tracker.usage.output_tokens >= 1
    chunks = [json.loads(line[6:]) for line in answer.text.splitlines()
              if line.startswith("data: {")]
    assert chunks[0]["object"] == "chat.completion.chunk"


def test_a_long_prompt_keeps_its_last_tokens(server):
    body = post(server, {"max_tokens": 2, "messages": [
        {"role": "user", "content": "word " * 2000}]}).json()
    assert body["usage"]["prompt_tokens"] <= 256 - 2


def test_bad_requests_are_refused_in_the_protocol(server):
    for bad in ({}, {"messages": []}, {"messages": ["hi"]}):
        answer = post(server, bad)
        assert answer.status_code == 400
        assert answer.json()["error"]["type"] == "invalid_request_error"


def test_messages_become_plain_turns():
    assert chat_messages({"messages": [
        {"role": "developer", "content": "be brief"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "a.txt"}]},
    ]}) == [{"role": "system", "content": "be brief"},
            {"role": "assistant", "content": '{"name": "bash", "arguments": '
                                             '"{\\"command\\": \\"ls\\"}"}'},
            {"role": "tool", "content": "a.txt"}]


def test_a_server_that_cannot_start_says_where_to_look(tmp_path):
    serve = ServeConfig(engine="transformers", start_timeout_s=60)
    server = LocalModelServer(serve, tmp_path / "no-model", "x", tmp_path / "server.log")
    with pytest.raises(RuntimeError, match="server.log"):
        server.start()
    assert not server.running and (tmp_path / "server.log").stat().st_size > 0


def test_the_engine_and_the_config():
    assert resolve_engine("transformers") == "transformers"
    assert resolve_engine("auto") in ("vllm", "transformers")
    driver = compose(["driver=local"]).driver
    assert (driver.provider, driver.serve.model.source, driver.prices.rates()) == (
        "local", "smollm2_gguf", (0.0, 0.0, 0.0))
    with pytest.raises(ConfigError, match="engine"):
        ServeConfig(engine="llama")
    with pytest.raises(ConfigError, match="max_context"):
        ServeConfig(max_context=100, max_new_tokens=200)
    with pytest.raises(ConfigError, match="serve"):
        compose(["driver=local", "~driver.serve"])
