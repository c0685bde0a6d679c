"""Snakemake adapter of rule summarize_run: compose the job's config, run a2rl.stages.summarize_run."""

from a2rl.cli import run_stage

snakemake = snakemake  # noqa: F821 (injected by Snakemake)
run_stage("summarize_run", snakemake.params.overrides, log_path=snakemake.log[0],
          expect=[snakemake.output.json, snakemake.output.md])
