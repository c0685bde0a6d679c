"""The records a run leaves, each defined once, written and read through one codec.

  ledger.jsonl   ``LedgerEntry``, one line per submission (appended by a2rl.grading.ledger)
  run.json       ``RunRecord``, the agent phase of a cell (a2rl.pipeline.runner)
  final.json     ``FinalRecord``, the selected submission's test score (a2rl.pipeline.stages)
  summary.json   ``RunSummary``, everything a run left, for people (a2rl.analysis.summary)

Each is a frozen dataclass that pydantic checks in strict mode when it is made, so a writer
cannot write a malformed record and a reader of a malformed or older file gets a ``RecordError``
naming the file, the entry and the field. ``to_json()`` is the JSON object written (every file
is written with sorted keys, so field order only matters where noted); ``from_json()`` and
``load()`` read one back. Numbers keep the type they were written with (``Number``): a time
limit of 480 stays 480, never 480.0, so a record read and written again is the same bytes.
A field marked ``written_if`` is left out of the JSON unless the named field is set (a rejected
submission has no score; a run without an LLM stack has no transcript).

Two files a run leaves are not typed here: events.jsonl (``a2rl.common.events.EventLog``, one
``{"time", "elapsed_s", "kind", ...details}`` per line) and baseline.json (``{"task", "model",
"model_hash", "hardware", "test": {"score", "stderr", "n", "seconds", ...}, "validation":
{...} | null}``, written by ``a2rl.pipeline.stages.measure_baseline``).
"""

from __future__ import annotations

import functools
from dataclasses import MISSING, asdict, field, fields
from pathlib import Path
from typing import Any, ClassVar, Literal, Self, get_args, get_origin, get_type_hints

from pydantic import ConfigDict, ValidationError
from pydantic.dataclasses import dataclass

from a2rl.common.files import iter_jsonl_lines, read_json, write_json_atomic

# strict: nothing is converted ("1" is not a number, 1 is not a bool); extra keys are errors
STRICT = ConfigDict(strict=True, extra="forbid")
Number = int | float  # a JSON number as written: int stays int, float stays float
# where the grader shows a ledger entry's field besides the ledger: the agent-visible
# scores.json (MIRROR) and its HTTP answer to a submission (ANSWER)
MIRROR, ANSWER = "mirror", "answer"


class RecordError(ValueError):
    """A file or line that is not the record it should be (malformed, or from an older a2rl
    that wrote other fields)."""


def _problems(err: ValidationError) -> str:
    said = []
    for e in err.errors()[:4]:
        where = ".".join(str(part) for part in e["loc"]) or "the record"
        got = "" if e["type"] == "missing" or not e["loc"] else f" (got {e['input']!r:.80})"
        said.append(f"{where}: {e['msg'].lower()}{got}")
    more = len(err.errors()) - len(said)
    old = any(e["type"] == "missing" for e in err.errors())
    return "; ".join(said) + (f"; and {more} more" if more > 0 else "") + (
        " (written by an older a2rl, or not an a2rl record)" if old else "")


def recorded(*shown: str, written_if: str | None = None, default: Any = MISSING) -> Any:
    """A field of a record, also shown where ``shown`` says (MIRROR, ANSWER) and written only
    when the field ``written_if`` is set (not None, not False)."""
    return field(default=default, metadata={"shown": frozenset(shown), "written_if": written_if})


class Codec:
    """to_json / from_json / load / save of a record dataclass."""

    KIND: ClassVar[str] = "record"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        return {f.name: data[f.name] for f in fields(self) if self._written(f.metadata)}

    def _written(self, metadata) -> bool:
        key = metadata.get("written_if")
        return key is None or getattr(self, key) not in (None, False)

    @classmethod
    def from_json(cls, data: Any, where: str) -> Self:
        """The record in ``data`` (a parsed JSON object); ``where`` names it in errors."""
        if not isinstance(data, dict):
            raise RecordError(f"{where}: expected a JSON object ({cls.KIND}), "
                              f"got {type(data).__name__}")
        try:
            return cls(**_nested(cls, data, where))
        except ValidationError as err:
            raise RecordError(f"{where}: not a valid {cls.KIND}: {_problems(err)}") from None

    @classmethod
    def load(cls, path: Path) -> Self:
        try:
            data = read_json(path)
        except ValueError as err:
            raise RecordError(f"{path}: not JSON ({err}); expected a {cls.KIND}") from None
        return cls.from_json(data, str(path))

    @classmethod
    def load_if_present(cls, path: Path) -> Self | None:
        """The record in ``path``, or None when there is no such file (a stage not run yet)."""
        return cls.load(path) if Path(path).exists() else None

    def save(self, path: Path) -> None:
        write_json_atomic(path, self.to_json())


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    """A record class's field types, worked out once: ``get_type_hints`` evaluates every
    annotation each time, which was most of reading a summary.json (a live view reads
    hundreds)."""
    return get_type_hints(cls)


