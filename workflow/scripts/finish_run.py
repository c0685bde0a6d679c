"""Rule finish_run: the stages after a run, in one job (a cell is two jobs, its run and this,
which halves what Snakemake plans for a grid): a2rl.pipeline.stages.final_grade (final.json),
export_model (the selected model under results/models/) and summarize_run (summary.json,
summary.md, integrity.json) on the job's composed config."""

from a2rl.pipeline.cli import run_stages

run_stages(["final_grade", "export_model", "summarize_run"],
           snakemake.params.overrides,  # noqa: F821 (set by Snakemake)
           log_path=snakemake.log[0], expect=snakemake.output)  # noqa: F821
