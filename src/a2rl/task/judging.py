"""An LLM that grades (a judge), reached the way agents reach their driver LLM: through a
recording proxy (``a2rl.llm.proxy.LLMProxy``) of the judge's own.

The proxy holds the real key (read from the variable ``JudgeEndpoint.api_key_env`` names),
pins the model, prices each call and appends it to ``calls_log`` in the format of a run's
``llm_calls.jsonl``, and refuses calls (HTTP 402) once ``max_usd`` is spent. The task speaks
OpenAI chat completions to the proxy; providers that do not (Gemini, Anthropic) are reached
through their OpenAI-compatible endpoint or translated by the proxy.

``ChatJudge.complete_many`` sends chat requests concurrently and retries 5xx, 429, timeouts,
connection errors and answers its ``parse`` function rejects (ValueError), with exponential
backoff; when a request still fails, or the budget is spent, or the key is missing, it raises
``GradingUnavailable``: the grader records an infrastructure failure, not the agent's.

Tasks import this module rather than ``a2rl.llm`` (tasks use the task layer only).
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2rl.task.base import GradingUnavailable

KEYED_PROVIDERS = ("openai", "anthropic", "gemini")


@dataclass
class JudgeEndpoint:
    """Where the judge lives and what it costs (the fields of a conf/driver/ file)."""

    provider: str
    model: str
    base_url: str
    openai_base_url: str | None = None
    api_key_env: str | None = None
    price_in_per_mtok: float = 0.0
    price_out_per_mtok: float = 0.0
    max_usd: float | None = None
    timeout_s: float = 120.0


@dataclass
class ChatAnswer:
    value: Any            # what ``parse`` made of the text
    text: str
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    attempts: int = 1


class _Retry(Exception):
    """A failure worth another attempt."""


class ChatJudge:
    """Chat completions through the judge's own recording proxy (started here)."""

    def __init__(self, endpoint: JudgeEndpoint, calls_log: Path, retries: int = 4,
                 concurrency: int = 4, backoff_s: float = 1.0, sleep=time.sleep):
        import httpx

        from a2rl.llm.proxy import LLMProxy, ProxyError, ProxySettings

        self.endpoint, self.retries, self.concurrency = endpoint, retries, concurrency
        self.backoff_s, self.sleep = backoff_s, sleep
        key = os.environ.get(endpoint.api_key_env) if endpoint.api_key_env else None
        if not key and endpoint.provider in KEYED_PROVIDERS:
            raise GradingUnavailable(f"the judge ({endpoint.provider}:{endpoint.model}) needs "
                                     f"its API key in ${endpoint.api_key_env}")
        try:
            settings = ProxySettings(
                provider=endpoint.provider, model=endpoint.model, base_url=endpoint.base_url,
                api_key=key, openai_base_url=endpoint.openai_base_url,
                price_in_per_mtok=endpoint.price_in_per_mtok,
                price_out_per_mtok=endpoint.price_out_per_mtok, max_usd=endpoint.max_usd,
                timeout_s=endpoint.timeout_s)
        except ProxyError as err:
            raise GradingUnavailable(f"the judge cannot be configured: {err}") from err
        Path(calls_log).parent.mkdir(parents=True, exist_ok=True)
        dummy = "a2rl-judge-" + secrets.token_urlsafe(16)
        self.proxy = LLMProxy(settings, Path(calls_log), dummy).start()
        self.http = httpx.Client(timeout=endpoint.timeout_s + 10,
                                 headers={"authorization": f"Bearer {dummy}"})

    def complete_many(self, requests: list[dict[str, Any]],
                      parse: Callable[[str], Any]) -> list[ChatAnswer]:
        """One answer per chat request body (``messages`` and options; the model is the
        judge's), in order."""
        if len(requests) <= 1 or self.concurrency <= 1:
            return [self.complete(r, parse) for r in requests]
        with ThreadPoolExecutor(self.concurrency) as pool:
            return list(pool.map(lambda r: self.complete(r, parse), requests))

    def complete(self, request: dict[str, Any], parse: Callable[[str], Any]) -> ChatAnswer:
        last = "no attempt"
        for attempt in range(self.retries + 1):
            if attempt:
                self.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                answer = self._attempt(request, parse)
                answer.attempts = attempt + 1
                return answer
            except _Retry as err:
                last = str(err)
        raise GradingUnavailable(f"the judge {self.endpoint.model} gave no usable answer after "
                                 f"{self.retries + 1} attempts; last: {last}")

    def _attempt(self, request: dict[str, Any], parse: Callable[[str], Any]) -> ChatAnswer:
        import httpx

        from a2rl.llm.wire import OPENAI_CHAT, usage_of

        body = {**request, "model": self.endpoint.model}
        try:
            response = self.http.post(f"{self.proxy.url}/v1/chat/completions", json=body)
        except httpx.HTTPError as err:
            raise _Retry(f"{type(err).__name__}: {err}") from err
        if response.status_code == 402:
            raise GradingUnavailable(f"the judge's budget is used up ({response.text[:200]})")
        if response.status_code >= 500 or response.status_code == 429:
            raise _Retry(f"HTTP {response.status_code}: {response.text[:200]}")
        if response.status_code >= 400:  # the request is wrong: retrying will not help
            raise GradingUnavailable(f"the judge refused the request: HTTP "
                                     f"{response.status_code}: {response.text[:300]}")
        try:
            answer = response.json()
            text = answer["choices"][0]["message"].get("content") or ""
            value = parse(text)
        except (ValueError, KeyError, IndexError, TypeError) as err:
            raise _Retry(f"unusable answer: {err}: {response.text[:200]}") from err
        usage = usage_of(OPENAI_CHAT, answer)
        e = self.endpoint
        cost = usage.cost(e.price_in_per_mtok, e.price_out_per_mtok, None)
        return ChatAnswer(value, text, usage.input_tokens, usage.output_tokens, cost)

    def close(self) -> None:
        self.http.close()
        self.proxy.stop()
