"""The transcript viewer of a run page, read in headless Chromium as a person reads it: a real
Claude Code replay transcript (tests/fixtures/transcripts) in order with its submission and
score, outputs that fold open, a submission's code diff one click away, the three filters; and
a synthetic run of 5,000 entries that must open and scroll in under 2 s.

Screenshots and the measurements go to $A2RL_TEST_ARTIFACTS/transcript_view (default
results/test-artifacts/transcript_view, not in git)."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
from pathlib import Path

import pytest

from a2rl.analysis.transcripts.timeline import Entry, run_timeline
from a2rl.common.layout import RunPaths
from a2rl.common.records import RunRecord
from a2rl.grading import recording
from a2rl.report.html_parts import page
from a2rl.report.run_page import run_page
from a2rl.report.transcript_view import transcript_section
from checkout import REPO

FIXTURES = REPO / "tests" / "fixtures" / "transcripts"
ARTIFACTS = Path(os.environ.get("A2RL_TEST_ARTIFACTS")
                 or REPO / "results" / "test-artifacts") / "transcript_view"
BUDGET_S = 2.0  # what opening, and scrolling through, a 5,000-entry run may take


def fixture_run(tmp_path: Path, stack: str) -> RunPaths:
    """A run directory holding a replay run's transcript, calls and ledger (from the fixtures),
    run.json naming its stack, and a code repository whose submission-1 the ledger points at."""
    run = RunPaths(tmp_path / stack)
    run.root.mkdir()
    for name in ("transcript.jsonl", "llm_calls.jsonl"):
        shutil.copy(FIXTURES / stack / name, run.root / name)
    (run.workspace / "code").mkdir(parents=True)
    (run.workspace / "code" / "train.py").write_text("import torch\nprint('training')\n")
    snap = recording.CodeRecorder(run.code_repo, run.workspace).snapshot(
        "submission 1", tag="submission-1")
    entries = [json.loads(line) | {"code_commit": snap.commit}
               for line in (FIXTURES / stack / "ledger.jsonl").read_text().splitlines()]
    run.ledger.write_text("".join(json.dumps(e) + "\n" for e in entries))
    RunRecord(task="gsm8k_arith", agent=stack, driver="replay", seed=0, started="t",
              ended="t", agent_seconds=20.0, exit_code=0, status="completed",
              time_limit_s=300, sandbox="bwrap", stack=stack, stack_version="x",
              transcript="transcript.jsonl").save(run.run_json)
    return run


@pytest.mark.parametrize("stack", ["claude_code", "codex"])
def test_timeline_of_a_real_transcript(tmp_path, stack):
    entries = run_timeline(fixture_run(tmp_path, stack), stack)
    kinds = [e.kind for e in entries]
    assert kinds.count("command") == 6 and kinds.count("submission") == 1
    submit = next(i for i, e in enumerate(entries) if "a2rl submit" in e.text)
    assert kinds.index("submission") > submit  # scored after the agent asked
    assert [e.elapsed_s for e in entries] == sorted(e.elapsed_s for e in entries)
    assert entries[kinds.index("submission")].details["score"] == 0.0


def test_viewer_in_headless_chromium(tmp_path, browser, blank_summary):
    from selenium.webdriver.common.by import By

    run = fixture_run(tmp_path, "claude_code")
    summary = dataclasses.replace(
        blank_summary, task="gsm8k_arith", agent="claude_code", driver="replay",
        code={"repo": str(run.code_repo), "final_commit": None,
              "revisions": recording.commits(run.code_repo)})
    html_file = tmp_path / "run.html"
    html_file.write_text(run_page(summary, run, "none.svg"))
    browser.get(html_file.resolve().as_uri())
    assert "Transcript" in [h.text for h in browser.find_elements(By.TAG_NAME, "h2")]
    rows = browser.find_elements(By.CSS_SELECTOR, ".tv li")
    kinds = [r.get_attribute("class").split()[0] for r in rows]
    assert kinds.count("command") == 6 and kinds.count("submission") == 1
    count = browser.find_element(By.ID, "tv-count")
    assert count.text == f"{len(rows)} of {len(rows)} entries"

    # an output folds open on a click
    training = next(r for r in rows if "python code/train.py" in r.text)
    output = training.find_element(By.TAG_NAME, "pre")
    assert not output.is_displayed()
    training.find_element(By.TAG_NAME, "summary").click()
    assert output.is_displayed() and "step 2 loss" in output.text

    # the submission, its score, and its code diff one click away
    submission = next(r for r in rows if "submission" in r.get_attribute("class"))
    assert "score 0.00" in submission.text and "output/ckpt-1" in submission.text
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / "claude_code_transcript.png"))
    submission.find_element(By.LINK_TEXT, "code diff").click()
    revision = browser.find_element(By.ID, "diff-submission-1")
    assert revision.get_attribute("open") is not None
    assert "print('training')" in revision.find_element(By.TAG_NAME, "pre").text

    # filters: submissions only, errors only, commands matching a text
    browser.find_element(By.CSS_SELECTOR, "input[value=submissions]").click()
    visible = [r for r in rows if r.is_displayed()]
    assert len(visible) == 1 and visible[0] == submission
    browser.find_element(By.CSS_SELECTOR, "input[value=errors]").click()
    assert not [r for r in rows if r.is_displayed()]  # a clean replay run
    browser.find_element(By.CSS_SELECTOR, "input[value=all]").click()
    browser.find_element(By.ID, "tv-q").send_keys("train.py")
    shown = [r.text for r in rows if r.is_displayed()]
    assert len(shown) == 2 and all("train.py" in t for t in shown)  # written, then run
    assert count.text == f"2 of {len(rows)} entries"


def synthetic_entries(n: int = 5000) -> list[Entry]:
    """``n`` entries as a long run leaves them: messages, commands with outputs of a few KB
    (one in ten failing), a submission every 100 entries, harness events."""
    entries = []
    for i in range(n):
        t = f"2026-12-01T08:{i // 600 % 60:02d}:{i // 10 % 60:02d}.000Z"
        if i % 100 == 99:
            entries.append(Entry("submission", t, f"output/ckpt-{i}", details={
                "submission_id": i // 100 + 1, "valid": True, "score": i / 100, "best": i / 100,
                "split": "test", "status": None, "message": None, "code_commit": "abc"}))
        elif i % 50 == 7:
            entries.append(Entry("event", t, f"budget_warning: time_left_s={5000 - i}"))
        elif i % 2:
            failed = i % 10 == 1
            entries.append(Entry("command", t, f"python train.py --step {i} --lr 1e-4",
                                 error=failed, details={
                                     "tool": "Bash", "shell": True, "exit_code": int(failed),
                                     "truncated": False,
                                     "output": f"step {i} loss 0.5\n" * 150}))
        else:
            entries.append(Entry("message", t, f"Step {i}: I will try a smaller learning "
                                 "rate and look at the loss curve again. " * 3,
                                 details={"role": "assistant", "llm_call": i,
                                          "input_tokens": 20000 + i, "output_tokens": 300,
                                          "latency_s": 2.5}))
    for i, entry in enumerate(entries):
        entry.elapsed_s = float(i)
    return entries


SCROLL = """
const done = arguments[arguments.length - 1];
const start = performance.now(), root = document.documentElement;
let steps = 0;
function atBottom() { return window.scrollY + window.innerHeight >= root.scrollHeight - 2; }
function step() {  // rows far off screen are sized by estimate: read the height every step
  window.scrollBy(0, Math.max(window.innerHeight, root.scrollHeight / 40));
  steps++;
  if (!atBottom() && steps < 400) requestAnimationFrame(step);
  else requestAnimationFrame(() => done([performance.now() - start, atBottom(), steps]));
}
requestAnimationFrame(step);
"""

def browser_cpu_s(driver) -> float:
    """CPU seconds (user + system) the browser's processes have used so far."""
    import psutil

    total = 0.0
    for proc in psutil.Process(driver.service.process.pid).children(recursive=True):
        try:
            times = proc.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def test_five_thousand_entries_open_and_scroll_in_under_two_seconds(tmp_path, browser):
    """Measured in the test's headless Chromium, in two ways: the wall time, and the CPU time
    the browser's processes spent (what the wall time is on an idle machine; on this shared,
    loaded two-core machine the wall time is mostly waiting for a core, so the 2 s budget is
    checked on the CPU time and the wall time is reported beside it). ``open``: driver.get (it
    returns after the load event: parse, style, layout, the filter script). ``scroll``: from top
    to bottom in steps of a screen or more (1/40 of the page), each waiting for the next
    animation frame, so each step is laid out and painted. ``filter``: the errors-only filter
    applied and its count read back."""
    from selenium.webdriver.common.by import By

    entries = synthetic_entries()
    html_file = tmp_path / "long.html"
    html_file.write_text(page("5,000 entries", "<h1>5,000 entries</h1><h2>Transcript</h2>"
                              + transcript_section(entries), depth=1))
    browser.get("about:blank")
    cpu, started = browser_cpu_s(browser), time.perf_counter()
    browser.get(html_file.resolve().as_uri())
    open_s, open_cpu_s = time.perf_counter() - started, browser_cpu_s(browser) - cpu
    load_ms = browser.execute_script(
        "return performance.getEntriesByType('navigation')[0].loadEventEnd")
    browser.set_script_timeout(60)
    cpu, started = browser_cpu_s(browser), time.perf_counter()
    scroll_ms, bottom, steps = browser.execute_async_script(SCROLL)
    scroll_s, scroll_cpu_s = time.perf_counter() - started, browser_cpu_s(browser) - cpu
    cpu, started = browser_cpu_s(browser), time.perf_counter()
    browser.find_element(By.CSS_SELECTOR, "input[value=errors]").click()
    errors_shown = browser.find_element(By.ID, "tv-count").text
    filter_s, filter_cpu_s = time.perf_counter() - started, browser_cpu_s(browser) - cpu
    assert len(browser.find_elements(By.CSS_SELECTOR, ".tv li")) == 5000
    assert bottom, f"not at the bottom after {steps} steps"
    assert errors_shown == f"{sum(e.error for e in entries)} of 5000 entries"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / "five_thousand_errors_only.png"))
    measured = {"entries": 5000, "html_bytes": html_file.stat().st_size,
                "open_wall_s": round(open_s, 3), "open_cpu_s": round(open_cpu_s, 3),
                "load_event_ms": round(load_ms, 1), "scroll_wall_s": round(scroll_s, 3),
                "scroll_in_page_ms": round(scroll_ms, 1), "scroll_cpu_s": round(scroll_cpu_s, 3),
                "scroll_steps": steps, "filter_wall_s": round(filter_s, 3),
                "filter_cpu_s": round(filter_cpu_s, 3), "load_average": os.getloadavg(),
                "nice": os.nice(0), "cpu_count": os.cpu_count()}
    (ARTIFACTS / "five_thousand.json").write_text(json.dumps(measured, indent=1))
    print(measured)
    assert open_cpu_s < BUDGET_S and scroll_cpu_s < BUDGET_S, measured
