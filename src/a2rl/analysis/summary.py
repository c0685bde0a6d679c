"""The per-run summary: what one cell's run left behind, in one JSON and one Markdown file.

``summarize_run(cfg)`` reads the run directory (run.json, ledger.jsonl, events.jsonl,
final.json, code.git, the stored artifacts, llm_calls.jsonl and transcript.jsonl when an LLM
agent left them) and the task's baseline.json, all through ``a2rl.common.layout``, runs the
integrity checks (``a2rl.analysis.integrity``, written to integrity.json) and writes summary.json
and summary.md next to them. Every input may be missing or empty (an agent that never started,
never submitted, or a run that crashed): the summary then says so instead of failing. Nothing
here calls an LLM; the optional narrative (``a2rl.report.narrative``) is written to its own file.

summary.json::

    {"task", "task_name", "level", "agent", "driver", "seed", "feedback", "model", "sandbox",
     "hardware" (run.json's: CPU, cores, flags, GPUs, precision; null for older runs),
     "budget": {"name", "time_limit_s", "max_submissions"},
     "status", "exit_code", "agent_seconds",
     "baseline", "baseline_stderr",
     "best_feedback_score", "final_score", "final_stderr", "final_n", "final_from",
     "improvement", "selected_submission",
     "submissions": {"total", "valid", "invalid", "items": [{"id", "elapsed_s", "valid",
                     "score", "stderr", "error", "status_code", "cached", "model_path",
                     "split", "artifact_hash", "artifact_bytes", "equals_base", "code_commit",
                     "parent", "methods"}]},
     "process": {"valid_rate", "time_to_first_valid_s", "time_to_first_improvement_s",
                 "time_to_best_s", "monotonic_ratio", "budget_used", "deadline_gap_s",
                 "copy_of_base"},
     "route": {"methods", "techniques", "per_submission": [{"id", "valid", "code_commit",
               "methods", "techniques", "evidence"}]},
     "lineage": [{"artifact_hash", "submissions", "bytes", "kind", "equals_base",
                  "weights_equal_base", "parent", "parent_distance", "distances"}],
     "code": {"repo", "final_commit", "revisions": [{"commit", "time", "message", "tags",
              "files"}]},
     "llm": {"calls", "failed_calls", "input_tokens", "output_tokens", "cached_input_tokens",
             "cost_usd", "usage_missing", "budget_exhausted", "models", "latency_s"} | null,
     "cost_usd", "grading_usage": {"calls", "cache_hits", "retries", "input_tokens",
                                   "output_tokens", "cost_usd", ...} | null,
     "integrity": {"contamination": {...}, "tamper": {...}} | null,
     "failures": [{"kind", "message", "elapsed_s", "excerpt"}],
     "timeline": [{"elapsed_s", "kind", ...details}], "files": {...}}

``final_from`` says where ``final_score`` comes from: ``final`` (final.json's test score),
``baseline`` (no valid submission: the agent leaves the base model, which scores the baseline)
or null (no final grade yet).

Process metrics (times are seconds of the agent's budget clock):
``valid_rate`` valid / all submissions; ``time_to_first_valid_s``; ``time_to_first_improvement_s``
(first valid score above the feedback split's baseline); ``time_to_best_s`` (the earliest
submission with the best feedback score); ``monotonic_ratio`` (share of consecutive valid scores
that did not go down); ``budget_used`` (agent seconds / time limit); ``deadline_gap_s`` (time
limit minus the last submission's time); ``copy_of_base`` (valid submissions equal to the base).
``llm`` totals llm_calls.jsonl (``a2rl.llm.proxy.llm_totals``, plus the summed latency);
``cost_usd`` is its cost, 0 for a run without a driver, null when a driver ran but no calls were
recorded. ``grading_usage`` is what grading cost (a judge's calls, from run.json), kept apart
from the agent's ``cost_usd``. The route of a submission reads the code at its commit and the
transcript's records up to its time (records without a time are read for every submission).
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

from a2rl.common.files import iter_jsonl, write_json_atomic, write_text_atomic
from a2rl.common.hardware import one_line
from a2rl.common.layout import Layout, RunPaths
from a2rl.config.types import RunConfig

log = logging.getLogger(__name__)

# fields of a ledger record kept per submission in the summary
SUBMISSION_FIELDS = ("elapsed_s", "valid", "score", "stderr", "error", "status_code", "cached",
                     "model_path", "split", "artifact_hash", "artifact_bytes", "equals_base",
                     "code_commit")
# event fields shown in their own columns of summary.md's timeline, not among the details
EVENT_COLUMNS = ("time", "elapsed_s", "kind")
LOG_TAIL_LINES = 12
SHORT = 10  # characters of a commit hash shown to people


def _read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object, or None when the file is missing, empty or not a JSON object."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _submission(record: dict[str, Any], index: int) -> dict[str, Any]:
    item = {"id": record.get("submission_id", index)}
    for key in SUBMISSION_FIELDS:
        item[key] = record.get(key)
    item["valid"] = bool(item["valid"])
    if not item["valid"]:
        item["score"] = None
        item["stderr"] = None
    return item


def _baseline(baseline: dict | None, final: dict | None,
              ledger: list[dict]) -> tuple[float | None, float | None]:
    """Baseline test score and its stderr: baseline.json first, then what final.json or the
    ledger recorded."""
    test = (baseline or {}).get("test")
    if isinstance(test, dict) and _number(test.get("score")) is not None:
        return _number(test.get("score")), _number(test.get("stderr"))
    if final and _number(final.get("baseline")) is not None:
        return _number(final["baseline"]), None
    for record in ledger:
        if _number(record.get("baseline")) is not None:
            return _number(record["baseline"]), None
    return None, None


# --------------------------------------------------------------------------- process metrics


def process_metrics(items: list[dict[str, Any]], ledger: list[dict[str, Any]],
                    baseline: float | None, agent_seconds: float | None,
                    time_limit_s: float | None) -> dict[str, Any]:
    """The process metrics of the module doc, from the summary's submission items."""
    valid = [s for s in items if s["valid"] and _number(s["score"]) is not None]
    feedback_baseline = {r.get("submission_id"): _number(r.get("baseline")) for r in ledger}

    def above_baseline(s: dict[str, Any]) -> bool:
        ref = feedback_baseline.get(s["id"])
        ref = baseline if ref is None else ref
        return ref is not None and s["score"] > ref

    first_better = next((s for s in valid if above_baseline(s)), None)
    best = max((s["score"] for s in valid), default=None)
    at_best = next((s for s in valid if s["score"] == best), None)
    steps = list(zip(valid, valid[1:]))
    last = items[-1]["elapsed_s"] if items else None
    limit = _number(time_limit_s)
    return {
        "valid_rate": round(len(valid) / len(items), 4) if items else None,
        "time_to_first_valid_s": valid[0]["elapsed_s"] if valid else None,
        "time_to_first_improvement_s": first_better["elapsed_s"] if first_better else None,
        "time_to_best_s": at_best["elapsed_s"] if at_best else None,
        "monotonic_ratio": round(sum(b["score"] >= a["score"] for a, b in steps) / len(steps), 4)
        if steps else None,
        "budget_used": round(agent_seconds / limit, 4)
        if agent_seconds is not None and limit else None,
        "deadline_gap_s": round(limit - last, 3)
        if limit is not None and _number(last) is not None else None,
        "copy_of_base": sum(1 for s in valid if s.get("equals_base")),
    }


