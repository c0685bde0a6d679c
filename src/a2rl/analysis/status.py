"""Where every cell of a grid stands, read from its results folder while the grid runs
(``a2rl status`` on the host; ``a2rl view`` shows the same table).

It only reads what the harness writes anyway (``a2rl.common.layout``): the planned cells
(grid.json, written by the workflow as a grid starts), each run folder's run.json, final.json,
summary.json, ledger.jsonl, events.jsonl and llm_calls.jsonl, the baseline and the prepared
task, and the workflow's job logs (results/<label>/logs/). It never talks to a grader: a
grader's state belongs to its run, and the files are what the grader itself writes down.

A cell's state, first match wins:

``infra_failed``  run.json says so (the harness failed, not the agent; the workflow may retry)
``done``          run.json, final.json and summary.json are there (the agent's own outcome,
                  budget_exhausted included, is the ``outcome``)
``failed``        the agent failed (run.json ``agent_failed``, once graded), or a job of the cell
                  ended in an error (its log's last stage ends with a traceback)
``grading``       run.json is there, the final grade and summary are not yet
``running``       the run folder's events have the agent's start
``preparing``     the cell's job started (workspace, grader), or its task is being prepared or
                  its baseline measured (their jobs' logs exist, their outputs do not yet)
``waiting``       nothing of it yet

A job killed outright (SIGKILL, a lost machine) leaves no traceback: its cell stays
``running``, and the last event's age says how long nothing happened.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Optional

from a2rl.analysis.summary import on_budget_clock
from a2rl.common.files import iter_jsonl, read_json
from a2rl.common.layout import Layout, RunPaths, cell_path

STATES = ("waiting", "preparing", "running", "grading", "done", "failed", "infra_failed")
TAIL_BYTES = 64 * 1024  # of a log or events.jsonl: enough for the last lines
HEAD_LINES = 50  # of events.jsonl: the agent's start comes within the first few
TRACEBACK = "Traceback (most recent call last)"
STAGE_START = " stage "  # a2rl.pipeline.cli.run_stages logs "stage NAME: overrides"


@dataclass
class CellStatus:
    task: str
    agent: str
    driver: str
    seed: int
    state: str = "waiting"
    outcome: Optional[str] = None  # run.json's status once the agent phase ended
    detail: str = ""  # why it failed, or what a preparing or grading job says last
    elapsed_s: Optional[float] = None  # of the agent's budget clock
    budget_s: Optional[float] = None
    valid: int = 0
    invalid: int = 0
    best: Optional[float] = None  # best feedback score so far
    last_event: Optional[str] = None
    last_event_age_s: Optional[float] = None
    cost_usd: Optional[float] = None  # the driver's calls and a judge's, so far
    run: Optional[str] = None  # the run folder, when there is one
    agent_started: bool = False  # events.jsonl has the agent's start

    @property
    def slug(self) -> str:
        return f"{self.task}__{self.agent}__{self.driver}__seed{self.seed}"


@dataclass
class GridStatus:
    results: str
    label: Optional[str]
    generated: str
    cells: list[CellStatus] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {s: sum(1 for c in self.cells if c.state == s) for s in STATES
                if any(c.state == s for c in self.cells)}

    def to_dict(self) -> dict[str, Any]:
        return {"results": self.results, "label": self.label, "generated": self.generated,
                "counts": self.counts(), "cells": [asdict(c) | {"slug": c.slug}
                                                   for c in self.cells]}


def grid_status(results: Path, planned: list[dict[str, Any]] = (),
                now: Optional[datetime] = None) -> GridStatus:
    """Every cell of the results folder ``results``: the planned ones (grid.json, and
    ``planned``: cells as ``a2rl.config.compose.grid_cells`` gives them) and those with a run
    folder, in task, agent, driver, seed order."""
    results = Path(results)
    layout = Layout(results, results)
    now = now or datetime.now(UTC)
    plan = _read(layout.grid_plan) or {}
    keys = {_key(c) for c in [*plan.get("cells", []), *planned]}
    keys |= set(run_folders(results))
    tasks = _task_states(layout, {k[0] for k in keys})
    cells = [cell_status(layout, *key, task_state=tasks.get(key[0]), now=now)
             for key in sorted(keys, key=lambda k: (k[0], k[1], k[2], k[3]))]
    return GridStatus(str(results), plan.get("label") or results.name,
                      now.strftime("%Y-%m-%dT%H:%M:%SZ"), cells)


def _key(cell: dict[str, Any]) -> tuple[str, str, str, int]:
    return str(cell["task"]), str(cell["agent"]), str(cell["driver"]), int(cell["seed"])


def run_folders(results: Path) -> list[tuple[str, str, str, int]]:
    """The cells with a run folder: runs/<task>/<agent>/<driver>/seed<k>/."""
    found = []
    for seed_dir in Path(results, "runs").glob("*/*/*/seed*"):
        seed = seed_dir.name[len("seed"):]
        if seed_dir.is_dir() and seed.isdigit():
            driver_dir = seed_dir.parent
            found.append((driver_dir.parent.parent.name, driver_dir.parent.name,
                          driver_dir.name, int(seed)))
    return found


def _task_states(layout: Layout, tasks: set[str]) -> dict[str, tuple[str, str]]:
    """(state, detail) of each task whose preparation holds its cells back: the job preparing
    the task or measuring its baseline started and has not written its output, ``preparing``
    with its log's last line, or ``failed`` with its error."""
    states = {}
    for task in tasks:
        for rule, output in (("prepare_task", layout.prepared(task).manifest),
                             ("measure_baseline", layout.baseline(task))):
            log = layout.log(rule, task)
            if not output.exists() and log.exists():
                error = job_error(log)
                states[task] = ("failed", f"{rule}: {error}") if error else (
                    "preparing", f"{rule}: {last_line(log)}")
                break
    return states


