"""Rule measure_baseline: run a2rl.pipeline.stages.measure_baseline on the job's composed config."""

from a2rl.pipeline import run_stages

run_stages(["measure_baseline"], snakemake.params.overrides,  # noqa: F821 (set by Snakemake)
           log_path=snakemake.log[0], expect=[snakemake.output.baseline])  # noqa: F821