# ------------------------------------------------------------------------------------ route


def _workspace_sources(workspace: Path) -> list[tuple[str, str]]:
    """The code in the workspace as it is now, for runs recorded without code.git."""
    from a2rl.analysis.routes import CODE_SUFFIXES
    from a2rl.grading.recording import select_files

    if not workspace.is_dir():
        return []
    files, _ = select_files(workspace)
    return [(rel, path.read_text(errors="replace")) for rel, path in files
            if rel.endswith(CODE_SUFFIXES) and not path.is_symlink()]


def _code_sources(repo: Path, commit: str | None, cache: dict) -> list[tuple[str, str]]:
    from a2rl.analysis.routes import CODE_SUFFIXES
    from a2rl.grading import recording

    if not commit:
        return cache.get(None, [])
    if commit not in cache:
        try:
            paths = [p for p in recording.tree_files(repo, commit) if p.endswith(CODE_SUFFIXES)]
            cache[commit] = sorted(recording.read_files(repo, commit, paths).items())
        except recording.RecordingError as err:
            log.warning("cannot read code of commit %s: %s", commit, err)
            cache[commit] = []
    return cache[commit]


def _transcript_sources(records: list[dict[str, Any]],
                        until: str | None) -> list[tuple[str, str]]:
    from a2rl.analysis.integrity import item_texts

    chosen = [c for c in records
              if until is None or not c.get("time") or str(c["time"]) <= until]
    return [(f"transcript:{i + 1}", "\n".join(item_texts(c))) for i, c in enumerate(chosen)]