def cell_status(layout: Layout, task: str, agent: str, driver: str, seed: int,
                task_state: Optional[tuple[str, str]] = None,
                now: Optional[datetime] = None) -> CellStatus:
    """One cell's state and figures (see the module doc)."""
    now = now or datetime.now(UTC)
    cell = CellStatus(task, agent, driver, seed)
    run = layout.run(task, agent, driver, seed)
    agent_log = layout.log("run_agent", cell_path(task, agent, driver, seed))
    finish_log = layout.log("finish_run", cell_path(task, agent, driver, seed))
    if not run.root.is_dir():
        error = job_error(agent_log)
        if error:
            cell.state, cell.detail = "failed", f"run_agent: {error}"
        elif task_state:
            cell.state, cell.detail = task_state
        elif agent_log.exists():
            cell.state, cell.detail = "preparing", last_line(agent_log)
        return cell
    cell.run = str(run.root)
    record = _read(run.run_json)
    _read_progress(cell, run, record, now)
    if record is not None:
        cell.outcome = record.get("status")
        if cell.outcome == "infra_failed":
            cell.state, cell.detail = "infra_failed", str(record.get("reason") or "")
        elif run.final.exists() and run.summary_json.exists():
            cell.state = "failed" if cell.outcome == "agent_failed" else "done"
            if cell.outcome == "agent_failed":
                cell.detail = f"the agent failed (exit code {record.get('exit_code')})"
        elif error := job_error(finish_log):
            cell.state, cell.detail = "failed", error
        else:
            cell.state, cell.detail = "grading", last_line(finish_log)
    elif error := job_error(agent_log):
        cell.state, cell.detail = "failed", error
    else:
        cell.state = "running" if cell.agent_started else "preparing"
    return cell


def _read_progress(cell: CellStatus, run: RunPaths, record: Optional[dict[str, Any]],
                   now: datetime) -> None:
    """Submissions, best score, budget, elapsed time, last event and cost of a run folder."""
    grading_cost, eval_seconds = 0.0, []
    for entry in iter_jsonl(run.ledger):
        eval_seconds.append(entry.get("eval_seconds"))
        if entry.get("valid"):
            cell.valid += 1
            score = entry.get("score")
            if isinstance(score, (int, float)) and (cell.best is None or score > cell.best):
                cell.best = float(score)
        else:
            cell.invalid += 1
        grading_cost += float((entry.get("grading_usage") or {}).get("cost_usd") or 0.0)
    start = next((e for e in _head(run.events) if e.get("kind") == "agent_start"), None)
    if start is not None:
        cell.agent_started = True
        cell.budget_s = start.get("time_limit_s")
    last = _last_record(run.events)
    if last is not None:
        cell.last_event = last.get("kind")
        cell.last_event_age_s = _age(last.get("time"), now)
    if record is not None:  # the agent phase ended: its own figures
        cell.budget_s = record.get("time_limit_s", cell.budget_s)
        cell.elapsed_s = record.get("agent_seconds")
        llm_cost = (record.get("llm") or {}).get("cost_usd") or 0.0
        grading_cost = (record.get("grading_usage") or {}).get("cost_usd") or grading_cost
    else:
        llm_cost = sum(float(c.get("cost_usd") or 0.0) for c in iter_jsonl(run.llm_calls))
        if start is not None and last is not None:
            # the budget clock at the last event, and the wall time since (a paused clock,
            # evaluations not counted, is over-counted until the next event)
            age = cell.last_event_age_s or 0.0
            cell.elapsed_s = round(float(last.get("elapsed_s") or 0.0) + age, 1)
    # where evaluations do not count, the clock gives their seconds back (older runs' starts
    # do not say: counted, as before)
    count_eval_time = start is None or start.get("count_eval_time", True)
    cell.elapsed_s = on_budget_clock(cell.elapsed_s, eval_seconds, count_eval_time)
    cell.cost_usd = round(llm_cost + grading_cost, 6)


