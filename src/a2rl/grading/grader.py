"""The grading API: the agent's only door to scores.

``GradingService`` holds the logic (validate, copy, hash, evaluate, record) and is usable without
HTTP; ``create_app`` wraps it in FastAPI with a bearer token; ``GradingServer`` serves the app on a
unix socket (reachable from a sandbox without network) and on 127.0.0.1:<free port>.
"""

from __future__ import annotations

import hmac
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from a2rl.common.clock import BudgetClock
from a2rl.common.events import EventLog
from a2rl.common.files import write_json_atomic
from a2rl.common.records import ANSWER, LedgerEntry
from a2rl.grading.artifacts import (
    Evaluator,
    SubmissionRejected,
    WorkspaceResolver,
    artifact_bytes,
    copy_artifact,
    resolve_submission,
    score_artifact,
)
from a2rl.grading.ledger import Ledger
from a2rl.grading.recording import CodeRecorder
from a2rl.llm.loopback import LoopbackServer, Served
from a2rl.models.submission import InvalidSubmission
from a2rl.task.base import GradingUnavailable


class GradingFailed(RuntimeError):
    """The evaluator raised GradingUnavailable (e.g. the judge is down): recorded as
    ``judge_failed``, with the hash of the stored artifact it could not grade."""

    def __init__(self, message: str, artifact_hash: str):
        super().__init__(message)
        self.artifact_hash = artifact_hash


@dataclass
class GraderSettings:
    """What one run's grader grades, where, and against what."""

    task: str
    split: str  # "test" or "validation": what feedback scores are computed on
    baseline: Optional[float]
    max_submissions: int
    workspace: Path  # the agent's workspace: submitted paths are resolved in it
    store: Path  # where accepted artifacts are copied, out of the agent's reach
    base_model: Path  # what an adapter is merged into and a tokenizer is copied from
    max_artifact_bytes: int = 64 * 2**30
    # the base model's content hash and its scores on ``split``: an unchanged copy of the base
    # is answered with the baseline instead of being evaluated again
    base_hash: Optional[str] = None
    base_scored: Optional[dict[str, Any]] = None
    alias: str = "/workspace"  # the workspace as the agent sees it (absolute paths it submits)
    mirror: Optional[Path] = None  # scores.json in the workspace, rewritten after each one
    # per-item results of every evaluated submission (outside the workspace: they name the
    # sealed items), so submissions can be compared item by item after the run
    evals: Optional[Path] = None


