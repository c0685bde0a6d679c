"""The DeepSearchQA judging protocol for the real questions.

The judge (an LLM; the paper's autorater is Gemini 2.5 Flash) gets the question, its answer
type, the expected answer and the model's response. It returns JSON with ``explanation``,
``correctness_details`` (one key per expected item, true when the response contains it) and
``excessive_answers`` (items the response gives that were not expected, whatever the answer
type); the starter notebook's nested shape (``"Answer Correctness"``) is read too.
``scoring.Grade`` turns that into the fully-correct verdict, precision, recall, F1 and the
outcome bucket, as the reference code does, except that a verdict checking no expected item
finds nothing (see ``parse_verdict``). The prompt (``TEMPLATE``) restates the protocol of the
DeepSearchQA starter code in this project's words; the output format is the same.

The judge is a conf/driver/ provider reached through a recording proxy of its own, lent by the
harness (``a2rl.task.base.Harness.recording_proxy``): the proxy holds the key, prices and logs
each call (the run's ``judge_calls.jsonl``) and refuses calls (HTTP 402) once the budget is
spent. ``ChatClient`` retries 5xx, 429, timeouts, connection errors and answers that are not the
protocol's JSON, with exponential backoff; a request that still fails, a spent budget or a
missing key raise ``GradingUnavailable`` (the grader records ``judge_failed``).

Verdicts are cached (``web.RequestCache``, sqlite, with the prepared data) by judge model,
template, question, expected answer and response: grading a submission again, or another one
that answers the same, calls nothing (and needs no key). An empty response is never correct
and is not sent.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2rl.task import (
    DriverConfig,
    GradingBudgetExhausted,
    GradingUnavailable,
    RecordingProxy,
    complete,
    progress,
)

from .params import JudgeParams
from .scoring import Grade, is_blank
from .web import RequestCache

TEMPLATE = """You grade answers to research questions. Decide whether the AI response below \
reached the correct answer.

Answer type: "{answer_type}".
- Single Answer: the response is correct if it gives the expected answer; the wording may \
differ.
- Set Answer: check, for every item of the expected answer, whether the response includes it \
(order does not matter).
Whatever the answer type, then list every answer the response gives that is not expected: a \
Single Answer response that hedges ("X or Y") lists the one that is not expected.

Return only a JSON object with these keys:
- "explanation": a short justification that points at the response and the expected answer;
- "correctness_details": an object with one key per expected item (for a Single Answer, the \
one expected answer) and the value true if the response contains that item, else false;
- "excessive_answers": a list of the answers in the response that are not expected (an empty \
list when there are none).

Example for the expected set "Belgium, France" and the response "Belgium, France and Italy":
{{"explanation": "Belgium and France are given; Italy is not expected.", \
"correctness_details": {{"Belgium": true, "France": true}}, "excessive_answers": ["Italy"]}}

Question:
<question>
{question}
</question>

Expected answer ({answer_type}):
<answer>
{answer}
</answer>

AI response:
<response>
{response}
</response>

