"""The grading API over its real unix socket: success, cache, resume, and the ways a submission
can be bad — each answered with a specific 4xx, recorded, and survived."""

import json
import shutil
import threading
import time
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from a2rl.common.clock import BudgetClock
from a2rl.common.events import EventLog
from a2rl.common.files import iter_jsonl
from a2rl.grading import client
from a2rl.grading.answers import answer
from a2rl.grading.grader import GraderSettings, GradingServer, GradingService
from a2rl.grading.ledger import Ledger, grading_totals
from a2rl.task.base import EvalResult, GradingBudgetExhausted, GradingUnavailable

TOKEN = "test-token"
PROBE_IDS = torch.arange(3, 43).view(4, 10)


class ForwardPassScore:
    """A real evaluation of a model folder: the share of positions where the model's greedy next
    token is even. Changes when weights change; counts calls and overlapping calls."""

    def __init__(self):
        self.calls = 0
        self.active = 0
        self.max_active = 0
        self._lock = threading.Lock()

    def __call__(self, model_dir: Path) -> EvalResult:
        with self._lock:
            self.calls += 1
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        try:
            model = AutoModelForCausalLM.from_pretrained(model_dir)
            with torch.inference_mode():
                nxt = model(PROBE_IDS).logits.argmax(-1).flatten()
            time.sleep(0.2)  # long enough for concurrent submissions to overlap if unqueued
            return EvalResult(per_item=[float(t % 2 == 0) for t in nxt.tolist()], seconds=0.2,
                              breakdown={"positions": float(len(nxt))})
        finally:
            with self._lock:
                self.active -= 1


@pytest.fixture
def run_env(tmp_path, tiny_model):
    ws = tmp_path / "run" / "workspace"
    for area in ("output", "code", "data"):
        (ws / area).mkdir(parents=True)
    (tmp_path / "sock").mkdir()
    return tmp_path, ws


def make_service(tmp_path, ws, tiny_model, evaluator, clock=None, max_submissions=10):
    run = tmp_path / "run"
    clock = clock or BudgetClock(600)
    clock.start()
    settings = GraderSettings(task="t", split="test", baseline=25.0,
                              max_submissions=max_submissions, workspace=ws,
                              store=run / "store", base_model=tiny_model, alias="/workspace",
                              mirror=ws / "scores.json", evals=run / "evals")
    return GradingService(settings, evaluate=evaluator, ledger=Ledger(run / "ledger.jsonl"),
                          clock=clock, events=EventLog(run / "events.jsonl", clock))


@pytest.fixture
def server(run_env, tiny_model):
    tmp_path, ws = run_env
    evaluator = ForwardPassScore()
    service = make_service(tmp_path, ws, tiny_model, evaluator)
    with GradingServer(service, TOKEN, tmp_path / "sock" / "grader.sock") as srv:
        yield srv, evaluator, ws


def post(srv, model_path, token=TOKEN):
    return client.request("POST", "/submit", {"model_path": model_path}, url=srv.url,
                          token=token)


def put_model(ws: Path, tiny_model: Path, name: str) -> Path:
    dest = ws / "output" / name
    shutil.copytree(tiny_model, dest)
    return dest


def perturb(model_dir: Path) -> None:
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    model.save_pretrained(model_dir)


def test_submit_scores_records_and_mirrors(server, tiny_model):
    srv, evaluator, ws = server
    put_model(ws, tiny_model, "ckpt-1")
    code, body = post(srv, "/workspace/output/ckpt-1")
    assert code == 200, body
    assert set(body) >= {"submission_id", "score", "best", "baseline", "improvement",
                         "elapsed_s", "submissions_left", "time_left_s"}
    assert 0 <= body["score"] <= 100 and body["best"] == body["score"]
    assert body["improvement"] == pytest.approx(body["score"] - 25.0)
    assert body["submissions_left"] == 9 and not body["cached"]
    ledger = list(iter_jsonl(srv.service.ledger.path))
    assert ledger[-1]["artifact_hash"] == body["artifact_hash"] and ledger[-1]["valid"]
    mirror = json.loads((ws / "scores.json").read_text())
    assert mirror["best"] == body["score"] and (ws / "scores.json").stat().st_mode & 0o222 == 0
    code, status = client.request("GET", "/status", url=srv.url, token=TOKEN)
    assert code == 200 and status["best"] == body["score"] and status["submissions_used"] == 1
    details = json.loads((ws.parent / "evals" / "1.json").read_text())
    assert details["artifact_hash"] == body["artifact_hash"] and details["split"] == "test"
    assert 100 * sum(details["per_item"]) / len(details["per_item"]) == pytest.approx(body["score"])
    assert details["breakdown"] == {"positions": float(len(details["per_item"]))}


