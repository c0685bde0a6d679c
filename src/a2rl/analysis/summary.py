"""The per-run summary: what one cell's run left behind, as one ``RunSummary``
(``a2rl.common.records``) written to summary.json; ``a2rl.report.markdown`` renders it as
summary.md and ``a2rl.report.html`` as the run's page.

``summarize_run(cfg)`` reads the run directory (run.json, ledger.jsonl, events.jsonl,
final.json, code.git, the stored artifacts, llm_calls.jsonl and transcript.jsonl when an LLM
agent left them) and the task's baseline.json, all through ``a2rl.common.layout``, runs the
integrity checks (``a2rl.analysis.integrity``, written to integrity.json) and writes
summary.json next to them. Every input may be missing or empty (an agent that never started,
never submitted, or a run that crashed): the summary then says so instead of failing; a record
that is there but malformed is a ``RecordError``. Nothing here calls an LLM; the optional
narrative (``a2rl.report.narrative``) is written to its own file.

``final_from`` says where ``final_score`` comes from: ``final`` (final.json's test score),
``baseline`` (no valid submission: the agent leaves the base model, which scores the baseline)
or null (no final grade yet).

Process metrics (times are seconds of the agent's budget clock: where evaluations do not count,
``budget.count_eval_time: false``, the run's seconds less the evaluations finished by then,
``budget_clock``): ``valid_rate`` valid / all submissions; ``time_to_first_valid_s``;
``time_to_first_improvement_s`` (first valid score above the feedback split's baseline);
``time_to_best_s`` (the earliest submission with the best feedback score); ``monotonic_ratio``
(share of consecutive valid scores that did not go down); ``budget_s`` (the agent's seconds on
the budget clock) and ``budget_used`` (``budget_s`` / time limit); ``deadline_gap_s`` (time
limit minus the last submission's time); ``copy_of_base`` (valid submissions equal to the base).
``llm`` totals llm_calls.jsonl (``a2rl.llm.proxy.llm_totals``, plus the summed latency);
``cost_usd`` is its cost, 0 for a run without a driver, null when a driver ran but no calls were
recorded. ``grading_usage`` is what grading cost (a judge's calls, from run.json), kept apart
from the agent's ``cost_usd``. The route of a submission reads the code at its commit and the
transcript's records up to its time (records without a time are read for every submission).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from a2rl.analysis.failures import EVENT_COLUMNS, failures_of
from a2rl.analysis.routes import route_of
from a2rl.analysis.view import number
from a2rl.common.files import iter_jsonl
from a2rl.common.layout import Layout, RunPaths
from a2rl.common.records import (
    Budget,
    FinalRecord,
    LedgerEntry,
    ProcessMetrics,
    RunRecord,
    RunSummary,
    SubmissionItem,
    Submissions,
    read_ledger,
)
from a2rl.config.types import RunConfig
from a2rl.isolation.egress import UNLOGGED


def _read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object, or None when the file is missing, empty or not a JSON object."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _baseline(baseline: dict | None, final: FinalRecord | None,
              ledger: list[LedgerEntry]) -> tuple[float | None, float | None]:
    """Baseline test score and its stderr: baseline.json first, then what final.json or the
    ledger recorded."""
    test = (baseline or {}).get("test")
    if isinstance(test, dict) and number(test.get("score")) is not None:
        return number(test.get("score")), number(test.get("stderr"))
    if final is not None:
        return number(final.baseline), None
    for entry in ledger:
        if number(entry.baseline) is not None:
            return number(entry.baseline), None
    return None, None


def budget_clock(ledger: list[LedgerEntry], count_eval_time: bool) -> dict[int, float]:
    """Each submission's time on the agent's budget clock: the run's seconds when it was
    answered (``elapsed_s``), less, where evaluations do not count, the evaluations answered by
    then, its own included (the clock gives their seconds back; a cached answer took none)."""
    given, times = 0.0, {}
    for entry in ledger:
        if not count_eval_time:
            given += number(entry.eval_seconds) or 0.0
        times[entry.submission_id] = round(max(0.0, entry.elapsed_s - given), 3)
    return times


def on_budget_clock(wall_s: float | None, eval_seconds: list[Any],
                    count_eval_time: bool) -> float | None:
    """The agent's seconds on its budget clock after ``wall_s`` of the run, from its ledger's
    ``eval_seconds``: all of them, or, where evaluations do not count, less the seconds of the
    evaluations finished by then (what ``BudgetClock.allowance`` gave back; ``budget_clock``
    does the same per submission)."""
    if wall_s is None or count_eval_time:
        return wall_s
    return round(max(0.0, wall_s - sum(number(s) or 0.0 for s in eval_seconds)), 3)


def process_metrics(items: list[SubmissionItem], ledger: list[LedgerEntry],
                    baseline: float | None, agent_seconds: float | None,
                    time_limit_s: float | None, count_eval_time: bool = True) -> ProcessMetrics:
    """The process metrics of the module doc, from the summary's submission items."""
    clock = budget_clock(ledger, count_eval_time)
    agent_seconds = on_budget_clock(agent_seconds, [e.eval_seconds for e in ledger],
                                    count_eval_time)
    valid = [s for s in items if s.valid and number(s.score) is not None]
    feedback_baseline = {e.submission_id: number(e.baseline) for e in ledger}

    def above_baseline(s: SubmissionItem) -> bool:
        ref = feedback_baseline.get(s.id)
        ref = baseline if ref is None else ref
        return ref is not None and s.score > ref

    first_better = next((s for s in valid if above_baseline(s)), None)
    best = max((s.score for s in valid), default=None)
    at_best = next((s for s in valid if s.score == best), None)
    steps = list(zip(valid, valid[1:]))
    last = clock.get(items[-1].id) if items else None
    limit = number(time_limit_s)
    return ProcessMetrics(
        valid_rate=round(len(valid) / len(items), 4) if items else None,
        time_to_first_valid_s=clock.get(valid[0].id) if valid else None,
        time_to_first_improvement_s=clock.get(first_better.id) if first_better else None,
        time_to_best_s=clock.get(at_best.id) if at_best else None,
        monotonic_ratio=round(sum(b.score >= a.score for a, b in steps) / len(steps), 4)
        if steps else None,
        budget_used=round(agent_seconds / limit, 4)
        if agent_seconds is not None and limit else None,
        budget_s=agent_seconds,
        deadline_gap_s=round(limit - last, 3)
        if limit is not None and number(last) is not None else None,
        copy_of_base=sum(1 for s in valid if s.equals_base),
    )


