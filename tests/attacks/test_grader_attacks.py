"""A hostile agent against the real grader (GradingService + GradingServer over its unix socket),
issue 11 items 3 and 5: links swapped in while the grader copies, links and magic links out of
the workspace, FIFOs, sockets, sparse files, entry and depth bombs, store exhaustion, huge and
deeply nested bodies, floods, a chat template that never ends. Each attack must be refused with
a clear error that names no host path, answered in bounded time, and leave the ledger intact
and the grader serving.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from a2rl.common.clock import BudgetClock
from a2rl.common.events import EventLog
from a2rl.common.files import iter_jsonl
from a2rl.grading import client
from a2rl.grading.grader import GraderSettings, GradingServer, GradingService
from a2rl.grading.ledger import Ledger
from a2rl.task.base import EvalResult

pytestmark = pytest.mark.attacks

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

    def __init__(self, tmp_path: Path, tiny_model: Path, **limits):
        self.tmp = tmp_path
        self.ws = tmp_path / "run" / "workspace"
        for area in ("output", "code", "data", "base_model"):
            (self.ws / area).mkdir(parents=True)
        self.sealed = tmp_path / "sealed"
        self.sealed.mkdir()
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
        self.service = GradingService(settings, evaluate=render_template,
                                      ledger=Ledger(run / "ledger.jsonl"), clock=self.clock,
                                      events=EventLog(run / "events.jsonl", self.clock))
        (tmp_path / "sock").mkdir()
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
        for line in self.service.ledger.path.read_text().splitlines():
            assert SEALED not in line and str(self.tmp) not in line

    def assert_serving(self) -> None:
        code, body = client.request("GET", "/status", url=self.server.url, token=TOKEN,
                                    timeout=30)
        assert code == 200 and body["task"] == "t"


@pytest.fixture
def rig(tmp_path, tiny_model):
    made = Rig(tmp_path, tiny_model)
    with made.server:
        yield made
    made.assert_nothing_sealed_stored()


def rig_with(tmp_path, tiny_model, **limits) -> Rig:
    return Rig(tmp_path, tiny_model, **limits)


# ---- items 3: links, magic links, swaps, special files -------------------------------------


def test_symlinked_file_to_the_sealed_split_is_refused(rig):
    folder = rig.model("m")
    (folder / "config.json").unlink()
    (folder / "config.json").symlink_to(rig.sealed / "config.json")
    code, body = rig.post("output/m")
    assert code == 403 and "m/config.json is a link that leads outside" in body["error"]
    assert rig.ledger()[-1]["status_code"] == 403


@pytest.mark.parametrize("target", ["/proc/self/environ", "/proc/self/root/etc/passwd",
                                    "/proc/self/fd/0", "/proc/self"])
def test_links_to_the_harness_proc_are_refused(rig, target):
    folder = rig.model("m")
    (folder / "extra").symlink_to(target)
    (rig.ws / "output" / "p").symlink_to(target)
    for path in ("output/m", "output/p", target, f"/workspace/../..{target}"):
        code, body = rig.post(path)
        assert code == 403 and "outside the workspace" in body["error"], (path, body)
        assert target not in body["error"].replace(repr(path)[1:-1], "")
    assert not rig.store_files()


def test_submitted_folder_swapped_for_a_link_during_the_copy(rig):
    """A thread swaps output/m/extra between a real folder and a link to the host folder of
    sealed files as fast as it can while the agent submits again and again: every copy is
    the real folder's or refused, never the sealed files', and their names are never listed."""
    folder = rig.model("m")
    (folder / "extra").mkdir()
    (folder / "extra" / "notes.txt").write_text("mine\n")
    stop = threading.Event()

    def swap() -> None:
        real, link = folder / "extra.real", folder / "extra.link"
        link.symlink_to(rig.sealed)
        while not stop.is_set():
            os.rename(folder / "extra", real)
            os.rename(link, folder / "extra")
            os.rename(folder / "extra", link)
            os.rename(real, folder / "extra")

    swapper = threading.Thread(target=swap, daemon=True)
    swapper.start()
    try:
        answers = [rig.post("output/m") for _ in range(12)]
    finally:
        stop.set()
        swapper.join()
    codes = {code for code, _ in answers}
    assert codes <= {200, 400, 403, 404, 409} and 403 in codes, answers  # the swap was seen
    # what was stored is the agent's own (with or without extra/, caught mid-rename)
    mine = {p.name for p in rig.tiny.iterdir()} | {"notes.txt"}
    assert {p.name for p in rig.store_files()} <= mine
    assert len(rig.ledger()) == 12


def test_top_level_folder_swapped_for_a_link_to_proc_self(rig):
    """The issue's 1.76 GB of pagemap: output/m becomes a link to /proc/self mid-submission."""
    folder = rig.model("m")
    stop = threading.Event()

    def swap() -> None:
        link = rig.ws / "output" / "m.link"
        link.symlink_to("/proc/self")
        while not stop.is_set():
            os.rename(folder, rig.ws / "output" / "m.real")
            os.rename(link, folder)
            os.rename(folder, link)
            os.rename(rig.ws / "output" / "m.real", folder)

    swapper = threading.Thread(target=swap, daemon=True)
    swapper.start()
    try:
        answers = [rig.post("output/m", timeout=30) for _ in range(8)]
    finally:
        stop.set()
        swapper.join()
    assert {code for code, _ in answers} <= {200, 400, 403, 404, 409}, [
        b["error"] for c, b in answers if c not in (200, 400, 403, 404, 409)]
    assert sum(p.stat().st_size for p in rig.store_files()) < 50 * 2**20
    for path in rig.store_files():
        assert path.name not in ("pagemap", "environ", "mem")


