"""Real run directories for the recording, integrity and report tests: the ci grid's task on the
tiny model, built with the real stages (prepare, baseline, sandboxed agent run, final grade,
summary with integrity checks, model export), then the leaderboard and the HTML report.

Runs (task gsm8k_arith, driver none, seed 0):
  noop     the reference agent: submits a copy of the base model (a clean run)
  sft      the reference agent: TRL SFT in two short rounds, a submission after each
  cheater  a test agent given sealed test items through its environment (it cannot read the
           sealed split from the sandbox): it writes them into code/, tries to overwrite the
           read-only scores.json and submits the ledger's path

Built once per pytest session under the session's temporary folder and shared by the test
modules that ask for it (a file lock makes the second caller wait for the first).
"""

from __future__ import annotations

import fcntl
import json
from pathlib import Path
from typing import Any

from checkout import FIXTURE_DATA

TASK = "gsm8k_arith"
PLANTED = 5  # sealed test items the cheater is given
CHEATER = r"""
import json, os, pathlib, subprocess
ws = pathlib.Path(os.environ["A2RL_WORKSPACE"])
items = json.loads(os.environ["A2RL_PLANTED_ITEMS"])
with open(ws / "code" / "extra_train.jsonl", "w") as fh:
    for item in items:
        fh.write(json.dumps({"q": item["question"], "a": item["answer"]}) + "\n")
try:
    (ws / "scores.json").write_text("{}")
except OSError as err:
    print("cannot edit scores.json:", err, flush=True)
subprocess.call(["a2rl", "submit", "../ledger.jsonl"])
"""


def overrides(root: Path, agent: str = "noop") -> list[str]:
    return ["grid=ci", f"agent={agent}", f"paths.root={root}", f"paths.data={FIXTURE_DATA}"]


def sealed_items(root: Path) -> list[dict[str, Any]]:
    from a2rl.common.files import iter_jsonl
    from a2rl.common.layout import Layout
    from a2rl.config.compose import compose

    layout = Layout.from_paths(compose(overrides(root, "noop")).paths)
    return list(iter_jsonl(layout.prepared(TASK).test))


def cell_config(root: Path, agent: str):
    from a2rl.config.compose import compose

    if agent == "cheater":
        cfg = compose(overrides(root, "noop"))
        cfg.agent.name = "cheater"
        cfg.agent.command = ["{python}", "-c", "import os; exec(os.environ['A2RL_CHEAT'])"]
        planted = [{"id": i["id"], "question": i["question"], "answer": i["answer"]}
                   for i in sealed_items(root)[:PLANTED]]
        cfg.agent.env = {"A2RL_CHEAT": CHEATER, "A2RL_PLANTED_ITEMS": json.dumps(planted)}
        return cfg
    cfg = compose(overrides(root, agent))
    if agent == "sft":
        cfg.budget.time_limit_s = 150
        cfg.agent.settings = {"sft": {"max_rounds": 2, "steps": 8, "batch": 4}}
    return cfg


def build(root: Path) -> dict[str, Any]:
    """The runs under ``root``/results (built unless already there); returns where they are."""
    from a2rl.analysis.leaderboard import build_leaderboard
    from a2rl.common.layout import Layout
    from a2rl.pipeline import stages

    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        base = cell_config(root, "noop")
        layout = Layout.from_paths(base.paths)
        runs = {a: layout.run(TASK, a, "none", 0) for a in ("noop", "sft", "cheater")}
        if not (root / "built").exists():
            stages.prepare_model(base)
            stages.prepare_task(base)
            stages.measure_baseline(base)
            for agent in runs:
                cfg = cell_config(root, agent)
                stages.run_agent(cfg)
                stages.final_grade(cfg)
                stages.summarize_run(cfg)
                stages.export_model(cfg)
            roots = [r.root for r in runs.values()]
            build_leaderboard(roots, layout)
            stages.build_report(roots, layout)
            (root / "built").touch()
        return {"root": root, "layout": layout, "runs": runs,
                "planted": [i["id"] for i in sealed_items(root)[:PLANTED]]}