class GradingService:
    """One run's grader. Thread-safe: evaluations run one at a time, others wait their turn."""

    def __init__(self, settings: GraderSettings, evaluate: Evaluator, ledger: Ledger,
                 clock: BudgetClock, events: EventLog, recorder: Optional[CodeRecorder] = None):
        self.settings = settings
        self.resolver = WorkspaceResolver(settings.workspace, settings.alias)
        self.store = Path(settings.store)
        self.store.mkdir(parents=True, exist_ok=True)
        self.ledger = ledger
        self.base_model = Path(settings.base_model)
        self.evaluate = evaluate
        self.clock = clock
        self.events = events
        self.mirror = settings.mirror
        self.recorder = recorder  # snapshots the agent's code at each accepted submission
        self.evals = Path(settings.evals) if settings.evals is not None else None
        self._turn = threading.Lock()
        if self.mirror is not None:
            self.ledger.write_mirror(self.mirror, settings.baseline)

    # -- public -------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        best = self.ledger.best()
        return {"task": self.settings.task, "feedback": self.settings.split,
                "baseline": self.settings.baseline,
                "best": best.score if best else None,
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
                                         judge_failed=err.artifact_hash)
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
            scored = {"score": earlier.score, "stderr": earlier.stderr, "n": earlier.n}
            return self._record(model_path, digest, scored, cached=True, extra=extra)
        if digest == self.settings.base_hash and self.settings.base_scored:
            return self._record(model_path, digest, self.settings.base_scored, cached=True,
                                extra=extra)
        try:
            result, seconds = score_artifact(artifact, self.base_model, self.evaluate,
                                             self.clock)
        except GradingUnavailable as err:
            raise GradingFailed(str(err), digest) from err
        scored = {"score": round(result.score, 4), "stderr": round(result.stderr, 4),
                  "n": result.n, "eval_seconds": round(seconds, 3)}
        usage = getattr(result, "usage", None)
        if usage:  # a judge's calls and cost, kept apart from the agent's LLM spending
            extra = extra | {"grading_usage": dict(usage)}
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
        best = max(score, best_before.score) if best_before else score
        baseline = self.settings.baseline
        entry = self.ledger.append(
            model_path=model_path, valid=True, error=None, status_code=200,
            artifact_hash=digest, cached=cached, split=self.settings.split,
            equals_base=digest == self.settings.base_hash,
            score=score, stderr=scored.get("stderr"), n=scored.get("n"),
            eval_seconds=0.0 if cached else scored.get("eval_seconds"),
            elapsed_s=round(self.clock.elapsed(), 3), best=best, baseline=baseline,
            improvement=None if baseline is None else round(score - baseline, 4),
            **(extra or {}))
        if entry.code_commit and self.recorder is not None:
            try:
                self.recorder.tag(entry.code_commit, f"submission-{entry.submission_id}")
            except Exception as err:
                self.events.emit("error", message=f"tagging the code snapshot failed: {err}")
        self._after(entry)
        return entry.shown_in(ANSWER) | {"submissions_left": self.submissions_left(),
                                         "time_left_s": round(self.clock.time_left(), 1)}

    def _reject(self, model_path: object, message: str, status: int,
                judge_failed: Optional[str] = None) -> dict[str, Any]:
        """Record an unscored submission. ``judge_failed`` (the artifact's hash) marks a
        grading infrastructure failure (like every invalid entry, it does not use up a
        submission)."""
        shown = model_path if isinstance(model_path, (str, int, float, type(None))) \
            else repr(model_path)[:200]
        failure = {"status": "judge_failed", "artifact_hash": judge_failed} if judge_failed \
            else {}
        entry = self.ledger.append(model_path=shown, valid=False, error=message,
                                   status_code=status, elapsed_s=round(self.clock.elapsed(), 3),
                                   **failure)
        self._after(entry)
        return {"error": message, "submission_id": entry.submission_id,
                "submissions_left": self.submissions_left(),
                "time_left_s": round(self.clock.time_left(), 1)} | (
                    {"status": entry.status} if entry.status else {})

    def _after(self, entry: LedgerEntry) -> None:
        if self.mirror is not None:
            self.ledger.write_mirror(self.mirror, self.settings.baseline)
        self.events.emit("submission", submission_id=entry.submission_id, valid=entry.valid,
                         score=entry.score, artifact_hash=entry.artifact_hash,
                         error=entry.error, cached=entry.cached, code_commit=entry.code_commit)

    def wait_idle(self) -> None:
        """Block until no evaluation is in progress."""
        with self._turn:
            pass


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


class GradingServer(Served):
    """Serves a GradingService on a unix socket (``url``, for the sandbox) and on 127.0.0.1
    (``http_url``) from a thread."""

    def __init__(self, service: GradingService, token: str, socket_path: Path):
        self.service = service
        self.token = token
        self.socket_path = Path(socket_path)
        self._server = LoopbackServer(create_app(service, token), "a2rl-grader", self.socket_path)

    @property
    def url(self) -> str:
        return f"unix:{self.socket_path}"

    @property
    def http_url(self) -> str:
        return self._server.url

    @property
    def port(self) -> Optional[int]:
        return self._server.port

    def start(self) -> "GradingServer":
        self._server.start()
        self.service.events.emit("grader_start", socket=str(self.socket_path), port=self.port)
        return self

    def stop(self) -> None:
        if self._server.stop():
            self.service.events.emit("grader_stop")