def test_fifo_in_the_folder_is_refused_without_hanging(rig):
    folder = rig.model("m")
    os.mkfifo(folder / "tokenizer.model")
    started = time.monotonic()
    code, body = rig.post("output/m", timeout=20)
    assert code == 400 and "m/tokenizer.model is a FIFO (named pipe)" in body["error"]
    assert time.monotonic() - started < 10
    assert not rig.store_files()  # the partial copy is gone


def test_file_swapped_for_a_fifo_during_the_copy_never_stalls(rig):
    folder = rig.model("m")
    target = folder / "tokenizer.json"
    saved = target.read_bytes()
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            target.unlink()
            os.mkfifo(target)
            target.unlink()
            target.write_bytes(saved)

    swapper = threading.Thread(target=swap, daemon=True)
    swapper.start()
    try:
        answers = [rig.post("output/m", timeout=20) for _ in range(8)]
    finally:
        stop.set()
        swapper.join()
    # 422: the copy caught the file half rewritten (empty), which is the agent's doing
    assert {code for code, _ in answers} <= {200, 400, 404, 409, 422}, answers
    rig.assert_serving()


def test_socket_and_fifo_as_the_submitted_path(rig):
    os.mkfifo(rig.ws / "output" / "pipe")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(rig.ws / "output" / "sock"))
    try:
        for name in ("pipe", "sock"):
            code, body = rig.post(f"output/{name}", timeout=20)
            assert code == 400 and "not a folder" in body["error"], body
    finally:
        listener.close()


def test_link_cycle_is_bounded(rig):
    folder = rig.model("m")
    (folder / "again").symlink_to(".")
    (folder / "up").symlink_to("../m")
    started = time.monotonic()
    code, body = rig.post("output/m", timeout=60)
    assert code == 413 and ("deep" in body["error"] or "files and folders" in body["error"])
    assert time.monotonic() - started < 30 and not rig.store_files()


def test_links_inside_the_workspace_still_work(rig):
    """What an honest agent does: a tokenizer file linked from base_model/, the submitted
    path itself a link to a checkpoint."""
    folder = rig.model("ckpt-3")
    shutil.copy(rig.tiny / "tokenizer.json", rig.ws / "base_model" / "tokenizer.json")
    (folder / "tokenizer.json").unlink()
    (folder / "tokenizer.json").symlink_to("/workspace/base_model/tokenizer.json")
    (rig.ws / "output" / "best").symlink_to("ckpt-3")
    code, body = rig.post("/workspace/output/best")
    assert code == 200, body
    stored = rig.service.store / body["artifact_hash"] / "artifact" / "tokenizer.json"
    assert stored.is_file() and not stored.is_symlink()