def _read(path: Path) -> Optional[dict[str, Any]]:
    """A JSON object, or None when missing, being written or not an object."""
    try:
        data = read_json(path)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _head(path: Path) -> list[dict[str, Any]]:
    records = []
    for record in iter_jsonl(path):
        records.append(record)
        if len(records) >= HEAD_LINES:
            break
    return records


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, os.fstat(fh.fileno()).st_size - TAIL_BYTES))
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _last_record(path: Path) -> Optional[dict[str, Any]]:
    """The last whole JSON line of a jsonl file (a torn last line is skipped)."""
    for line in reversed(_tail(path).splitlines()):
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            return record
    return None


def last_line(log: Path) -> str:
    """A job log's last line, a progress bar's latest state included (tqdm rewrites its line
    with carriage returns), cut to 120 characters."""
    for line in reversed(_tail(log).replace("\r", "\n").splitlines()):
        if line.strip():
            return line.strip()[:120]
    return ""


def job_error(log: Path) -> str:
    """The error a job log's last stage ended with ("" when none): the traceback's last line
    (``a2rl.pipeline.cli.log_output`` writes one when a stage raises)."""
    text = _tail(log)
    stage = text.rfind(STAGE_START)
    failed = text.rfind(TRACEBACK)
    if failed < 0 or failed < stage:
        return ""
    lines = [line for line in text[failed:].splitlines() if line.strip()]
    return lines[-1].strip()[:300] if lines else ""


def _age(time: Any, now: datetime) -> Optional[float]:
    try:
        then = datetime.fromisoformat(str(time).replace("Z", "+00:00"))
    except ValueError:
        return None
    return round(max(0.0, (now - then).total_seconds()), 1)


def write_plan(results: Path, label: str, grid: str, overrides: list[str],
               cells: list[dict[str, Any]]) -> Path:
    """grid.json: the grid's cells as planned, so that the cells not started yet are listed
    (the workflow writes it as a grid starts)."""
    from a2rl.common.files import utc_now, write_json_atomic

    path = Layout(Path(results), Path(results)).grid_plan
    write_json_atomic(path, {"label": label, "grid": grid, "overrides": list(overrides),
                             "started": utc_now(), "cells": [dict(c) for c in cells]})
    return path


def where_to_look(results: Path) -> str:
    """What to run, and which files to read, while a grid files its runs under ``results``."""
    return (f"a2rl: this grid files its runs under {results}/. While it runs:\n"
            f"  a2rl status {results} --watch   every cell: state, time, submissions, "
            "best score, last event, cost\n"
            f"  a2rl view {results}             the report, live, on http://127.0.0.1:8765/ "
            "(the address it prints)\n"
            f"  a job's log: {results}/logs/<rule>/...; an agent's own output: "
            f"{results}/runs/<task>/<agent>/<driver>/seed<k>/agent.log")


# ---------------------------------------------------------------------------- the command

USAGE = """usage: a2rl status [RESULTS | grid=NAME [OVERRIDES...]] [--json] [--watch] [--interval S]

Every cell of a grid's results folder (RESULTS, e.g. results/quick; or the folder the workflow
files grid=NAME under these OVERRIDES in; default grid=quick): state, elapsed time and budget,
submissions valid/invalid, best feedback score so far, last event and its age, cost so far.
--json prints the same as one JSON object; --watch redraws the table every S seconds (2).
Inside an agent's workspace `a2rl status` is the grader's view of that run instead."""
STYLES = {"waiting": "dim", "preparing": "cyan", "running": "bold blue", "grading": "magenta",
          "done": "green", "failed": "bold red", "infra_failed": "bold yellow"}


