"""Rule run_cell: the cell's agent run, then its final grade, model export and summary, in one
job (a2rl.pipeline.cell.run_cell). A retry keeps an agent run that finished (only the stages
after it run again) and runs the agent again only after a harness failure (infra_failed)."""

from pathlib import Path

from a2rl.pipeline import run_cell

job = snakemake  # noqa: F821 (set by Snakemake)
run_cell(job.params.overrides, Path(job.params.run_json), job.input,
         attempt=job.resources.a2rl_attempt, infra_retries=job.params.infra_retries,
         expect=job.output, agent_log=job.log.agent, finish_log=job.log.finish)
