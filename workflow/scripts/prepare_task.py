"""Snakemake adapter of rule prepare_task: compose the job's config, run a2rl.stages.prepare_task."""

from a2rl.cli import run_stage

snakemake = snakemake  # noqa: F821 (injected by Snakemake)
run_stage("prepare_task", snakemake.params.overrides, log_path=snakemake.log[0],
          expect=[snakemake.output.manifest])
