"""Issue #28, findings 2 and 3: the grader's clock as a way to more time. An evaluation past its
deadline was answered eval_timeout, not counted and its time given back, while the agent's other
processes worked on (13 hangs stretched a 60 s budget to 273 s); with evaluation time not counted,
a slow valid evaluation did the same. One invariant now holds: the wall time in which the agent
can run is at most ``time_limit_s`` (plus the kill grace), whatever it submits.

A whole cell as CI runs it (root, the real sandbox, the grader in its own process, gsm8k_arith on
the tiny model): the agent keeps a ticker thread writing the time every 50 ms (a gap means it
could not run) and submits, in turn, models whose chat template never ends and copies of the base
model that are really evaluated. Its working time is the sum of the short gaps."""

from __future__ import annotations

import shutil

import pytest
from hostile_sandbox import agent_command_override

from a2rl.common.files import read_json
from a2rl.config.compose import compose
from a2rl.grading.ledger import Ledger
from a2rl.pipeline import stages
from checkout import FIXTURE_DATA

pytestmark = [pytest.mark.attacks,
              pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")]

TIME_LIMIT_S = 20
EVAL_TIMEOUT_S = 3
KILL_GRACE_S = 1
TICK_S = 0.05
# Jinja's sandbox caps range() at 100,000: two nested loops run 10^10 times, past any deadline
HANG = ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
        "{{ messages[-1]['content'] }}")

STALLING_AGENT = r'''
import os, shutil, subprocess, threading, time
ws = os.environ["A2RL_WORKSPACE"]
def tick():
    with open(f"{ws}/code/ticks", "a") as fh:
        while True:
            fh.write(f"{time.monotonic()}\n"); fh.flush()
            time.sleep(TICK_S)
threading.Thread(target=tick, daemon=True).start()
for i in range(40):
    folder = f"{ws}/output/m{i}"
    shutil.copytree(f"{ws}/base_model", folder, copy_function=shutil.copyfile)
    os.chmod(folder, 0o755)
    if i % 2 == 0:  # hangs its evaluation
        with open(f"{folder}/chat_template.jinja", "w") as fh:
            fh.write(HANG)
    else:  # a real evaluation: a copy the grader has not seen
        with open(f"{folder}/note.txt", "w") as fh:
            fh.write(str(i))
    answer = subprocess.run(["a2rl", "submit", folder], capture_output=True, text=True)
    print(i, answer.stdout.strip()[:300], flush=True)
while True:
    time.sleep(1)
'''


def cell(root, count_eval_time: bool):
    program = (STALLING_AGENT.replace("TICK_S", repr(TICK_S)).replace("HANG", repr(HANG)))
    return compose(["grid=ci", "agent=noop", "agent.name=staller", f"paths.root={root}",
                    f"paths.data={FIXTURE_DATA}", "task.params.test_size=6",
                    "task.params.train_size=16", "task.inference.max_new_tokens=8",
                    f"budget.time_limit_s={TIME_LIMIT_S}", f"++budget.kill_grace_s={KILL_GRACE_S}",
                    f"++budget.eval_timeout_s={EVAL_TIMEOUT_S}", "budget.max_submissions=40",
                    f"++budget.count_eval_time={str(count_eval_time).lower()}",
                    agent_command_override(program)])


def gaps(ticks_file) -> list[float]:
    times = [float(line) for line in ticks_file.read_text().split()]
    return [b - a for a, b in zip(times, times[1:])]


@pytest.mark.parametrize("count_eval_time", [True, False], ids=["counted", "not_counted"])
def test_hanging_and_slow_evaluations_buy_no_working_time(tmp_path, tiny_model,
                                                          count_eval_time):
    cfg = cell(tmp_path, count_eval_time)
    shutil.copytree(tiny_model, stages.layout_of(cfg).model(cfg.task.model.name))
    stages.prepare_task(cfg)
    stages.measure_baseline(cfg)

    run = stages.run_agent(cfg)

    record = read_json(run.run_json)
    assert record["status"] == "budget_exhausted", record
    entries = Ledger(run.ledger).entries
    hung = [e for e in entries if e.status == "eval_timeout"]
    scored = [e for e in entries if e.valid and not e.cached]
    assert len(hung) >= 2 and scored, [(e.status, e.error) for e in entries]
    # a hang counts as a submission and is answered as the agent's, not the harness's
    assert Ledger(run.ledger).evaluated_count() == len(hung) + len(scored)
    assert all(e.status_code == 504 and "counts as a submission" in e.error for e in hung)

    steps = gaps(run.workspace / "code" / "ticks")
    working = sum(g for g in steps if g < 0.5)
    assert working <= TIME_LIMIT_S + KILL_GRACE_S + 1, (working, record["agent_seconds"])
    if count_eval_time:  # every evaluation's time was the agent's: nothing given back
        assert record["agent_seconds"] <= TIME_LIMIT_S + KILL_GRACE_S + 2, record
    else:  # paused while each evaluation ran: the allowance stretched, the work did not
        assert record["resources"]["enforced_by"]["pause"] in ("cgroup2", "cgroup1", "signals")
        paused = [g for g in steps if g >= 0.5]
        assert len(paused) >= len(scored), steps
        assert record["agent_seconds"] > working + 1, (record["agent_seconds"], working)
