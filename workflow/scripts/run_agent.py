"""Snakemake adapter of rule run_agent: compose the job's config, run a2rl.stages.run_agent."""

from a2rl.cli import run_stage

snakemake = snakemake  # noqa: F821 (injected by Snakemake)
run_stage("run_agent", snakemake.params.overrides, log_path=snakemake.log[0],
          expect=[snakemake.output.run])
