"""The agent's side of the grading API: ``a2rl submit PATH`` and ``a2rl status``.

Standard library only: this file is mounted read-only into the sandbox, where the a2rl package
is not installed. It reads A2RL_GRADER_URL (``unix:/path/to.sock`` or ``http://host:port``) and
A2RL_TOKEN from the environment.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import sys
from urllib.parse import urlparse


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float | None = None):
        super().__init__("localhost", timeout=timeout)
        self._socket_path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if self.timeout is not None:
            self.sock.settimeout(self.timeout)
        self.sock.connect(self._socket_path)


def _connection(url: str, timeout: float | None) -> http.client.HTTPConnection:
    if url.startswith("unix:"):
        return UnixHTTPConnection(url[len("unix:"):], timeout=timeout)
    parsed = urlparse(url)
    if parsed.scheme != "http" or not parsed.hostname:
        raise ValueError(f"A2RL_GRADER_URL={url!r}; expected unix:/path or http://host:port")
    return http.client.HTTPConnection(parsed.hostname, parsed.port or 80, timeout=timeout)


def request(method: str, route: str, body: dict | None = None, url: str | None = None,
            token: str | None = None, timeout: float | None = None) -> tuple[int, dict]:
    """Call the grader; returns (HTTP status, JSON body)."""
    url = url or os.environ.get("A2RL_GRADER_URL", "")
    token = token if token is not None else os.environ.get("A2RL_TOKEN", "")
    if not url:
        raise SystemExit("A2RL_GRADER_URL is not set: run this inside an a2rl workspace")
    conn = _connection(url, timeout)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    conn.request(method, route, body=json.dumps(body) if body is not None else None,
                 headers=headers)
    response = conn.getresponse()
    raw = response.read()
    conn.close()
    try:
        return response.status, json.loads(raw)
    except json.JSONDecodeError:
        return response.status, {"error": raw.decode(errors="replace")}


def submit(path: str, **kwargs) -> tuple[int, dict]:
    return request("POST", "/submit", {"model_path": os.path.abspath(path)}, **kwargs)


def status(**kwargs) -> tuple[int, dict]:
    return request("GET", "/status", **kwargs)


# the grader did not answer: it is restarting, or its process died; a submission it was grading
# is recorded as "interrupted" and does not count. Exit status 75 (EX_TEMPFAIL): try again.
RETRY_EXIT = 75
UNREACHABLE = (ConnectionError, FileNotFoundError, http.client.RemoteDisconnected,
               http.client.IncompleteRead, socket.timeout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="a2rl", description="Talk to this run's grader.")
    sub = parser.add_subparsers(dest="command", required=True)
    p_submit = sub.add_parser("submit", help="submit a model folder (HF model or PEFT adapter)")
    p_submit.add_argument("path", help="folder under output/ or code/, e.g. output/ckpt-1")
    sub.add_parser("status", help="baseline, best score, submissions and time left")
    args = parser.parse_args(argv)
    try:
        code, body = submit(args.path) if args.command == "submit" else status()
    except UNREACHABLE as err:
        print(f"the grader is not answering ({type(err).__name__}); it may be restarting: "
              "retry in a few seconds. A submission it was grading when it stopped is "
              "recorded as interrupted and does not count: submit it again.", file=sys.stderr)
        return RETRY_EXIT
    print(json.dumps(body, indent=2))
    if code != 200:
        print(f"grader answered {code}: {body.get('error', body)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
