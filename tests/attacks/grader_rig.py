"""The rig the grader attacks run against (test_grader_attacks.py, test_grader_limit_attacks.py):
one run's real GradingService served by a real GradingServer on its unix socket, a host folder
of sealed files beside the workspace, and checks that nothing of the host reaches the agent."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

from transformers import AutoTokenizer

from a2rl.common.clock import BudgetClock
from a2rl.common.events import EventLog
from a2rl.common.files import iter_jsonl
from a2rl.grading import client
from a2rl.grading.grader import GraderSettings, GradingServer, GradingService
from a2rl.grading.ledger import Ledger
from a2rl.task.base import EvalResult

TOKEN = "attack-token"
SEALED = "SEALED-ITEM-7f3a91"  # what must never reach the store, an answer or the ledger
SEALED_NAME = "sealed_test_split_c0ffee.jsonl"  # a host file name that must never be listed


def render_template(model_dir: Path) -> EvalResult:
    """A real, cheap evaluation: render the model's own chat template (where a hostile
    template's loops run) and score the rendered prompt's token ids."""
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    ids = tokenizer.apply_chat_template([{"role": "user", "content": "2+2?"}], tokenize=True)
    ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
    return EvalResult(per_item=[float(int(t) % 2 == 0) for t in ids])


class Rig:
    """One run's grader on a real unix socket, with the host secrets it must not leak."""

    def __init__(self, tmp_path: Path, tiny_model: Path, evaluate=render_template, **limits):
        """A grader over ``tmp_path``; a second one over the same folder (a restarted grader)
        resumes its ledger and store."""
        self.tmp = tmp_path
        self.ws = tmp_path / "run" / "workspace"
        for area in ("output", "code", "data", "base_model"):
            (self.ws / area).mkdir(parents=True, exist_ok=True)
        self.sealed = tmp_path / "sealed"
        self.sealed.mkdir(exist_ok=True)
        (self.sealed / SEALED_NAME).write_text(json.dumps({"question": SEALED}) + "\n")
        (self.sealed / "config.json").write_text(json.dumps({"note": SEALED}))
        self.tiny = tiny_model
        run = tmp_path / "run"
        self.clock = BudgetClock(600)
        self.clock.start()
        settings = GraderSettings(
            task="t", split="test", baseline=25.0, max_submissions=10, workspace=self.ws,
            store=run / "store", base_model=tiny_model, alias="/workspace",
            mirror=self.ws / "scores.json", evals=run / "evals",
            **({"invalid_per_minute": 10_000.0} | limits))
        self.service = GradingService(settings, evaluate=evaluate,
                                      ledger=Ledger(run / "ledger.jsonl"), clock=self.clock,
                                      events=EventLog(run / "events.jsonl", self.clock))
        (tmp_path / "sock").mkdir(exist_ok=True)
        self.server = GradingServer(self.service, TOKEN, tmp_path / "sock" / "grader.sock")

    def post(self, model_path, timeout: float = 60.0) -> tuple[int, dict]:
        """Submit over the socket; a grader stalled past ``timeout`` fails the test."""
        code, body = client.request("POST", "/submit", {"model_path": model_path},
                                    url=self.server.url, token=TOKEN, timeout=timeout)
        self.assert_clean(body)
        return code, body

    def raw(self, body: bytes, headers: dict | None = None) -> tuple[int, dict]:
        conn = client.UnixHTTPConnection(str(self.server.socket_path), timeout=60)
        conn.request("POST", "/submit", body=body,
                     headers={"Authorization": f"Bearer {TOKEN}"} | (headers or {}))
        response = conn.getresponse()
        answer = json.loads(response.read())
        conn.close()
        self.assert_clean(answer)
        return response.status, answer

    def model(self, name: str) -> Path:
        dest = self.ws / "output" / name
        shutil.copytree(self.tiny, dest)
        return dest

    def assert_clean(self, answer: dict) -> None:
        """No host path, host file name or sealed content in what the agent is told."""
        text = json.dumps(answer)
        for secret in (str(self.tmp), SEALED, SEALED_NAME, str(self.tiny)):
            assert secret not in text, (secret, text[:500])

    def ledger(self) -> list[dict]:
        return list(iter_jsonl(self.service.ledger.path))

    def store_files(self) -> list[Path]:
        return [p for p in self.service.store.rglob("*") if p.is_file()]

    def assert_nothing_sealed_stored(self) -> None:
        for path in self.store_files():
            assert SEALED.encode() not in path.read_bytes(), path
            assert path.name != SEALED_NAME
        ledger = self.service.ledger.path  # none when nothing was recorded
        for line in ledger.read_text().splitlines() if ledger.exists() else []:
            assert SEALED not in line and str(self.tmp) not in line

    def __enter__(self) -> "Rig":
        self.server.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.stop()
        if exc[0] is None:
            self.assert_nothing_sealed_stored()

    def assert_serving(self) -> None:
        code, body = client.request("GET", "/status", url=self.server.url, token=TOKEN,
                                    timeout=30)
        assert code == 200 and body["task"] == "t"


def while_swapping(swap, action, n: int) -> list:
    """``n`` results of ``action()``, taken while another thread keeps calling ``swap`` (one
    step of an attack that swaps files under the harness as fast as it can)."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            swap()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        return [action() for _ in range(n)]
    finally:
        stop.set()
        thread.join()