def _nested(cls: type, data: dict[str, Any], where: str) -> dict[str, Any]:
    """``data`` with the objects of nested record fields (``Budget``, ``list[SubmissionItem]``)
    made into records: strict mode takes only instances there."""
    hints = _hints(cls)
    out = dict(data)
    for name, value in data.items():
        hint = hints.get(name)
        if isinstance(hint, type) and issubclass(hint, Codec):
            out[name] = hint.from_json(value, f"{where}: {name}")
        elif get_origin(hint) is list and isinstance(value, list):
            (item,) = get_args(hint)
            if isinstance(item, type) and issubclass(item, Codec):
                out[name] = [item.from_json(v, f"{where}: {name}[{i}]")
                             for i, v in enumerate(value)]
    return out


# ------------------------------------------------------------------------------------ ledger

GradingFailure = Literal["judge_failed", "eval_timeout", "interrupted",
                         "grading_budget_exhausted"]


@dataclass(frozen=True, kw_only=True, config=STRICT)
class LedgerEntry(Codec):
    """One submission, valid or rejected: a line of ledger.jsonl. Fields shown in the grader's
    ANSWER come first, in the order the answer lists them (the agent's log prints it)."""

    KIND: ClassVar[str] = "ledger entry"

    submission_id: int = recorded(MIRROR, ANSWER)
    score: Number | None = recorded(MIRROR, ANSWER, written_if="valid", default=None)
    best: Number | None = recorded(ANSWER, written_if="valid", default=None)  # best so far
    baseline: Number | None = recorded(ANSWER, written_if="valid", default=None)
    improvement: Number | None = recorded(ANSWER, written_if="valid", default=None)
    elapsed_s: Number = recorded(MIRROR, ANSWER)  # of the agent's budget clock
    cached: bool | None = recorded(MIRROR, ANSWER, written_if="valid", default=None)
    stderr: Number | None = recorded(ANSWER, written_if="valid", default=None)
    n: int | None = recorded(ANSWER, written_if="valid", default=None)
    split: str | None = recorded(ANSWER, written_if="valid", default=None)  # test | validation
    # a valid entry's artifact, or the one a judge_failed entry could not grade
    artifact_hash: str | None = recorded(ANSWER, written_if="artifact_hash", default=None)
    equals_base: bool | None = recorded(ANSWER, written_if="valid", default=None)
    time: str = recorded(MIRROR)  # UTC, ISO 8601
    model_path: Any = recorded(MIRROR)  # as the agent sent it (any JSON scalar when rejected)
    valid: bool = recorded(MIRROR)
    error: str | None = recorded(MIRROR)
    status_code: int = recorded()
    eval_seconds: Number | None = recorded(written_if="valid", default=None)
    artifact_bytes: int | None = recorded(written_if="valid", default=None)
    code_commit: str | None = recorded(written_if="valid", default=None)  # agent code at submit
    # what grading cost outside the model (a judge's calls, tokens, USD), never the agent's
    grading_usage: dict[str, Any] | None = recorded(written_if="grading_usage", default=None)
    # grading failed for a reason outside the submission, an infrastructure failure, not the
    # agent's, and the submission is not used up: judge_failed (a judge outage),
    # grading_budget_exhausted (the run's paid-judge budget is spent),
    # eval_timeout (the evaluation ran past the budget's eval_timeout_s and was abandoned) or
    # interrupted (the grader died while evaluating it; recorded by the restarted grader)
    status: GradingFailure | None = recorded(written_if="status", default=None)

    def __post_init__(self) -> None:
        if self.valid and (self.score is None or self.artifact_hash is None):
            raise ValueError("a valid submission needs a score and an artifact_hash")
        if self.valid and self.status is not None:
            raise ValueError(f"a valid submission has no status {self.status!r}")
        if not self.valid:
            scored = [f.name for f in fields(self)
                      if f.metadata["written_if"] in ("valid", "grading_usage")
                      and getattr(self, f.name) is not None]
            if self.artifact_hash is not None and self.status is None:
                scored.append("artifact_hash (only a grading failure's entry has one)")
            if scored:
                raise ValueError(f"a rejected submission has no {', '.join(scored)}")

    def shown_in(self, where: str) -> dict[str, Any]:
        """The fields the grader shows in ``where`` (MIRROR or ANSWER), in field order."""
        return {f.name: getattr(self, f.name) for f in fields(self) if where in f.metadata["shown"]}


