"""The grading API: the agent's only door to scores.

``GradingService`` holds the logic (validate, copy, hash, evaluate, record) and is usable without
HTTP; ``a2rl.grading.server`` serves it (``create_app``, ``GradingServer``, imported from here
too). What it refuses and its limits: docs/grading.md.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from a2rl.common.beneath import Limits
from a2rl.common.clock import BudgetClock
from a2rl.common.events import EventLog
from a2rl.common.files import read_json, utc_now, write_json_atomic
from a2rl.common.records import ANSWER, LedgerEntry
from a2rl.grading.answers import ANSWERS, answer, log_detail
from a2rl.grading.artifacts import (
    LOAD_TIMEOUT_S,
    Evaluator,
    SubmissionRejected,
    WorkspaceResolver,
    artifact_bytes,
    copy_artifact,
    remove_stored,
    resolve_submission,
    score_artifact,
    store_bytes,
)
from a2rl.grading.ledger import Ledger
from a2rl.grading.limits import (
    EvaluationTimedOut,
    InvalidLimiter,
    clipped,
    printable,
    scrub,
)
from a2rl.grading.recording import CodeRecorder
from a2rl.grading.server import GradingServer, create_app  # noqa: F401 (callers' import)
from a2rl.models.submission import InvalidSubmission
from a2rl.task.base import GradingBudgetExhausted, GradingUnavailable

# what the agent reads in the ledger and scores.json about a submission the grader was evaluating
# when it died (a2rl.grading.grader.recover_inflight)
INTERRUPTED = ("the grader stopped while evaluating this submission and was restarted (not your "
               "submission's fault; it does not count): submit it again")


def inflight_path(ledger: Ledger) -> Path:
    """Where the submission being evaluated is kept until it is recorded."""
    return ledger.path.with_name(ledger.path.stem + ".inflight.json")


def recover_inflight(ledger: Ledger, events: EventLog) -> None:
    """Record the submission a grader on ``ledger`` was evaluating when it died as
    ``interrupted`` (not counted, like judge_failed; its artifact stays in the store); nothing
    to do when it finished, or got as far as recording it. A restarted grader calls it, and
    the harness when the grader died after the agent (a2rl.pipeline.supervisor)."""
    inflight = inflight_path(ledger)
    if not inflight.exists():
        return
    pending = read_json(inflight)
    recorded = any(e.artifact_hash == pending["artifact_hash"] and e.time >= pending["started"]
                   for e in ledger.entries)
    if not recorded:
        entry = ledger.append(
            model_path=pending["model_path"], valid=False, error=INTERRUPTED,
            status_code=503, elapsed_s=pending["elapsed_s"], status="interrupted",
            artifact_hash=pending["artifact_hash"])
        events.emit("grader_recovered", submission_id=entry.submission_id,
                    artifact_hash=entry.artifact_hash)
    inflight.unlink()


class GradingFailed(RuntimeError):
    """Grading did not end in a score: the evaluator raised GradingUnavailable (the judge is
    down; ``status`` judge_failed: not the submission's fault, it does not count) or ran past
    its deadline (eval_timeout: a submission can hang its evaluation, so it counts and its time
    is charged); recorded with the hash of the stored artifact it could not grade."""

    def __init__(self, message: str, artifact_hash: str, status: str = "judge_failed"):
        super().__init__(message)
        self.artifact_hash = artifact_hash
        self.status = status


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
    # what one submission may cost the grader (docs/grading.md, "Limits")
    max_artifact_entries: int = 100_000  # files and folders in one submitted folder
    copy_timeout_s: float = 900.0  # copying one submitted folder into the store
    load_timeout_s: float = LOAD_TIMEOUT_S  # materialising it (a2rl.grading.loading)
    eval_timeout_s: Optional[float] = None  # one evaluation; None: no limit
    max_store_bytes: Optional[int] = None  # every stored artifact together; None: no quota
    max_invalid_submissions: int = 100  # recorded in the ledger; further ones only counted
    invalid_per_minute: float = 30.0  # invalid submissions processed a minute (a burst as many)
    max_model_path_chars: int = 4096


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
        self._turn = threading.Lock()  # one grading at a time
        self._refusals = threading.Lock()  # the limiter's count and the refused entries
        self.limiter = InvalidLimiter(
            settings.max_invalid_submissions, settings.invalid_per_minute,
            recorded=sum(1 for e in ledger.entries if not e.valid and e.status is None))
        # host paths an error message could quote (a library naming a file it failed on)
        self._hidden = {str(self.resolver.workspace): settings.alias,
                        str(Path(settings.workspace)): settings.alias,
                        str(self.store.resolve()): "<store>", str(self.store): "<store>",
                        str(self.base_model.resolve()): f"{settings.alias}/base_model",
                        str(self.base_model): f"{settings.alias}/base_model",
                        # the run's folder, the ledger's (it holds the results' path)
                        str(self.ledger.path.parent.resolve()): "<run>"}
        # the submission being evaluated, on disk until it is recorded: a grader that dies
        # mid-evaluation leaves it, and the grader restarted on the same ledger records it
        self.inflight = inflight_path(self.ledger)
        # the paid judge's budget is spent for the rest of the run, a restarted grader too
        self.grading_funds_spent = any(e.status == "grading_budget_exhausted"
                                       for e in self.ledger.entries)
        recover_inflight(self.ledger, self.events)
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
                "deadline": self.clock.deadline_utc(),
                "grading_budget_exhausted": self.grading_funds_spent,
                "invalid_recorded": self.limiter.recorded,
                "invalid_refused_unrecorded": self.limiter.unrecorded}

    def submissions_left(self) -> int:
        return max(0, self.settings.max_submissions - self.ledger.evaluated_count())

    def submit(self, model_path: object) -> tuple[int, dict[str, Any]]:
        """Grade one submission; returns (HTTP status, body). Never raises for bad input."""
        with self._turn:
            try:
                return self._submit(model_path)
            finally:  # recorded now, whatever the outcome: no longer in flight
                self.inflight.unlink(missing_ok=True)

    def _submit(self, model_path: object) -> tuple[int, dict[str, Any]]:
        wait = self.limiter.wait_s()
        if wait > 0:  # refused before any reading: a flood costs the grader nothing
            return 429, self._reject(model_path, (
                f"too many invalid submissions (at most {self.settings.invalid_per_minute:g}"
                f" a minute); retry in {wait:.0f} s"), 429, spend=False)
        try:
            return 200, self._grade(model_path)
        except InvalidSubmission as err:
            status = getattr(err, "status", 422)
            return status, self._reject(model_path, str(err), status)
        except GradingFailed as err:
            if err.status == "eval_timeout":  # the submission's doing: it counts
                return 504, self._reject(model_path, str(err), 504,
                                         failed=(err.status, err.artifact_hash))
            if err.status == "grading_budget_exhausted":  # said plainly, not as an outage
                return 402, self._reject(model_path, str(err), 402,
                                         failed=(err.status, err.artifact_hash))
            return 503, self._reject(model_path, f"grading failed (not your submission's "
                                                 f"fault; it does not count): {err}", 503,
                                     failed=(err.status, err.artifact_hash))
        except Exception as err:  # a harness fault must not take the server down
            log_detail("internal_error", err, clipped(model_path))
            return 500, self._reject(model_path, answer("internal_error"), 500)

    # -- steps --------------------------------------------------------------------------------
    def _grade(self, model_path: object) -> dict[str, Any]:
        if self.clock.expired():
            raise SubmissionRejected("the time budget is used up; no more submissions", 403)
        if self.grading_funds_spent:
            raise SubmissionRejected(answer("grading_budget_exhausted"), 402)
        if self.submissions_left() <= 0:
            raise SubmissionRejected(
                f"no submissions left (the budget allows {self.settings.max_submissions})", 429)
        if isinstance(model_path, str) and len(model_path) > self.settings.max_model_path_chars:
            raise SubmissionRejected(f"model_path is {len(model_path)} characters long; the "
                                     f"limit is {self.settings.max_model_path_chars}", 413)
        src = resolve_submission(self.resolver, model_path)
        digest, artifact = copy_artifact(self.resolver, src, self.store, self._copy_limits())
        extra = self._snapshot(model_path, artifact)
        earlier = self.ledger.find_hash(digest)
        if earlier is not None:
            scored = {"score": earlier.score, "stderr": earlier.stderr, "n": earlier.n}
            return self._record(model_path, digest, scored, cached=True, extra=extra)
        if digest == self.settings.base_hash and self.settings.base_scored:
            return self._record(model_path, digest, self.settings.base_scored, cached=True,
                                extra=extra)
        write_json_atomic(self.inflight, {
            "model_path": clipped(model_path), "artifact_hash": digest, "started": utc_now(),
            "elapsed_s": round(self.clock.elapsed(), 3)})
        return self._evaluate(model_path, digest, artifact, extra)

    def _evaluate(self, model_path: object, digest: str, artifact: Path,
                  extra: dict[str, Any]) -> dict[str, Any]:
        try:
            result, seconds = score_artifact(artifact, self.base_model, self.evaluate,
                                             self.clock, self.settings.eval_timeout_s,
                                             self.settings.load_timeout_s)
        except GradingBudgetExhausted as err:
            log_detail("grading_budget_exhausted", err, digest)
            self.grading_funds_spent = True
            raise GradingFailed(answer("grading_budget_exhausted"), digest,
                                "grading_budget_exhausted") from err
        except GradingUnavailable as err:  # a judge's error may quote the sealed prompt
            log_detail("grading_unavailable", err, digest)
            raise GradingFailed(ANSWERS["grading_unavailable"], digest) from err
        except EvaluationTimedOut as err:
            self.events.emit("error", message=f"evaluation of {digest[:12]} timed out; its "
                                              f"thread {'stopped' if err.stopped else 'runs on'}")
            raise GradingFailed(f"{err}; it counts as a submission and its time is charged "
                                "to the budget", digest, "eval_timeout") from err
        except InvalidSubmission:
            remove_stored(self.store, digest)  # rejected: nothing will read it again
            raise
        scored = {"score": round(result.score, 4), "stderr": round(result.stderr, 4),
                  "n": result.n, "eval_seconds": round(seconds, 3)}
        usage = getattr(result, "usage", None)
        if usage:  # a judge's calls and cost, kept apart from the agent's LLM spending
            extra = extra | {"grading_usage": dict(usage)}
        recorded = self._record(model_path, digest, scored, cached=False, extra=extra)
        self._keep_details(recorded["submission_id"], digest, result)
        return recorded

    def _copy_limits(self) -> Limits:
        """The copy's limits: the artifact's own, within what the store quota leaves."""
        cap = self.settings.max_artifact_bytes
        if self.settings.max_store_bytes is not None:
            left = self.settings.max_store_bytes - store_bytes(self.store)
            if left <= 0:
                raise SubmissionRejected(
                    f"the artifact store is full (quota {self.settings.max_store_bytes} bytes); "
                    "no further artifacts can be stored in this run", 507)
            cap = min(cap, left)
        return Limits(max_bytes=cap, max_entries=self.settings.max_artifact_entries,
                      seconds=self.settings.copy_timeout_s)

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

    def refuse(self, model_path: object, message: str, status: int) -> dict[str, Any]:
        """Record a request refused before grading (a body too large or not a submission)."""
        return self._reject(model_path, message, status)

    def _reject(self, model_path: object, message: str, status: int,
                failed: Optional[tuple[str, str]] = None, spend: bool = True
                ) -> dict[str, Any]:
        """Record an unscored submission. ``failed`` (status, artifact hash) marks a grading
        infrastructure failure (judge_failed, eval_timeout); like every invalid entry it does
        not use up a submission. The agent's invalid ones are counted by the limiter: past
        its count they are answered but not written (no ledger line, no mirror rewrite)."""
        with self._refusals:
            return self._refused(model_path, printable(scrub(message, self._hidden)), status,
                                 failed, spend)

    def _refused(self, model_path: object, message: str, status: int,
                 failed: Optional[tuple[str, str]], spend: bool) -> dict[str, Any]:
        answer = {"error": message, "submissions_left": self.submissions_left(),
                  "time_left_s": round(self.clock.time_left(), 1)}
        if failed is None:
            if spend:
                self.limiter.spend()
            if self.limiter.full():
                self.limiter.unrecorded += 1
                if self.limiter.unrecorded & (self.limiter.unrecorded - 1) == 0:  # 1, 2, 4...
                    self.events.emit("grader_throttled", unrecorded=self.limiter.unrecorded)
                return answer | {"submission_id": None, "recorded": False}
            self.limiter.recorded += 1
            if self.limiter.full():
                message += (f" [the run's limit of {self.limiter.max_recorded} recorded invalid "
                            "submissions is reached: further ones are refused unrecorded]")
                answer["error"] = message
        extra = {"status": failed[0], "artifact_hash": failed[1]} if failed else {}
        entry = self.ledger.append(model_path=clipped(model_path), valid=False, error=message,
                                   status_code=status, elapsed_s=round(self.clock.elapsed(), 3),
                                   **extra)
        self._after(entry)
        # an eval_timeout entry used one up
        return answer | {"submission_id": entry.submission_id,
                         "submissions_left": self.submissions_left()} | (
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
