"""One Snakemake job per cell (rule run_cell, workflow/rules/run.smk): the agent's run, then the
stages after it (final grade, model export, summary).

Snakemake's planning costs about the same per job whatever the job does, so a cell is one job,
which halves what planning a grid costs against a job for the run and one for the rest. Yet a
failure after the run (the final grade, the export or the summary) must never run a 12-hour
agent again, and only the harness's own failures of the agent (run.json ``infra_failed``) may
be run again. So the job resumes: an agent run already finished in the run directory is kept
and only the stages after it run. Snakemake deletes a failed job's declared outputs before its
retry, which is why run.json is not one of them (the rule's outputs are what the later stages
write): a finished run survives the failure of the stages after it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from a2rl.common.records import RunRecord

AGENT_STAGE = "run_agent"
# the stages after the agent's run, in order
FINISH_STAGES = ("final_grade", "export_model", "summarize_run")


def finished_run(run_json: Path, inputs: Iterable[os.PathLike | str]) -> RunRecord | None:
    """The agent run recorded in ``run_json`` when it is finished and still current, else None
    (run the agent). Finished: any status but ``infra_failed`` (an agent's own failure or
    exhausted budget is a result). Current: written after every one of the job's ``inputs``
    (base model, prepared data, baseline) last changed, as Snakemake judges outputs by mtime;
    a newer input means the run used an older one."""
    if not run_json.exists():
        return None
    record = RunRecord.load(run_json)
    if record.status == "infra_failed":
        return None
    written = run_json.stat().st_mtime
    if any(Path(path).stat().st_mtime > written for path in inputs):
        return None
    return record


def run_cell(overrides: Sequence[str], run_json: Path, inputs: Iterable[os.PathLike | str],
             attempt: int, infra_retries: int, expect: Iterable[os.PathLike | str],
             agent_log: str | None = None, finish_log: str | None = None) -> None:
    """The agent's run (logged to ``agent_log``) unless a finished one is there
    (``finished_run``), then the stages after it (``finish_log``). A harness failure of the agent
    (InfraFailed) fails the job, so that Snakemake retries it, while attempts are left
    (``attempt`` <= ``infra_retries``); the last attempt keeps the infra_failed run.json and
    finishes the cell with it. Two logs, so that a retry that keeps the run keeps its log."""
    from a2rl.pipeline.jobs import run_stages
    from a2rl.pipeline.runner import InfraFailed

    kept = finished_run(run_json, inputs)
    if kept is None:
        try:
            run_stages([AGENT_STAGE], overrides, log_path=agent_log, expect=[run_json])
        except InfraFailed:
            if attempt <= infra_retries:
                raise
    else:
        # on the job's stderr: Snakemake shows it with the job
        print(f"run_cell: kept the finished agent run in {run_json} (status {kept.status}, "
              f"started {kept.started}); running {', '.join(FINISH_STAGES)}", file=sys.stderr)
    run_stages(list(FINISH_STAGES), overrides, log_path=finish_log, expect=expect)
