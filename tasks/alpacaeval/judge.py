"""The weighted pairwise judge of AlpacaEval 2.0, behind one interface.

The judge sees one instruction and two outputs in AlpacaEval's published template
(``judge_template.txt``, from alpaca_eval's ``alpaca_eval_clf_gpt4_turbo``: the first output is
model ``m``, the second ``M``) and answers with one identifier. The preference is read from the
probabilities of the two answer tokens, not from sampled text: ``p_first = P(m) / (P(m) + P(M))``
(alpaca_eval's ``logprob_parser``).

Backends (``JudgeParams.kind``):

* ``local``: a HF causal LM loaded in the grader (offline; SmolLM2-135M-Instruct by default, a
  weak stand-in for GPT-4 Turbo): the next-token logits after the chat-formatted prompt.
* ``openai``: any OpenAI-compatible chat completions endpoint returning ``top_logprobs``
  (e.g. a local vLLM server of a judge model), or, with ``answer: text``, one whose sampled
  answer is read as a hard verdict (reasoning models without logprobs).
* ``api``: a provider from conf/driver/ (GPT-4 Turbo for the paper grid), called through a
  recording proxy of its own that the harness lends (``a2rl.task.base.Harness``): it holds the
  real key, prices every call and logs it (``judge_calls.jsonl``, apart from the agent's
  ``llm_calls.jsonl``).

``CachedJudge`` wraps a backend: verdicts are cached on disk (sqlite) by judge id, template,
instruction and both outputs in order, so a resubmission or re-grade calls nothing; it counts
tokens and USD and refuses to spend past ``max_usd``.

Failures: an HTTP judge retries 5xx, 429, timeouts, connection errors and malformed answers
with exponential backoff, at most ``retries`` times, then raises ``JudgeFailed`` (an
infrastructure failure: the grader records ``judge_failed`` and the submission does not count).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import sqlite3
import threading
import time
from abc import ABC, abstractmethod
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from a2rl.task import GradingBudgetExhausted, GradingUnavailable, RecordingProxy, complete, progress

TEMPLATE_FILE = Path(__file__).with_name("judge_template.txt")
FIRST, SECOND = "m", "M"  # the template's identifiers of output_1 and output_2
_TURN = re.compile(r"<\|im_start\|>(system|user)\n(.*?)\n?<\|im_end\|>", re.DOTALL)


class JudgeFailed(GradingUnavailable):
    """The judge could not give verdicts (outage, malformed answers after retries, budget)."""


def template_text() -> str:
    return TEMPLATE_FILE.read_text(encoding="utf-8")


def template_id(text: str | None = None) -> str:
    return hashlib.sha256((text or template_text()).encode()).hexdigest()[:16]


def judge_messages(instruction: str, first: str, second: str,
                   template: str | None = None) -> list[dict[str, str]]:
    """The chat turns of the template with the instruction and the two outputs filled in.
    Plain replacement, not str.format: outputs contain braces."""
    text = template or template_text()
    turns = []
    for role, content in _TURN.findall(text):
        filled = (content.replace("{instruction}", instruction)
                  .replace("{output_1}", first).replace("{output_2}", second))
        turns.append({"role": role, "content": filled.strip("\n")})
    return turns


@dataclass(frozen=True)
class Pair:
    """One question to the judge: which of ``first`` (m) and ``second`` (M) is better."""

    instruction: str
    first: str
    second: str


@dataclass
class Verdict:
    """``p_first``: the judge's probability that the first output is the better one."""

    p_first: float
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    cached: bool = False
    attempts: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {"p_first": self.p_first, "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens, "cost_usd": self.cost_usd}


class Judge(ABC):
    """A backend: one verdict per pair, in order; raises JudgeFailed."""

    id: str = "judge"

    @abstractmethod
    def judge(self, pairs: list[Pair]) -> list[Verdict]:
        ...

    def close(self) -> None:
        """Free what the backend holds (a model, a proxy)."""


def p_first_from_logprobs(logprobs: dict[str, float]) -> float | None:
    """P(m) / (P(m) + P(M)) from a token -> logprob map; None when neither token is there."""
    lp_first, lp_second = logprobs.get(FIRST), logprobs.get(SECOND)
    if lp_first is None and lp_second is None:
        return None
    a = -math.inf if lp_first is None else lp_first
    b = -math.inf if lp_second is None else lp_second
    top = max(a, b)
    ea, eb = math.exp(a - top), math.exp(b - top)
    return ea / (ea + eb)


# ---- local HF judge -------------------------------------------------------------------------

class LocalHFJudge(Judge):
    """A causal LM in the grader's process: the softmax over the logits of the two answer
    tokens right after the chat-formatted prompt (greedy-free, deterministic)."""

    def __init__(self, model_dir: Path, weights_hash: str, precision: str = "fp32",
                 batch_size: int = 4, max_input_tokens: int | None = None,
                 template: str | None = None):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from a2rl.task import torch_dtype

        self.model_dir = Path(model_dir)
        self.template = template or template_text()
        self.batch_size = batch_size
        self.max_input_tokens = max_input_tokens
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_dir)
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.model = AutoModelForCausalLM.from_pretrained(
            self.model_dir, dtype=torch_dtype(precision)).to(self.device).eval()
        self.answer_ids = [self._single_token(t) for t in (FIRST, SECOND)]
        # beyond its context a model's logits mean nothing: keep the prompt's end (the task
        # statement and the answer cue are there)
        self.max_input_tokens = max_input_tokens or getattr(
            self.model.config, "max_position_embeddings", None)
        # the weights' content hash: a cached verdict belongs to these weights only
        self.id = f"local:{weights_hash[:16]}"

    def _single_token(self, text: str) -> int:
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        if len(ids) != 1:
            raise ValueError(f"judge model {self.model_dir}: answer {text!r} is {len(ids)} "
                             f"tokens; the weighted judge needs one token per answer")
        return ids[0]

    def _encode(self, pair: Pair) -> list[int]:
        from a2rl.task import encode_prompt

        messages = judge_messages(pair.instruction, pair.first, pair.second, self.template)
        if getattr(self.tokenizer, "chat_template", None):
            prompt = self.tokenizer.apply_chat_template(messages, tokenize=False,
                                                        add_generation_prompt=True)
        else:
            prompt = "\n\n".join(m["content"] for m in messages) + "\n"
        ids = encode_prompt(self.tokenizer, prompt)
        if self.max_input_tokens and len(ids) > self.max_input_tokens:
            ids = ids[-self.max_input_tokens:]
        return ids

    def judge(self, pairs: list[Pair]) -> list[Verdict]:
        import torch

        encoded = [self._encode(p) for p in pairs]
        order = sorted(range(len(pairs)), key=lambda i: -len(encoded[i]))
        out: list[Verdict | None] = [None] * len(pairs)
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                idx = order[start:start + self.batch_size]
                batch = self.tokenizer.pad({"input_ids": [encoded[i] for i in idx]},
                                           padding=True, return_tensors="pt")
                mask = batch["attention_mask"].to(self.device)
                # position ids from the mask: a left-padded row scores as it would alone
                positions = (mask.cumsum(-1) - 1).clamp(min=0)
                logits = self.model(input_ids=batch["input_ids"].to(self.device),
                                    attention_mask=mask, position_ids=positions).logits
                two = logits[:, -1, self.answer_ids].float().log_softmax(-1)
                for row, i in enumerate(idx):
                    out[i] = Verdict(p_first=float(two[row, 0].exp()),
                                     input_tokens=len(encoded[i]), output_tokens=0)
        return [v for v in out if v is not None]

    def close(self) -> None:
        self.model = None


