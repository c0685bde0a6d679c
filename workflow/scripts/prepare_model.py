"""Rule prepare_model: the base model folder from its config (the job's params.model)."""

from a2rl.pipeline import run_prepare_model

run_prepare_model(snakemake.params.model, snakemake.output.model,  # noqa: F821 (set by Snakemake)
                  log_path=snakemake.log[0])  # noqa: F821