def route_of(items: list[dict[str, Any]], ledger: list[dict[str, Any]],
             lineage: list[dict[str, Any]], repo: Path, transcript: list[dict[str, Any]],
             final_commit: str | None, workspace: Path) -> dict[str, Any]:
    """Methods per submission and for the run (see ``a2rl.analysis.routes``). Without recorded
    revisions (runs from before code.git) the workspace's code as left is read instead."""
    from a2rl.analysis.routes import detect, run_route, submission_route

    by_hash = {a["artifact_hash"]: a for a in lineage}
    times = {r.get("submission_id"): r.get("time") for r in ledger}
    cache: dict[Any, list] = {}
    if final_commit is None:
        cache[None] = _workspace_sources(workspace)
    per_submission = []
    for s in items:
        code = detect(_code_sources(repo, s.get("code_commit"), cache)
                      + _transcript_sources(transcript, times.get(s["id"])))
        artifact = by_hash.get(s.get("artifact_hash")) if s["valid"] else None
        route = submission_route(artifact, code) if s["valid"] else code
        per_submission.append({"id": s["id"], "valid": s["valid"],
                               "code_commit": s.get("code_commit"), **route})
        s["methods"] = route["methods"] if s["valid"] else []
    methods = run_route(per_submission)
    techniques = sorted({t for p in per_submission if p["valid"] for t in p["techniques"]})
    final = detect(_code_sources(repo, final_commit, cache)
                   + _transcript_sources(transcript, None))
    return {"methods": methods, "techniques": techniques, "per_submission": per_submission,
            "final_code": final}


# ------------------------------------------------------------------------------- failures


PROGRESS = re.compile(r"\d+%\|.*\|")  # a tqdm progress bar


def _log_lines(path: Path) -> list[str]:
    try:
        return Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return []


def _tail(lines: list[str], n: int = LOG_TAIL_LINES) -> str:
    """The last ``n`` lines worth reading: blank lines and all but the last progress bar
    dropped."""
    kept = [line for line in lines if line.strip()]
    bars = [i for i, line in enumerate(kept) if PROGRESS.search(line)]
    kept = [line for i, line in enumerate(kept) if i not in bars[:-1]]
    return "\n".join(line[:300] for line in kept[-n:])


def _last_traceback(lines: list[str]) -> list[str]:
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent")]
    if not starts:
        return []
    block = lines[starts[-1]:]
    end = next((i for i, line in enumerate(block[1:], 1)
                if line and not line.startswith((" ", "\t", "Traceback"))), len(block) - 1)
    block = block[:end + 1]
    return block if len(block) <= 8 else [block[0], "  ..."] + block[-6:]


def failures_of(items: list[dict[str, Any]], events: list[dict[str, Any]],
                run: dict[str, Any] | None, agent_log: Path) -> list[dict[str, Any]]:
    """What went wrong, each with a short excerpt: rejected submissions, the agent's exit, the
    last traceback in its log, error events."""
    found = []
    for s in items:
        if not s["valid"]:
            found.append({"kind": "submission", "message": f"submission {s['id']} rejected "
                          f"({s.get('status_code')}): {s.get('error')}",
                          "elapsed_s": s.get("elapsed_s"), "excerpt": None})
    for e in events:
        if e.get("kind") in ("error", "budget_kill"):
            detail = e.get("message") or ", ".join(f"{k}={v}" for k, v in e.items()
                                                   if k not in EVENT_COLUMNS)
            found.append({"kind": e["kind"], "message": str(detail),
                          "elapsed_s": e.get("elapsed_s"), "excerpt": None})
    lines = _log_lines(agent_log)
    status = (run or {}).get("status")
    if status in ("agent_failed", "budget_exhausted"):
        found.append({"kind": "agent", "message": f"agent {status} (exit "
                      f"{(run or {}).get('exit_code')})", "elapsed_s": (run or {}).get(
                          "agent_seconds"), "excerpt": _tail(lines)})
    traceback = _last_traceback(lines)
    if traceback and status not in ("agent_failed",):
        found.append({"kind": "traceback", "message": "a traceback in agent.log: "
                      + traceback[-1][:200], "elapsed_s": None, "excerpt": "\n".join(traceback)})
    return found


