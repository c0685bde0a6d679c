"""Rule final_grade: run a2rl.pipeline.stages.final_grade on the job's composed config."""

from a2rl.pipeline.cli import run_stage

run_stage("final_grade", snakemake.params.overrides,  # noqa: F821 (set by Snakemake)
          log_path=snakemake.log[0], expect=[snakemake.output.final])  # noqa: F821
