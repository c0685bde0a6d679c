"""Snakemake adapter of rule final_grade: compose the job's config, run a2rl.stages.final_grade."""

from a2rl.cli import run_stage

snakemake = snakemake  # noqa: F821 (injected by Snakemake)
run_stage("final_grade", snakemake.params.overrides, log_path=snakemake.log[0],
          expect=[snakemake.output.final])
