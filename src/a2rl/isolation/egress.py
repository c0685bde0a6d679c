"""The egress proxy of network policy ``allowlist``: HTTP(S) out of the sandbox to listed hosts.

The sandbox has no network of its own; its HTTPS_PROXY/HTTP_PROXY point at 127.0.0.1:<port>,
which a2rl/isolation/netrelay.py relays to this proxy's unix socket in /run/a2rl. It serves
``CONNECT host:port`` (HTTPS, and any TLS tunnel) and plain-HTTP requests in absolute form
(``GET http://host/path``). A host not in the allowlist (exactly, or under an entry starting with
a dot), a withheld host (matched the same way, whatever the allowlist says: one that serves the
task's sealed split publicly, a2rl.pipeline.network.withheld_hosts), a port not allowed, or a
name resolving to a non-public address (loopback, private, link-local: the host's own services)
gets 403. Every connection, allowed or refused, is one line of
the run's egress.jsonl::

    {"time": "...", "host": "pypi.org", "port": 443, "method": "CONNECT", "allowed": true,
     "outcome": "ok", "bytes_up": 5121, "bytes_down": 90233, "seconds": 1.2}

``outcome``: ok, refused (with ``reason``), unreachable, bad_request or client_closed. A text
field is cut to MAX_FIELD characters (a CONNECT's host may be 64 KiB). Past ``max_lines``
connections (``budget.max_egress_log_lines``) the log only counts them, by outcome, and says so in
one last line when the proxy stops, so that refused CONNECTs at thousands a second (50 MB/s of
log before) never grow it unbounded::

    {"time": "...", "outcome": "unlogged", "connections": 48213,
     "by_outcome": {"refused": 48213}, "max_lines": 100000}
"""

from __future__ import annotations

import asyncio
import collections
import ipaddress
import json
import os
import socket
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Optional
from urllib.parse import urlsplit

from a2rl.common.files import append_jsonl, utc_now
from a2rl.isolation.netrelay import pipe  # the relay's own stream pipe (standalone there)

DEFAULT_PORTS = (80, 443)
HEAD_LIMIT = 64 * 1024  # a request line and headers; more is refused
HEAD_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 30.0
START_TIMEOUT_S = 10.0
MAX_FIELD = 300  # characters of a logged text field (a DNS name has at most 253)
UNLOGGED = "unlogged"  # the outcome of egress.jsonl's last line when connections were left out


def host_allowed(host: str, allowlist: Iterable[str]) -> bool:
    """``host`` is an entry, or under an entry that starts with a dot (``.hf.co``)."""
    host = host.lower().rstrip(".")
    for entry in allowlist:
        entry = entry.lower().rstrip(".")
        if host == entry or (entry.startswith(".") and host.endswith(entry)):
            return True
    return False


def unlogged_connections(log_path: Path) -> int:
    """The connections ``log_path`` (an egress.jsonl) left out, from its last line."""
    try:
        with open(log_path, "rb") as log:
            log.seek(max(0, log.seek(0, os.SEEK_END) - 4096))
            last = log.read().splitlines()[-1]
        line = json.loads(last)
    except (OSError, IndexError, ValueError):
        return 0
    return int(line.get("connections", 0)) if line.get("outcome") == UNLOGGED else 0


def is_public(address: str) -> bool:
    return ipaddress.ip_address(address).is_global


class Refused(Exception):
    """A request the proxy answers itself: ``status`` and why."""

    def __init__(self, status: int, outcome: str, reason: str):
        super().__init__(reason)
        self.status, self.outcome, self.reason = status, outcome, reason