def read_ledger(path: Path) -> list[LedgerEntry]:
    """The entries of a ledger.jsonl (none when there is no file); a torn last line (a crash
    mid-write) is skipped, any other line that is not an entry is a RecordError."""
    return [LedgerEntry.from_json(record, f"{path} line {number}")
            for number, record in iter_jsonl_lines(path)]


# --------------------------------------------------------------------------- run and final

RunStatus = Literal["completed", "budget_exhausted", "agent_failed", "llm_budget_exhausted",
                    "disk_quota_exceeded", "infra_failed"]
# why a run is infra_failed: the harness failed, not the agent (RunRecord.reason starts with one)
INFRA_REASONS = ("missing_key", "agent_not_installed", "provider_outage", "grader_crash",
                 "grader_died", "harness_oom", "harness_error")


@dataclass(frozen=True, kw_only=True, config=STRICT)
class CellRecord(Codec):
    """A record of one cell of the grid: task, agent, driver and seed."""

    task: str
    agent: str
    driver: str
    seed: int

    @property
    def cell(self) -> tuple[str, str, str, int]:
        return self.task, self.agent, self.driver, self.seed


@dataclass(frozen=True, kw_only=True, config=STRICT)
class RunRecord(CellRecord):
    """run.json: how the agent phase of one cell went."""

    KIND: ClassVar[str] = "run.json record"

    started: str  # UTC, ISO 8601
    ended: str
    agent_seconds: Number
    exit_code: int | None  # None: killed before it exited
    status: RunStatus
    time_limit_s: Number
    sandbox: str
    feedback: str | None = None  # split the grader scored on; None in runs before it was kept
    submissions: int | None = None  # ledger entries
    hardware: dict[str, Any] | None = None  # a2rl.common.hardware.describe(); None: older runs
    # times the harness restarted the grader's process after it died (a2rl.pipeline.supervisor);
    # None in runs before the grader had a process of its own
    grader_restarts: int | None = None
    # the agent's memory, process and tmpfs limits, what enforced each and the kernel's OOM
    # kills (a2rl.isolation.limits.Confinement.record); None in runs before they were kept
    resources: dict[str, Any] | None = recorded(written_if="resources", default=None)
    # what the sandbox could reach: {"policy": none|llm|allowlist|open, "allowlist": [...],
    # "public_sources": {"names", "hosts", "access": withheld|allowed|open}} (the last where the
    # task's sealed split is public; a2rl.pipeline.network.network_record); None in runs before
    # it was kept
    network: dict[str, Any] | None = recorded(written_if="network", default=None)
    # an LLM agent's stack (a2rl.llm.drivers.StackRun)
    stack: str | None = recorded(written_if="stack", default=None)
    stack_version: str | None = recorded(written_if="stack", default=None)
    transcript: str | None = recorded(written_if="stack", default=None)  # file name, if any
    # a driver's recording proxy (a2rl.llm.proxy)
    driver_model: str | None = recorded(written_if="driver_model", default=None)
    llm: dict[str, Any] | None = recorded(written_if="driver_model", default=None)  # llm_totals
    # what grading cost (a judge's calls; a2rl.grading.ledger.grading_totals), apart from llm
    grading_usage: dict[str, Any] | None = recorded(written_if="grading_usage", default=None)
    # bytes of the agent's output left out of agent.log past budget.max_agent_log_mb
    # (a2rl.isolation.procs.LogCopy); written only when some were
    log_cut_bytes: int | None = recorded(written_if="log_cut_bytes", default=None)
    # infra_failed: "<one of INFRA_REASONS>: <what happened>" (a2rl.pipeline.runner)
    reason: str | None = recorded(written_if="reason", default=None)

    def __post_init__(self) -> None:
        if self.status == "infra_failed":
            if not self.reason or self.reason.split(":")[0] not in INFRA_REASONS:
                raise ValueError(f"an infra_failed run needs a reason starting with one of "
                                 f"{INFRA_REASONS}; got {self.reason!r}")
        elif self.reason is not None:
            raise ValueError(f"only an infra_failed run has a reason (status {self.status})")


@dataclass(frozen=True, kw_only=True, config=STRICT)
class FinalRecord(CellRecord):
    """final.json: the selected submission (best feedback score, earliest on ties) scored on
    the test split, or the baseline when there was no valid submission."""

    KIND: ClassVar[str] = "final.json record"

    feedback: str  # test | validation
    baseline: Number  # the base model's test score
    no_valid_submission: bool
    rescored: bool  # evaluated again on test (validation feedback)
    selected_submission: int | None
    artifact_hash: str | None
    test_score: Number
    test_stderr: Number | None
    n: int | None
    improvement: Number  # test_score - baseline
    breakdown: dict[str, Any] | None = None  # the task's per-category scores, if any
    # the selected model on a twin of the test split, and the verdict (a2rl.grading.twin)
    twin: dict[str, Any] | None = recorded(written_if="twin", default=None)


