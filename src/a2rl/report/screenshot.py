"""Screenshots of report pages with headless Chromium (Debian: chromium), as a person sees them.

    a2rl report --screenshots results/report/screenshots    # builds the report, then PNGs

The browser runs with --no-sandbox (needed as root), no GPU, no network services, and a
throw-away profile.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Optional

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "chrome")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run", "--disable-sync",
         "--disable-extensions", "--hide-scrollbars", "--allow-file-access-from-files"]


class BrowserUnavailable(RuntimeError):
    """No headless Chromium on this machine (Debian: apt-get install chromium)."""


def find_browser() -> str:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    raise BrowserUnavailable("no chromium found on PATH; install it (Debian: apt-get install "
                             "chromium chromium-driver)")


def screenshot(page: Path, out: Path, width: int = 1280, height: int = 1600,
               browser: Optional[str] = None, timeout_s: float = 90) -> Path:
    """A PNG of ``page`` (an HTML file) at ``width`` x ``height`` pixels."""
    page, out = Path(page).resolve(), Path(out).resolve()
    if not page.is_file():
        raise FileNotFoundError(f"no page at {page}; build the report first (a2rl report)")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="a2rl-chromium-") as profile:
        argv = [browser or find_browser(), *FLAGS, f"--user-data-dir={profile}",
                f"--screenshot={out}", f"--window-size={width},{height}", page.as_uri()]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s,
                                check=False)
    if result.returncode != 0 or not out.is_file():
        raise RuntimeError(f"chromium could not screenshot {page} ({result.returncode}): "
                           f"{result.stderr[-2000:]}")
    return out


def pick_run_page(report: Path, prefer: str = "sft") -> Optional[Path]:
    """A run page to show: the first whose agent is ``prefer``, else the first."""
    pages = sorted((Path(report) / "runs").glob("*.html"))
    chosen = [p for p in pages if f"__{prefer}__" in p.name]
    return (chosen or pages or [None])[0]


def screenshot_report(report: Path, out: Path, run: Optional[str] = None) -> list[Path]:
    """leaderboard.png (index.html) and run.png (the run page ``run``, a file name under
    runs/, else the sft run's or the first) of the report folder ``report``."""
    report = Path(report)
    shots = [screenshot(report / "index.html", Path(out) / "leaderboard.png", height=1400)]
    page = report / "runs" / run if run else pick_run_page(report)
    if page is not None:
        shots.append(screenshot(page, Path(out) / "run.png", height=3000))
    return shots