# ---------------------------------------------------------------------------------- summary


def summarize(cfg: RunConfig, layout: Layout,
              integrity: dict[str, Any] | None = None) -> dict[str, Any]:
    """The summary of one run as a dict (nothing written). ``integrity``: the result of
    ``a2rl.analysis.integrity.check_run``; when None, the run's integrity.json if there is one."""
    from a2rl.grading import recording

    paths = layout.run(cfg.task.id, cfg.agent.name, cfg.driver.name, cfg.seed)
    run = _read_json(paths.run_json)
    final = _read_json(paths.final)
    baseline_record = _read_json(layout.baseline(cfg.task.id))
    ledger = list(iter_jsonl(paths.ledger))
    events = list(iter_jsonl(paths.events))
    transcript = recording.read_transcript(paths.transcript)
    if integrity is None:
        integrity = _read_json(paths.integrity)

    items = [_submission(record, i + 1) for i, record in enumerate(ledger)]
    valid_scores = [s["score"] for s in items if s["valid"] and _number(s["score"]) is not None]
    baseline, baseline_stderr = _baseline(baseline_record, final, ledger)

    final_score = _number((final or {}).get("test_score"))
    final_from: str | None = "final" if final_score is not None else None
    if final is not None and final.get("no_valid_submission"):
        final_from = "baseline"
        if final_score is None:
            final_score = baseline
    improvement = None
    if final_score is not None and baseline is not None:
        improvement = final_score - baseline

    status = (run or {}).get("status") or ("not_run" if run is None else "unknown")
    timeline = [{"time": e.get("time"), "elapsed_s": e.get("elapsed_s"), "kind": e.get("kind"),
                 **{k: v for k, v in e.items() if k not in EVENT_COLUMNS}} for e in events]
    time_limit = (run or {}).get("time_limit_s", cfg.budget.time_limit_s)
    agent_seconds = _number((run or {}).get("agent_seconds"))

    base_dir = paths.workspace / "base_model"
    if not base_dir.is_dir():
        base_dir = Layout.from_paths(cfg.paths).base_model(cfg.task.model)
    lineage = recording.artifact_lineage(ledger, paths.store, base_dir if base_dir.is_dir()
                                         else None, (baseline_record or {}).get("model_hash"))
    parents = {a["artifact_hash"]: a["parent"] for a in lineage}
    for s in items:
        s["parent"] = parents.get(s.get("artifact_hash")) if s["valid"] else None

    revisions = recording.commits(paths.code_repo)
    final_commit = recording.tags(paths.code_repo).get("final") if revisions else None
    route = route_of(items, ledger, lineage, paths.code_repo, transcript, final_commit,
                     paths.workspace)
    llm = _llm(paths)
    cost = llm["cost_usd"] if llm else (0.0 if cfg.driver.name == "none" else None)

    return {
        "task": cfg.task.id,
        "task_name": cfg.task.name,
        "level": cfg.task.level,
        "agent": cfg.agent.name,
        "driver": cfg.driver.name,
        "seed": cfg.seed,
        "feedback": cfg.task.feedback,
        "model": cfg.task.model.name,
        "sandbox": (run or {}).get("sandbox", cfg.sandbox),
        "hardware": (run or {}).get("hardware"),
        "budget": {"name": cfg.budget.name,
                   "time_limit_s": time_limit,
                   "max_submissions": cfg.budget.max_submissions},
        "status": status,
        "exit_code": (run or {}).get("exit_code"),
        "agent_seconds": agent_seconds,
        "baseline": baseline,
        "baseline_stderr": baseline_stderr,
        "best_feedback_score": max(valid_scores) if valid_scores else None,
        "final_score": final_score,
        "final_stderr": _number((final or {}).get("test_stderr")),
        "final_n": (final or {}).get("n"),
        "final_from": final_from,
        "improvement": improvement,
        "selected_submission": (final or {}).get("selected_submission"),
        "submissions": {"total": len(items),
                        "valid": sum(1 for s in items if s["valid"]),
                        "invalid": sum(1 for s in items if not s["valid"]),
                        "items": items},
        "process": process_metrics(items, ledger, baseline, agent_seconds, time_limit),
        "route": route,
        "lineage": lineage,
        "code": {"repo": str(paths.code_repo) if revisions else None,
                 "final_commit": final_commit, "revisions": revisions},
        "llm": llm,
        "cost_usd": cost,
        # what grading cost (a judge's calls): never part of the agent's cost_usd
        "grading_usage": (run or {}).get("grading_usage") or None,
        "integrity": integrity,
        "failures": failures_of(items, events, run, paths.agent_log),
        "timeline": timeline,
        "files": {name: str(path) for name, path in _files(paths).items() if path.exists()},
    }


