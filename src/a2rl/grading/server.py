"""The grader over HTTP: ``create_app`` wraps a ``GradingService`` in FastAPI with a bearer
token and bounded requests; ``GradingServer`` serves the app on a unix socket (reachable from a
sandbox without network) and on 127.0.0.1:<free port>.

A request without the run's bearer token is answered 401 before any route sees it
(``TokenGate``), and costs the run nothing. An authorized request is refused before it costs
anything when its body is over ``MAX_BODY_BYTES`` (413, read no further) or is not a JSON object
with model_path or nests too deep (400); each such refused submission is recorded through the
service like any invalid one.
"""

from __future__ import annotations

import hmac
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any, Callable, Optional

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from a2rl.llm.loopback import LoopbackServer, Served

# the service is a2rl.grading.grader.GradingService (which imports this module, so it is not
# imported here): submit, refuse and status are what the app uses
GradingService = Any

MAX_BODY_BYTES = 64 * 1024
BODY_SHAPE = 'the body must be JSON like {"model_path": "output/ckpt-1"}'
UNAUTHORIZED = "missing or wrong bearer token (use $A2RL_TOKEN)"


class BodyTooLarge(Exception):
    pass


async def read_body(request: Request, limit: int) -> bytes:
    """The request's body, refused (BodyTooLarge) past ``limit`` bytes without reading on."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise BodyTooLarge
    return bytes(body)


def parse_submission(body: bytes) -> Optional[dict[str, Any]]:
    """The JSON object in ``body`` when it has model_path; None for anything else (not JSON,
    not UTF-8, nested past the parser's recursion limit, another shape)."""
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError):
        return None
    return payload if isinstance(payload, dict) and "model_path" in payload else None


class TokenGate:
    """ASGI middleware: every HTTP request without the run's bearer token is answered 401
    before any route (health included, or a path that does not exist) sees it.

    The grader's TCP port is on the host's loopback, where any process reaches it, a
    neighbouring run's agent under ``agent.network=open`` among them. Such a request must cost
    the run nothing and tell the sender nothing: it spends no invalid-submission rate, writes
    no ledger line and no event (the run's report counts events as tamper attempts). It is
    counted in the grader's own log only (``grader.log``, which no agent reads), at the 1st,
    2nd, 4th, 8th... refusal, so a flood cannot fill it."""

    def __init__(self, app: Callable, token: str):
        self.app = app
        self.expected = f"Bearer {token}".encode()
        self.refused = 0  # served from one event loop: no lock

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] == "http" and not self.authorized(scope):
            self.count(scope)
            await JSONResponse({"error": UNAUTHORIZED}, 401)(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def authorized(self, scope: dict) -> bool:
        header = dict(scope["headers"]).get(b"authorization", b"")
        return hmac.compare_digest(header, self.expected)

    def count(self, scope: dict) -> None:
        self.refused += 1
        if self.refused & (self.refused - 1) == 0:
            print(f"a2rl grader: refused {self.refused} request"
                  f"{'s' if self.refused > 1 else ''} without the run's token (the last: "
                  f"{scope['method']} {scope['path'][:100]!r})", file=sys.stderr, flush=True)


def create_app(service: GradingService, token: str,
               max_body_bytes: int = MAX_BODY_BYTES) -> FastAPI:
    app = FastAPI(title="a2rl grader", docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(TokenGate, token=token)

    async def refused(shown: object, message: str, status: int) -> JSONResponse:
        answer = await run_in_threadpool(service.refuse, shown, message, status)
        return JSONResponse(answer, status)

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/status")
    def status() -> dict[str, Any]:
        return service.status()

    @app.post("/submit")
    async def submit(request: Request):
        try:
            body = await read_body(request, max_body_bytes)
        except BodyTooLarge:
            return await refused(None, f"the request body is larger than {max_body_bytes} "
                                       f"bytes; {BODY_SHAPE}", 413)
        payload = parse_submission(body)
        if payload is None:
            return await refused(body[:200].decode(errors="replace"), BODY_SHAPE, 400)
        code, answer = await run_in_threadpool(service.submit, payload["model_path"])
        return JSONResponse(answer, code)

    return app


class GradingServer(Served):
    """Serves a GradingService on a unix socket (``url``, for the sandbox) and on 127.0.0.1
    (``http_url``) from a thread; on ``listening`` sockets when given (a2rl.llm.loopback)."""

    def __init__(self, service: GradingService, token: str, socket_path: Path,
                 listening: Optional[list[socket.socket]] = None):
        self.service = service
        self.token = token
        self.socket_path = Path(socket_path)
        self._server = LoopbackServer(create_app(service, token), "a2rl-grader", self.socket_path,
                                      listening)

    @property
    def url(self) -> str:
        return f"unix:{self.socket_path}"

    @property
    def http_url(self) -> str:
        return self._server.url

    @property
    def port(self) -> Optional[int]:
        return self._server.port

    def start(self) -> "GradingServer":
        self._server.start()
        self.service.events.emit("grader_start", socket=str(self.socket_path), port=self.port,
                                 pid=os.getpid())
        return self

    def stop(self) -> None:
        if self._server.stop():
            self.service.events.emit("grader_stop")
