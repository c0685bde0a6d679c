"""Progress of the harness's long steps (a task's preparation, the base model's conversion, an
evaluation's generations and episodes, a judge pass): items done of the total, the rate and an
estimate of the time left, through tqdm, on stderr, which is the job's log under Snakemake
(``a2rl.pipeline.cli.log_output``).

On a terminal it is tqdm's bar as usual. Anywhere else (a job's log file, a pipe) a bar's
redraws would fill the log, so there each report is a line of its own, at most one every
``LOG_EVERY_S`` seconds, and none at all for a step that ends within ``QUIET_S`` seconds (a
household episode's step, a twin's few items): a log gets a handful of lines per long step.
``a2rl status`` shows the last of them as a preparing or grading cell's detail.
``A2RL_PROGRESS=0`` turns it off.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import Any, Optional, TextIO

from tqdm import tqdm

LOG_EVERY_S = 30.0
QUIET_S = 5.0


class LogLines:
    """tqdm's output for a file that is not a terminal: each report on a line of its own
    (tqdm starts a redraw with a carriage return and pads it with spaces)."""

    def __init__(self, stream: TextIO):
        self.stream = stream

    def write(self, text: str) -> None:
        text = text.replace("\r", "").rstrip()
        if text:
            self.stream.write(text + "\n")

    def flush(self) -> None:
        self.stream.flush()


def progress(iterable: Optional[Iterable] = None, *, total: Optional[int] = None, desc: str,
             unit: str = "item", stream: Optional[TextIO] = None,
             leave: bool = True, every_s: Optional[float] = None,
             quiet_s: Optional[float] = None) -> tqdm:
    """A tqdm bar for one long step, set for a terminal or for a log (see the module doc);
    use it as tqdm (iterate it, or ``update(n)`` and ``close()``, or ``with``). ``leave``
    false: a terminal's bar is cleared at the end (a step inside another's, such as one
    generation call of an episode's step). ``every_s``, ``quiet_s``: a log's report interval
    and quiet start (default LOG_EVERY_S, QUIET_S)."""
    stream = stream or sys.stderr
    terminal = hasattr(stream, "isatty") and stream.isatty()
    options: dict[str, Any] = (
        {"file": stream, "mininterval": 0.5, "delay": 1.0, "dynamic_ncols": True}
        if terminal else
        {"file": LogLines(stream), "mininterval": LOG_EVERY_S if every_s is None else every_s,
         "maxinterval": LOG_EVERY_S if every_s is None else every_s,
         "delay": QUIET_S if quiet_s is None else quiet_s, "ascii": True, "ncols": 100})
    return tqdm(iterable, total=total, desc=desc, unit=unit, leave=leave,
                disable=os.environ.get("A2RL_PROGRESS") == "0", **options)
