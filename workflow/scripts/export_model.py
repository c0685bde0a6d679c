"""Rule export_model: run a2rl.pipeline.stages.export_model on the job's composed config."""

from a2rl.pipeline.cli import run_stage

run_stage("export_model", snakemake.params.overrides,  # noqa: F821 (set by Snakemake)
          log_path=snakemake.log[0], expect=[snakemake.output.model])  # noqa: F821