def test_identical_resubmission_is_answered_from_cache(server, tiny_model):
    srv, evaluator, ws = server
    put_model(ws, tiny_model, "a")
    put_model(ws, tiny_model, "b")  # same bytes, different folder
    _, first = post(srv, "output/a")
    _, second = post(srv, "output/b")
    assert second["cached"] and second["score"] == first["score"]
    assert second["artifact_hash"] == first["artifact_hash"]
    assert evaluator.calls == 1 and second["submissions_left"] == first["submissions_left"]


def test_artifact_is_copied_before_evaluation(server, tiny_model):
    srv, evaluator, ws = server
    src = put_model(ws, tiny_model, "ckpt")
    _, first = post(srv, "output/ckpt")
    stored = srv.service.store / first["artifact_hash"] / "artifact"
    before = (stored / "model.safetensors").read_bytes()
    perturb(src)  # the agent changes its folder afterwards
    assert (stored / "model.safetensors").read_bytes() == before
    _, second = post(srv, "output/ckpt")
    assert not second["cached"] and second["artifact_hash"] != first["artifact_hash"]


def bad_submissions(ws: Path, tiny_model: Path, tmp_path: Path) -> list[tuple[object, int, str]]:
    (ws / "output" / "empty").mkdir()
    (ws / "output" / "notes").mkdir()
    (ws / "output" / "notes" / "readme.txt").write_text("hello")
    (ws / "output" / "weights.bin").write_bytes(b"\0" * 10)
    corrupt = put_model(ws, tiny_model, "corrupt")
    (corrupt / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{garbage")
    escape = ws / "output" / "escape"
    escape.mkdir()
    (escape / "config.json").symlink_to(tmp_path / "run" / "ledger.jsonl")
    (ws / "output" / "link_out").symlink_to(tmp_path)
    put_model(ws, tiny_model, "in_data_later")
    shutil.move(ws / "output" / "in_data_later", ws / "data" / "model")
    _shrink_vocab(put_model(ws, tiny_model, "wrong_vocab_src"), ws / "output" / "wrong_vocab")
    return [
        ("output/missing", 404, "does not exist"),
        ("../ledger.jsonl", 403, "outside the workspace"),
        ("/etc", 403, "outside the workspace"),
        ("data/model", 403, "outside the workspace"),
        ("output/link_out", 403, "outside the workspace"),
        ("output/escape", 403, "outside the workspace"),
        ("output/weights.bin", 400, "not a folder"),
        ("output/empty", 400, "empty"),
        ("output/notes", 422, "not a model"),
        ("output/corrupt", 422, "corrupt"),
        ("output/wrong_vocab", 422, "vocab"),
        ("", 400, "non-empty string"),
        (["output/a"], 400, "non-empty string"),
    ]


def _shrink_vocab(src: Path, dest: Path) -> None:
    """A model whose embedding is smaller than the base tokenizer's vocabulary."""
    model = AutoModelForCausalLM.from_pretrained(src)
    model.resize_token_embeddings(64)
    model.save_pretrained(dest)
    shutil.rmtree(src)


def test_bad_submissions_get_specific_errors_and_server_survives(server, tiny_model, tmp_path):
    srv, evaluator, ws = server
    cases = bad_submissions(ws, tiny_model, tmp_path)
    for model_path, status, words in cases:
        code, body = post(srv, model_path)
        assert code == status, (model_path, code, body)
        assert words in body["error"].lower(), (model_path, body["error"])
    assert evaluator.calls == 0
    ledger = list(iter_jsonl(srv.service.ledger.path))
    assert len(ledger) == len(cases) and not any(e["valid"] for e in ledger)
    assert [e["submission_id"] for e in ledger] == list(range(1, len(cases) + 1))
    put_model(ws, tiny_model, "good")
    code, body = post(srv, "output/good")
    assert code == 200 and body["submissions_left"] == 9  # invalid ones used none up


def test_malformed_requests(server):
    srv, _, _ = server
    code, body = post(srv, "output/x", token="wrong")
    assert code == 401 and "token" in body["error"]
    import http.client
    conn = client.UnixHTTPConnection(str(srv.socket_path))
    conn.request("POST", "/submit", body=b"{not json", headers={
        "Authorization": f"Bearer {TOKEN}"})
    response = conn.getresponse()
    assert response.status == 400 and "model_path" in json.loads(response.read())["error"]
    code, _ = client.request("GET", "/health", url=srv.url, token="")
    assert code == 401  # no route answers without the token (tests/attacks: a neighbour)
    assert client.request("GET", "/health", url=srv.url, token=TOKEN) == (200, {"status": "ok"})
    del http


def test_concurrent_submissions_queue(server, tiny_model):
    srv, evaluator, ws = server
    for i in range(3):
        perturb(put_model(ws, tiny_model, f"m{i}"))
    results = []
    threads = [threading.Thread(target=lambda i=i: results.append(post(srv, f"output/m{i}")))
               for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(code for code, _ in results) == [200, 200, 200]
    assert evaluator.max_active == 1 and evaluator.calls == 3
    assert sorted(b["submission_id"] for _, b in results) == [1, 2, 3]


def test_restart_resumes_from_ledger(run_env, tiny_model):
    tmp_path, ws = run_env
    evaluator = ForwardPassScore()
    first = make_service(tmp_path, ws, tiny_model, evaluator)
    put_model(ws, tiny_model, "a")
    perturb(put_model(ws, tiny_model, "b"))
    _, a = first.submit("output/a")
    first.submit("output/missing")
    restarted = make_service(tmp_path, ws, tiny_model, evaluator)
    assert restarted.status()["best"] == a["score"]
    assert restarted.status()["submissions_used"] == 1
    code, again = restarted.submit("output/a")
    assert code == 200 and again["cached"] and again["submission_id"] == 3
    _, b = restarted.submit("output/b")
    assert b["submission_id"] == 4 and b["best"] == max(a["score"], b["score"])


def test_budget_limits(run_env, tiny_model):
    tmp_path, ws = run_env
    put_model(ws, tiny_model, "a")
    perturb(put_model(ws, tiny_model, "b"))
    one = make_service(tmp_path, ws, tiny_model, ForwardPassScore(), max_submissions=1)
    assert one.submit("output/a")[0] == 200
    code, body = one.submit("output/b")
    assert code == 429 and "no submissions left" in body["error"]
    clock = BudgetClock(0.01)
    late = make_service(tmp_path / "late", ws, tiny_model, ForwardPassScore(), clock=clock)
    time.sleep(0.05)
    code, body = late.submit("output/a")
    assert code == 403 and "time budget" in body["error"]


@pytest.mark.parametrize("count_eval_time", [True, False])
def test_a_running_evaluation_stretches_the_budget_only_when_evaluations_do_not_count(
        run_env, tiny_model, count_eval_time):
    """An evaluation longer than the time left: when evaluations do not count, the agent
    waiting for its score is not out of time meanwhile (the runner would stop it), and the
    evaluation's seconds stay given back afterwards."""
    tmp_path, ws = run_env
    clock = BudgetClock(1.0, count_eval_time=count_eval_time)
    score = ForwardPassScore()
    seen = []

    def evaluate(model_dir: Path) -> EvalResult:
        time.sleep(1.5)
        seen.append(clock.expired())
        return score(model_dir)

    service = make_service(tmp_path, ws, tiny_model, evaluate, clock=clock)
    put_model(ws, tiny_model, "a")
    assert service.submit("output/a")[0] == 200
    assert seen == [count_eval_time] and clock.expired() is count_eval_time


def test_eval_time_can_be_excluded_from_budget():
    clock = BudgetClock(10, count_eval_time=False)
    counted = BudgetClock(10, count_eval_time=True)
    for c in (clock, counted):
        c.start()
        c.begin_eval()
    time.sleep(0.3)
    for c in (clock, counted):
        c.end_eval("eval")
    assert clock.allowance() >= 10.3 and clock.time_left() > 10 - 0.1
    assert counted.allowance() == 10 and counted.time_left() <= 10 - 0.3


@pytest.mark.parametrize("count_eval_time", [True, False])
def test_grading_unavailable_is_judge_failed_uncounted_and_not_charged(run_env, tiny_model,
                                                                     count_eval_time):
    """An evaluator that cannot grade for a reason outside the submission (a judge outage):
    503 judge_failed, the submission not used up, its grading time given back to the agent
    whether or not evaluations count; the same model is scored once grading works again."""
    tmp_path, ws = run_env
    score = ForwardPassScore()
    outage = [GradingUnavailable("the judge is down")]  # the first evaluation only

    def evaluate(model_dir: Path) -> EvalResult:
        if outage:
            time.sleep(0.5)
            raise outage.pop()
        return score(model_dir)

    clock = BudgetClock(600, count_eval_time=count_eval_time)
    service = make_service(tmp_path, ws, tiny_model, evaluate, clock=clock, max_submissions=1)
    put_model(ws, tiny_model, "a")
    code, body = service.submit("output/a")
    assert code == 503 and body["status"] == "judge_failed" and body["submissions_left"] == 1
    # the judge's own words stay in the grader's log: they could quote the sealed prompt
    assert "could not be used" in body["error"] and "the judge is down" not in body["error"]
    assert clock.allowance() >= 600.5
    entry = service.ledger.entries[0]
    assert entry.status == "judge_failed" and not entry.valid and entry.artifact_hash
    code, body = service.submit("output/a")
    assert code == 200 and body["submissions_left"] == 0 and score.calls == 1


def test_a_spent_judge_budget_is_answered_plainly_and_ends_grading(run_env, tiny_model):
    """The run's paid-judge budget spent (GradingBudgetExhausted): 402 with the documented
    sentence, not the generic 503 of an outage; the submission is not used up, and later ones
    are refused up front (a restarted grader too) without calling the evaluator."""
    tmp_path, ws = run_env
    score = ForwardPassScore()

    def evaluate(model_dir: Path) -> EvalResult:
        raise GradingBudgetExhausted("the judge budget is used up: 50.01 of 50 USD")

    service = make_service(tmp_path, ws, tiny_model, evaluate, max_submissions=5)
    put_model(ws, tiny_model, "a")
    code, body = service.submit("output/a")
    assert code == 402 and body["status"] == "grading_budget_exhausted"
    assert body["error"] == answer("grading_budget_exhausted") and body["submissions_left"] == 5
    assert "50.01" not in body["error"]  # the judge's words stay in the grader's log
    assert service.status()["grading_budget_exhausted"] is True
    put_model(ws, tiny_model, "b")
    code, body = service.submit("output/b")
    assert code == 402 and body["error"] == answer("grading_budget_exhausted")
    restarted = make_service(tmp_path, ws, tiny_model, score, max_submissions=5)
    assert restarted.submit("output/b")[0] == 402 and score.calls == 0
    assert grading_totals(restarted.ledger.entries)["grading_budget_exhausted_submissions"] == 1


def test_copy_of_base_model_is_answered_with_the_baseline(run_env, tiny_model):
    from a2rl.models.hf_folder import content_hash
    tmp_path, ws = run_env
    evaluator = ForwardPassScore()
    service = make_service(tmp_path, ws, tiny_model, evaluator)
    service.settings.base_hash = content_hash(tiny_model)
    service.settings.base_scored = {"score": 25.0, "stderr": 1.0, "n": 40}
    put_model(ws, tiny_model, "base")
    code, body = service.submit("output/base")
    assert code == 200 and body["equals_base"] and body["cached"]
    assert body["score"] == 25.0 and body["improvement"] == 0 and evaluator.calls == 0
