"""The static report at a laptop's width: a leaderboard with many agents and columns scrolls
inside its own box instead of pushing the page past the window's right edge (headless
Chromium at 1,400 px), and the per-task bar charts list agents in one order."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from a2rl.common.layout import Layout, RunPaths
from a2rl.report import build_report
from a2rl.report.plots import bar_rows

AGENTS = ["sft", "noop", "grpo", "dpo", "sft_grpo", "claude_code_with_a_long_name"]


def test_bar_charts_list_agents_in_one_order_whatever_the_scores():
    board = pd.DataFrame([
        {"task": "a", "agent": "sft", "driver": "none", "final_mean": 50.0},
        {"task": "a", "agent": "noop", "driver": "none", "final_mean": 10.0},
        {"task": "b", "agent": "noop", "driver": "none", "final_mean": 60.0},
        {"task": "b", "agent": "sft", "driver": "none", "final_mean": 5.0},
        {"task": "b", "agent": "codex", "driver": "gpt", "final_mean": 7.0}])
    assert list(bar_rows(board, "a")["agent"]) == ["noop", "sft"]
    assert list(bar_rows(board, "b")["agent"]) == ["codex", "noop", "sft"]


def test_a_wide_leaderboard_scrolls_in_its_box_not_the_page(tmp_path, blank_summary, browser):
    layout = Layout(tmp_path / "results", tmp_path / "resources")
    roots = []
    for task in ("gsm8k_arith", "household", "alpacaeval_local"):
        for i, agent in enumerate(AGENTS):
            summary = replace(blank_summary, task=task, agent=agent, baseline=10.0,
                              final_score=10.0 + 7 * i, improvement=7.0 * i)
            root = layout.run(task, agent, "none", 0).root
            summary.save(RunPaths(root).summary_json)
            roots.append(root)
    index = build_report(roots, layout)
    browser.set_window_size(1400, 1200)
    try:
        browser.get(index.resolve().as_uri())
        page, window = browser.execute_script(
            "return [document.documentElement.scrollWidth, window.innerWidth]")
        box = browser.execute_script(
            "var t = document.querySelector('table.leaderboard'); var b = t.parentElement;"
            "return [b.className, b.scrollWidth, b.clientWidth, t.getBoundingClientRect().width]")
    finally:
        browser.set_window_size(1280, 1600)
    assert page <= window, f"the page is {page} px wide in a {window} px window"
    assert box[0] == "wide" and box[1] >= box[2]  # the box holds the table; it scrolls if wider
