"""Rule run_agent: run a2rl.pipeline.stages.run_agent on the job's composed config.

A harness failure (InfraFailed: run.json says infra_failed) fails the job so that Snakemake
retries it (the rule's ``retries``); on the last attempt the infra_failed run.json is kept as
the job's output, and the cell goes on to its summary."""

from a2rl.pipeline.cli import run_stages
from a2rl.pipeline.runner import InfraFailed

try:
    run_stages(["run_agent"], snakemake.params.overrides,  # noqa: F821 (set by Snakemake)
               log_path=snakemake.log[0], expect=[snakemake.output.run])  # noqa: F821
except InfraFailed:
    if snakemake.resources.a2rl_attempt <= snakemake.params.infra_retries:  # noqa: F821
        raise
