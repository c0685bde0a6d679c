"""How fast ``a2rl status`` and ``a2rl view`` answer on a results folder of 1,000 runs (issue
#35: under 2 s each). Prints one JSON object of seconds.

    .venv/bin/python benchmarks/live_status.py                 # 1,000 runs in a temporary folder
    .venv/bin/python benchmarks/live_status.py --runs 1000 --dir /tmp/a2rl-1000 --keep

The folder is generated with the harness's own writers (event log, ledger, run.json, final.json,
summary.json from a real summary of one run, grid.json): 5 tasks x 10 agents x 20 seeds, of
which most are done, some running (events and ledger only, with config.json), some
infra_failed and some not started. Measured:

- ``status_cli_s``: ``a2rl status DIR --json`` as a user runs it (a fresh Python, imports
  included); ``status_s``: the same reading in this process (``grid_status``).
- ``view_index_first_s``: the live index's first request (every summary read, the leaderboard
  with its bootstrap intervals); ``view_index_again_s``: the next request (nothing changed);
  ``view_run_done_s`` / ``view_run_running_s``: a finished run's page and a running one's
  (summarized on the fly); ``view_status_s``: ``/api/status``; ``view_figures_s``: the index's
  two figures, drawn when the browser asks for them after the index arrived.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import replace
from pathlib import Path

TASKS = ["gsm8k_arith", "household", "alpacaeval_local", "webshop", "deepsearchqa_world"]
AGENTS = ["noop", "sft", "grpo", "dpo", "sft_grpo", "claude_code", "codex", "gemini_cli",
          "opencode", "openhands"]


def make_cfg(root: Path, task: str, agent: str, seed: int):
    from a2rl.config import AgentConfig, PathsConfig, RunConfig, TaskConfig

    return RunConfig(task=TaskConfig(id=task, package=task.split("_")[0], level="L1"),
                     agent=AgentConfig(name=agent, command=["{python}", "x.py"]),
                     paths=PathsConfig(root=str(root), results="results/bench"), seed=seed)


def write_run(cfg, state: str, template) -> None:
    """One run folder in ``state`` (done, running or infra_failed)."""
    from a2rl.common import BudgetClock, EventLog, FinalRecord, Layout, RunRecord, write_json_atomic
    from a2rl.config import config_record
    from a2rl.grading import Ledger

    run = Layout.from_paths(cfg.paths).run(cfg.task.id, cfg.agent.name, "none", cfg.seed)
    run.root.mkdir(parents=True, exist_ok=True)
    write_json_atomic(run.config, config_record(cfg))
    clock = BudgetClock(cfg.budget.time_limit_s, True)
    events = EventLog(run.events, clock)
    events.emit("grader_start", pid=1)
    clock.start()
    events.emit("agent_start", time_limit_s=cfg.budget.time_limit_s)
    ledger = Ledger(run.ledger)
    score = 10.0 + (cfg.seed * 7 + len(cfg.agent.name)) % 50
    for k in range(5):
        valid = k != 2
        fields = dict(elapsed_s=10.0 * k, model_path=f"output/ckpt-{k}", status_code=200,
                      valid=valid, error=None if valid else "no config.json")
        if valid:
            fields |= dict(score=score + k, best=score + k, baseline=10.0, improvement=k,
                           cached=False, stderr=1.0, n=100, split="test",
                           artifact_hash=f"{k:02d}" * 32, equals_base=False)
        entry = ledger.append(**fields)
        events.emit("submission", submission_id=entry.submission_id, valid=valid)
        for call in range(4):
            events.emit("llm_call", call=call)
    if state == "running":
        return
    cell = dict(task=cfg.task.id, agent=cfg.agent.name, driver="none", seed=cfg.seed)
    if state == "infra_failed":
        RunRecord(**cell, started="2026-12-04T10:00:00.000Z", ended="2026-12-04T10:01:00.000Z",
                  agent_seconds=0.0, exit_code=None, status="infra_failed",
                  time_limit_s=cfg.budget.time_limit_s, sandbox="bwrap",
                  reason="grader_died: bench").save(run.run_json)
        return
    events.emit("agent_exit", exit_code=0)
    RunRecord(**cell, started="2026-12-04T10:00:00.000Z", ended="2026-12-04T10:08:00.000Z",
              agent_seconds=100.0, exit_code=0, status="completed",
              time_limit_s=cfg.budget.time_limit_s, sandbox="bwrap",
              submissions=5).save(run.run_json)
    FinalRecord(**cell, feedback="test", baseline=10.0, no_valid_submission=False,
                rescored=False, selected_submission=5, artifact_hash="04" * 32,
                test_score=score + 4, test_stderr=1.0, n=100,
                improvement=score - 6).save(run.final)
    replace(template, task=cfg.task.id, task_name=cfg.task.package, agent=cfg.agent.name,
            seed=cfg.seed, final_score=score + 4, improvement=score - 6,
            best_feedback_score=score + 4).save(run.summary_json)


def generate(root: Path, runs: int) -> Path:
    """The results folder of ``runs`` cells (see the module doc); returns it."""
    from a2rl.analysis import summarize, write_plan
    from a2rl.common import Layout

    cells = [(t, a, s) for s in range(runs) for t in TASKS for a in AGENTS][:runs]
    first = make_cfg(root, *cells[0])
    write_run(first, "running", None)
    template = summarize(first, Layout.from_paths(first.paths))  # a real summary, reused
    for i, (task, agent, seed) in enumerate(cells):
        state = ("waiting" if i % 50 == 49 else "running" if i % 20 == 1 else
                 "infra_failed" if i % 33 == 2 else "done")
        if state != "waiting":
            write_run(make_cfg(root, task, agent, seed), state, template)
    results = Layout.from_paths(first.paths).results
    write_plan(results, "bench", "bench", [], [
        {"task": t, "agent": a, "driver": "none", "seed": s} for t, a, s in cells])
    return results


def timed(call) -> float:
    started = time.perf_counter()
    call()
    return round(time.perf_counter() - started, 3)


def fetch(url: str, cookie: str) -> bytes:
    request = urllib.request.Request(url, headers={"Cookie": cookie})
    with urllib.request.urlopen(request, timeout=120) as response:
        return response.read()


def measure(results: Path) -> dict:
    from a2rl.analysis import grid_status
    from a2rl.report import COOKIE, INDEX_FIGURES, make_server

    report: dict = {"runs": len(grid_status(results).cells)}
    report["status_s"] = timed(lambda: grid_status(results))
    report["status_cli_s"] = timed(lambda: subprocess.run(
        [sys.executable, "-m", "a2rl.pipeline.cli", "status", str(results), "--json"],
        check=True, capture_output=True))
    server = make_server(results, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = server.url.split("?")[0]
    cookie = f"{COOKIE}={server.url.split('token=')[1]}"
    status = grid_status(results)
    done = next(c for c in status.cells if c.state == "done")
    running = next(c for c in status.cells if c.state == "running")
    try:
        report["view_index_first_s"] = timed(lambda: fetch(base, cookie))
        report["view_index_again_s"] = timed(lambda: fetch(base, cookie))
        report["view_run_done_s"] = timed(lambda: fetch(f"{base}runs/{done.slug}.html", cookie))
        report["view_run_running_s"] = timed(
            lambda: fetch(f"{base}runs/{running.slug}.html", cookie))
        report["view_status_s"] = timed(lambda: fetch(f"{base}api/status", cookie))
        report["view_figures_s"] = timed(lambda: [fetch(f"{base}plots/{name}", cookie)
                                                  for name in INDEX_FIGURES])
    finally:
        server.shutdown()
        server.report.close()
    report["limit_s"] = 2.0
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--dir", type=Path, help="where to generate (default: a temporary "
                        "folder); an existing results/bench/ there is reused")
    parser.add_argument("--keep", action="store_true", help="keep the generated folder")
    parser.add_argument("--out", help="also write the JSON here")
    args = parser.parse_args()
    from a2rl.common import print_report

    root = args.dir or Path(tempfile.mkdtemp(prefix="a2rl-bench-status-"))
    try:
        results = root / "results" / "bench"
        started = time.perf_counter()
        if not (results / "grid.json").exists():
            generate(root, args.runs)
        generated_s = round(time.perf_counter() - started, 1)
        report = measure(results) | {"generated_s": generated_s, "folder": str(results)}
        print_report(report, args.out)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
