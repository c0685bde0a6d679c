"""One OpenAI-style chat completion with bounded retries, for the judges a task calls while
grading (AlpacaEval's, DeepSearchQA's): 5xx, 429, connection errors, timeouts and answers
``parse`` cannot read are retried with exponential backoff; a used-up budget (HTTP 402, the
recording proxy's answer) and any other 4xx are not, since retrying will not help. What cannot
be answered raises ``fail(message)``, an infrastructure failure (``GradingUnavailable`` or a
subclass), never the submission's fault."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from a2rl.task.base import GradingBudgetExhausted


class _Retry(Exception):
    """A failure worth another attempt."""


@dataclass
class ChatCall:
    value: Any  # what ``parse`` made of the answer
    input_tokens: int
    output_tokens: int
    cost_usd: float  # at the prices given
    attempts: int


def complete(http, url: str, body: dict[str, Any], parse: Callable[[dict[str, Any]], Any], *,
             who: str, fail: Callable[[str], Exception], retries: int, backoff_s: float,
             price_in_per_mtok: float = 0.0, price_out_per_mtok: float = 0.0,
             sleep: Callable[[float], None] = time.sleep) -> ChatCall:
    """POST ``body`` to ``url`` (an httpx client's chat completions endpoint) until ``parse``
    reads the JSON answer, at most ``retries`` + 1 times; ``who`` names the judge in errors."""
    last = "no attempt"
    for attempt in range(retries + 1):
        if attempt:
            sleep(backoff_s * 2 ** (attempt - 1))
        try:
            value, usage = _attempt(http, url, body, parse, who, fail)
        except _Retry as err:
            last = str(err)
            continue
        tokens_in = int(usage.get("prompt_tokens") or 0)
        tokens_out = int(usage.get("completion_tokens") or 0)
        cost = (tokens_in * price_in_per_mtok + tokens_out * price_out_per_mtok) / 1e6
        return ChatCall(value, tokens_in, tokens_out, cost, attempt + 1)
    raise fail(f"{who}: no usable answer after {retries + 1} attempts; last: {last}")


def _attempt(http, url: str, body: dict[str, Any], parse, who: str, fail
             ) -> tuple[Any, dict[str, Any]]:
    import httpx

    try:
        response = http.post(url, json=body)
    except httpx.HTTPError as err:  # timeouts included
        raise _Retry(f"{type(err).__name__}: {err}") from err
    if response.status_code == 402:  # the recording proxy's answer at the judge's max_usd
        raise GradingBudgetExhausted(f"{who}: the budget is used up ({response.text[:200]})")
    if response.status_code >= 500 or response.status_code == 429:
        raise _Retry(f"HTTP {response.status_code}: {response.text[:200]}")
    if response.status_code >= 400:  # the request is wrong: retrying will not help
        raise fail(f"{who} refused the request: HTTP {response.status_code}: "
                   f"{response.text[:300]}")
    try:
        answer = response.json()
        return parse(answer), answer.get("usage") or {}
    except (ValueError, KeyError, IndexError, TypeError) as err:
        raise _Retry(f"malformed answer: {err}: {response.text[:200]}") from err
