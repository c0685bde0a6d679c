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

pytestmark = pytest.mark.integration

CELLS = (100, 1000, 5000)
CI_CELLS_PER_SEED = 4  # conf/grid/ci.yaml: 2 tasks x 2 agents x driver none
RUN_AGENT_COUNT = re.compile(r"^run_agent\s+(\d+)$", re.MULTILINE)


def plan(cells: int, workdir) -> tuple[float, int]:
    """CPU seconds of ``snakemake -n`` on the ci grid sized to ``cells`` cells, and the number
    of run_agent jobs it planned."""
    seeds = ",".join(map(str, range(cells // CI_CELLS_PER_SEED)))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = snakemake("-n", "--quiet", "rules", "--config", "grid=ci",
                       f"overrides=grid.seeds=[{seeds}]", workdir=workdir, timeout=1200)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert result.returncode == 0, result.stderr[-3000:]
    planned = int(RUN_AGENT_COUNT.search(result.stdout + result.stderr)[1])
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, planned


def test_planning_grows_linearly_with_the_grid(tmp_path):
    """Each cell costs about the same to plan in a grid of 5,000 as in one of 1,000: the cost
    per added cell from 1,000 to 5,000 cells is at most twice that from 100 to 1,000."""
    costs = {}
    for cells in CELLS:
        cpu, planned = plan(cells, tmp_path / str(cells))
        assert planned == cells
        costs[cells] = cpu
    small = (costs[1000] - costs[100]) / (1000 - 100)
    large = (costs[5000] - costs[1000]) / (5000 - 1000)
    report = ", ".join(f"{n} cells {s:.1f} s" for n, s in costs.items())
    print(f"planning CPU time: {report}")  # shown with pytest -rP
    assert small > 0, report
    assert large <= 2 * small, f"planning is superlinear: {report}"