def test_non_utf8_file_names_do_not_break_the_grader(rig):
    folder = rig.ws / "output" / "odd"
    folder.mkdir()
    (folder / os.fsdecode(b"w\xffe\xfe.txt")).write_text("x")
    code, body = rig.post("output/odd")
    assert code == 422 and "not a model" in body["error"]
    assert "\\xff" in body["error"] or "w" in body["error"]
    json.dumps(rig.ledger())  # the ledger stays valid JSON


# ---- item 5: sizes, counts, time -------------------------------------------------------------


def test_sparse_file_is_refused_by_its_allocated_blocks(rig):
    folder = rig.model("m")
    with open(folder / "model-00002.safetensors", "wb") as fh:
        fh.truncate(4 * 2**30)  # 4 GiB apparent, nothing on disk
    code, body = rig.post("output/m", timeout=30)
    assert code == 413 and "sparse file" in body["error"]
    assert sum(p.stat().st_blocks for p in [*rig.store_files()]) * 512 < 2**20


def test_entry_and_depth_bombs_are_refused(tmp_path, tiny_model):
    rig = rig_with(tmp_path, tiny_model, max_artifact_entries=500)
    with rig.server:
        many = rig.ws / "output" / "many"
        many.mkdir()
        for i in range(2000):
            (many / f"f{i}").touch()
        deep = rig.ws / "output" / "deep"
        os.makedirs(deep / "/".join(["d"] * 40))
        code, body = rig.post("output/many")
        assert code == 413 and "more than 500 files and folders" in body["error"]
        code, body = rig.post("output/deep")
        assert code == 413 and "nested more than" in body["error"]
        assert not rig.store_files()


def test_store_quota(tmp_path, tiny_model):
    size = sum(p.stat().st_size for p in tiny_model.rglob("*") if p.is_file())
    rig = rig_with(tmp_path, tiny_model, max_store_bytes=int(size * 1.5))
    with rig.server:
        rig.model("a")
        code, body = rig.post("output/a")
        assert code == 200, body
        b = rig.model("b")
        (b / "notes.txt").write_text("different content, different hash")
        code, body = rig.post("output/b")
        assert code in (413, 507) and ("limit" in body["error"] or "full" in body["error"])
        assert len(list(rig.service.store.iterdir())) == 1


