"""What the reference agents share: the grader's status, logging, and planning against the
deadline (as a user would: from the measured speed of their own first steps, keeping time to
submit, so a run always ends with a valid submission on a slow machine too).

``reserve_s`` (the agent's settings, settings.py; 45 s by default): seconds kept free before the
end of the budget to save and submit a model.
"""

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

STARTED = time.time()


def log(who, message):
    print(f"[{who}-agent {time.strftime('%H:%M:%S')}] {message}", flush=True)


def status():
    out = subprocess.run(["a2rl", "status"], capture_output=True, text=True, check=False)
    try:
        return json.loads(out.stdout) if out.returncode == 0 else {}
    except ValueError:
        return {}


def time_left():
    """Seconds left in the budget: the grader's word, else the limit minus time since start."""
    fallback = float(os.environ.get("A2RL_TIME_LIMIT_S", "0")) - (time.time() - STARTED)
    return float(status().get("time_left_s", fallback))


def deadline(reserve_s):
    """Unix time by which training must end: the budget's end less ``reserve_s``."""
    return time.time() + time_left() - reserve_s


def run_until(cmd, until, cwd, reserve_s):
    """Run ``cmd``; kill it (and its children) if it is still running at ``until`` plus half the
    reserve. Returns the exit code, or None when it was killed for time."""
    proc = subprocess.Popen(cmd, cwd=cwd, start_new_session=True)
    try:
        return proc.wait(timeout=max(1.0, until - time.time() + reserve_s / 2))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return None


def submit(who, folder):
    """Submit ``folder``; returns whether the grader accepted it (logged either way)."""
    answer = subprocess.run(["a2rl", "submit", str(folder)], capture_output=True, text=True,
                            check=False)
    log(who, f"submitted {Path(folder).name}: {answer.stdout.strip()} {answer.stderr.strip()}")
    return answer.returncode == 0


def submit_base_model(who, ws, why):
    """The fallback that keeps a run valid when no training step fitted: the base model."""
    target = Path(ws) / "output" / "base"
    if not target.exists():
        shutil.copytree(Path(ws) / "base_model", target)
    log(who, f"{why}: submitting the base model so that the run has a valid submission")
    return submit(who, target)


class Rounds:
    """The training rounds an agent submits; at the end, the base model when none was, so that
    the run has a valid submission."""

    def __init__(self, who, ws):
        self.who, self.ws, self.submitted = who, ws, 0
        self.last = None  # the last model the grader took (the next round starts from it)

    def submit(self, out, report):
        """Submit a round's model; whether another round may follow (the grader took it and
        the round was not cut by the deadline)."""
        if not submit(self.who, out):
            return False
        self.submitted, self.last = self.submitted + 1, str(out)
        return not report.get("stopped")

    def skip(self, k, why):
        """Say why round ``k`` and the ones after it are not trained."""
        log(self.who, f"skipping round {k} and after: {why}")

    def finish(self, why="no trained checkpoint was submitted"):
        if not self.submitted:
            submit_base_model(self.who, self.ws, why)
        return 0


def training_report(folder):
    """The training report the SFT script leaves in its output folder (None if absent)."""
    path = Path(folder) / "train_log.json"
    return json.loads(path.read_text()) if path.exists() else None


def run_round(who, cmd, until, ws, out, reserve_s):
    """Run a training round's script until ``until``; its report (steps done, step time), or
    None when it failed or was still running at the deadline (logged)."""
    code = run_until(cmd, until, Path(ws) / "code", reserve_s)
    report = training_report(out) if code == 0 else None
    if code is None:
        log(who, f"training was still running at the deadline and was stopped ({Path(out).name})")
    elif report is None:
        log(who, f"training failed (exit code {code})")
    elif report.get("stopped"):
        log(who, f"{Path(out).name}: stopped early by the {report['stopped']}"
            + (f" ({report['step_s']:.1f}s a step)" if report.get("step_s") else ""))
    return report
