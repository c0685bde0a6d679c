"""The web backend: a search API over HTTP, page fetching with text extraction (trafilatura),
and a request cache that makes grading reproducible.

The provider is configuration (``ProviderSpec``): endpoint, method, the variable holding the
key and the header carrying it, the query and count parameters, and where the result list and
its title / URL / snippet fields are in the JSON answer. Presets: ``brave`` (Brave Search API,
GET, ``web.results[].{title,url,description}``) and ``serper`` (Serper's Google results, POST,
``organic[].{title,link,snippet}``).

Every search and every page fetch goes through ``RequestCache`` (sqlite, keyed by the request:
provider, endpoint, query and count; or the URL), kept with the task's prepared data: grading a
submission again, or grading another one that asks the same, sees the same results and costs no
call. Permanent answers are cached (results, pages, dead links); transient failures (timeouts,
5xx) are not. Each network call is logged like an LLM call (``calls.jsonl``: time, kind,
provider, status, outcome, latency, cost), and ``usage()`` sums calls, cache hits and USD.

A search API that cannot be used (no key, refused key, outage after retries) raises
``SearchUnavailable``: grading cannot go on, which is not the model's fault. A page that cannot
be read is the web's answer: the model sees "cannot be read".

Self-contained apart from httpx, trafilatura and ``search_env`` (copied as ``dsqa_env.py``), so
the agent's copy (``dsqa_web.py``) runs in a sandbox with the network.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from dataclasses import asdict, dataclass, fields, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

try:
    from a2rl_tasks.deepsearchqa.search_env import DocumentUnavailable, SearchBackend, SearchResult
except ImportError:  # inside an agent's sandbox: the copy next to this file
    from dsqa_env import DocumentUnavailable, SearchBackend, SearchResult


class SearchUnavailable(RuntimeError):
    """The search API cannot be used (no key, a refused key, an outage after retries)."""


class SearchBudgetExhausted(SearchUnavailable):
    """The run's search budget (``web.max_usd``) is spent."""


@dataclass
class ProviderSpec:
    name: str
    endpoint: str
    method: str          # GET: parameters in the URL; POST: a JSON body
    key_env: str
    key_header: str
    query_field: str
    count_field: str
    results_path: str    # dotted path of the result list in the answer
    title_field: str
    url_field: str
    snippet_field: str
    price_per_search_usd: float = 0.0


PROVIDERS = {
    # https://api-dashboard.search.brave.com/app/documentation/web-search/get-started
    "brave": ProviderSpec("brave", "https://api.search.brave.com/res/v1/web/search", "GET",
                          "BRAVE_API_KEY", "X-Subscription-Token", "q", "count", "web.results",
                          "title", "url", "description", 0.005),
    # https://serper.dev (Google results)
    "serper": ProviderSpec("serper", "https://google.serper.dev/search", "POST",
                           "SERPER_API_KEY", "X-API-KEY", "q", "num", "organic", "title", "link",
                           "snippet", 0.001),
}


def provider_spec(params: Any) -> ProviderSpec:
    """The preset ``params.provider`` names, with every field ``params`` sets (not None) put
    over it; ``custom`` has no preset, so every field must be set."""
    given = {f.name: getattr(params, f.name) for f in fields(ProviderSpec)
             if f.name != "name" and getattr(params, f.name, None) is not None}
    if params.provider in PROVIDERS:
        return replace(PROVIDERS[params.provider], **given)
    missing = sorted({f.name for f in fields(ProviderSpec)} - {"name", "price_per_search_usd"}
                     - set(given))
    if params.provider != "custom" or missing:
        raise ValueError(f"task.params.web.provider={params.provider!r}: expected one of "
                         f"{sorted(PROVIDERS)} or custom with every field set"
                         + (f" (missing {missing})" if missing else ""))
    return ProviderSpec(name="custom", **given)


def dig(data: Any, path: str) -> Any:
    """``data["a"]["b"]`` for the path ``a.b``; None when a step is missing."""
    for part in path.split(".") if path else []:
        if not isinstance(data, dict):
            return None
        data = data.get(part)
    return data