def duration(seconds: Optional[float]) -> str:
    """``1h02m``, ``3m05s``, ``42s``; ``–`` when unknown."""
    if seconds is None:
        return "–"
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


def status_rows(status: GridStatus) -> list[list[str]]:
    """The table's cells as text: cell, state, elapsed/budget, valid/invalid, best, last event,
    cost, detail (the terminal table and the live view's both)."""
    rows = []
    for c in status.cells:
        event = "–" if c.last_event is None else (
            f"{c.last_event} {duration(c.last_event_age_s)} ago")
        state = c.state if c.outcome in (None, c.state) else f"{c.state} ({c.outcome})"
        rows.append([f"{c.task}/{c.agent}/{c.driver}/seed{c.seed}", state,
                     f"{duration(c.elapsed_s)} / {duration(c.budget_s)}",
                     f"{c.valid}/{c.invalid}", "–" if c.best is None else f"{c.best:.2f}",
                     event, "–" if c.cost_usd is None else f"${c.cost_usd:.4f}", c.detail])
    return rows


STATUS_HEADER = ["cell", "state", "elapsed / budget", "valid/invalid", "best", "last event",
                 "cost", "detail"]


def status_table(status: GridStatus):
    """The rich Table of ``status``."""
    from rich.table import Table
    from rich.text import Text

    counts = ", ".join(f"{n} {s}" for s, n in status.counts().items()) or "no cells"
    table = Table(title=f"{status.label}: {counts}", caption=f"{status.results} at "
                  f"{status.generated}", title_justify="left", caption_justify="left")
    for name in STATUS_HEADER:
        table.add_column(name, no_wrap=name != "detail",
                         justify="right" if name in ("best", "cost") else "left")
    for cell, row in zip(status.cells, status_rows(status)):
        table.add_row(row[0], Text(row[1], style=STYLES.get(cell.state, "")), *row[2:])
    return table


def where(args: list[str]) -> tuple[Path, list[dict[str, Any]]]:
    """The results folder and the planned cells of ``a2rl status``'s arguments: a folder, or
    ``grid=NAME`` and overrides, composed as the workflow composes them."""
    folders = [a for a in args if "=" not in a]
    if folders:
        if len(folders) > 1 or len(folders) != len(args):
            raise ValueError("give a results folder or grid=NAME with overrides, not both")
        folder = Path(folders[0])
        if not folder.is_dir():
            raise ValueError(f"{folder} is not a folder (a grid's results, e.g. results/quick)")
        return folder, []
    from a2rl.config.compose import compose, grid_cells, grid_label, grid_overrides
    from a2rl.config.types import DEFAULT_GRID

    grid = next((a.split("=", 1)[1] for a in args if a.startswith("grid=")), DEFAULT_GRID)
    extra = [a for a in args if not a.startswith("grid=")]
    label = grid_label(grid, extra)
    cfg = compose(grid_overrides(grid, [*extra, f"++grid.label={label}"]))
    return Path("results") / label, grid_cells(cfg)


def main(args: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="a2rl status", usage=USAGE.split("\n\n")[0][7:],
                                     description=USAGE.split("\n\n", 1)[1])
    parser.add_argument("where", nargs="*", help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--watch", action="store_true")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between redraws")
    opts = parser.parse_args(args)
    try:
        results, planned = where(opts.where)
    except ValueError as err:
        parser.error(str(err))
    if opts.json:
        print(json.dumps(grid_status(results, planned).to_dict(), indent=1))
        return 0
    from rich.console import Console

    # not a terminal (a pipe, a file): as wide as the table is, never cut
    console = Console() if sys.stdout.isatty() else Console(width=240)
    if opts.watch:
        watch_table(console, results, planned, max(0.2, opts.interval))
    else:
        console.print(status_table(grid_status(results, planned)))
    return 0


def watch_table(console, results: Path, planned: list[dict[str, Any]],
                interval: float) -> None:
    """Redraw the table in place every ``interval`` seconds until Ctrl-C."""
    import time

    from rich.live import Live

    with Live(status_table(grid_status(results, planned)), console=console,
              auto_refresh=False, screen=False) as live:
        try:
            while True:
                time.sleep(interval)
                live.update(status_table(grid_status(results, planned)), refresh=True)
        except KeyboardInterrupt:
            pass
