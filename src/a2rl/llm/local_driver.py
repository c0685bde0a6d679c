"""The ``local`` driver's server: an OpenAI-compatible server for an open-weight model that the
harness starts for one run and stops after it (``driver.serve``, conf/driver/local.yaml).

The engine is vLLM's OpenAI server where vLLM and a GPU are present (``engine: auto`` or
``vllm``), else ``a2rl.llm.local_server`` over transformers on CPU. Either runs as a process of
its own, outside the sandbox, on 127.0.0.1 with a fresh key that only the run's recording proxy
holds: the agent reaches the model through the proxy, as it reaches a paid API, and its calls
are recorded and priced (at zero) like any other. The server's output goes to
``local_server.log`` in the run folder.
"""

from __future__ import annotations

import importlib.util
import json
import os
import secrets
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Optional

import httpx

from a2rl.config.types import ServeConfig
from a2rl.llm.local_server import KEY_ENV

STOP_GRACE_S = 15.0


class LocalServerFailed(RuntimeError):
    """The local model server did not start (an infrastructure failure, before the agent)."""


def resolve_engine(engine: str) -> str:
    """``auto``: vllm where vLLM is installed and torch sees a GPU, else transformers."""
    if engine != "auto":
        return engine
    if importlib.util.find_spec("vllm") is None:
        return "transformers"
    import torch

    return "vllm" if torch.cuda.is_available() else "transformers"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LocalModelServer:
    """``with LocalModelServer(serve, folder, name, log) as server``: ``server.url`` (with /v1,
    as OpenAI-style clients take it) answers callers presenting ``server.key``."""

    def __init__(self, serve: ServeConfig, folder: Path, name: str, log_path: Path):
        self.serve = serve
        self.folder = Path(folder)
        self.name = name
        self.log_path = Path(log_path)
        self.engine = resolve_engine(serve.engine)
        self.key = "a2rl-local-" + secrets.token_urlsafe(24)
        self.url = ""
        self._process: Optional[subprocess.Popen] = None
        self._log: Optional[IO[bytes]] = None

    def command(self, port: Optional[int]) -> list[str]:
        s = self.serve
        if self.engine == "vllm":
            return [sys.executable, "-m", "vllm.entrypoints.openai.api_server",
                    "--model", str(self.folder), "--served-model-name", self.name,
                    "--host", "127.0.0.1", "--port", str(port),
                    "--max-model-len", str(s.max_context), *s.vllm_args]
        return [sys.executable, "-m", "a2rl.llm.local_server", "--model", str(self.folder),
                "--name", self.name, "--max-context", str(s.max_context),
                "--max-new-tokens", str(s.max_new_tokens),
                *(["--threads", str(s.threads)] if s.threads else [])]

    def start(self) -> LocalModelServer:
        if self.engine == "vllm" and importlib.util.find_spec("vllm") is None:
            raise LocalServerFailed("driver.serve.engine=vllm but vllm is not installed "
                                    "(pip install vllm, on a machine with a GPU)")
        port = _free_port() if self.engine == "vllm" else None
        env = os.environ | {KEY_ENV: self.key, "VLLM_API_KEY": self.key}
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        # the transformers server says where it listens on stdout; vLLM's output is all log
        stdout = self._log if self.engine == "vllm" else subprocess.PIPE
        self._process = subprocess.Popen(self.command(port), stdin=subprocess.PIPE,
                                         stdout=stdout, stderr=self._log, env=env,
                                         start_new_session=True)
        try:
            if self.engine == "vllm":
                self.url = f"http://127.0.0.1:{port}/v1"
                self._wait_until_serving()
            else:
                self.url = self._read_url() + "/v1"
        except BaseException:
            self.stop()
            raise
        return self

    def _read_url(self) -> str:
        """The transformers server's first line: {"url": ...} once it serves."""
        deadline = time.monotonic() + self.serve.start_timeout_s
        stdout = self._process.stdout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([stdout], [], [], 1.0)
            if ready:
                line = stdout.readline()
                if line:
                    return json.loads(line)["url"]
            if self._process.poll() is not None:
                break
        raise LocalServerFailed(self._failure("did not start"))

    def _wait_until_serving(self) -> None:
        deadline = time.monotonic() + self.serve.start_timeout_s
        while time.monotonic() < deadline and self._process.poll() is None:
            try:
                if httpx.get(f"{self.url}/models", timeout=5.0,
                             headers={"authorization": f"Bearer {self.key}"}).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(2.0)
        raise LocalServerFailed(self._failure("did not answer"))

    def _failure(self, what: str) -> str:
        code = self._process.poll() if self._process else None
        state = f"exited with {code}" if code is not None else "still starting"
        return (f"the local model server ({self.engine}, {self.folder.name}) {what} within "
                f"{self.serve.start_timeout_s:g} s ({state}); see {self.log_path}")

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.stdin.close()  # the transformers server exits on it
            if self.engine == "vllm":
                os.killpg(process.pid, signal.SIGTERM)
            for last in (signal.SIGTERM, signal.SIGKILL):
                try:
                    process.wait(timeout=STOP_GRACE_S)
                    break
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, last)
            process.wait()
        if process is not None and process.stdout:
            process.stdout.close()
        if self._log is not None:
            self._log.close()
            self._log = None

    @property
    def pid(self) -> Optional[int]:
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def __enter__(self) -> LocalModelServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
