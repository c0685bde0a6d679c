"""The grader over HTTP: ``create_app`` wraps a ``GradingService`` in FastAPI with a bearer
token and bounded requests; ``GradingServer`` serves the app on a unix socket (reachable from a
sandbox without network) and on 127.0.0.1:<free port>.

A request is refused before it costs anything: a body over ``MAX_BODY_BYTES`` (413, read no
further), a body that is not a JSON object with model_path or that nests too deep (400), a wrong
token (401); each refused submission is recorded through the service like any invalid one.
"""

from __future__ import annotations

import hmac
import json
import os
import socket
from pathlib import Path
from typing import Any, Optional

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from a2rl.llm.loopback import LoopbackServer, Served

# the service is a2rl.grading.grader.GradingService (which imports this module, so it is not
# imported here): submit, refuse, status and events are what the app uses
GradingService = Any

MAX_BODY_BYTES = 64 * 1024
BODY_SHAPE = 'the body must be JSON like {"model_path": "output/ckpt-1"}'


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


def create_app(service: GradingService, token: str,
               max_body_bytes: int = MAX_BODY_BYTES) -> FastAPI:
    app = FastAPI(title="a2rl grader", docs_url=None, redoc_url=None, openapi_url=None)

    def authorized(request: Request) -> bool:
        header = request.headers.get("authorization", "")
        return hmac.compare_digest(header.encode(errors="replace"), f"Bearer {token}".encode())

    def denied(request: Request) -> JSONResponse:
        # recorded for the tamper log (a2rl.analysis.integrity)
        service.events.emit("grader_denied", method=request.method, path=request.url.path)
        return JSONResponse({"error": "missing or wrong bearer token (use $A2RL_TOKEN)"}, 401)

    async def refused(shown: object, message: str, status: int) -> JSONResponse:
        answer = await run_in_threadpool(service.refuse, shown, message, status)
        return JSONResponse(answer, status)

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/status")
    def status(request: Request):
        return service.status() if authorized(request) else denied(request)

    @app.post("/submit")
    async def submit(request: Request):
        if not authorized(request):
            denied(request)
            return await refused(None, "missing or wrong bearer token (use $A2RL_TOKEN)", 401)
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
