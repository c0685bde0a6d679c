"""Snakemake adapter of rule measure_baseline: compose the job's config, run a2rl.stages.measure_baseline."""

from a2rl.cli import run_stage

snakemake = snakemake  # noqa: F821 (injected by Snakemake)
run_stage("measure_baseline", snakemake.params.overrides, log_path=snakemake.log[0],
          expect=[snakemake.output.baseline])
