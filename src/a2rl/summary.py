"""The per-run summary: what one cell's run left behind, in one JSON and one Markdown file.

``summarize_run(cfg)`` reads the run directory (run.json, ledger.jsonl, events.jsonl,
final.json) and the task's baseline.json, all through ``a2rl.layout``, and writes summary.json
and summary.md next to them. Every input may be missing or empty (an agent that never started,
never submitted, or a run that crashed): the summary then says so instead of failing.

summary.json::

    {"task", "task_name", "level", "agent", "driver", "seed", "feedback", "model", "sandbox",
     "budget": {"name", "time_limit_s", "max_submissions"},
     "status", "exit_code", "agent_seconds",
     "baseline", "baseline_stderr",
     "best_feedback_score", "final_score", "final_stderr", "final_n", "final_from",
     "improvement", "selected_submission",
     "submissions": {"total", "valid", "invalid", "items": [{"id", "elapsed_s", "valid",
                     "score", "stderr", "error", "status_code", "cached"}]},
     "timeline": [{"elapsed_s", "kind", ...details}], "files": {...}}

``final_from`` says where ``final_score`` comes from: ``final`` (final.json's test score),
``baseline`` (no valid submission: the agent leaves the base model, which scores the baseline)
or null (no final grade yet).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from a2rl.config import RunConfig
from a2rl.layout import Layout, RunPaths
from a2rl.records import iter_jsonl, write_json_atomic

# fields of a ledger record kept per submission in the summary
SUBMISSION_FIELDS = ("elapsed_s", "valid", "score", "stderr", "error", "status_code", "cached",
                     "model_path", "split")
# event fields shown in their own columns of summary.md's timeline, not among the details
EVENT_COLUMNS = ("time", "elapsed_s", "kind")


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


def summarize(cfg: RunConfig, layout: Layout) -> dict[str, Any]:
    """The summary of one run as a dict (nothing written)."""
    paths = layout.run(cfg.task.id, cfg.agent.name, cfg.driver.name, cfg.seed)
    run = _read_json(paths.run_json)
    final = _read_json(paths.final)
    baseline_record = _read_json(layout.baseline(cfg.task.id))
    ledger = list(iter_jsonl(paths.ledger))
    events = list(iter_jsonl(paths.events))

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
        "budget": {"name": cfg.budget.name,
                   "time_limit_s": (run or {}).get("time_limit_s", cfg.budget.time_limit_s),
                   "max_submissions": cfg.budget.max_submissions},
        "status": status,
        "exit_code": (run or {}).get("exit_code"),
        "agent_seconds": _number((run or {}).get("agent_seconds")),
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
        "timeline": timeline,
        "files": {name: str(path) for name, path in _files(paths).items() if path.exists()},
    }


def _files(paths: RunPaths) -> dict[str, Path]:
    return {"run": paths.run_json, "ledger": paths.ledger, "events": paths.events,
            "agent_log": paths.agent_log, "final": paths.final}


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


def render_markdown(summary: dict[str, Any]) -> str:
    """summary.md: header, outcome, submissions, timeline."""
    s = summary
    budget = s["budget"]
    subs = s["submissions"]
    about = (f"Task `{s['task']}` ({s['task_name']}, {s['level']}), feedback on the "
             f"{s['feedback']} split; base model `{s['model']}`; budget `{budget['name']}` "
             f"({_fmt(budget['time_limit_s'], 0)} s, {budget['max_submissions']} submissions); "
             f"sandbox `{s['sandbox']}`.")
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
    lines += _table(["", "value"], [
        ["Agent status", _cell(status)],
        ["Baseline (test)", _score(s["baseline"], s["baseline_stderr"])],
        [f"Best feedback score ({s['feedback']})", _fmt(s["best_feedback_score"])],
        ["Final test score", final],
        ["Improvement", _fmt(s["improvement"], signed=True)],
        ["Submissions", f"{subs['total']} ({subs['valid']} valid, {subs['invalid']} invalid)"],
    ])

    lines += ["", "## Submissions", ""]
    if subs["items"]:
        lines += _table(["#", "elapsed (s)", "valid", "score", "error"], [
            [_cell(i["id"]), _fmt(i["elapsed_s"], 1), "yes" if i["valid"] else "no",
             _score(i["score"], i["stderr"]), _cell(i["error"])] for i in subs["items"]])
    else:
        lines.append("No submissions.")

    lines += ["", "## Timeline", ""]
    if s["timeline"]:
        lines += _table(["elapsed (s)", "event", "details"], [
            [_fmt(e["elapsed_s"], 1), _cell(e["kind"]),
             _cell(", ".join(f"{k}={_text(v)}" for k, v in e.items()
                             if k not in EVENT_COLUMNS))] for e in s["timeline"]])
    else:
        lines.append("No events recorded.")
    return "\n".join(lines) + "\n"


def write_text_atomic(path: Path, text: str) -> None:
    """Text counterpart of ``records.write_json_atomic`` (readers never see half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def summarize_run(cfg: RunConfig) -> dict[str, Any]:
    """Write summary.json and summary.md for the run of ``cfg``; returns the summary."""
    layout = Layout.from_paths(cfg.paths)
    paths = layout.run(cfg.task.id, cfg.agent.name, cfg.driver.name, cfg.seed)
    summary = summarize(cfg, layout)
    write_json_atomic(paths.summary_json, summary)
    write_text_atomic(paths.summary_md, render_markdown(summary))
    return summary