Your JSON:"""
TEMPLATE_ID = hashlib.sha256(TEMPLATE.encode()).hexdigest()[:16]
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.MULTILINE)


def judge_request(row: dict[str, Any], response: str, max_tokens: int) -> dict[str, Any]:
    """The chat request for one verdict (greedy, one user turn)."""
    prompt = TEMPLATE.format(answer_type=row["answer_type"], question=row["question"],
                             answer=row["answer"], response=response)
    return {"messages": [{"role": "user", "content": prompt}], "temperature": 0,
            "max_tokens": max_tokens}


def _verdict_fields(verdict: Any) -> tuple[Any, Any]:
    """(correctness details, excessive answers) of a verdict in either shape: this prompt's
    flat ``correctness_details`` / ``excessive_answers``, or the official starter notebook's
    ``{"Answer Correctness": {"Correctness Details": ..., "Excessive Answers": ...}}``."""
    if not isinstance(verdict, dict):
        raise ValueError("the verdict is not a JSON object")
    nested = verdict.get("Answer Correctness")
    if isinstance(nested, dict):
        return nested.get("Correctness Details"), nested.get("Excessive Answers", [])
    return verdict.get("correctness_details"), verdict.get("excessive_answers", [])


def parse_verdict(text: str) -> Grade:
    """The judge's JSON as a Grade; ValueError when it is not the protocol's shape (the
    request is then retried). Correctness details may be an object or a list of
    ``{"key", "value"}`` pairs (structured-output judges answer so). An empty object is a
    verdict that checked no expected item: nothing found (``scoring.Grade``). Every listed
    excessive answer counts, blank ones too, as the official metric counts the list."""
    body = _FENCE.sub("", text.strip())
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end < start:
        raise ValueError("no JSON object in the answer")
    details, excessive = _verdict_fields(json.loads(body[start:end + 1]))
    if isinstance(details, list):
        details = {str(d["key"]): d["value"] for d in details}
    if not isinstance(details, dict):
        raise ValueError("correctness details are missing")
    if not all(isinstance(v, bool) for v in details.values()):
        raise ValueError("correctness details values must be true or false")
    if not isinstance(excessive, list):
        raise ValueError("excessive answers must be a list")
    return Grade(found=dict(details), excessive=[str(x) for x in excessive])


def empty_grade(row: dict[str, Any]) -> Grade:
    """No response: nothing found (the expected items as listed, split at commas)."""
    items = [part.strip() for part in row["answer"].split(",") if part.strip()] \
        if row["answer_type"] == "Set Answer" else [row["answer"]]
    return Grade(found={item: False for item in items or [row["answer"]]})


@dataclass
class ChatAnswer:
    value: Any            # what ``parse`` made of the text
    text: str
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    attempts: int = 1


class ChatClient:
    """OpenAI chat completions through a started recording proxy, with retries."""

    def __init__(self, proxy: RecordingProxy, driver: DriverConfig, retries: int = 4,
                 timeout_s: float = 120.0, backoff_s: float = 1.0, sleep=time.sleep):
        import httpx

        self.proxy, self.driver, self.retries = proxy, driver, retries
        self.backoff_s, self.sleep = backoff_s, sleep
        self.http = httpx.Client(timeout=timeout_s + 10,
                                 headers={"authorization": f"Bearer {proxy.dummy_key}"})

    def complete(self, request: dict[str, Any], parse: Callable[[str], Any]) -> ChatAnswer:
        def read(answer: dict[str, Any]) -> tuple[Any, str]:
            text = answer["choices"][0]["message"].get("content") or ""
            return parse(text), text

        rates = self.driver.prices.rates()
        call = complete(self.http, f"{self.proxy.url}/v1/chat/completions",
                        {**request, "model": self.driver.model}, read,
                        who=f"the judge {self.driver.model}", fail=GradingUnavailable,
                        retries=self.retries, backoff_s=self.backoff_s,
                        price_in_per_mtok=rates.input, price_out_per_mtok=rates.output,
                        sleep=self.sleep)
        value, text = call.value
        return ChatAnswer(value, text, call.input_tokens, call.output_tokens, call.cost_usd,
                          call.attempts)

    def close(self) -> None:
        self.http.close()
        self.proxy.stop()


# opens the judge's recording proxy with this many USD left to spend (None: no limit)
OpenProxy = Callable[[float | None], RecordingProxy]


class DeepSearchJudge:
    """Grades responses to real questions: cached verdicts, else the LLM judge. ``spent_usd``
    carries over between evaluations of one run (the task keeps it) so that ``max_usd``
    bounds the whole run's judging."""

    def __init__(self, params: JudgeParams, driver: DriverConfig, cache_dir: Path,
                 open_proxy: OpenProxy, spent_usd: float = 0.0):
        self.params, self.driver, self.open_proxy = params, driver, open_proxy
        self.cache = RequestCache(Path(cache_dir) / "judge.sqlite")
        self.spent_usd = spent_usd
        self._chat: ChatClient | None = None

    def _client(self) -> ChatClient:
        if self._chat is None:  # started only when something is not cached
            p = self.params
            if p.max_usd is not None and self.spent_usd >= p.max_usd:
                raise GradingBudgetExhausted(f"the judge budget is used up: {self.spent_usd:.4f} "
                                         f"of {p.max_usd} USD (task.params.judge.max_usd)")
            left = None if p.max_usd is None else p.max_usd - self.spent_usd
            self._chat = ChatClient(self.open_proxy(left), self.driver, p.retries,
                                    p.timeout_s)
        return self._chat

    def key(self, row: dict[str, Any], response: str) -> dict[str, Any]:
        return {"kind": "judge", "provider": self.driver.provider, "model": self.driver.model,
                "template": TEMPLATE_ID, "question": row["question"], "answer": row["answer"],
                "answer_type": row["answer_type"], "response": response}

    def grade(self, rows: list[dict[str, Any]], responses: list[str]
              ) -> tuple[list[Grade], dict[str, float]]:
        """One grade per (row, response), and what judging cost (the keys of
        ``EvalResult.usage`` that the report shows: calls, cache_hits, retries, tokens, USD)."""
        usage = {"calls": 0, "cache_hits": 0, "input_tokens": 0, "output_tokens": 0,
                 "cost_usd": 0.0, "retries": 0}
        grades: dict[int, Grade] = {}
        todo = []
        for i, (row, response) in enumerate(zip(rows, responses, strict=True)):
            if is_blank(response):
                grades[i] = empty_grade(row)
                continue
            cached = self.cache.get(self.key(row, response))
            if cached is not None:
                grades[i] = Grade(cached["found"], cached["excessive"])
                usage["cache_hits"] += 1
            else:
                todo.append(i)
        lock = threading.Lock()

        def ask(i: int) -> None:  # each verdict is cached as it comes: a failure later
            request = judge_request(rows[i], responses[i], self.params.max_tokens)
            answer = self._client().complete(request, parse_verdict)  # loses nothing paid for
            self.cache.put(self.key(rows[i], responses[i]),
                           {"found": answer.value.found, "excessive": answer.value.excessive,
                            "judge_text": answer.text})
            with lock:
                grades[i] = answer.value
                usage["calls"] += 1
                usage["retries"] += answer.attempts - 1
                usage["input_tokens"] += answer.input_tokens
                usage["output_tokens"] += answer.output_tokens
                usage["cost_usd"] += answer.cost_usd
                self.spent_usd += answer.cost_usd

        if todo:
            self._client()  # opened once, before the threads share it
            with ThreadPoolExecutor(max(1, self.params.concurrency)) as pool:
                # the first failure is raised once all are done
                list(progress(pool.map(ask, todo), total=len(todo), desc="judge",
                              unit="answer"))
        return [grades[i] for i in range(len(rows))], usage

    def close(self) -> None:
        if self._chat is not None:
            self._chat.close()
