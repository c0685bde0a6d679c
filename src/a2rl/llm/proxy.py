"""The per-run recording LLM proxy: the only way from an agent to its driver LLM.

It listens on 127.0.0.1 (a free port), speaks the protocols of ``a2rl.llm.wire`` (OpenAI chat
completions and responses, Anthropic messages, Gemini generateContent), forwards each call to
the driver's provider with the real API key, and appends one line per call to
``llm_calls.jsonl``. The sandbox only ever sees a per-run dummy key, which is all the proxy
accepts. The model is pinned to the driver's: whatever model a CLI asks for (side calls to a
"small fast" model included) is answered by the driver's model and priced as such.

How a call reaches the provider (``route`` in the record):

* ``native``: the provider speaks the agent's protocol; bytes pass through, streamed responses
  event by event as they arrive, usage read on the way;
* ``openai_compatible``: an OpenAI-chat agent with a provider that offers an OpenAI-compatible
  endpoint (``driver.openai_base_url``: Anthropic, Gemini); passed through the same way;
* ``translated``: otherwise the request is translated into OpenAI chat completions, sent
  without streaming, and the answer written back in the agent's protocol (streamed as SSE when
  the agent asked for a stream);
* ``local``: token-counting calls the provider cannot answer, estimated here.

Budgets: with ``max_tokens`` (input + output) or ``max_usd`` set, the call that reaches the
limit completes; later calls are refused (HTTP 402, an error in the agent's protocol) and
``exhausted`` turns true, which the runner takes as the signal to stop the agent.

llm_calls.jsonl, one line per call::

    {"call": 3, "time": "...Z", "protocol": "anthropic", "route": "native",
     "path": "/v1/messages", "requested_model": "claude-haiku-4-5", "model": "claude-opus-4-6",
     "stream": true, "status": 200, "outcome": "ok", "input_tokens": 5120,
     "output_tokens": 210, "cached_input_tokens": 4096, "usage_reported": true,
     "latency_s": 3.2, "cost_usd": 0.0213, "error": null}

Each record is also handed to ``on_record``: a run's driver session makes it an ``llm_call``
event of events.jsonl (a2rl.llm.drivers.call_event).

``outcome`` is ok, upstream_error (the provider answered >= 400), connection_error (it could not
be reached), budget_exhausted, unauthorized, bad_request, unsupported or client_closed (the
agent closed the stream, or the run ended while the local driver's server was still answering).

The driver's settings, the route and the upstream URL and headers are ``a2rl.llm.upstream``'s;
the server is ``a2rl.llm.loopback``'s.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Optional

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from a2rl.common.files import append_jsonl, iter_jsonl, utc_now
from a2rl.common.layout import RunPaths
from a2rl.llm.loopback import LoopbackServer, Served
from a2rl.llm.parse import to_chat_request, turn_of_chat
from a2rl.llm.render import count_tokens_answer, render_error, turn_response
from a2rl.llm.upstream import ProxyError, ProxySettings, upstream_headers, upstream_url
from a2rl.llm.wire import (
    GEMINI,
    OPENAI_CHAT,
    Usage,
    UsageTracker,
    WireError,
    gemini_method,
    is_counting,
    is_streaming,
    protocol_of,
    usage_of,
)

# response headers relayed to the agent (the rest are per-connection or the provider's own)
KEPT_RESPONSE_HEADERS = {"content-type", "request-id", "x-request-id", "anthropic-ratelimit",
                         "retry-after", "openai-processing-ms"}


class CallLog:
    """llm_calls.jsonl, the running totals and the budget (thread-safe)."""

    def __init__(self, path: Path, settings: ProxySettings,
                 on_exhausted: Optional[Callable[[dict[str, Any]], None]] = None,
                 on_record: Optional[Callable[[dict[str, Any]], None]] = None):
        self.path = Path(path)
        self.settings = settings
        self.on_exhausted = on_exhausted
        self.on_record = on_record  # told each record after it is written (the run's events)
        self.calls = 0
        self.tokens = 0
        self.cost_usd = 0.0
        self.exhausted = False
        # set by the harness when the run is over and it stops the driver's own server (the
        # local driver): a call cut by that is the run's end, not the provider's failure
        self.run_ended = False
        self._lock = threading.Lock()

    def record(self, **fields: Any) -> dict[str, Any]:
        usage: Usage = fields.pop("usage", None) or Usage()
        s = self.settings
        cost = usage.cost(s.price_in_per_mtok, s.price_out_per_mtok, s.price_cached_in_per_mtok)
        with self._lock:
            self.calls += 1
            self.tokens += usage.input_tokens + usage.output_tokens
            self.cost_usd += cost
            entry = {"call": self.calls, "time": utc_now(), **fields,
                     "input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
                     "cached_input_tokens": usage.cached_input_tokens,
                     "usage_reported": usage.found, "cost_usd": round(cost, 6)}
            entry.setdefault("error", None)
            append_jsonl(self.path, entry)
            newly = not self.exhausted and self._over_budget()
            if newly:
                self.exhausted = True
        if self.on_record is not None:
            self.on_record(entry)
        if newly and self.on_exhausted is not None:
            self.on_exhausted(self.totals())
        return entry

    def _over_budget(self) -> bool:
        s = self.settings
        return ((s.max_tokens is not None and self.tokens >= s.max_tokens)
                or (s.max_usd is not None and self.cost_usd >= s.max_usd))

    def totals(self) -> dict[str, Any]:
        return {"calls": self.calls, "tokens": self.tokens, "cost_usd": round(self.cost_usd, 6),
                "max_tokens": self.settings.max_tokens, "max_usd": self.settings.max_usd}


def llm_totals(run_root: Path) -> dict[str, Any]:
    """Totals of a run's llm_calls.jsonl (zeros when there is none): calls, failed_calls,
    input/output/cached tokens, cost_usd, models, and calls whose usage was not reported."""
    totals: dict[str, Any] = {"calls": 0, "failed_calls": 0, "input_tokens": 0,
                              "output_tokens": 0, "cached_input_tokens": 0, "cost_usd": 0.0,
                              "usage_missing": 0, "budget_exhausted": False, "models": []}
    path = RunPaths(Path(run_root)).llm_calls
    models: set[str] = set()
    if path.exists():
        for entry in iter_jsonl(path):
            totals["calls"] += 1
            if entry.get("outcome") != "ok":
                totals["failed_calls"] += 1
            if entry.get("outcome") == "budget_exhausted":
                totals["budget_exhausted"] = True
            elif entry.get("outcome") == "ok" and not entry.get("usage_reported"):
                totals["usage_missing"] += 1
            for key in ("input_tokens", "output_tokens", "cached_input_tokens"):
                totals[key] += int(entry.get(key) or 0)
            totals["cost_usd"] += float(entry.get("cost_usd") or 0.0)
            if entry.get("model"):
                models.add(str(entry["model"]))
    totals["cost_usd"] = round(totals["cost_usd"], 6)
    totals["models"] = sorted(models)
    return totals


# --------------------------------------------------------------------------------- server

def _presented_key(request: Request) -> str:
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return (request.headers.get("x-api-key") or request.headers.get("x-goog-api-key")
            or request.headers.get("api-key") or request.query_params.get("key") or "")


def create_app(settings: ProxySettings, log: CallLog, dummy_key: str) -> FastAPI:
    state: dict[str, httpx.AsyncClient] = {}

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        yield
        if "http" in state:
            await state.pop("http").aclose()

    app = FastAPI(title="a2rl LLM proxy", docs_url=None, redoc_url=None, openapi_url=None,
                  lifespan=lifespan)

    def client() -> httpx.AsyncClient:
        if "http" not in state:
            state["http"] = httpx.AsyncClient(timeout=httpx.Timeout(settings.timeout_s,
                                                                    connect=30.0))
        return state["http"]

    @app.middleware("http")
    async def only_with_the_key(request: Request, call_next):
        """Every route needs the run's key, and a request without it is not logged: under the
        ``open`` network policy other runs' agents share loopback, and must neither probe this
        proxy nor fill this run's llm_calls.jsonl and report (issue #28, as for the grader)."""
        if not hmac.compare_digest(_presented_key(request).encode(), dummy_key.encode()):
            protocol = protocol_of(request.url.path) or OPENAI_CHAT
            return JSONResponse(render_error(protocol, 401, "wrong API key for the a2rl proxy "
                                             "(use the one in the environment)",
                                             "authentication_error"), 401)
        return await call_next(request)

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/models")
    def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": settings.model, "object": "model",
                                             "owned_by": settings.provider}]}

    @app.post("/{path:path}")
    async def call(path: str, request: Request):
        path = "/" + path
        started = time.monotonic()
        protocol = protocol_of(path)
        base = {"protocol": protocol, "path": path, "model": settings.model}
        if protocol is None:
            log.record(**base, route=None, requested_model=None, stream=False, status=404,
                       outcome="unsupported", latency_s=0.0, error=f"no route {path}")
            return JSONResponse({"error": {"message": f"the a2rl proxy has no route {path}"}},
                                404)

        def refuse(status: int, outcome: str, message: str, kind: str, **extra: Any):
            log.record(**base, route=None, requested_model=extra.get("requested_model"),
                       stream=extra.get("stream", False), status=status, outcome=outcome,
                       latency_s=round(time.monotonic() - started, 3), error=message)
            return JSONResponse(render_error(protocol, status, message, kind), status)

        try:
            body = json.loads(await request.body() or b"{}")
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return refuse(400, "bad_request", "the body must be a JSON object",
                          "invalid_request_error")
        requested = (gemini_method(path)[0] if protocol == GEMINI else body.get("model"))
        stream = is_streaming(protocol, path, body)
        if log.exhausted:
            return refuse(402, "budget_exhausted", "the run's LLM budget is used up "
                          f"({log.totals()})", "budget_exhausted", requested_model=requested,
                          stream=stream)
        try:
            route, base_url = settings.route(protocol)
        except ProxyError as err:
            return refuse(501, "unsupported", str(err), "not_supported",
                          requested_model=requested, stream=stream)
        counting = is_counting(protocol, path)
        if counting and route != "native":
            log.record(**base, route="local", requested_model=requested, stream=False,
                       status=200, outcome="ok", latency_s=0.0)
            return JSONResponse(count_tokens_answer(protocol, body))
        fields = base | {"route": route, "requested_model": requested, "stream": stream}
        if route == "translated":
            return await _translated(protocol, body, stream, base_url, request, fields,
                                     started)
        if protocol != GEMINI:
            body["model"] = settings.model
        if protocol == OPENAI_CHAT and stream:
            options = body.setdefault("stream_options", {})
            if isinstance(options, dict):
                options["include_usage"] = True
        url = upstream_url(protocol, route, base_url, path, settings.model,
                           dict(request.query_params), settings.provider)
        headers = upstream_headers(protocol, route, settings, dict(request.headers))
        try:
            upstream = await client().send(
                client().build_request("POST", url, headers=headers, json=body), stream=True)
        except httpx.HTTPError as err:
            return _unreachable(protocol, fields, started, err)
        kept = {k: v for k, v in upstream.headers.items() if k.lower() in KEPT_RESPONSE_HEADERS}
        if "text/event-stream" in upstream.headers.get("content-type", ""):
            return StreamingResponse(_relay(upstream, protocol, fields, started, counting),
                                     status_code=upstream.status_code, headers=kept)
        raw = await upstream.aread()
        await upstream.aclose()
        try:
            answer = json.loads(raw)
        except ValueError:
            answer = None
        ok = upstream.status_code < 400
        log.record(**fields, status=upstream.status_code,
                   outcome="ok" if ok else "upstream_error",
                   usage=None if counting else usage_of(protocol, answer),
                   latency_s=round(time.monotonic() - started, 3),
                   error=None if ok else raw[:500].decode(errors="replace"))
        return Response(raw, status_code=upstream.status_code, headers=kept)

    async def _relay(upstream: httpx.Response, protocol: str, fields: dict[str, Any],
                     started: float, counting: bool) -> AsyncIterator[bytes]:
        tracker = UsageTracker(protocol)
        outcome, error = "ok" if upstream.status_code < 400 else "upstream_error", None
        try:
            async for chunk in upstream.aiter_raw():
                tracker.feed(chunk)
                yield chunk
            tracker.close()
        except (asyncio.CancelledError, GeneratorExit):
            if not tracker.finished:
                outcome, error = "client_closed", "the agent closed the stream"
            raise
        except httpx.HTTPError as err:
            outcome, error = "connection_error", f"{type(err).__name__}: {err}"
        finally:
            await upstream.aclose()
            if tracker.error and outcome == "ok":
                outcome, error = "upstream_error", tracker.error
            log.record(**fields, status=upstream.status_code, outcome=outcome,
                       usage=None if counting else tracker.usage,
                       latency_s=round(time.monotonic() - started, 3), error=error)

    def _unreachable(protocol: str, fields: dict[str, Any], started: float,
                     err: Exception) -> JSONResponse:
        message = f"the driver's API could not be reached: {type(err).__name__}: {err}"
        outcome = "connection_error"
        if log.run_ended:
            outcome, message = "client_closed", f"the run ended before the reply ({message})"
        log.record(**fields, status=502, outcome=outcome,
                   latency_s=round(time.monotonic() - started, 3), error=message[:500])
        return JSONResponse(render_error(protocol, 502, message, "api_error"), 502)

    async def _translated(protocol: str, body: dict[str, Any], stream: bool, base_url: str,
                          request: Request, fields: dict[str, Any], started: float):
        try:
            chat = to_chat_request(protocol, body, settings.model)
        except (WireError, KeyError, TypeError, AttributeError) as err:
            log.record(**fields, status=400, outcome="bad_request",
                       latency_s=round(time.monotonic() - started, 3),
                       error=f"cannot translate the request: {err}")
            return JSONResponse(render_error(protocol, 400, f"cannot translate: {err}",
                                             "invalid_request_error"), 400)
        url = upstream_url(protocol, "translated", base_url, "", settings.model, {})
        headers = upstream_headers(protocol, "translated", settings, dict(request.headers))
        try:
            upstream = await client().post(url, headers=headers, json=chat)
        except httpx.HTTPError as err:
            return _unreachable(protocol, fields, started, err)
        try:
            answer = upstream.json()
        except ValueError:
            answer = None
        if upstream.status_code >= 400 or not isinstance(answer, dict):
            message = upstream.text[:500]
            log.record(**fields, status=upstream.status_code, outcome="upstream_error",
                       latency_s=round(time.monotonic() - started, 3), error=message)
            return JSONResponse(render_error(protocol, upstream.status_code, message,
                                             "api_error"), max(upstream.status_code, 400))
        try:
            turn = turn_of_chat(answer)
        except WireError as err:
            log.record(**fields, status=502, outcome="upstream_error",
                       latency_s=round(time.monotonic() - started, 3), error=str(err))
            return JSONResponse(render_error(protocol, 502, str(err), "api_error"), 502)
        turn.model = settings.model
        log.record(**fields, status=200, outcome="ok", usage=usage_of(OPENAI_CHAT, answer),
                   latency_s=round(time.monotonic() - started, 3))
        return turn_response(protocol, turn, stream, request.query_params.get("alt") == "sse")

    return app


class LLMProxy(Served):
    """One run's proxy: ``url`` for the agent, ``dummy_key`` its only accepted key,
    ``exhausted`` true once a budget is used up."""

    def __init__(self, settings: ProxySettings, calls_path: Path, dummy_key: str,
                 on_exhausted: Optional[Callable[[dict[str, Any]], None]] = None,
                 on_record: Optional[Callable[[dict[str, Any]], None]] = None,
                 socket_path: Optional[Path] = None):
        self.settings = settings
        self.dummy_key = dummy_key
        self.log = CallLog(calls_path, settings, on_exhausted, on_record)
        # ``socket_path``: served there too, for a sandbox with a network namespace of its own
        self._server = LoopbackServer(create_app(settings, self.log, dummy_key), "a2rl-proxy",
                                      socket_path)

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    @property
    def exhausted(self) -> bool:
        return self.log.exhausted
