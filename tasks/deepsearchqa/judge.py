"""The DeepSearchQA judging protocol for the real questions.

The judge (an LLM; the paper's autorater is Gemini 2.5 Flash) gets the question, its answer
type, the expected answer and the model's response. It returns JSON with ``explanation``,
``correctness_details`` (one key per expected item, true when the response contains it) and
``excessive_answers`` (items the response gives that were not expected). ``scoring.Grade``
turns that into the fully-correct verdict, precision, recall, F1 and the outcome bucket, as the
reference code does. The prompt (``TEMPLATE``) restates the protocol of the DeepSearchQA starter
code in this project's words; the output format is the same.

Verdicts are cached (``web.RequestCache``, sqlite, with the prepared data) by judge model,
template, question, expected answer and response: grading a submission again, or another one
that answers the same, calls nothing. An empty response is never correct and is not sent.
A judge that fails (after retries) or runs out of budget raises ``GradingUnavailable``.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from a2rl.task.judging import ChatJudge, JudgeEndpoint

from .params import JudgeParams
from .scoring import Grade, split_items
from .web import RequestCache

TEMPLATE = """You grade answers to research questions. Decide whether the AI response below \
reached the correct answer.

Answer type: "{answer_type}".
- Single Answer: the response is correct if it gives the expected answer; the wording may \
differ.
- Set Answer: check, for every item of the expected answer, whether the response includes it \
(order does not matter). Then list the items the response gives that are not expected.

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
CHUNK = 16  # verdicts asked for (concurrently) and cached at a time
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.MULTILINE)


def judge_request(row: dict[str, Any], response: str, max_tokens: int) -> dict[str, Any]:
    """The chat request for one verdict (greedy, one user turn)."""
    prompt = TEMPLATE.format(answer_type=row["answer_type"], question=row["question"],
                             answer=row["answer"], response=response)
    return {"messages": [{"role": "user", "content": prompt}], "temperature": 0,
            "max_tokens": max_tokens}


def parse_verdict(text: str) -> Grade:
    """The judge's JSON as a Grade; ValueError when it is not the protocol's shape (the
    request is then retried). ``correctness_details`` may be an object or a list of
    ``{"key", "value"}`` pairs (structured-output judges answer so)."""
    body = _FENCE.sub("", text.strip())
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end < start:
        raise ValueError("no JSON object in the answer")
    verdict = json.loads(body[start:end + 1])
    details = verdict.get("correctness_details")
    if isinstance(details, list):
        details = {str(d["key"]): d["value"] for d in details}
    if not isinstance(details, dict) or not details:
        raise ValueError("correctness_details is missing or empty")
    if not all(isinstance(v, bool) for v in details.values()):
        raise ValueError("correctness_details values must be true or false")
    excessive = verdict.get("excessive_answers", [])
    if not isinstance(excessive, list):
        raise ValueError("excessive_answers must be a list")
    return Grade(found=dict(details), excessive=[str(x) for x in excessive if str(x).strip()])


def empty_grade(row: dict[str, Any]) -> Grade:
    """No response: nothing found (the expected items as listed, split at commas)."""
    items = [part.strip() for part in row["answer"].split(",") if part.strip()] \
        if row["answer_type"] == "Set Answer" else [row["answer"]]
    return Grade(found={item: False for item in items or [row["answer"]]})


class DeepSearchJudge:
    """Grades responses to real questions: cached verdicts, else the LLM judge."""

    def __init__(self, params: JudgeParams, cache_dir: Path):
        self.params = params
        self.cache = RequestCache(Path(cache_dir) / "judge.sqlite")
        self.calls_log = Path(cache_dir) / "judge_calls.jsonl"
        self._chat: ChatJudge | None = None

    def _client(self) -> ChatJudge:
        if self._chat is None:  # started only when something is not cached
            p = self.params
            endpoint = JudgeEndpoint(p.provider, p.model, p.base_url, p.openai_base_url,
                                     p.api_key_env, p.price_in_per_mtok, p.price_out_per_mtok,
                                     p.max_usd, p.timeout_s)
            self._chat = ChatJudge(endpoint, self.calls_log, p.retries, p.concurrency)
        return self._chat

    def key(self, row: dict[str, Any], response: str) -> dict[str, Any]:
        return {"kind": "judge", "provider": self.params.provider, "model": self.params.model,
                "template": TEMPLATE_ID, "question": row["question"], "answer": row["answer"],
                "answer_type": row["answer_type"], "response": response}

    def grade(self, rows: list[dict[str, Any]], responses: list[str]
              ) -> tuple[list[Grade], dict[str, float]]:
        """One grade per (row, response), and what judging cost."""
        usage = {"judge_calls": 0.0, "judge_cache_hits": 0.0, "judge_input_tokens": 0.0,
                 "judge_output_tokens": 0.0, "judge_cost_usd": 0.0, "judge_retries": 0.0}
        grades: dict[int, Grade] = {}
        todo = []
        for i, (row, response) in enumerate(zip(rows, responses, strict=True)):
            if not split_items(response):
                grades[i] = empty_grade(row)
                continue
            cached = self.cache.get(self.key(row, response))
            if cached is not None:
                grades[i] = Grade(cached["found"], cached["excessive"])
                usage["judge_cache_hits"] += 1
            else:
                todo.append(i)
        for start in range(0, len(todo), CHUNK):  # cached chunk by chunk: a failure later
            chunk = todo[start:start + CHUNK]       # does not lose what was paid for
            requests = [judge_request(rows[i], responses[i], self.params.max_tokens)
                        for i in chunk]
            answers = self._client().complete_many(requests, parse_verdict)
            for i, answer in zip(chunk, answers, strict=True):
                grades[i] = answer.value
                self.cache.put(self.key(rows[i], responses[i]),
                               {"found": answer.value.found, "excessive": answer.value.excessive,
                                "judge_text": answer.text})
                usage["judge_calls"] += 1
                usage["judge_retries"] += answer.attempts - 1
                usage["judge_input_tokens"] += answer.input_tokens
                usage["judge_output_tokens"] += answer.output_tokens
                usage["judge_cost_usd"] += answer.cost_usd
        return [grades[i] for i in range(len(rows))], usage

    def close(self) -> None:
        if self._chat is not None:
            self._chat.close()
