"""Attacks on the network from inside the sandbox (issue #11, item 8): under every policy but
``open`` the agent has its own network namespace. A hostile program in the real sandbox tries
the host's loopback services (the grader's kind of TCP port), a host abstract unix socket and
the internet, while the run's real LLM proxy and egress proxy serve through their unix sockets
and the port forwarder (a2rl/isolation/netrelay.py). The host listeners assert that no
connection reached them.
"""

from __future__ import annotations

import json
import shutil
import socket
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from hostile_sandbox import attack, make_cell

from a2rl.isolation.egress import EgressProxy
from a2rl.isolation.sandbox import GRADER_DIR
from a2rl.llm.proxy import LLMProxy
from a2rl.llm.upstream import ProxySettings
from a2rl.pipeline.network import EGRESS_PORT, proxy_env

pytestmark = [pytest.mark.attacks,
              pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")]

UNREACHABLE = {"ECONNREFUSED", "ENETUNREACH", "ENOENT", "timeout", "EACCES"}
# what the hostile program tries besides the services it is given
PROBES = r'''
import socket, urllib.request
def connect_abstract():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect("\0" + sys.argv[1])
attempt("abstract", connect_abstract)
attempt("host_tcp", lambda: socket.create_connection(("127.0.0.1", int(sys.argv[2])), 2)
        and None)
attempt("internet", lambda: socket.create_connection(("1.1.1.1", 443), 2) and None)
def get(url, proxy=None):
    opener = urllib.request.build_opener(urllib.request.ProxyHandler(
        {"http": proxy} if proxy else {}))
    with opener.open(url, timeout=10) as answer:
        return answer.read().decode()
'''


class HostListeners:
    """A host TCP listener on 127.0.0.1 and a host abstract unix socket; ``reached`` says
    whether anything connected to either."""

    def __init__(self):
        self.name = f"a2rl-attack-{uuid.uuid4().hex}"
        self.abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.abstract.bind("\0" + self.name)
        self.abstract.listen(4)
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.port = self.tcp.getsockname()[1]

    def args(self) -> list[str]:
        return [self.name, str(self.port)]

    def reached(self) -> bool:
        for listener in (self.abstract, self.tcp):
            listener.setblocking(False)
            try:
                listener.accept()[0].close()
                return True
            except BlockingIOError:
                pass
        return False

    def close(self) -> None:
        self.abstract.close()
        self.tcp.close()


@pytest.fixture
def host():
    listeners = HostListeners()
    yield listeners
    listeners.close()


@pytest.fixture
def cell(tmp_path):
    return make_cell(tmp_path)


def llm_proxy(cell) -> LLMProxy:
    """The run's real recording proxy, on TCP and on the grader folder's llm.sock."""
    settings = ProxySettings(provider="openai", model="m", base_url="http://127.0.0.1:9/v1",
                             api_key="real-key")
    return LLMProxy(settings, cell.run / "llm_calls.jsonl", "dummy",
                    socket_path=cell.run / "grader" / "llm.sock")


def test_llm_policy_reaches_the_proxy_and_nothing_else(cell, host):
    with llm_proxy(cell) as proxy:
        cell.sandbox.network = "llm"
        cell.sandbox.forwards = {proxy.port: f"{GRADER_DIR}/llm.sock"}
        # with the run's key, as the agent's CLI is given it: the proxy answers nothing else
        program = PROBES + f'''
attempt("proxy", lambda: get("http://127.0.0.1:{proxy.port}/health?key=dummy"))
report()
'''
        result = attack(cell, program, *host.args()).result
    assert json.loads(result["proxy"]) == {"status": "ok"}, result
    for key in ("abstract", "host_tcp", "internet"):
        assert result[key] in UNREACHABLE, (key, result)
    assert not host.reached()


def test_none_policy_reaches_nothing(cell, host):
    with llm_proxy(cell) as proxy:  # serving on the host: still out of reach
        cell.sandbox.network = "none"
        program = PROBES + f'''
attempt("proxy", lambda: get("http://127.0.0.1:{proxy.port}/health"))
report()
'''
        result = attack(cell, program, *host.args()).result
    for key in ("abstract", "host_tcp", "internet", "proxy"):
        assert result[key] in UNREACHABLE | {"URLError"}, (key, result)
    assert not host.reached()


class StandIn(BaseHTTPRequestHandler):
    """The server an allowlisted host name is mapped to (the internet is out of reach here)."""

    seen: list[str] = []

    def do_GET(self):  # noqa: N802 (http.server's name)
        StandIn.seen.append(self.path)
        body = b"stand-in for pypi.org"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_allowlist_policy_tunnels_to_listed_hosts_only_and_logs_each(cell, host):
    server = ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    StandIn.seen = []
    egress_log = cell.run / "egress.jsonl"
    egress = EgressProxy(cell.run / "grader" / "egress.sock", egress_log, ["pypi.org"],
                         ports=[port], resolve={"pypi.org": "127.0.0.1"})
    proxy = f"http://127.0.0.1:{EGRESS_PORT}"
    program = PROBES + f'''
def tunnel(target, path):
    s = socket.create_connection(("127.0.0.1", {EGRESS_PORT}), 10)
    s.sendall(f"CONNECT {{target}} HTTP/1.1\\r\\nHost: {{target}}\\r\\n\\r\\n".encode())
    answer = s.recv(4096).decode()
    if not answer.startswith("HTTP/1.1 200"):
        return answer.split("\\r\\n")[0]
    s.sendall(f"GET {{path}} HTTP/1.1\\r\\nHost: pypi.org\\r\\n"
              "Connection: close\\r\\n\\r\\n".encode())
    got = b""
    while chunk := s.recv(4096):
        got += chunk
    return got.decode().split("\\r\\n\\r\\n", 1)[1]
attempt("connect_allowed", lambda: tunnel("pypi.org:{port}", "/simple/torch/"))
attempt("plain_http_allowed", lambda: get("http://pypi.org:{port}/plain", {proxy!r}))
attempt("connect_refused", lambda: tunnel("evil.example:443", "/"))
attempt("connect_host_loopback", lambda: tunnel("127.0.0.1:" + sys.argv[2], "/"))
attempt("wrong_port", lambda: tunnel("pypi.org:22", "/"))
report()
'''
    try:
        with egress:
            cell.sandbox.network = "allowlist"
            cell.sandbox.forwards = {EGRESS_PORT: f"{GRADER_DIR}/egress.sock"}
            result = attack(cell, program, *host.args()).result
    finally:
        server.shutdown()
    assert result["connect_allowed"] == "stand-in for pypi.org", result
    assert result["plain_http_allowed"] == "stand-in for pypi.org", result
    for key in ("connect_refused", "connect_host_loopback", "wrong_port"):
        assert result[key] == "HTTP/1.1 403 Forbidden", (key, result)
    for key in ("abstract", "host_tcp", "internet"):
        assert result[key] in UNREACHABLE, (key, result)
    assert not host.reached()
    assert StandIn.seen == ["/simple/torch/", "/plain"]
    lines = [json.loads(line) for line in egress_log.read_text().splitlines()]
    by_host = {(e["host"], e["port"]): e for e in lines}
    assert len(lines) == 5
    allowed = by_host[("pypi.org", port)]
    assert allowed["allowed"] and allowed["outcome"] == "ok" and allowed["bytes_down"] > 0
    for key in (("evil.example", 443), ("127.0.0.1", host.port), ("pypi.org", 22)):
        assert not by_host[key]["allowed"] and by_host[key]["outcome"] == "refused", by_host
    assert proxy_env(proxy)["HTTPS_PROXY"] == proxy


def test_open_policy_shares_the_host_loopback(cell, host):
    """``open`` is the explicit exception: the host's loopback is reachable (the runner
    records the policy in run.json and a network_open event)."""
    cell.sandbox.network = "open"
    result = attack(cell, PROBES + "report()", *host.args()).result
    assert result["host_tcp"] == "ok" and result["abstract"] == "ok", result
    assert host.reached()
