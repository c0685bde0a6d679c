"""The grading API: the agent's only door to scores.

``GradingService`` holds the logic (validate, copy, hash, evaluate, record) and is usable without
HTTP; ``create_app`` wraps it in FastAPI with a bearer token; ``GradingServer`` serves the app on a
unix socket (reachable from a sandbox without network) and on 127.0.0.1:<free port>.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import shutil
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

import uvicorn
from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from a2rl.common.clock import BudgetClock
from a2rl.common.events import EventLog
from a2rl.common.files import write_json_atomic
from a2rl.grading.artifacts import (
    SubmissionRejected,
    WorkspaceResolver,
    copy_artifact,
    resolve_submission,
)
from a2rl.grading.ledger import Ledger
from a2rl.grading.recording import CodeRecorder, artifact_bytes
from a2rl.models.provision import InvalidSubmission, materialize_submission
from a2rl.task.base import GradingUnavailable

# evaluate(model_dir) -> EvalResult-like object with .score .stderr .n .seconds
Evaluator = Callable[[Path], Any]


class GradingFailed(RuntimeError):
    """The evaluator raised GradingUnavailable (e.g. the judge is down): recorded as
    ``judge_failed``, with what is known of the submission (``extra``)."""

    def __init__(self, message: str, extra: dict[str, Any]):
        super().__init__(message)
        self.extra = extra


@dataclass
class GraderSettings:
    task: str
    split: str  # "test" or "validation": what feedback scores are computed on
    baseline: Optional[float]
    max_submissions: int
    max_artifact_bytes: int = 64 * 2**30
    # the base model's content hash and its scores on ``split``: an unchanged copy of the base
    # is answered with the baseline instead of being evaluated again
    base_hash: Optional[str] = None
    base_scored: Optional[dict[str, Any]] = None


class GradingService:
    """One run's grader. Thread-safe: evaluations run one at a time, others wait their turn."""

    def __init__(self, settings: GraderSettings, workspace: Path, store: Path, ledger: Ledger,
                 base_model: Path, evaluate: Evaluator, clock: BudgetClock, events: EventLog,
                 mirror: Optional[Path] = None, alias: str = "/workspace",
                 recorder: Optional[CodeRecorder] = None, evals: Optional[Path] = None):
        self.settings = settings
        self.resolver = WorkspaceResolver(workspace, alias)
        self.store = Path(store)
        self.store.mkdir(parents=True, exist_ok=True)
        self.ledger = ledger
        self.base_model = Path(base_model)
        self.evaluate = evaluate
        self.clock = clock
        self.events = events
        self.mirror = mirror
        self.recorder = recorder  # snapshots the agent's code at each accepted submission
        # per-item results of every evaluated submission (outside the workspace: they name the
        # sealed items), so submissions can be compared item by item after the run
        self.evals = Path(evals) if evals is not None else None
        self._turn = threading.Lock()
        if mirror is not None:
            self.ledger.write_mirror(mirror, settings.baseline)

    # -- public -------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        best = self.ledger.best()
        return {"task": self.settings.task, "feedback": self.settings.split,
                "baseline": self.settings.baseline,
                "best": best["score"] if best else None,
                "submissions_used": self.ledger.evaluated_count(),
                "submissions_left": self.submissions_left(),
                "elapsed_s": round(self.clock.elapsed(), 1),
                "time_left_s": round(self.clock.time_left(), 1),
                "deadline": self.clock.deadline_utc()}

    def submissions_left(self) -> int:
        return max(0, self.settings.max_submissions - self.ledger.evaluated_count())

    def submit(self, model_path: object) -> tuple[int, dict[str, Any]]:
        """Grade one submission; returns (HTTP status, body). Never raises for bad input."""
        with self._turn:
            try:
                return 200, self._grade(model_path)
            except InvalidSubmission as err:
                status = getattr(err, "status", 422)
                return status, self._reject(model_path, str(err), status)
            except GradingFailed as err:
                return 503, self._reject(model_path, f"grading failed (not your submission's "
                                                     f"fault; it does not count): {err}", 503,
                                         extra={"status": "judge_failed",
                                                "infrastructure_failure": True, **err.extra})
            except Exception as err:  # a harness fault must not take the server down
                return 500, self._reject(model_path, f"internal grader error: "
                                                     f"{type(err).__name__}: {err}", 500)

    # -- steps --------------------------------------------------------------------------------
    def _grade(self, model_path: object) -> dict[str, Any]:
        if self.clock.expired():
            raise SubmissionRejected("the time budget is used up; no more submissions", 403)
        if self.submissions_left() <= 0:
            raise SubmissionRejected(
                f"no submissions left (the budget allows {self.settings.max_submissions})", 429)
        src = resolve_submission(self.resolver, model_path)
        digest, artifact = copy_artifact(self.resolver, src, self.store,
                                         self.settings.max_artifact_bytes)
        extra = self._snapshot(model_path, artifact)
        earlier = self.ledger.find_hash(digest)
        if earlier is not None:
            return self._record(model_path, digest, earlier, cached=True, extra=extra)
        if digest == self.settings.base_hash and self.settings.base_scored:
            return self._record(model_path, digest, self.settings.base_scored, cached=True,
                                extra=extra)
        model_dir = materialize_submission(artifact, self.base_model,
                                           artifact.parent / "model")
        started = time.monotonic()
        try:
            result = self.evaluate(model_dir)
        except GradingUnavailable as err:  # not the agent's fault: its time is not charged
            raise GradingFailed(str(err), extra | {"artifact_hash": digest}) from err
        except Exception as err:
            raise InvalidSubmission(f"the model could not be evaluated: "
                                    f"{type(err).__name__}: {err}") from err
        seconds = time.monotonic() - started
        self.clock.add_eval_time(seconds)
        scored = {"score": round(result.score, 4), "stderr": round(result.stderr, 4),
                  "n": result.n, "eval_seconds": round(seconds, 3)}
        answer = self._record(model_path, digest, scored, cached=False, extra=extra)
        self._keep_details(answer["submission_id"], digest, result)
        return answer

    def _keep_details(self, submission_id: int, digest: str, result: Any) -> None:
        """Write ``evals/<submission_id>.json`` (per-item scores, breakdown, records); a
        failure here is logged and never fails the submission."""
        if self.evals is None:
            return
        details = {"submission_id": submission_id, "artifact_hash": digest,
                   "split": self.settings.split, "score": result.score, "n": result.n,
                   "per_item": list(result.per_item),
                   "breakdown": dict(getattr(result, "breakdown", None) or {}),
                   "records": list(getattr(result, "records", None) or [])}
        try:
            write_json_atomic(self.evals / f"{submission_id}.json", details)
        except (OSError, TypeError, ValueError) as err:
            self.events.emit("error", message=f"keeping the evaluation details of submission "
                                              f"{submission_id} failed: {err}")

    def _snapshot(self, model_path: object, artifact: Path) -> dict[str, Any]:
        """The artifact's size and, before it is evaluated, a commit of the agent's code as
        submitted (``code_commit``; None when recording failed, which never fails grading)."""
        extra: dict[str, Any] = {"artifact_bytes": artifact_bytes(artifact)}
        if self.recorder is not None:
            try:
                extra["code_commit"] = self.recorder.snapshot(
                    f"submission {self.ledger.next_id()}: {model_path}").commit
            except Exception as err:
                extra["code_commit"] = None
                self.events.emit("error", message=f"code snapshot failed: "
                                                  f"{type(err).__name__}: {err}")
        return extra

    def _record(self, model_path: object, digest: str, scored: dict[str, Any],
                cached: bool, extra: Optional[dict[str, Any]] = None) -> dict[str, Any]:
        best_before = self.ledger.best()
        score = scored["score"]
        best = max(score, best_before["score"]) if best_before else score
        baseline = self.settings.baseline
        entry = self.ledger.append({
            "model_path": model_path, "valid": True, "error": None, "status_code": 200,
            "artifact_hash": digest, "cached": cached, "split": self.settings.split,
            "equals_base": digest == self.settings.base_hash,
            "score": score, "stderr": scored.get("stderr"), "n": scored.get("n"),
            "eval_seconds": 0.0 if cached else scored.get("eval_seconds"),
            "elapsed_s": round(self.clock.elapsed(), 3), "best": best, "baseline": baseline,
            "improvement": None if baseline is None else round(score - baseline, 4),
            **(extra or {})})
        if entry.get("code_commit") and self.recorder is not None:
            try:
                self.recorder.tag(entry["code_commit"], f"submission-{entry['submission_id']}")
            except Exception as err:
                self.events.emit("error", message=f"tagging the code snapshot failed: {err}")
        self._after(entry)
        return {k: entry[k] for k in ("submission_id", "score", "best", "baseline",
                                      "improvement", "elapsed_s", "cached", "stderr", "n",
                                      "split", "artifact_hash", "equals_base")} | {
            "submissions_left": self.submissions_left(),
            "time_left_s": round(self.clock.time_left(), 1)}

    def _reject(self, model_path: object, message: str, status: int,
                extra: Optional[dict[str, Any]] = None) -> dict[str, Any]:
        """Record an unscored submission. ``extra["status"]`` ``judge_failed`` marks a grading
        infrastructure failure (like every invalid entry, it does not use up a submission)."""
        shown = model_path if isinstance(model_path, (str, int, float, type(None))) \
            else repr(model_path)[:200]
        entry = self.ledger.append({"model_path": shown, "valid": False, "error": message,
                                    "status_code": status,
                                    "elapsed_s": round(self.clock.elapsed(), 3),
                                    **(extra or {})})
        self._after(entry)
        answer = {"error": message, "submission_id": entry["submission_id"],
                  "submissions_left": self.submissions_left(),
                  "time_left_s": round(self.clock.time_left(), 1)}
        return answer | ({"status": entry["status"]} if "status" in entry else {})

    def _after(self, entry: dict[str, Any]) -> None:
        if self.mirror is not None:
            self.ledger.write_mirror(self.mirror, self.settings.baseline)
        self.events.emit("submission", submission_id=entry["submission_id"],
                         valid=entry["valid"], score=entry.get("score"),
                         artifact_hash=entry.get("artifact_hash"), error=entry.get("error"),
                         cached=entry.get("cached"), code_commit=entry.get("code_commit"))

    def wait_idle(self) -> None:
        """Block until no evaluation is in progress."""
        with self._turn:
            pass

    def discard_unselected(self, keep: set[str]) -> None:
        """Free disk: drop stored artifacts other than ``keep`` (hashes)."""
        for entry in self.store.iterdir():
            if entry.is_dir() and entry.name not in keep:
                shutil.rmtree(entry, ignore_errors=True)


