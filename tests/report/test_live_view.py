"""``a2rl view``'s pages follow a running run (a2rl.report.live), on run folders written by the
harness's own writers and, for an LLM agent, the codex CLI's recorded transcript
(tests/fixtures/transcripts/codex) as it grows in the agent folder: a page's stamp changes when
its files do, and the page drawn again shows the new submission or transcript lines. The
browser side (the page swapping in its new body) is tests/report/test_live_grid.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from a2rl.config.types import AgentConfig, PathsConfig, RunConfig, TaskConfig
from a2rl.grading.ledger import Ledger
from a2rl.report.live import LiveReport
from checkout import REPO
from live_runs import started_run

CODEX = REPO / "tests" / "fixtures" / "transcripts" / "codex"
TASK = "gsm8k_arith"
SLUG = f"{TASK}__codex__replay__seed0"
PAGE = f"/runs/{SLUG}.html"


@pytest.fixture
def running(tmp_path):
    """A codex cell whose agent has started: config.json, the agent's start, no run.json."""
    cfg = RunConfig(task=TaskConfig(id=TASK, package="gsm8k", level="L1"),
                    agent=AgentConfig(name="codex", kind="llm", network="llm", command=[],
                                      stack="codex", version="0.0.0"),
                    paths=PathsConfig(root=str(tmp_path), results="results/ci"))
    cfg.driver.name = "replay"
    cfg.budget.time_limit_s = 300
    run, events = started_run(cfg)
    report = LiveReport(tmp_path / "results" / "ci")
    yield run, events, report
    report.close()


def test_a_new_submission_changes_the_stamp_and_shows_on_the_page(running):
    run, events, report = running
    before, page = report.stamp(PAGE), report.page(PAGE)
    assert "No submissions." in page and "running" in page
    assert report.stamp(PAGE) == before and report.page(PAGE) is page  # drawn once
    entry = Ledger(run.ledger).append(
        elapsed_s=12.5, model_path="output/ckpt-7", status_code=200, valid=True, error=None,
        score=42.0, best=42.0, baseline=10.0, improvement=32.0, cached=False, stderr=1.0,
        n=16, split="test", artifact_hash="ab" * 32, equals_base=False)
    events.emit("submission", submission_id=entry.submission_id, valid=True, score=42.0)
    assert report.stamp(PAGE) != before
    page = report.page(PAGE)
    assert "output/ckpt-7" in page and "42.00" in page and "No submissions." not in page


def test_a_running_llm_agents_transcript_shows_as_its_cli_writes_it(running):
    run, _, report = running
    lines = (CODEX / "transcript.jsonl").read_text().splitlines(keepends=True)
    shutil.copy(CODEX / "llm_calls.jsonl", run.llm_calls)
    native = run.agent_files / "transcript.jsonl"  # where the codex CLI's output is teed
    native.write_text("".join(lines[:6]))
    first = report.page(PAGE)
    assert 'id="transcript"' in first
    stamp = report.stamp(PAGE)
    native.write_text("".join(lines))  # the CLI wrote on
    assert report.stamp(PAGE) != stamp
    later = report.page(PAGE)
    assert later.count("<li class=") > first.count("<li class=")
    assert native.read_text() == "".join(lines)  # read, never taken: the CLI still owns it
    assert not run.transcript.exists()
    # the copy the page was drawn from is the server's own, not a file it serves
    assert report.static_file(f"/plots/{SLUG}.transcript.jsonl") is None
    assert report.static_file(f"/plots/{SLUG}.svg") is not None


def test_a_script_agent_has_no_transcript_section(tmp_path):
    cfg = RunConfig(task=TaskConfig(id=TASK, package="gsm8k", level="L1"),
                    agent=AgentConfig(name="sft", command=["{python}", "x.py"]),
                    paths=PathsConfig(root=str(tmp_path), results="results/ci"))
    started_run(cfg)
    report = LiveReport(tmp_path / "results" / "ci")
    try:
        page = report.page(f"/runs/{TASK}__sft__none__seed0.html")
    finally:
        report.close()
    assert page is not None and 'id="transcript"' not in page
    assert Path(report.figures).exists() is False