class RequestCache:
    """sqlite: request key -> answer JSON, shared by processes (one writer at a time)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._run("CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, kind TEXT, "
                  "request TEXT, answer TEXT, time TEXT)")

    def _run(self, sql: str, args: tuple = ()) -> Any:
        """One statement in its own committed transaction; the first row it returns."""
        with self._lock:
            db = sqlite3.connect(self.path, timeout=60)
            try:
                with db:
                    return db.execute(sql, args).fetchone()
            finally:
                db.close()

    @staticmethod
    def key(request: dict[str, Any]) -> str:
        return hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()

    def get(self, request: dict[str, Any]) -> Any:
        row = self._run("SELECT answer FROM answers WHERE key = ?", (self.key(request),))
        return None if row is None else json.loads(row[0])

    def put(self, request: dict[str, Any], answer: Any) -> None:
        self._run("INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?, ?)",
                  (self.key(request), request["kind"], json.dumps(request, sort_keys=True),
                   json.dumps(answer), _now()))

    def __len__(self) -> int:
        return self._run("SELECT COUNT(*) FROM answers")[0]


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class WebBackend(SearchBackend):
    """Search and read the web through one provider, every request cached."""

    def __init__(self, spec: ProviderSpec, cache_dir: Path, timeout_s: float = 20.0,
                 retries: int = 2, max_page_bytes: int = 3_000_000,
                 user_agent: str = "a2rl-deepsearchqa/0.1", snippet_chars: int = 160,
                 sleep=time.sleep, max_usd: float | None = None, spent_usd: float = 0.0):
        import httpx

        self.spec = spec
        # the run's search budget and what its earlier gradings spent of it
        self.max_usd, self.spent_usd = max_usd, spent_usd
        self.cache = RequestCache(Path(cache_dir) / "web.sqlite")
        self.calls_log = Path(cache_dir) / "web_calls.jsonl"
        self.retries, self.max_page_bytes = retries, max_page_bytes
        self.snippet_chars = snippet_chars
        self.sleep = sleep
        self.http = httpx.Client(timeout=timeout_s, follow_redirects=True,
                                 headers={"user-agent": user_agent})
        self.titles: dict[str, str] = {}  # URL -> title from the results that showed it
        self.counts = {"web_calls": 0, "web_cache_hits": 0, "web_cost_usd": 0.0,
                       "web_failed_calls": 0}
        self._log_lock = threading.Lock()

    @classmethod
    def from_params(cls, params: Any, cache_dir: Path, snippet_chars: int = 160,
                    spent_usd: float = 0.0) -> WebBackend:
        return cls(provider_spec(params), cache_dir, params.timeout_s, params.retries,
                   params.max_page_bytes, params.user_agent, snippet_chars,
                   max_usd=params.max_usd, spent_usd=spent_usd)

    def usage(self) -> dict[str, float]:
        return dict(self.counts)

    def close(self) -> None:
        self.http.close()

    # ---- search ---------------------------------------------------------------------------

    def search(self, query: str, k: int) -> list[SearchResult]:
        s = self.spec
        request = {"kind": "search", "provider": s.name, "endpoint": s.endpoint,
                   "query": " ".join(query.split()), "count": k}
        answer = self.cache.get(request)
        if answer is None:
            answer = self._search_online(request)
            self.cache.put(request, answer)
        else:
            self.counts["web_cache_hits"] += 1
        results = [SearchResult(r["url"], r["title"], self._clip(r["snippet"]))
                   for r in answer["results"][:k]]
        for r in results:
            self.titles.setdefault(r.key, r.title)
        return results

    def _search_online(self, request: dict[str, Any]) -> dict[str, Any]:
        s = self.spec
        spent = self.spent_usd + self.counts["web_cost_usd"]
        if self.max_usd is not None and spent >= self.max_usd:
            raise SearchBudgetExhausted(f"the search budget is used up: {spent:.4f} of "
                                        f"{self.max_usd} USD (task.params.web.max_usd)")
        key = os.environ.get(s.key_env)
        if not key:
            raise SearchUnavailable(f"the web search provider {s.name!r} needs its API key in "
                                    f"${s.key_env}")
        params = {s.query_field: request["query"], s.count_field: request["count"]}
        last = "no attempt"
        for attempt in range(self.retries + 1):
            if attempt:
                self.sleep(2 ** (attempt - 1))
            response, error, started = None, None, time.monotonic()
            try:
                if s.method.upper() == "GET":
                    response = self.http.get(s.endpoint, params=params,
                                             headers={s.key_header: key,
                                                      "accept": "application/json"})
                else:
                    response = self.http.post(s.endpoint, json=params,
                                              headers={s.key_header: key})
            except Exception as err:  # httpx's transport errors and timeouts
                error = f"{type(err).__name__}: {err}"
            status = response.status_code if response is not None else None
            ok = status is not None and status < 400
            self._log("search", status, "ok" if ok else "error", started,
                      s.price_per_search_usd if ok else 0.0, error or (
                          None if ok else response.text[:300]))
            if ok:
                return {"results": self._results(response)}
            last = error or f"HTTP {status}: {response.text[:200]}"
            if status is not None and status < 500 and status != 429:
                break  # a refused key or a bad request: retrying will not help
        raise SearchUnavailable(f"web search ({s.name}) failed: {last}")

    def _results(self, response) -> list[dict[str, str]]:
        s = self.spec
        try:
            found = dig(response.json(), s.results_path) or []
        except ValueError as err:
            raise SearchUnavailable(f"web search ({s.name}) answered with no JSON: {err}") \
                from err
        if not isinstance(found, list):
            raise SearchUnavailable(f"web search ({s.name}): {s.results_path} is not a list; "
                                    f"check task.params.web.results_path")
        out = []
        for item in found:
            url = str(dig(item, s.url_field) or "")
            if url:
                out.append({"url": url, "title": str(dig(item, s.title_field) or url),
                            "snippet": " ".join(str(dig(item, s.snippet_field) or "").split())})
        return out

    def _clip(self, text: str) -> str:
        return text if len(text) <= self.snippet_chars else \
            text[:self.snippet_chars].rsplit(" ", 1)[0] + " ..."

    # ---- pages ----------------------------------------------------------------------------

    def read(self, key: str) -> tuple[str, str]:
        request = {"kind": "fetch", "url": key}
        answer = self.cache.get(request)
        if answer is None:
            answer = self._fetch(key)
            if answer.get("permanent", True):
                self.cache.put(request, answer)
        else:
            self.counts["web_cache_hits"] += 1
        if answer.get("error"):
            raise DocumentUnavailable(answer["error"])
        return self.titles.get(key) or answer.get("title") or key, answer["text"]

    def _fetch(self, url: str) -> dict[str, Any]:
        started, status = time.monotonic(), None
        try:
            with self.http.stream("GET", url) as response:
                status = response.status_code
                body = b""
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) >= self.max_page_bytes:
                        break
                kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
                encoding = response.encoding or "utf-8"
        except Exception as err:  # a dead host or a timeout: the web's answer, not cached
            self._log("fetch", status, "error", started, 0.0, f"{type(err).__name__}: {err}")
            return {"error": f"the page could not be fetched ({type(err).__name__})",
                    "permanent": False}
        if status >= 400:
            self._log("fetch", status, "error", started, 0.0, f"HTTP {status}")
            return {"error": f"the page answered HTTP {status}", "permanent": status < 500}
        self._log("fetch", status, "ok", started, 0.0, None)
        text = self._extract(body, kind, encoding)
        if not text:
            return {"error": f"no readable text in the page ({kind or 'unknown type'})"}
        return {"text": text, "title": None}

    @staticmethod
    def _extract(body: bytes, kind: str, encoding: str) -> str:
        if kind == "text/plain":
            return body.decode(encoding, errors="replace").strip()
        if kind not in ("text/html", "application/xhtml+xml", ""):
            return ""
        import trafilatura

        text = trafilatura.extract(body.decode(encoding, errors="replace"),
                                   include_comments=False, include_tables=True)
        return (text or "").strip()

    def _log(self, kind: str, status: int | None, outcome: str, started: float, cost: float,
             error: str | None) -> None:
        with self._log_lock:
            self.counts["web_calls"] += 1
            self.counts["web_cost_usd"] += cost
            self.counts["web_failed_calls"] += outcome != "ok"
            entry = {"call": self.counts["web_calls"], "time": _now(), "kind": kind,
                     "provider": self.spec.name, "status": status, "outcome": outcome,
                     "latency_s": round(time.monotonic() - started, 3),
                     "cost_usd": round(cost, 6), "error": error}
            with self.calls_log.open("a") as fh:
                fh.write(json.dumps(entry) + "\n")


def spec_dict(spec: ProviderSpec) -> dict[str, Any]:
    """The provider as recorded in prepared.json (no key: only the variable's name)."""
    return asdict(spec)