def create_app(service: GradingService, token: str) -> FastAPI:
    app = FastAPI(title="a2rl grader", docs_url=None, redoc_url=None, openapi_url=None)

    def authorized(request: Request) -> bool:
        header = request.headers.get("authorization", "")
        return hmac.compare_digest(header.encode(), f"Bearer {token}".encode())

    def denied(request: Request) -> JSONResponse:
        # recorded for the tamper log (a2rl.analysis.integrity)
        service.events.emit("grader_denied", method=request.method, path=request.url.path)
        return JSONResponse({"error": "missing or wrong bearer token (use $A2RL_TOKEN)"}, 401)

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/status")
    def status(request: Request):
        return service.status() if authorized(request) else denied(request)

    @app.post("/submit")
    async def submit(request: Request):
        if not authorized(request):
            return denied(request)
        body = await request.body()
        try:
            payload = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError):
            payload = None
        if not isinstance(payload, dict) or "model_path" not in payload:
            message = 'the body must be JSON like {"model_path": "output/ckpt-1"}'
            answer = await run_in_threadpool(service._reject, body[:200].decode(errors="replace"),
                                             message, 400)
            return JSONResponse(answer, 400)
        code, answer = await run_in_threadpool(service.submit, payload["model_path"])
        return JSONResponse(answer, code)

    return app