class EgressProxy:
    """Serves on ``socket_path`` (world-connectable: the sandbox's uid is another) from a daemon
    thread; logs to ``log_path``. ``withheld``: hosts refused even when the allowlist names them.
    ``resolve`` maps host names to addresses before DNS (tests map an allowlisted name to a local
    server; such a mapping may name a non-public address)."""

    def __init__(self, socket_path: Path, log_path: Path, allowlist: Iterable[str],
                 ports: Iterable[int] = DEFAULT_PORTS, resolve: Optional[dict[str, str]] = None,
                 withheld: Iterable[str] = (), max_lines: Optional[int] = None):
        self.socket_path = Path(socket_path)
        self.log_path = Path(log_path)
        self.allowlist = list(allowlist)
        self.withheld = list(withheld)
        self.ports = set(ports)
        self.resolve = dict(resolve or {})
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None
        self._ready = threading.Event()
        self._lock = threading.Lock()
        self.max_lines = max_lines
        self.logged = 0
        self.unlogged: collections.Counter[str] = collections.Counter()  # outcome -> connections

    def __enter__(self) -> EgressProxy:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> EgressProxy:
        self._thread = threading.Thread(target=self._run, name="a2rl-egress", daemon=True)
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT_S):
            raise RuntimeError(f"the egress proxy did not start within {START_TIMEOUT_S:g} s")
        return self

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
            self._log_unlogged()
        self.socket_path.unlink(missing_ok=True)

    def _run(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        server = loop.run_until_complete(
            asyncio.start_unix_server(self._handle, path=str(self.socket_path),
                                      limit=HEAD_LIMIT))
        os.chmod(self.socket_path, 0o666)
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            server.close()
            loop.close()

    def _log(self, **fields: Any) -> None:
        with self._lock:
            if self.max_lines is not None and self.logged >= self.max_lines:
                self.unlogged[str(fields.get("outcome"))] += 1
                return
            self.logged += 1
            cut = {k: v[:MAX_FIELD] if isinstance(v, str) else v for k, v in fields.items()}
            append_jsonl(self.log_path, {"time": utc_now(), **cut})

    def _log_unlogged(self) -> None:
        """The last line: how many connections were left out past ``max_lines``, by outcome."""
        with self._lock:
            if self.unlogged:
                append_jsonl(self.log_path, {
                    "time": utc_now(), "outcome": UNLOGGED,
                    "connections": sum(self.unlogged.values()),
                    "by_outcome": dict(self.unlogged), "max_lines": self.max_lines})

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        started = time.monotonic()
        entry: dict[str, Any] = {"host": None, "port": None, "method": None, "allowed": False}
        counts = [0, 0]
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT_S)
            method, host, port, forward = self._parse(head)
            entry |= {"host": host, "port": port, "method": method}
            address = await self._check(host, port)
            entry["allowed"] = True
            try:
                up_reader, up_writer = await asyncio.wait_for(
                    asyncio.open_connection(address, port), CONNECT_TIMEOUT_S)
            except (OSError, asyncio.TimeoutError) as err:
                raise Refused(502, "unreachable", f"{type(err).__name__}: {err}") from err
            if forward is None:
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                up_writer.write(forward)
                counts[0] += len(forward)
            await asyncio.gather(pipe(reader, up_writer, counts, 0),
                                 pipe(up_reader, writer, counts, 1))
            up_writer.close()
            entry["outcome"] = "ok"
        except Refused as refused:
            entry |= {"outcome": refused.outcome, "reason": refused.reason[:300]}
            _answer(writer, refused.status, refused.reason)
        except asyncio.LimitOverrunError:  # a head over HEAD_LIMIT
            entry["outcome"] = "bad_request"
            _answer(writer, 431, "request head too large")
        except (asyncio.IncompleteReadError, asyncio.TimeoutError, ConnectionError):
            entry["outcome"] = "client_closed"
        finally:
            writer.close()
            self._log(**entry, bytes_up=counts[0], bytes_down=counts[1],
                      seconds=round(time.monotonic() - started, 3))

    def _parse(self, head: bytes) -> tuple[str, str, int, Optional[bytes]]:
        """(method, host, port, what to send upstream: None for CONNECT, else the request
        rewritten to origin form and closing after one response)."""
        line, _, rest = head.partition(b"\r\n")
        parts = line.decode("latin-1").split(" ")
        if len(parts) != 3:
            raise Refused(400, "bad_request", "malformed request line")
        method, target, version = parts
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
            if not host or not port.isdigit():
                raise Refused(400, "bad_request", "CONNECT needs host:port")
            return method, host.strip("[]").lower(), int(port), None
        try:
            url = urlsplit(target)
        except ValueError as err:
            raise Refused(400, "bad_request", "malformed URL") from err
        if url.scheme != "http" or not url.hostname:
            raise Refused(400, "bad_request", "only CONNECT and absolute http:// URLs are proxied")
        try:
            port = url.port or 80
        except ValueError as err:
            raise Refused(400, "bad_request", "bad port") from err
        path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        headers = [h for h in rest.split(b"\r\n") if h and not h.lower().startswith(
            (b"connection:", b"proxy-connection:", b"keep-alive:"))]
        forward = b"\r\n".join([f"{method} {path} {version}".encode("latin-1"), *headers,
                                b"Connection: close", b"", b""])
        return method, url.hostname.lower(), port, forward

    async def _check(self, host: str, port: int) -> str:
        """The address to connect to, or Refused (403) with why."""
        if host_allowed(host, self.withheld):
            raise Refused(403, "refused", f"host {host} serves the task's sealed split publicly "
                          "(task.public_sources; agent.allow_public_sources is false)")
        if not host_allowed(host, self.allowlist):
            raise Refused(403, "refused", f"host {host} is not in agent.allowlist")
        if port not in self.ports:
            raise Refused(403, "refused", f"port {port} is not allowed")
        if host in self.resolve:
            return self.resolve[host]
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, port,
                                                                 type=socket.SOCK_STREAM)
        except OSError as err:
            raise Refused(502, "unreachable", f"cannot resolve {host}: {err}") from err
        address = infos[0][4][0]
        if not is_public(address):
            raise Refused(403, "refused", f"{host} resolves to a non-public address")
        return address


def _answer(writer: asyncio.StreamWriter, status: int, reason: str) -> None:
    body = f"a2rl egress proxy: {reason}\n".encode()
    phrase = {400: "Bad Request", 403: "Forbidden", 431: "Request Header Fields Too Large",
              502: "Bad Gateway"}.get(status, "Error")
    writer.write(f"HTTP/1.1 {status} {phrase}\r\nContent-Type: text/plain\r\n"
                 f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
