"""What went wrong in a run, each with a short excerpt, for its summary: rejected submissions,
error and budget-kill events, the agent's exit and the last traceback in its log."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from a2rl.common.beneath import Refused, read_file
from a2rl.common.records import RunRecord, SubmissionItem

# event fields shown in their own columns of a timeline, not among the details
EVENT_COLUMNS = ("time", "elapsed_s", "kind")
LOG_TAIL_LINES = 12
LOG_TAIL_BYTES = 1 << 20  # of agent.log, where its tail and last traceback are looked for
PROGRESS = re.compile(r"\d+%\|.*\|")  # a tqdm progress bar


def _log_lines(path: Path) -> list[str]:
    """The lines of the log's last ``LOG_TAIL_BYTES`` (the first one cut), read as the agent's
    files are (``a2rl.common.beneath``: a regular file only, never through a link)."""
    path = Path(path)
    try:
        data = read_file(path.parent, path.name, LOG_TAIL_BYTES, tail=True)
    except Refused:
        return []
    lines = data.decode(errors="replace").splitlines()
    return lines[1:] if len(data) == LOG_TAIL_BYTES and lines else lines


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


def failures_of(items: list[SubmissionItem], events: list[dict[str, Any]],
                run: RunRecord | None, agent_log: Path) -> list[dict[str, Any]]:
    """``{"kind", "message", "elapsed_s", "excerpt"}`` for each thing that went wrong."""
    found = []
    for s in items:
        if s.status in ("judge_failed", "grading_budget_exhausted", "interrupted"):  # harness
            found.append({"kind": "infrastructure", "message": f"submission {s.id} could not "
                          f"be graded ({s.status_code}): {s.error}",
                          "elapsed_s": s.elapsed_s, "excerpt": None})
        elif not s.valid:
            found.append({"kind": "submission", "message": f"submission {s.id} rejected "
                          f"({s.status_code}): {s.error}",
                          "elapsed_s": s.elapsed_s, "excerpt": None})
    for e in events:
        if e.get("kind") in ("error", "budget_kill"):
            detail = e.get("message") or ", ".join(f"{k}={v}" for k, v in e.items()
                                                   if k not in EVENT_COLUMNS)
            found.append({"kind": e["kind"], "message": str(detail),
                          "elapsed_s": e.get("elapsed_s"), "excerpt": None})
    lines = _log_lines(agent_log)
    status = run.status if run else None
    if status == "infra_failed":  # the harness's failure: the run does not count
        found.append({"kind": "infrastructure", "message": f"run infra_failed: {run.reason}",
                      "elapsed_s": run.agent_seconds, "excerpt": None})
    if status in ("agent_failed", "budget_exhausted", "disk_quota_exceeded"):
        found.append({"kind": "agent", "message": f"agent {status} (exit {run.exit_code})",
                      "elapsed_s": run.agent_seconds, "excerpt": _tail(lines)})
    traceback = _last_traceback(lines)
    if traceback and status not in ("agent_failed",):
        found.append({"kind": "traceback", "message": "a traceback in agent.log: "
                      + traceback[-1][:200], "elapsed_s": None, "excerpt": "\n".join(traceback)})
    return found