def test_rejected_artifacts_leave_the_store(rig):
    folder = rig.model("corrupt")
    (folder / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{garbage")
    code, body = rig.post("output/corrupt")
    assert code == 422 and "corrupt" in body["error"]
    assert not rig.store_files()


def test_long_model_paths_are_refused_and_not_echoed(rig):
    """A 1 MiB model_path is over the body limit; 50 KB fits the body but not the field."""
    for size, words in ((2**20, "request body is larger than"), (50_000, "characters long")):
        code, body = rig.post("output/" + "a" * size)
        assert code == 413 and words in body["error"]
        assert len(json.dumps(body)) < 2000
    entry = rig.ledger()[-1]
    assert len(json.dumps(entry)) < 2000 and entry["model_path"].endswith("characters)")
    assert (rig.ws / "scores.json").stat().st_size < 5000
    code, body = rig.post("output/\udcff\ud800")  # lone surrogates: not a path
    assert code == 400 and "lone surrogate" in body["error"]


def test_huge_request_bodies_are_refused_unread(rig):
    code, body = rig.raw(b"{" + b" " * (3 * 2**20) + b"}")
    assert code == 413 and "larger than" in body["error"]
    # a declared size far over the limit is refused before the body is read
    conn = client.UnixHTTPConnection(str(rig.server.socket_path), timeout=30)
    conn.putrequest("POST", "/submit")
    conn.putheader("Authorization", f"Bearer {TOKEN}")
    conn.putheader("Content-Length", str(200 * 2**20))
    conn.endheaders()
    conn.send(b'{"model_path": "')
    response = conn.getresponse()
    assert response.status == 413
    conn.close()
    assert [e["status_code"] for e in rig.ledger()] == [413, 413]
    rig.assert_serving()


def test_deeply_nested_json_is_a_clean_400_in_the_ledger(rig):
    code, body = rig.raw(b"[" * 30_000 + b"]" * 30_000)
    assert code == 400 and "model_path" in body["error"]
    code, body = rig.raw(b'{"model_path": ' + b"[" * 20_000 + b"]" * 20_000 + b"}")
    assert code == 400 and "model_path" in body["error"]
    code, body = rig.raw(b'{"model_path": ' + b"[" * 50 + b"]" * 50 + b"}")
    assert code == 400 and "non-empty string" in body["error"]
    assert [e["status_code"] for e in rig.ledger()] == [400, 400, 400]
    rig.assert_serving()


def test_wrong_tokens_are_refused_and_recorded(rig):
    code, body = client.request("POST", "/submit", {"model_path": "output/x"},
                                url=rig.server.url, token="guess", timeout=10)
    assert code == 401 and "token" in body["error"]
    assert rig.ledger()[-1]["status_code"] == 401 and not rig.ledger()[-1]["valid"]


def test_invalid_submission_flood_is_counted_not_recorded(tmp_path, tiny_model):
    rig = rig_with(tmp_path, tiny_model, max_invalid_submissions=5)
    with rig.server:
        for i in range(5):
            rig.post(f"output/missing-{i}")
        mirror = rig.ws / "scores.json"
        before = (mirror.stat().st_mtime_ns, mirror.read_bytes())
        started = time.monotonic()
        answers = [rig.post(f"output/missing-{i}") for i in range(200)]
        assert time.monotonic() - started < 30
        assert all(code == 404 and body["submission_id"] is None for code, body in answers)
        assert len(rig.ledger()) == 5 and "limit of 5 recorded" in rig.ledger()[-1]["error"]
        assert (mirror.stat().st_mtime_ns, mirror.read_bytes()) == before
        status = client.request("GET", "/status", url=rig.server.url, token=TOKEN)[1]
        assert status["invalid_refused_unrecorded"] == 200
        events = [e for e in iter_jsonl(tmp_path / "run" / "events.jsonl")
                  if e["kind"] == "grader_throttled"]
        assert [e["unrecorded"] for e in events] == [1, 2, 4, 8, 16, 32, 64, 128]
        rig.model("good")  # a valid submission is still graded and recorded
        code, body = rig.post("output/good")
        assert code == 200 and len(rig.ledger()) == 6


def test_invalid_submission_rate_limit_refuses_before_reading(tmp_path, tiny_model):
    rig = rig_with(tmp_path, tiny_model, invalid_per_minute=6.0)
    with rig.server:
        answers = [rig.post(f"output/missing-{i}") for i in range(10)]
        assert [code for code, _ in answers] == [404] * 6 + [429] * 4
        assert "retry in" in answers[-1][1]["error"]
        assert [e["status_code"] for e in rig.ledger()] == [404] * 6 + [429] * 4


def test_endless_chat_template_times_out_and_the_grader_keeps_serving(tmp_path, tiny_model):
    """A tokenizer whose chat template loops 10^10 times: the evaluation is abandoned at the
    budget's eval_timeout_s (its thread stopped), recorded as eval_timeout, not charged to the
    agent nor used up; the next submission is graded normally."""
    rig = rig_with(tmp_path, tiny_model, eval_timeout_s=3.0)
    with rig.server:
        folder = rig.model("loop")
        config = json.loads((folder / "tokenizer_config.json").read_text())
        config["chat_template"] = ("{% for a in range(100000) %}{% for b in range(100000) %}"
                                   "{% endfor %}{% endfor %}hi")
        (folder / "tokenizer_config.json").write_text(json.dumps(config))
        (folder / "chat_template.jinja").unlink(missing_ok=True)
        started = time.monotonic()
        code, body = rig.post("output/loop", timeout=60)
        assert code == 504 and body["status"] == "eval_timeout", body
        assert "limit of 3 s" in body["error"] and body["submissions_left"] == 10
        assert time.monotonic() - started < 20
        assert rig.clock.allowance() >= 603
        entry = rig.service.ledger.entries[-1]
        assert entry.status == "eval_timeout" and not entry.valid and entry.artifact_hash
        events = [e for e in iter_jsonl(tmp_path / "run" / "events.jsonl")
                  if "timed out" in str(e.get("message"))]
        assert events and "stopped" in events[0]["message"]
        rig.model("fine")
        code, body = rig.post("output/fine")
        assert code == 200 and body["submissions_left"] == 9

