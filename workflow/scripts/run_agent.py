"""Rule run_agent: run a2rl.pipeline.stages.run_agent on the job's composed config."""

from a2rl.pipeline.cli import run_stage

run_stage("run_agent", snakemake.params.overrides,  # noqa: F821 (set by Snakemake)
          log_path=snakemake.log[0], expect=[snakemake.output.run])  # noqa: F821