def _llm(paths: RunPaths) -> dict[str, Any] | None:
    """Totals of llm_calls.jsonl (None without one), with the calls' summed latency."""
    if not paths.llm_calls.exists():
        return None
    from a2rl.llm.proxy import llm_totals

    totals = llm_totals(paths.root)
    totals["latency_s"] = round(sum(_number(c.get("latency_s")) or 0.0
                                    for c in iter_jsonl(paths.llm_calls)), 3)
    return totals


def _files(paths: RunPaths) -> dict[str, Path]:
    return {"run": paths.run_json, "ledger": paths.ledger, "events": paths.events,
            "agent_log": paths.agent_log, "final": paths.final, "code_repo": paths.code_repo,
            "integrity": paths.integrity, "llm_calls": paths.llm_calls,
            "transcript": paths.transcript}


# ---------------------------------------------------------------------------------- markdown

def _fmt(value: Any, digits: int = 2, signed: bool = False) -> str:
    number = _number(value)
    if number is None:
        return "–" if value is None else _cell(value)
    return f"{number:+.{digits}f}" if signed else f"{number:.{digits}f}"


def _score(value: Any, stderr: Any = None) -> str:
    if _number(value) is None:
        return "–"
    return _fmt(value) + (f" ± {_fmt(stderr)}" if _number(stderr) is not None else "")


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.3f}".rstrip("0").rstrip(".")
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _cell(value: Any) -> str:
    """Text safe inside a Markdown table cell: one line, pipes escaped."""
    return " ".join(_text(value).split()).replace("|", "\\|")


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _short(commit: Any) -> str:
    return f"`{commit[:SHORT]}`" if isinstance(commit, str) and commit else "–"


def _seconds(value: Any) -> str:
    return "–" if _number(value) is None else f"{_number(value):.1f} s"


def _share(value: Any) -> str:
    return "–" if _number(value) is None else f"{100 * _number(value):.1f} %"


def _route_text(methods: list[str], techniques: list[str]) -> str:
    if not methods:
        return "–"
    return ", ".join(methods) + (f" ({', '.join(techniques)})" if techniques else "")


def _integrity_line(integrity: dict[str, Any] | None) -> str:
    if not integrity:
        return "not checked"
    c = integrity.get("contamination") or {}
    t = integrity.get("tamper") or {}
    parts = []
    if not c.get("checked"):
        parts.append("contamination not checked")
    elif c.get("flagged"):
        parts.append(f"**CONTAMINATION FLAGGED** ({c.get('contaminated_items')} sealed items "
                     f"found in the agent's files)")
    else:
        parts.append("no contamination found")
    parts.append(f"{t.get('count', 0)} tamper attempt(s)")
    return "; ".join(parts)


