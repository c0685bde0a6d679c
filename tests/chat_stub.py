"""An OpenAI-compatible chat endpoint on 127.0.0.1 for tests: it answers every request with one
fixed message and records what it was sent (path, Authorization header, JSON body)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer


class ChatStub:
    """``with ChatStub(answer) as chat``: serves on ``chat.base_url`` (with /v1) until the block
    ends; ``chat.seen`` lists the requests."""

    def __init__(self, answer: str):
        self.answer = answer
        self.seen: list[dict] = []
        self.server = HTTPServer(("127.0.0.1", 0), self._handler())
        self.base_url = f"http://127.0.0.1:{self.server.server_port}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> ChatStub:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.thread.join(timeout=10)
        self.server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's naming)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.seen.append({"path": self.path, "auth": self.headers.get("Authorization"),
                                  "body": body})
                answer = json.dumps({"choices": [{"message": {
                    "role": "assistant", "content": stub.answer}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        return Handler