# ---------------------------------------------------------------------------------- summary


@dataclass(frozen=True, kw_only=True, config=STRICT)
class Budget(Codec):
    KIND: ClassVar[str] = "budget"

    name: str
    time_limit_s: Number
    max_submissions: int


@dataclass(frozen=True, kw_only=True, config=STRICT)
class SubmissionItem(Codec):
    """A submission as the summary lists it: the ledger entry's fields of the same name, its
    lineage parent and the methods its route found."""

    KIND: ClassVar[str] = "summary submission"

    id: int
    elapsed_s: Number
    valid: bool
    score: Number | None
    stderr: Number | None
    error: str | None
    status_code: int
    cached: bool | None
    model_path: Any
    split: str | None
    artifact_hash: str | None
    artifact_bytes: int | None
    equals_base: bool | None
    code_commit: str | None
    status: str | None  # judge_failed, interrupted: grading's fault; eval_timeout: the agent's
    parent: str | None  # "base", "submission-<id>" or None (a2rl.grading.recording)
    methods: list[str]

    @classmethod
    def of(cls, entry: LedgerEntry, parent: str | None, methods: list[str]) -> SubmissionItem:
        kept = {f.name for f in fields(LedgerEntry)} & {f.name for f in fields(cls)}
        return cls(id=entry.submission_id, parent=parent, methods=methods,
                   **{name: getattr(entry, name) for name in kept})


@dataclass(frozen=True, kw_only=True, config=STRICT)
class Submissions(Codec):
    KIND: ClassVar[str] = "summary submissions"

    total: int
    valid: int
    invalid: int
    items: list[SubmissionItem]


@dataclass(frozen=True, kw_only=True, config=STRICT)
class ProcessMetrics(Codec):
    """How the agent worked (a2rl.analysis.summary.process_metrics); None: not defined for
    this run (no submission, no time limit)."""

    KIND: ClassVar[str] = "process metrics"

    valid_rate: Number | None
    time_to_first_valid_s: Number | None
    time_to_first_improvement_s: Number | None
    time_to_best_s: Number | None
    monotonic_ratio: Number | None
    budget_used: Number | None
    deadline_gap_s: Number | None
    copy_of_base: int
    # the agent's seconds on its budget clock (budget_used's numerator); None in older summaries
    budget_s: Number | None = None


@dataclass(frozen=True, kw_only=True, config=STRICT)
class RunSummary(CellRecord):
    """summary.json: one run for people; the Markdown and HTML renderers (a2rl.report) read
    only this. The nested dicts are written by the module named beside them."""

    KIND: ClassVar[str] = "run summary"

    grid: str  # the label of the grid the run belongs to (GridConfig.label)
    task_name: str
    level: str
    feedback: str
    model: str
    sandbox: str
    hardware: dict[str, Any] | None  # run.json's
    budget: Budget
    status: str  # run.json's, "not_run" without one
    exit_code: int | None
    agent_seconds: Number | None
    baseline: Number | None  # the base model's test score
    baseline_stderr: Number | None
    best_feedback_score: Number | None
    final_score: Number | None
    final_stderr: Number | None
    final_n: int | None
    final_from: Literal["final", "baseline"] | None  # final.json, or the base model's score
    improvement: Number | None
    selected_submission: int | None
    submissions: Submissions
    process: ProcessMetrics
    route: dict[str, Any]  # a2rl.analysis.routes
    lineage: list[dict[str, Any]]  # a2rl.analysis.lineage.artifact_lineage
    code: dict[str, Any]  # {"repo", "final_commit", "revisions"} (a2rl.grading.recording)
    llm: dict[str, Any] | None  # a2rl.llm.proxy.llm_totals plus latency_s
    cost_usd: Number | None
    # what grading cost (a judge's calls; run.json's), never part of the agent's cost_usd
    grading_usage: dict[str, Any] | None = None
    # run.json's network policy and the hosts the egress proxy saw (a2rl.analysis.summary)
    network: dict[str, Any] | None = None
    integrity: dict[str, Any] | None  # a2rl.analysis.integrity.check_run
    failures: list[dict[str, Any]]  # {"kind", "message", "elapsed_s", "excerpt"}
    timeline: list[dict[str, Any]]  # events.jsonl
    files: dict[str, str]  # what the run directory holds, by name

    @property
    def slug(self) -> str:
        return f"{self.task}__{self.agent}__{self.driver}__seed{self.seed}"