def summarize(cfg: RunConfig, layout: Layout,
              integrity: dict[str, Any] | None = None) -> RunSummary:
    """The summary of one run (nothing written). ``integrity``: the result of
    ``a2rl.analysis.integrity.check_run``; when None, the run's integrity.json if there is one."""
    from a2rl.analysis.lineage import artifact_lineage, read_transcript
    from a2rl.grading import recording

    paths = layout.run(cfg.task.id, cfg.agent.name, cfg.driver.name, cfg.seed)
    run = RunRecord.load_if_present(paths.run_json)
    final = FinalRecord.load_if_present(paths.final)
    baseline_record = _read_json(layout.baseline(cfg.task.id))
    ledger = read_ledger(paths.ledger)
    events = list(iter_jsonl(paths.events))
    transcript = read_transcript(paths.transcript)
    if integrity is None:
        integrity = _read_json(paths.integrity)

    valid_scores = [e.score for e in ledger if e.valid]
    baseline, baseline_stderr = _baseline(baseline_record, final, ledger)
    final_score = number(final.test_score) if final else None
    final_from = None if final is None else "baseline" if final.no_valid_submission else "final"
    improvement = None
    if final_score is not None and baseline is not None:
        improvement = final_score - baseline

    # llm_call events are counted in ``llm`` and shown in the report's transcript viewer
    timeline = [{"time": e.get("time"), "elapsed_s": e.get("elapsed_s"), "kind": e.get("kind"),
                 **{k: v for k, v in e.items() if k not in EVENT_COLUMNS}} for e in events
                if e.get("kind") != "llm_call"]
    time_limit = run.time_limit_s if run else cfg.budget.time_limit_s
    agent_seconds = number(run.agent_seconds) if run else None

    # the harness's own base model first: the workspace's copy is below the agent's areas
    base_dir = Layout.from_paths(cfg.paths).base_model(cfg.task.model)
    if not base_dir.is_dir():
        base_dir = paths.workspace / "base_model"
    lineage = artifact_lineage(ledger, paths.store, base_dir if base_dir.is_dir() else None,
                               (baseline_record or {}).get("model_hash"))
    parents = {a["artifact_hash"]: a["parent"] for a in lineage}
    revisions = recording.commits(paths.code_repo)
    final_commit = recording.tags(paths.code_repo).get("final") if revisions else None
    route = route_of(ledger, lineage, paths.code_repo, transcript, final_commit,
                     paths.workspace)
    items = [SubmissionItem.of(e, parent=parents.get(e.artifact_hash) if e.valid else None,
                               methods=r["methods"] if e.valid else [])
             for e, r in zip(ledger, route["per_submission"], strict=True)]
    llm = _llm(paths)
    cost = llm["cost_usd"] if llm else (0.0 if cfg.driver.name == "none" else None)

    return RunSummary(
        grid=cfg.grid.label, task=cfg.task.id, task_name=cfg.task.package,
        level=cfg.task.level,
        agent=cfg.agent.name, driver=cfg.driver.name, seed=cfg.seed,
        feedback=cfg.task.feedback, model=cfg.task.model.name,
        sandbox=run.sandbox if run else cfg.sandbox,
        hardware=run.hardware if run else None,
        budget=Budget(name=cfg.budget.name, time_limit_s=time_limit,
                      max_submissions=cfg.budget.max_submissions),
        status=run.status if run else "not_run",
        exit_code=run.exit_code if run else None,
        agent_seconds=agent_seconds,
        baseline=baseline, baseline_stderr=baseline_stderr,
        best_feedback_score=max(valid_scores) if valid_scores else None,
        final_score=final_score,
        final_stderr=number(final.test_stderr) if final else None,
        final_n=final.n if final else None,
        final_from=final_from, improvement=improvement,
        selected_submission=final.selected_submission if final else None,
        submissions=Submissions(total=len(items), valid=sum(1 for s in items if s.valid),
                                invalid=sum(1 for s in items if not s.valid), items=items),
        process=process_metrics(items, ledger, baseline, agent_seconds, time_limit,
                                cfg.budget.count_eval_time),
        route=route, lineage=lineage,
        code={"repo": str(paths.code_repo) if revisions else None,
              "final_commit": final_commit, "revisions": revisions},
        llm=llm, cost_usd=cost,
        grading_usage=run.grading_usage if run else None,
        network=network_of(run, paths), integrity=integrity,
        failures=failures_of(items, events, run, paths.agent_log),
        timeline=timeline,
        files={name: str(path) for name, path in _files(paths).items() if path.exists()},
    )