class GradingServer:
    """Serves a GradingService on a unix socket and on 127.0.0.1 (free port) in a thread."""

    def __init__(self, service: GradingService, token: str, socket_path: Path):
        self.service = service
        self.token = token
        self.socket_path = Path(socket_path)
        self.port: Optional[int] = None
        self._server: Optional[uvicorn.Server] = None
        self._thread: Optional[threading.Thread] = None

    @property
    def url(self) -> str:
        return f"unix:{self.socket_path}"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "GradingServer":
        self.socket_path.unlink(missing_ok=True)
        uds = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        uds.bind(str(self.socket_path))
        self.socket_path.chmod(0o666)
        tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        tcp.bind(("127.0.0.1", 0))
        self.port = tcp.getsockname()[1]
        config = uvicorn.Config(create_app(self.service, self.token), log_level="warning",
                                access_log=False, timeout_graceful_shutdown=5)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=lambda: asyncio.run(self._server.serve(sockets=[uds, tcp])),
            name="a2rl-grader", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the grading server did not start within 30 s")
            time.sleep(0.05)
        self.service.events.emit("grader_start", socket=str(self.socket_path), port=self.port)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
            self._thread.join(timeout=30)
            self.service.events.emit("grader_stop")
        self.socket_path.unlink(missing_ok=True)

    def __enter__(self) -> "GradingServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