# ---- OpenAI-compatible judge ----------------------------------------------------------------

@dataclass
class HttpSettings:
    base_url: str  # with the version, e.g. http://127.0.0.1:8000/v1
    model: str
    api_key: str | None = None
    answer: str = "logprobs"  # logprobs | text
    top_logprobs: int = 5
    max_tokens: int = 1
    timeout_s: float = 60.0
    retries: int = 4
    backoff_s: float = 1.0
    concurrency: int = 4
    price_in_per_mtok: float = 0.0
    price_out_per_mtok: float = 0.0


class OpenAIJudge(Judge):
    """Chat completions over HTTP, one request per pair (AlpacaEval's batch_size 1)."""

    def __init__(self, settings: HttpSettings, template: str | None = None, sleep=time.sleep):
        import httpx

        self.s = settings
        self.template = template or template_text()
        self.sleep = sleep
        self.id = f"openai:{settings.model}:{settings.answer}"
        headers = {"authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
        self.http = httpx.Client(timeout=settings.timeout_s, headers=headers)

    def request_body(self, pair: Pair) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.s.model,
            "messages": judge_messages(pair.instruction, pair.first, pair.second,
                                       self.template)}
        if self.s.answer == "logprobs":
            # AlpacaEval 2.0's settings: one token, its top logprobs (temperature is moot)
            body |= {"max_tokens": self.s.max_tokens, "temperature": 1.0, "logprobs": True,
                     "top_logprobs": self.s.top_logprobs}
        else:  # reasoning models take no logprobs and count their thinking as completion
            body |= {"max_completion_tokens": self.s.max_tokens}
        return body

    def judge(self, pairs: list[Pair]) -> list[Verdict]:
        if len(pairs) <= 1 or self.s.concurrency <= 1:
            return [self._one(p) for p in pairs]
        with ThreadPoolExecutor(self.s.concurrency) as pool:
            return list(pool.map(self._one, pairs))

    def _one(self, pair: Pair) -> Verdict:
        call = complete(self.http, f"{self.s.base_url.rstrip('/')}/chat/completions",
                        self.request_body(pair), self._parse, who=f"judge {self.id}",
                        fail=JudgeFailed, retries=self.s.retries, backoff_s=self.s.backoff_s,
                        price_in_per_mtok=self.s.price_in_per_mtok,
                        price_out_per_mtok=self.s.price_out_per_mtok, sleep=self.sleep)
        return Verdict(p_first=call.value, input_tokens=call.input_tokens,
                       output_tokens=call.output_tokens, cost_usd=call.cost_usd,
                       attempts=call.attempts)

    def _parse(self, answer: dict[str, Any]) -> float:
        choice = answer["choices"][0]
        if self.s.answer == "text":
            text = (choice["message"].get("content") or "").strip().strip("\"'`")
            if text not in (FIRST, SECOND):
                raise ValueError(f"answer {text[:40]!r} is neither {FIRST} nor {SECOND}")
            return 1.0 if text == FIRST else 0.0
        top = choice["logprobs"]["content"][0]["top_logprobs"]
        p = p_first_from_logprobs({t["token"]: float(t["logprob"]) for t in top
                                   if t.get("token") in (FIRST, SECOND)})
        if p is None:
            raise ValueError(f"neither {FIRST!r} nor {SECOND!r} among the top logprobs")
        return p

    def close(self) -> None:
        self.http.close()