def _llm(paths: RunPaths) -> dict[str, Any] | None:
    """Totals of llm_calls.jsonl (None without one), with the calls' summed latency."""
    if not paths.llm_calls.exists():
        return None
    from a2rl.llm.proxy import llm_totals

    totals = llm_totals(paths.root)
    totals["latency_s"] = round(sum(number(c.get("latency_s")) or 0.0
                                    for c in iter_jsonl(paths.llm_calls)), 3)
    return totals


def network_of(run: RunRecord | None, paths: RunPaths) -> dict[str, Any] | None:
    """run.json's network policy with the hosts contacted through the egress proxy (each:
    host, port, allowed, connections, bytes up and down); None when neither was recorded."""
    record = dict(run.network) if run and run.network else None
    if not paths.egress.exists():
        return record
    hosts: dict[tuple, dict[str, Any]] = {}
    for line in iter_jsonl(paths.egress):
        if line.get("outcome") == UNLOGGED:  # the count past the log's cap: run.json has it
            continue
        key = (line.get("host"), line.get("port"), bool(line.get("allowed")))
        seen = hosts.setdefault(key, {"host": key[0], "port": key[1], "allowed": key[2],
                                      "connections": 0, "bytes_up": 0, "bytes_down": 0})
        seen["connections"] += 1
        seen["bytes_up"] += int(line.get("bytes_up") or 0)
        seen["bytes_down"] += int(line.get("bytes_down") or 0)
    return (record or {}) | {"hosts": sorted(hosts.values(), key=lambda h: (
        str(h["host"]), h["port"] or 0))}


def _files(paths: RunPaths) -> dict[str, Path]:
    return {"run": paths.run_json, "ledger": paths.ledger, "events": paths.events,
            "agent_log": paths.agent_log, "final": paths.final, "code_repo": paths.code_repo,
            "integrity": paths.integrity, "llm_calls": paths.llm_calls,
            "transcript": paths.transcript, "egress": paths.egress}


def summarize_run(cfg: RunConfig, check_integrity: bool = True) -> RunSummary:
    """Run the integrity checks, then write summary.json for the run of ``cfg``; returns the
    summary (``a2rl.pipeline.stages.summarize_run`` renders it to summary.md)."""
    from a2rl.analysis.integrity import check_run

    layout = Layout.from_paths(cfg.paths)
    paths = layout.run(cfg.task.id, cfg.agent.name, cfg.driver.name, cfg.seed)
    integrity = None
    if check_integrity and paths.root.exists():
        integrity = check_run(cfg)
    summary = summarize(cfg, layout, integrity)
    summary.save(paths.summary_json)
    return summary
