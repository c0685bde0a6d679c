"""Watching a real cell while it runs: one ci-grid cell (gsm8k_arith, the sft reference agent in
three short rounds, a submission after each) runs in the background through ``a2rl run``, and
while it runs ``a2rl status --json`` sees its elapsed time and submissions advance, and
``a2rl view`` in headless Chromium shows a submission arrive on the run page without a reload.
One cell serves the module, stopped once both have seen what they look for (about three
minutes on two shared cores, most of it the cell's preparation and training rounds); a finished
cell's ``done`` is tested on run folders in tests/analysis/test_status.py."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from a2rl.isolation.quota import unmount_below
from a2rl.isolation.workspace import make_writable
from checkout import FIXTURE_DATA, REPO, child_env

pytestmark = pytest.mark.integration

TASK = "gsm8k_arith"
SLUG = f"{TASK}__sft__none__seed0"
WAIT_S = 420  # a loaded machine's imports and training rounds; the limit only catches a hang
# three rounds of a few steps each, room for all three in the budget
OVERRIDES = ["grid=ci", f"task={TASK}", "agent=sft", "budget.time_limit_s=300",
             "++agent.settings.sft.max_rounds=3", "++agent.settings.sft.steps=4",
             "++agent.settings.sft.reserve_s=30"]


def a2rl(*args: str) -> list[str]:
    """The ``a2rl`` command of this interpreter's environment."""
    return [sys.executable, "-m", "a2rl.pipeline.cli", *args]


def wait_for(check, what: str, timeout: float = WAIT_S, every: float = 1.0):
    """``check()``'s first truthy value, polled; fails the test naming ``what``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")


class LiveCell:
    def __init__(self, root: Path):
        self.root = root
        self.results = root / "results" / "ci"
        self.run = self.results / "runs" / TASK / "sft" / "none" / "seed0"
        self.log = root / "a2rl-run.log"
        self.cell = subprocess.Popen(
            a2rl("run", *OVERRIDES, f"paths.root={root}", f"paths.data={FIXTURE_DATA}"),
            cwd=root, env=child_env(), stdout=self.log.open("w"), stderr=subprocess.STDOUT,
            start_new_session=True)
        self.view: subprocess.Popen | None = None
        self.url = ""

    def status(self) -> dict:
        """The cell's row of ``a2rl status --json``."""
        result = subprocess.run(a2rl("status", str(self.results), "--json"), cwd=REPO,
                                env=child_env(), capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr[-2000:]
        return next(c for c in json.loads(result.stdout)["cells"] if c["slug"] == SLUG)

    def running(self) -> bool:
        if self.cell.poll() is not None:
            pytest.fail(f"the cell ended early ({self.cell.returncode}): "
                        f"{self.log.read_text()[-3000:]}")
        return True

    def start_view(self) -> str:
        self.view = subprocess.Popen(a2rl("view", str(self.results), "--port", "0"), cwd=REPO,
                                     env=child_env(), stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True)
        line = self.view.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:\d+/\?token=\S+", line)
        assert found, line
        self.url = found.group(0)
        return self.url

    def stop(self) -> None:
        if self.view is not None:
            os.killpg(self.view.pid, signal.SIGINT)
            self.view.wait(timeout=30)
        # the checks are done: the cell's end (final grade, summary) is not waited for; it
        # is stopped as Ctrl-C stops it, so that the harness's own clean-up runs
        if self.cell.poll() is None:
            os.killpg(self.cell.pid, signal.SIGINT)
            try:
                self.cell.wait(timeout=90)
            except subprocess.TimeoutExpired:
                os.killpg(self.cell.pid, signal.SIGKILL)
                self.cell.wait(timeout=60)
        # and what a harness killed outright would leave: its loop disk mounted, read-only
        # folders (the runner's own remedy for a run folder it starts again)
        unmount_below(self.root)
        make_writable(self.root)


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    cell = LiveCell(tmp_path_factory.mktemp("live"))
    try:
        wait_for(lambda: cell.running() and (cell.run / "events.jsonl").exists(),
                 "the run folder")
        cell.start_view()
        yield cell
    finally:
        cell.stop()


def submissions(row: dict) -> int:
    return row["valid"] + row["invalid"]


def test_status_sees_the_running_cell_advance(live):
    first = wait_for(lambda: live.running() and (row := live.status())["state"] == "running"
                     and row, "the cell's agent to start")
    second = wait_for(lambda: live.running() and submissions(row := live.status())
                      > submissions(first) and row, "a submission after the first reading")
    assert second["state"] == "running", second  # read while it runs
    assert second["elapsed_s"] > first["elapsed_s"], (first, second)
    assert second["budget_s"] == 300 and second["last_event"] is not None
    assert second["best"] is not None and second["cost_usd"] == 0.0


def test_view_shows_a_submission_arrive_without_a_reload(live, browser):
    from selenium.webdriver.common.by import By

    rows = "//h2[@id='submissions']/following-sibling::*[1]//tbody/tr"
    browser.get(live.url)  # the token becomes the page's cookie
    assert browser.find_element(By.ID, "cells")
    browser.get(live.url.split("?")[0] + f"runs/{SLUG}.html")
    assert browser.title.startswith(f"{TASK} · sft")
    before = len(browser.find_elements(By.XPATH, rows))
    plot = browser.find_element(By.CSS_SELECTOR, "#trajectory + figure img").get_attribute("src")
    browser.execute_script("window.a2rlMarker = 'the same page';")  # gone on a reload
    wait_for(lambda: live.running() and len(browser.find_elements(By.XPATH, rows)) > before,
             "a new submission row on the open page", every=2)
    assert browser.execute_script("return window.a2rlMarker") == "the same page"
    new_plot = browser.find_element(By.CSS_SELECTOR, "#trajectory + figure img")
    assert new_plot.get_attribute("src") != plot  # the best-so-far curve was drawn again