class ProxiedJudge(OpenAIJudge):
    """A conf/driver/ provider through a recording proxy of the judge's own (lent by the
    harness): the proxy holds the real key, prices each call with the driver's prices, logs it
    and refuses calls (HTTP 402) once its budget is spent. Closing the judge stops the proxy."""

    def __init__(self, driver, proxy: RecordingProxy, settings: HttpSettings,
                 template: str | None = None, sleep=time.sleep):
        self.proxy = proxy
        settings.base_url = proxy.url + "/v1"
        settings.api_key = proxy.dummy_key
        settings.model = driver.model
        rates = driver.prices.rates()
        settings.price_in_per_mtok, settings.price_out_per_mtok = rates.input, rates.output
        super().__init__(settings, template, sleep)
        self.id = f"api:{driver.model}:{settings.answer}"

    def close(self) -> None:
        super().close()
        self.proxy.stop()


# ---- cache, accounting, budget --------------------------------------------------------------

class VerdictCache:
    """sqlite: key -> verdict JSON. Safe across threads and processes (one writer at a time)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        with self._connect() as db:
            db.execute("CREATE TABLE IF NOT EXISTS verdicts (key TEXT PRIMARY KEY, value TEXT)")

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=60)

    @staticmethod
    def key(judge_id: str, template: str, pair: Pair) -> str:
        parts = [judge_id, template_id(template), pair.instruction, pair.first, pair.second]
        return hashlib.sha256(json.dumps(parts).encode()).hexdigest()

    def get_many(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        with self._lock, self._connect() as db:
            for start in range(0, len(keys), 500):
                chunk = keys[start:start + 500]
                rows = db.execute(f"SELECT key, value FROM verdicts WHERE key IN "
                                  f"({','.join('?' * len(chunk))})", chunk).fetchall()
                found |= {k: json.loads(v) for k, v in rows}
        return found

    def put_many(self, items: dict[str, dict[str, Any]]) -> None:
        with self._lock, self._connect() as db:
            db.executemany("INSERT OR REPLACE INTO verdicts VALUES (?, ?)",
                           [(k, json.dumps(v)) for k, v in items.items()])


@dataclass
class JudgeUsage:
    """What judging cost: calls made, cache hits, tokens, USD."""

    calls: int = 0
    cache_hits: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    retries: int = 0

    def add(self, other: JudgeUsage) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def to_dict(self) -> dict[str, Any]:
        return {k: (round(v, 6) if isinstance(v, float) else v)
                for k, v in self.__dict__.items()}


@dataclass
class CachedJudge:
    """A backend with the disk cache, usage accounting and a USD budget. ``spent_usd`` carries
    over between evaluations of one run (the task keeps the CachedJudge)."""

    backend: Judge
    cache: VerdictCache | None
    template: str
    max_usd: float | None = None
    chunk: int = 32  # verdicts written to the cache every this many pairs
    spent_usd: float = 0.0
    total: JudgeUsage = field(default_factory=JudgeUsage)

    def judge(self, pairs: list[Pair]) -> tuple[list[Verdict], JudgeUsage]:
        usage = JudgeUsage()
        keys = [VerdictCache.key(self.backend.id, self.template, p) for p in pairs]
        known = self.cache.get_many(keys) if self.cache else {}
        out: dict[int, Verdict] = {}
        todo = []
        for i, key in enumerate(keys):
            if key in known:
                out[i] = Verdict(p_first=known[key]["p_first"], cached=True)
                usage.cache_hits += 1
            else:
                todo.append(i)
        bar = progress(total=len(todo), desc="judge", unit="pair")
        try:
            for start in range(0, len(todo), self.chunk):
                self._check_budget()
                idx = todo[start:start + self.chunk]
                verdicts = self.backend.judge([pairs[i] for i in idx])
                fresh = {}
                for i, verdict in zip(idx, verdicts, strict=True):
                    out[i] = verdict
                    fresh[keys[i]] = verdict.to_dict()
                    usage.calls += 1
                    usage.retries += verdict.attempts - 1
                    usage.input_tokens += verdict.input_tokens
                    usage.output_tokens += verdict.output_tokens
                    usage.cost_usd += verdict.cost_usd
                    self.spent_usd += verdict.cost_usd
                if self.cache:  # kept even if a later chunk fails: a retry pays only the rest
                    self.cache.put_many(fresh)
                bar.update(len(idx))
        finally:
            bar.close()
            self.total.add(usage)
        return [out[i] for i in range(len(pairs))], usage

    def _check_budget(self) -> None:
        if self.max_usd is not None and self.spent_usd >= self.max_usd:
            raise GradingBudgetExhausted(f"the judge budget is used up: {self.spent_usd:.4f} of "
                              f"{self.max_usd} USD (task.params.judge.max_usd)")

    def close(self) -> None:
        self.backend.close()
