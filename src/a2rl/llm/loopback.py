"""One HTTP server for the harness's local services: an ASGI app served by uvicorn from a daemon
thread on 127.0.0.1 (a free port) and, when asked, on a unix socket as well (reachable from a
sandbox without network). The LLM proxy, the replay driver and the grader all run on it.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from pathlib import Path
from typing import Any, Optional, Self

import uvicorn

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0


class ServerError(RuntimeError):
    """A loopback server that is not serving (not started, or failed to start)."""


class LoopbackServer:
    """Serves ``app`` on 127.0.0.1:<free port> (``url``) and on ``socket_path`` when given one
    (created world-writable, so a sandbox's other uid can connect; removed on stop).
    ``listening``: sockets already bound and listening (a unix one at ``socket_path`` and a
    TCP one), held by a supervising process across restarts of this one: served instead of
    new ones, and left in place on stop."""

    def __init__(self, app: Any, name: str, socket_path: Optional[Path] = None,
                 listening: Optional[list[socket.socket]] = None):
        self.app = app
        self.name = name
        self.socket_path = Path(socket_path) if socket_path is not None else None
        self.listening = listening
        self.port: Optional[int] = None
        self._server: Optional[uvicorn.Server] = None
        self._thread: Optional[threading.Thread] = None

    @property
    def url(self) -> str:
        if self.port is None:
            raise ServerError(f"{self.name} is not started")
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> LoopbackServer:
        if self.listening is not None:
            sockets = self.listening
            self.port = next(s.getsockname()[1] for s in sockets if s.family == socket.AF_INET)
        else:
            sockets = ([self._unix_socket()] if self.socket_path is not None else [])
            sockets.append(self._tcp_socket())
        config = uvicorn.Config(self.app, log_level="warning", access_log=False,
                                timeout_graceful_shutdown=5, lifespan="on")
        server = self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=lambda: asyncio.run(server.serve(sockets=sockets)), name=self.name,
            daemon=True)
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise ServerError(f"{self.name} did not start within {START_TIMEOUT_S:g} s")
            time.sleep(0.05)
        return self

    def stop(self) -> bool:
        """Stop serving; True when it was serving."""
        was_serving = self._server is not None and self._thread is not None
        if was_serving:
            self._server.should_exit = True
            self._thread.join(timeout=STOP_TIMEOUT_S)
            self._server = None
        if self.socket_path is not None and self.listening is None:
            self.socket_path.unlink(missing_ok=True)
        return was_serving

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _unix_socket(self) -> socket.socket:
        self.socket_path.unlink(missing_ok=True)
        uds = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        uds.bind(str(self.socket_path))
        self.socket_path.chmod(0o666)
        return uds

    def _tcp_socket(self) -> socket.socket:
        tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        tcp.bind(("127.0.0.1", 0))
        self.port = tcp.getsockname()[1]
        return tcp


class Served:
    """What a service running on a LoopbackServer (``self._server``) offers: its url, start, stop
    and ``with``. Services that announce their start or stop override those."""

    _server: LoopbackServer

    @property
    def url(self) -> str:
        return self._server.url

    def start(self) -> Self:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
