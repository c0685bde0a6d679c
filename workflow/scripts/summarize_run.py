"""Rule summarize_run: run a2rl.pipeline.stages.summarize_run on the job's composed config."""

from a2rl.pipeline.cli import run_stage

run_stage("summarize_run", snakemake.params.overrides,  # noqa: F821 (set by Snakemake)
          log_path=snakemake.log[0],  # noqa: F821
          expect=[snakemake.output.json, snakemake.output.md])  # noqa: F821
