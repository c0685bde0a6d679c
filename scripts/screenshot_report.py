"""Screenshots of the HTML report as a person sees it, with headless Chromium (Debian packages
chromium and chromium-driver; scripts/setup.sh installs them).

    a2rl report                                   # build results/report/ first
    python scripts/screenshot_report.py           # -> results/report/screenshots/*.png
    python scripts/screenshot_report.py --report results/report --out /tmp/shots \
        --run gsm8k_arith__sft__none__seed0.html

Writes leaderboard.png (index.html) and run.png (the run page given by --run, else the sft
run's, else the first).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from a2rl.report.screenshot import screenshot_report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--report", type=Path, default=Path("results/report"),
                        help="the report folder (default: results/report)")
    parser.add_argument("--out", type=Path, default=None,
                        help="where the PNGs go (default: REPORT/screenshots)")
    parser.add_argument("--run", default=None,
                        help="file name of the run page to capture, under REPORT/runs/")
    args = parser.parse_args(argv)
    for path in screenshot_report(args.report, args.out or args.report / "screenshots",
                                  args.run):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
