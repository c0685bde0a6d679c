"""A real grader process over a rig's folder (grader_rig.Rig), for the fault tests: run as
``python grader_process.py TMP TINY_MODEL MODE``, it serves until it is killed and writes
TMP/ready once it answers. MODE ``slow`` evaluates by writing TMP/evaluating and then waiting
(so a test can kill it mid-evaluation); ``fast`` renders the chat template as the rig does."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from grader_rig import Rig, render_template


def slow(flag: Path):
    def evaluate(model_dir: Path):
        flag.write_text("evaluating")
        time.sleep(300)
        return render_template(model_dir)
    return evaluate


def main(tmp: Path, tiny: Path, mode: str) -> None:
    rig = Rig(tmp, tiny, evaluate=slow(tmp / "evaluating") if mode == "slow" else render_template)
    rig.server.start()
    (tmp / "ready").write_text(rig.server.url)
    while True:
        time.sleep(1)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3])
