"""Rule build_report: the static HTML report of the grid's runs (results/report/)."""

from pathlib import Path

from a2rl.pipeline import run_report

run_report(snakemake.params.overrides,  # noqa: F821 (set by Snakemake)
           [Path(summary).parent for summary in snakemake.input.summaries],  # noqa: F821
           log_path=snakemake.log[0], leaderboard=False)  # noqa: F821
