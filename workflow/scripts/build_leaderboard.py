"""Rule build_leaderboard: aggregate the grid's run summaries into results/leaderboard.*."""

from pathlib import Path

from a2rl.pipeline import run_leaderboard

run_leaderboard(snakemake.params.overrides,  # noqa: F821 (set by Snakemake)
                [Path(summary).parent for summary in snakemake.input.summaries],  # noqa: F821
                log_path=snakemake.log[0])  # noqa: F821
