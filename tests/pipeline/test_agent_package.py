"""An agent from a package of its own, end to end, the way a user adds one: ``a2rl new agent``
writes the package outside the repository, pip installs it into this environment, ``a2rl
agents`` lists it, and ``a2rl run`` runs its ci-grid cell through every stage to its
leaderboard row; uninstalled, it is gone from the listing.

It installs into the environment the tests run in (a throwaway distribution of its own name)
and uninstalls it whatever happens. About two minutes on two CPU cores.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest
from test_integration import CI_RESULTS, TASK, a2rl, read_json, repo_copy_at, run

from checkout import child_env
from plugin_packages import unique

pytestmark = pytest.mark.integration


def pip(*args: str) -> None:
    """This interpreter's pip, offline (the package needs nothing but setuptools to build)."""
    subprocess.run([sys.executable, "-m", "pip", *args, "--disable-pip-version-check", "-q"],
                   env=child_env(), check=True, capture_output=True, text=True)


def listed(root) -> dict[str, dict]:
    """``a2rl agents --json``'s rows by name (whatever its exit status: another package's
    broken plugin must not fail this test)."""
    done = subprocess.run(a2rl("agents", "--json"), cwd=root, env=child_env(),
                          capture_output=True, text=True, check=False, timeout=300)
    return {row["name"]: row for row in json.loads(done.stdout)}


def test_a_generated_agent_package_runs_a_ci_cell_and_uninstalls(tmp_path_factory):
    name = unique("made")
    distribution = f"a2rl-agent-{name.replace('_', '-')}"
    outside = tmp_path_factory.mktemp("elsewhere")  # not in the repository, nor in its copy
    repo = repo_copy_at(tmp_path_factory.mktemp("a2rl") / "repo")
    run(a2rl("new", "agent", name, "--dir", str(outside)), repo)
    assert not (repo / distribution).exists()
    pip("install", "--no-deps", "--no-build-isolation", "--no-index", str(outside / distribution))
    try:
        assert listed(repo)[name] == {"name": name, "kind": "agent", "package": distribution,
                                      "problem": None}
        run(a2rl("run", "grid=ci", f"task={TASK}", f"agent={name}"), repo)
        run_root = repo / CI_RESULTS / "runs" / TASK / name / "none" / "seed0"
        record = read_json(run_root / "run.json")
        assert (record["status"], record["exit_code"], record["submissions"]) == \
            ("completed", 0, 1), record
        ledger = [json.loads(line) for line in (run_root / "ledger.jsonl").read_text()
                  .splitlines()]
        assert [(e["valid"], e["equals_base"]) for e in ledger] == [(True, True)]
        assert (run_root / "workspace" / "output" / f"{name}-1").is_dir()  # its script ran
        with (repo / CI_RESULTS / "leaderboard.csv").open() as fh:
            rows = [row for row in csv.DictReader(fh) if row["agent"] == name]
        assert [(r["task"], r["driver"], r["n_seeds"]) for r in rows] == [(TASK, "none", "1")]
    finally:
        pip("uninstall", "-y", distribution)
    assert name not in listed(repo)
