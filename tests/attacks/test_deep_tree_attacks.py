"""Issue #28, finding 4: an agent voided its own run with a folder tree deeper than PATH_MAX. The
grader's copy raised a bare OSError, answered 500, so the run was marked infra_failed (retried,
or left out of the scores), and every retry crashed in ``fresh_run_dir`` on the same tree before
any agent started. Now such a submission is the agent's invalid one (413) and the tree is removed
like any other; as CI runs it: root, the real sandbox and grader, gsm8k_arith on the tiny model."""

from __future__ import annotations

import shutil

import pytest
from hostile_sandbox import agent_command_override

from a2rl.common.files import read_json
from a2rl.config.compose import compose
from a2rl.grading.ledger import Ledger
from a2rl.pipeline import stages
from a2rl.pipeline.runner import fresh_run_dir
from checkout import FIXTURE_DATA

pytestmark = [pytest.mark.attacks,
              pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")]

# 24 folders of 200-byte names: 4.8 kB of path, past PATH_MAX (4096) yet within the copy's
# 32-folder depth cap; the deepest folder is left unreadable
DEEP_AGENT = r'''
import os, shutil, subprocess
ws = os.environ["A2RL_WORKSPACE"]
def deep(base):
    os.makedirs(base)
    fd = os.open(base, os.O_RDONLY)
    for _ in range(24):
        os.mkdir("d" * 200, dir_fd=fd)
        inner = os.open("d" * 200, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    out = os.open("config.json", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
    os.write(out, b"{}")
    os.close(out)
    os.fchmod(fd, 0)
    os.close(fd)
deep(f"{ws}/output/deep")
deep(f"{ws}/code/deep")  # the grader records code/ with each submission
answer = subprocess.run(["a2rl", "submit", f"{ws}/output/deep"], capture_output=True, text=True)
print("deep:", answer.stdout.strip(), flush=True)
shutil.copytree(f"{ws}/base_model", f"{ws}/output/base")
raise SystemExit(subprocess.call(["a2rl", "submit", f"{ws}/output/base"]))
'''


def test_a_tree_past_path_max_is_the_agents_invalid_submission(tmp_path, tiny_model):
    cfg = compose(["grid=ci", "agent=noop", "agent.name=deep", f"paths.root={tmp_path}",
                   f"paths.data={FIXTURE_DATA}", "task.params.test_size=6",
                   "task.params.train_size=16", "task.inference.max_new_tokens=8",
                   "budget.time_limit_s=120", agent_command_override(DEEP_AGENT)])
    shutil.copytree(tiny_model, stages.layout_of(cfg).model(cfg.task.model.name))
    stages.prepare_task(cfg)
    stages.measure_baseline(cfg)

    run = stages.run_agent(cfg)

    record = read_json(run.run_json)
    assert record["status"] == "completed", (record, run.agent_log.read_text()[-2000:])
    entries = Ledger(run.ledger).entries
    assert [e.status_code for e in entries] == [413, 200], [e.error for e in entries]
    assert "longer than 1024 bytes" in entries[0].error
    assert entries[1].valid

    # a retry of the cell starts from a fresh run folder: the tree goes with the rest
    assert any((run.workspace / "output" / "deep").iterdir())
    fresh_run_dir(run)
    assert list(run.root.iterdir()) == []
