"""Rule prepare_model: run a2rl.pipeline.stages.prepare_model on the job's composed config."""

from a2rl.pipeline import run_stages

run_stages(["prepare_model"], snakemake.params.overrides,  # noqa: F821 (set by Snakemake)
           log_path=snakemake.log[0], expect=[snakemake.output.model])  # noqa: F821
