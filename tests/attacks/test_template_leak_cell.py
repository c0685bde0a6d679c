"""Issue #28, finding 1, in a whole cell as CI runs the harness (root, the real sandbox, the
grader in its own process, the ci grid's gsm8k_arith on the tiny model), through to the report:
the agent submits models whose chat template raises with the prompt it renders, hoping to read
sealed items in the grader's answers (and keeps what it is told in code/, as an agent training on
it would), then submits the base model. No 12-word run of a sealed item reaches anything the
agent or a reader sees: agent.log, the ledger, events, scores.json, run.json, final.json, the
summary, the leaderboard and the report's pages. The errors are in the private grader.log, which
the agent cannot open. (test_grader_answer_attacks.py replays the attack on every task.)"""

from __future__ import annotations

import json
import shutil

import pytest
from hostile_sandbox import agent_command_override
from sealed_ngrams import leaked, public_part, sealed_runs
from test_grader_answer_attacks import ALWAYS, ONLY_ON_TASK_TEXT

from a2rl.config.compose import compose
from a2rl.grading.ledger import Ledger
from a2rl.pipeline import stages
from checkout import FIXTURE_DATA

pytestmark = [pytest.mark.attacks,
              pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")]

HOSTILE_AGENT = r'''
import json, os, shutil, subprocess
ws = os.environ["A2RL_WORKSPACE"]
out = {}
host = [line.split()[3] for line in open("/proc/self/mountinfo")
        if line.split()[4] == "/workspace"][0]
try:
    open(f"{host}/../grader.log").read()
    out["read_grader_log"] = "ok"
except OSError as err:
    out["read_grader_log"] = type(err).__name__
for name, template in TEMPLATES.items():
    folder = f"{ws}/output/{name}"
    shutil.copytree(f"{ws}/base_model", folder, copy_function=shutil.copyfile)
    os.chmod(folder, 0o755)  # the base model's copy is read-only
    settings = json.load(open(f"{folder}/tokenizer_config.json"))
    settings["chat_template"] = template
    os.chmod(f"{folder}/tokenizer_config.json", 0o644)
    json.dump(settings, open(f"{folder}/tokenizer_config.json", "w"))
    if os.path.exists(f"{folder}/chat_template.jinja"):
        os.remove(f"{folder}/chat_template.jinja")
    answer = subprocess.run(["a2rl", "submit", folder], capture_output=True, text=True)
    print(answer.stdout, answer.stderr, flush=True)
    with open(f"{ws}/code/answers.txt", "a") as fh:  # what an agent would train on
        fh.write(answer.stdout)
print(json.dumps(out), flush=True)
shutil.copytree(f"{ws}/base_model", f"{ws}/output/base")
subprocess.call(["a2rl", "submit", f"{ws}/output/base"])
'''
# what the harness keeps to itself: the sealed split, the store, per-item evaluation details,
# the grader's private log, the agent's recorded code (its own), the models, and the twin split
# final grading draws after the run (sealed like test: its questions are not test's, but the
# prompt's instruction and a question's first operands can make a 12-word run test has too)
PRIVATE = {"prepared", "cache", "store", "evals", "code.git", "models", "logs", "twin"}


def shown_files(results):
    """Every file of the run and the report that is not the harness's own."""
    return [p for p in results.rglob("*") if p.is_file() and p.name != "grader.log"
            and not set(p.relative_to(results).parts) & PRIVATE]


def test_a_template_that_raises_with_the_prompt_leaks_nothing_to_the_report(tmp_path,
                                                                            tiny_model):
    templates = {"always": ALWAYS, "on_task_text": ONLY_ON_TASK_TEXT}
    program = HOSTILE_AGENT.replace("TEMPLATES", repr(templates))
    results = tmp_path / "results"
    cfg = compose(["grid=ci", "agent=noop", "agent.name=hostile", f"paths.root={results}",
                   f"paths.data={FIXTURE_DATA}", "task.params.test_size=6",
                   "task.params.train_size=16", "task.inference.max_new_tokens=8",
                   "budget.time_limit_s=120", agent_command_override(program)])
    shutil.copytree(tiny_model, stages.layout_of(cfg).model(cfg.task.model.name))
    prepared = stages.prepare_task(cfg)
    sealed = sealed_runs(prepared.test)
    stages.measure_baseline(cfg)

    run = stages.run_agent(cfg)
    stages.final_grade(cfg)
    stages.summarize_run(cfg)
    layout = stages.layout_of(cfg)
    stages.build_leaderboard([run.root], layout)
    stages.build_report([run.root], layout)

    texts = {str(p.relative_to(results)): p.read_text(errors="replace")
             for p in shown_files(results)}
    given = [text for name, text in texts.items() if "/workspace/data/" in name
             or name.endswith("/workspace/description.md")]
    assert given
    sealed -= public_part(sealed, given)
    assert str(run.agent_log.relative_to(results)) in texts
    assert any(name.endswith(".html") for name in texts), sorted(texts)
    assert any(name.endswith("summary.md") for name in texts), sorted(texts)
    found = {name: leaked(sealed, text) for name, text in texts.items()}
    assert {name: hits for name, hits in found.items() if hits} == {}

    entries = Ledger(run.ledger).entries
    assert [e.error.split(":")[0] for e in entries[:2]] == \
        ["chat_template_failed", "eval_failed"], run.agent_log.read_text()[-3000:]
    assert entries[2].valid  # the base model, scored as usual
    report = json.loads(next(line for line in run.agent_log.read_text().splitlines()
                             if line.startswith('{"read_grader_log"')))
    assert report["read_grader_log"] == "FileNotFoundError", report
    # the attack did reach the sealed split: its error, in the private log, quotes an item
    assert leaked(sealed, run.grader_log.read_text())
