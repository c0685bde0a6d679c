# Agent² RL-Bench grid: prepare -> baseline -> run agent -> final grade -> summary -> leaderboard
# and HTML report (results/report/index.html); `snakemake --cores 1 --report report.zip` collects
# the outputs marked with report() (a zip: the HTML report is a folder).
#   snakemake --cores all --config grid=ci          (grids: conf/grid/*.yaml; default quick)
#   snakemake -n --config grid=paper                (plan only)
#   snakemake --cores all --config grid=smoke overrides='["task.params.test_size=50"]'
# The configuration comes from conf/ through Hydra (see workflow/rules/common.smk).
# While it runs: `a2rl status results/<label> --watch` and `a2rl view results/<label>` (it
# prints both as it starts; docs/reports.md).
from snakemake.utils import min_version

min_version("9.0")


include: "workflow/rules/common.smk"
include: "workflow/rules/prepare.smk"
include: "workflow/rules/grade.smk"
include: "workflow/rules/run.smk"
include: "workflow/rules/report.smk"


# the cells as planned (results/<label>/grid.json) and where to look while the grid runs
onstart:
    start_grid()


# every cell's outputs (final grade, summary, selected model: run_cell) are the
# leaderboard's and the report's inputs
rule all:
    input:
        str(PATHS.leaderboard_csv),
        str(PATHS.report),