def render_markdown(summary: dict[str, Any]) -> str:
    """summary.md: header, outcome, process, route, submissions, code revisions, failures,
    integrity, LLM usage, timeline."""
    s = summary
    budget = s["budget"]
    subs = s["submissions"]
    about = (f"Task `{s['task']}` ({s['task_name']}, {s['level']}), feedback on the "
             f"{s['feedback']} split; base model `{s['model']}`; budget `{budget['name']}` "
             f"({_fmt(budget['time_limit_s'], 0)} s, {budget['max_submissions']} submissions); "
             f"sandbox `{s['sandbox']}`.")
    if s.get("hardware"):
        about += f" Machine: {one_line(s['hardware'])}."
    lines = [f"# {s['task']} · {s['agent']} · {s['driver']} · seed {s['seed']}", "", about, "",
             "## Outcome", ""]

    status = s["status"]
    details = []
    if s["exit_code"] is not None:
        details.append(f"exit {s['exit_code']}")
    if s["agent_seconds"] is not None:
        details.append(f"{_fmt(s['agent_seconds'], 1)} s of {_fmt(budget['time_limit_s'], 0)} s")
    if details:
        status += f" ({', '.join(details)})"
    final = _score(s["final_score"], s["final_stderr"])
    if s["final_from"] == "baseline":
        final += " (no valid submission: base model)"
    elif s["selected_submission"] is not None:
        final += f" (submission {s['selected_submission']})"
    route = s.get("route") or {"methods": [], "techniques": []}
    cost = s.get("cost_usd")
    lines += _table(["", "value"], [
        ["Agent status", _cell(status)],
        ["Baseline (test)", _score(s["baseline"], s["baseline_stderr"])],
        [f"Best feedback score ({s['feedback']})", _fmt(s["best_feedback_score"])],
        ["Final test score", final],
        ["Improvement", _fmt(s["improvement"], signed=True)],
        ["Submissions", f"{subs['total']} ({subs['valid']} valid, {subs['invalid']} invalid)"],
        ["Route", _cell(_route_text(route["methods"], route["techniques"]))],
        ["LLM cost", "–" if cost is None else f"${cost:.4f}"],
        ["Integrity", _cell(_integrity_line(s.get("integrity")))],
    ])

    p = s.get("process")
    if p:
        lines += ["", "## Process", ""]
        lines += _table(["metric", "value"], [
            ["Valid-submission rate", _share(p["valid_rate"])],
            ["Time to first valid submission", _seconds(p["time_to_first_valid_s"])],
            ["Time to first improvement", _seconds(p["time_to_first_improvement_s"])],
            ["Time to best", _seconds(p["time_to_best_s"])],
            ["Monotonic ratio of scores", _fmt(p["monotonic_ratio"])],
            ["Share of budget used", _share(p["budget_used"])],
            ["Gap between last submission and deadline", _seconds(p["deadline_gap_s"])],
            ["Copies of the base model submitted", _cell(p["copy_of_base"])],
        ])

    lines += ["", "## Route", ""]
    if route.get("per_submission"):
        lines.append(f"Methods used: **{_route_text(route['methods'], route['techniques'])}**. "
                     "Per submission (code at its commit, transcript up to its time, artifact):")
        lines.append("")
        lines += _table(["#", "code commit", "route", "evidence"], [
            [_cell(r["id"]), _short(r.get("code_commit")),
             _cell(_route_text(r["methods"], r["techniques"])) if r["valid"] else "(rejected)",
             _cell("; ".join(f"{e['where']}: {e['match']}" for e in r["evidence"][:3]))]
            for r in route["per_submission"]])
    else:
        final_code = route.get("final_code") or {}
        lines.append("No submissions; methods in the final code: "
                     f"{_route_text(final_code.get('methods', []), [])}.")

    lines += ["", "## Submissions", ""]
    if subs["items"]:
        lines += _table(["#", "elapsed (s)", "valid", "score", "code commit", "parent", "error"], [
            [_cell(i["id"]), _fmt(i["elapsed_s"], 1), "yes" if i["valid"] else "no",
             _score(i["score"], i["stderr"]), _short(i.get("code_commit")),
             _cell(i.get("parent")) or "–", _cell(i["error"])] for i in subs["items"]])
    else:
        lines.append("No submissions.")

    code = s.get("code") or {}
    if code.get("revisions"):
        repo = code["repo"]
        lines += ["", "## Code revisions", "",
                  f"The agent's code is recorded in `{repo}` (a git repository; tags "
                  "`submission-<id>` and `final`)."]
        lines.append("")
        lines += _table(["commit", "tags", "files", "message"], [
            [_short(r["commit"]), _cell(", ".join(r["tags"])), _cell(len(r["files"])),
             _cell(r["message"])] for r in code["revisions"]])
        tagged = [t for r in code["revisions"] for t in r["tags"] if t.startswith("submission-")]
        if len(tagged) >= 2:
            lines += ["", "What changed between the first two submissions:", "", "```",
                      f"git --git-dir {repo} diff {tagged[0]} {tagged[1]}", "```"]
        elif tagged:
            lines += ["", f"Code of {tagged[0]}:", "", "```",
                      f"git --git-dir {repo} show --stat {tagged[0]}", "```"]

    failures = s.get("failures") or []
    lines += ["", "## Failures", ""]
    if failures:
        for f in failures:
            when = f" at {_fmt(f['elapsed_s'], 1)} s" if _number(f.get("elapsed_s")) else ""
            lines.append(f"- **{f['kind']}**{when}: {' '.join(str(f['message']).split())}")
            if f.get("excerpt"):
                lines += ["", "  ```", *(f"  {x}" for x in f["excerpt"].splitlines()), "  ```"]
    else:
        lines.append("None.")

    lines += ["", "## Integrity", ""] + _integrity_markdown(s.get("integrity"))

    llm = s.get("llm")
    if llm:
        lines += ["", "## LLM usage", ""]
        lines += _table(["calls", "failed", "input tokens", "output tokens", "cost (USD)",
                         "latency (s)", "models"],
                        [[_cell(llm["calls"]), _cell(llm["failed_calls"]),
                          _cell(llm["input_tokens"]),
                          _cell(llm["output_tokens"]), f"{llm['cost_usd']:.4f}",
                          _fmt(llm["latency_s"], 1), _cell(", ".join(llm["models"]))]])

    grading = s.get("grading_usage")
    if grading:
        lines += ["", "## Grading usage (the judge; not the agent's cost)", ""]
        keys = [k for k in ("calls", "cache_hits", "retries", "input_tokens", "output_tokens",
                            "cost_usd", "judge_failed_submissions") if k in grading]
        lines += _table(keys, [[_cell(grading[k]) for k in keys]])

    lines += ["", "## Timeline", ""]
    if s["timeline"]:
        lines += _table(["elapsed (s)", "event", "details"], [
            [_fmt(e["elapsed_s"], 1), _cell(e["kind"]),
             _cell(", ".join(f"{k}={_text(v)}" for k, v in e.items()
                             if k not in EVENT_COLUMNS))] for e in s["timeline"]])
    else:
        lines.append("No events recorded.")
    return "\n".join(lines) + "\n"


