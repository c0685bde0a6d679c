"""A hostile agent against the real grader over its unix socket, issue 11 item 5: work without
end. Sparse files, entry and depth bombs, store exhaustion, rejected copies left behind, huge
model paths and bodies, deeply nested JSON, wrong tokens, floods of invalid submissions, a chat
template that never ends. Each must be refused or cut off with a clear error, be in the ledger
(up to the run's limit), and leave the grader serving (tests/attacks/grader_rig.py)."""

from __future__ import annotations

import json
import os
import time

import pytest
from grader_rig import TOKEN, Rig

from a2rl.common.files import iter_jsonl
from a2rl.grading import client

pytestmark = pytest.mark.attacks


# ---- item 5: sizes, counts, time -------------------------------------------------------------


def test_sparse_file_is_refused_by_its_allocated_blocks(rig):
    folder = rig.model("m")
    with open(folder / "model-00002.safetensors", "wb") as fh:
        fh.truncate(4 * 2**30)  # 4 GiB apparent, nothing on disk
    code, body = rig.post("output/m", timeout=30)
    assert code == 413 and "sparse file" in body["error"]
    assert sum(p.stat().st_blocks for p in [*rig.store_files()]) * 512 < 2**20


def test_entry_and_depth_bombs_are_refused(tmp_path, tiny_model):
    with Rig(tmp_path, tiny_model, max_artifact_entries=500) as rig:
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
    with Rig(tmp_path, tiny_model, max_store_bytes=int(size * 1.5)) as rig:
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


def test_wrong_tokens_are_refused_and_never_recorded(rig):
    """A request without the token costs the run nothing (whoever sent it: the port is on the
    host's loopback, test_neighbour_attacks.py): no ledger line, no use of the rate limit."""
    for token in ("guess", "", f"Bearer {TOKEN}"):
        code, body = client.request("POST", "/submit", {"model_path": "output/x"},
                                    url=rig.server.url, token=token, timeout=10)
        assert code == 401 and "token" in body["error"]
    assert rig.ledger() == [] and rig.service.status()["invalid_recorded"] == 0


def test_invalid_submission_flood_is_counted_not_recorded(tmp_path, tiny_model):
    with Rig(tmp_path, tiny_model, max_invalid_submissions=5) as rig:
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
    with Rig(tmp_path, tiny_model, invalid_per_minute=6.0) as rig:
        answers = [rig.post(f"output/missing-{i}") for i in range(10)]
        assert [code for code, _ in answers] == [404] * 6 + [429] * 4
        assert "retry in" in answers[-1][1]["error"]
        assert [e["status_code"] for e in rig.ledger()] == [404] * 6 + [429] * 4


def test_endless_chat_template_times_out_and_the_grader_keeps_serving(tmp_path, tiny_model):
    """A tokenizer whose chat template loops 10^10 times: the evaluation is abandoned at the
    budget's eval_timeout_s (its thread stopped), recorded as eval_timeout; a submission can
    hang its evaluation, so it is charged to the agent and uses a submission up (issue #28; it
    was given back once, and 13 hangs stretched a 60 s budget to 273 s); the next submission is
    graded normally."""
    with Rig(tmp_path, tiny_model, eval_timeout_s=3.0) as rig:
        folder = rig.model("loop")
        config = json.loads((folder / "tokenizer_config.json").read_text())
        config["chat_template"] = ("{% for a in range(100000) %}{% for b in range(100000) %}"
                                   "{% endfor %}{% endfor %}hi")
        (folder / "tokenizer_config.json").write_text(json.dumps(config))
        (folder / "chat_template.jinja").unlink(missing_ok=True)
        started = time.monotonic()
        code, body = rig.post("output/loop", timeout=60)
        assert code == 504 and body["status"] == "eval_timeout", body
        assert "limit of 3 s" in body["error"] and body["submissions_left"] == 9
        assert "counts as a submission" in body["error"]
        assert time.monotonic() - started < 20
        assert rig.clock.allowance() == rig.clock.time_limit_s  # nothing given back
        entry = rig.service.ledger.entries[-1]
        assert entry.status == "eval_timeout" and not entry.valid and entry.artifact_hash
        events = [e for e in iter_jsonl(tmp_path / "run" / "events.jsonl")
                  if "timed out" in str(e.get("message"))]
        assert events and "stopped" in events[0]["message"]
        rig.model("fine")
        code, body = rig.post("output/fine")
        assert code == 200 and body["submissions_left"] == 8
