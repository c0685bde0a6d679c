"""The screenshots of docs/reports.md's "Watching a running grid": the live view's index (PNG,
headless Chromium through Selenium) and `a2rl status --watch` (a tmux capture, text) of a
results folder while a cell runs.

    python experiments/watch_screenshots/take.py RESULTS [--png docs/img/live-view.png]
        [--run-png docs/img/live-run.png] [--text docs/img/status-watch.txt]

Start a cell first, e.g. `a2rl run grid=ci task=gsm8k_arith agent=sft ...`, and run this while
its agent trains.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path


def live_png(results: Path, out: Path, run_out: Path, width: int = 1280,
             height: int = 1000) -> None:
    """The live index at ``out`` and the first running cell's page at ``run_out``."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    from a2rl.report import make_server

    server = make_server(results, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    os.environ.setdefault("SE_OFFLINE", "true")
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu",
                 f"--window-size={width},{height}", "--hide-scrollbars"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    try:
        driver.get(server.url)
        time.sleep(3)  # the figures arrive after the page
        out.parent.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(out))
        running = next(c for c in server.report.status().cells if c.state == "running")
        driver.get(server.url.split("?")[0] + f"runs/{running.slug}.html")
        time.sleep(3)
        driver.execute_script("document.getElementById('outcome').scrollIntoView()")
        driver.save_screenshot(str(run_out))
    finally:
        driver.quit()
        server.shutdown()
        server.report.close()


def watch_text(results: Path, out: Path, width: int = 200, height: int = 14) -> None:
    """`a2rl status RESULTS --watch` in a detached tmux session, captured after a redraw."""
    session = f"a2rl-watch-{os.getpid()}"
    command = f"{sys.executable} -m a2rl.pipeline.cli status {results} --watch"
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", str(width), "-y",
                    str(height), command], check=True, env=os.environ)
    try:
        time.sleep(8)
        text = subprocess.run(["tmux", "capture-pane", "-p", "-t", session], check=True,
                              capture_output=True, text=True).stdout
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text.rstrip() + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--png", type=Path, default=Path("docs/img/live-view.png"))
    parser.add_argument("--run-png", type=Path, default=Path("docs/img/live-run.png"))
    parser.add_argument("--text", type=Path, default=Path("docs/img/status-watch.txt"))
    args = parser.parse_args()
    watch_text(args.results, args.text)
    live_png(args.results, args.png, args.run_png)
    print(args.text, args.png, args.run_png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
