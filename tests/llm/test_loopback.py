"""The one loopback HTTP server of the proxy, the replay driver and the grader
(a2rl.llm.loopback): a real uvicorn on 127.0.0.1 and, when asked, a unix socket."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI

from a2rl.llm.loopback import LoopbackServer, ServerError


def ping_app() -> FastAPI:
    app = FastAPI()

    @app.get("/ping")
    def ping() -> dict[str, str]:
        return {"pong": "yes"}

    return app


def test_serves_on_a_free_local_port_until_stopped():
    with LoopbackServer(ping_app(), "test-ping") as server:
        assert server.url.startswith("http://127.0.0.1:")
        assert httpx.get(f"{server.url}/ping").json() == {"pong": "yes"}
        url = server.url
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/ping", timeout=2)


def test_serves_on_a_unix_socket_too_and_removes_it(tmp_path):
    path = tmp_path / "srv.sock"
    path.write_text("stale")  # a leftover of an earlier run is replaced
    server = LoopbackServer(ping_app(), "test-uds", path).start()
    try:
        assert path.is_socket() and path.stat().st_mode & 0o777 == 0o666
        with httpx.Client(transport=httpx.HTTPTransport(uds=str(path))) as client:
            assert client.get("http://local/ping").json() == {"pong": "yes"}
        assert httpx.get(f"{server.url}/ping").status_code == 200
    finally:
        assert server.stop() is True
    assert not path.exists()
    assert server.stop() is False  # stopping twice is harmless


def test_a_server_that_was_not_started_has_no_url():
    server = LoopbackServer(ping_app(), "test-idle")
    with pytest.raises(ServerError, match="test-idle is not started"):
        server.url
