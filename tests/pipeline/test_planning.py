"""What planning a grid costs: ``snakemake -n`` on grids of 100, 1,000 and 5,000 cells (the ci
grid with more seeds) grows linearly with the number of cells. Cost is the CPU time of the
snakemake process, not wall time, which on a shared machine measures the neighbours.

About two CPU minutes in all: integration, not in the quick run.
"""

from __future__ import annotations

import re
import resource

import pytest
from test_workflow import snakemake

from a2rl.config.compose import compose, grid_cells, grid_overrides

pytestmark = pytest.mark.integration

CELLS = (100, 1000, 5000)  # about: a whole number of seeds of the ci grid
CELL_COUNT = re.compile(r"^run_cell\s+(\d+)$", re.MULTILINE)


def plan(seeds: int, workdir) -> tuple[float, int]:
    """CPU seconds of ``snakemake -n`` on the ci grid with ``seeds`` seeds, and the number of
    cells (run_cell jobs) it planned."""
    seeds = ",".join(map(str, range(seeds)))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = snakemake("-n", "--quiet", "rules", "--config", "grid=ci",
                       f"overrides=grid.seeds=[{seeds}]", workdir=workdir, timeout=1200)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert result.returncode == 0, result.stderr[-3000:]
    planned = int(CELL_COUNT.search(result.stdout + result.stderr)[1])
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, planned


def test_planning_grows_linearly_with_the_grid(tmp_path):
    """Each cell costs about the same to plan in a grid of 5,000 as in one of 1,000: the cost
    per added cell from 1,000 to 5,000 cells is at most twice that from 100 to 1,000."""
    per_seed = len(grid_cells(compose(grid_overrides("ci"))))
    costs = {}
    for cells in CELLS:
        seeds = round(cells / per_seed)
        cpu, planned = plan(seeds, tmp_path / str(cells))
        assert planned == seeds * per_seed
        costs[planned] = cpu
    few, more, most = sorted(costs)
    small = (costs[more] - costs[few]) / (more - few)
    large = (costs[most] - costs[more]) / (most - more)
    report = ", ".join(f"{n} cells {s:.1f} s" for n, s in costs.items())
    print(f"planning CPU time: {report}")  # shown with pytest -rP
    assert small > 0, report
    assert large <= 2 * small, f"planning is superlinear: {report}"