def _integrity_markdown(integrity: dict[str, Any] | None) -> list[str]:
    if not integrity:
        return ["Not checked."]
    c = integrity.get("contamination") or {}
    t = integrity.get("tamper") or {}
    lines = []
    if not c.get("checked"):
        lines.append(f"Contamination: not checked ({c.get('reason', 'no data')}).")
    else:
        splits = ", ".join(f"{name}: {v['contaminated']} of {v['judged']} items"
                           for name, v in c.get("splits", {}).items())
        verdict = "**FLAGGED**" if c.get("flagged") else "not flagged"
        lines.append(f"Contamination ({c['n']}-gram overlap of the sealed splits with "
                     f"{c['files_scanned']} files the agent wrote or fetched): {verdict}; "
                     f"{splits}.")
        if c.get("evidence"):
            lines.append("")
            lines += _table(["split", "item", "coverage", "files", "matching text"], [
                [_cell(e["split"]), _cell(e["id"]), _share(e["coverage"]),
                 _cell(", ".join(e["files"][:3])), _cell(e["example"])]
                for e in c["evidence"][:10]])
    lines += ["", f"Tamper log: {t.get('count', 0)} attempt(s) to reach sealed paths or the "
              f"ledger; {t.get('rejected_count', 0)} rejected submission(s)."]
    if t.get("attempts"):
        lines.append("")
        lines += _table(["kind", "where", "detail"], [
            [_cell(a["kind"]), _cell(a["source"]), _cell(a["detail"][:160])]
            for a in t["attempts"][:20]])
    return lines




def summarize_run(cfg: RunConfig, check_integrity: bool = True) -> dict[str, Any]:
    """Run the integrity checks, then write summary.json and summary.md for the run of
    ``cfg``; returns the summary."""
    from a2rl.analysis.integrity import check_run

    layout = Layout.from_paths(cfg.paths)
    paths = layout.run(cfg.task.id, cfg.agent.name, cfg.driver.name, cfg.seed)
    integrity = None
    if check_integrity and paths.root.exists():
        integrity = check_run(cfg)
    summary = summarize(cfg, layout, integrity)
    write_json_atomic(paths.summary_json, summary)
    write_text_atomic(paths.summary_md, render_markdown(summary))
    return summary

