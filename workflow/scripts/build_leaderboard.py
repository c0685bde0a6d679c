"""Snakemake adapter of rule build_leaderboard: aggregate the grid's run summaries."""

from pathlib import Path

from a2rl.cli import run_leaderboard

snakemake = snakemake  # noqa: F821 (injected by Snakemake)
run_leaderboard(snakemake.params.overrides,
                [Path(summary).parent for summary in snakemake.input.summaries],
                log_path=snakemake.log[0])
