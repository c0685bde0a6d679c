"""GRPO on a single-turn task: the ``grpo`` / ``sft_grpo`` agents' route by the task's
declaration (data/rollouts.json), and the TRL script they copy into code/
(src/a2rl/agents/grpo_single_train.py), run as the agent runs it: a separate Python process on
a model folder and the task's prepared data folder."""

import json
import os
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from a2rl_tasks.gsm8k import build
from safetensors.torch import load_file

from a2rl.agents import grpo
from a2rl.agents.settings import GrpoSettings
from a2rl.config.types import TaskConfig
from checkout import prepare_in

TINY = replace(GrpoSettings(), iters=2, games=2, group=2, reply_tokens=8, train_layers=1, kl=0.0)


@pytest.fixture(scope="module")
def arith(tmp_path_factory) -> Path:
    """gsm8k_arith's kind of data (chain sums), prepared small: its data folder."""
    task = build(TaskConfig(id="gsm8k_arith", package="gsm8k", params={
        "source": {"kind": "reasoning_gym", "dataset": "chain_sum"},
        "train_size": 16, "test_size": 4}), Path("/nonexistent"))
    out, _ = prepare_in(task, tmp_path_factory.mktemp("arith"))
    return out.data


def workspace(tmp_path: Path, data: Path) -> Path:
    """A workspace as the agent sees it: the data folder and an empty code/."""
    ws = tmp_path / "ws"
    (ws / "code").mkdir(parents=True)
    (ws / "data").symlink_to(data)
    return ws


def run_script(ws: Path, model: Path, out: Path, settings: GrpoSettings, *extra: str):
    """The single-turn script from code/, with the agent's own command line."""
    grpo.install_scripts(ws, "single_turn")
    command = grpo.single_turn_command(ws, str(model), out, 1, 0.0, settings)
    done = subprocess.run([*command, "--precision", "fp32", *extra], capture_output=True,
                          text=True, timeout=600, check=False,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_script_runs_grpo_steps_on_the_tasks_reward_and_saves(arith, tiny_model, tmp_path):
    """Two TRL GRPO steps on gsm8k_arith's train prompts with the reward it ships: a model
    folder that loads, with one log row per step."""
    out = tmp_path / "grpo-1"
    report = run_script(workspace(tmp_path, arith), tiny_model, out, TINY)
    assert report["steps"] == 2 and "stopped" not in report
    rows = json.loads((out / "grpo_log.json").read_text())
    assert [r["step"] for r in rows] == [1, 2]
    assert all(0.0 <= r["success"] <= 100.0 and r["seconds"] >= 0 for r in rows)
    assert "save_s" in rows[-1] and (out / "tokenizer.json").is_file()
    assert set(load_file(out / "model.safetensors")) == set(
        load_file(tiny_model / "model.safetensors"))
    # the saved config is the base's: TRL's trainer does not leave its KV cache switched off
    config = json.loads((out / "config.json").read_text())
    assert config["use_cache"] == json.loads((tiny_model / "config.json").read_text())["use_cache"]


def test_the_declared_reward_drives_the_update(tiny_model, tmp_path):
    """A reward that varies within each group moves the trained top layer and nothing below
    it; the reward gets the rows' own fields, the replies as text."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "rollouts.json").write_text(json.dumps({
        "kind": "single_turn", "module": "longer", "function": "score",
        "prompts": "prompts.jsonl", "system": "Be brief."}))
    (data / "prompts.jsonl").write_text("".join(
        json.dumps({"prompt": f"Say {i}.", "target": str(i)}) + "\n" for i in range(4)))
    (data / "longer.py").write_text(
        "def score(completions, target, **extra):\n"
        "    assert not extra and all(isinstance(c, str) for c in completions), extra\n"
        "    return [len(c) / 100 + (t in c) for c, t in zip(completions, target)]\n")
    out = tmp_path / "grpo-1"
    run_script(workspace(tmp_path, data), tiny_model, out, replace(TINY, lr=1e-3, temp=1.5))
    before, after = load_file(tiny_model / "model.safetensors"), load_file(
        out / "model.safetensors")
    changed = {name for name in before if not torch.equal(before[name], after[name])}
    top = max(int(name.split(".")[2]) for name in before if name.startswith("model.layers."))
    assert changed and all(name.startswith(f"model.layers.{top}.") or name == "model.norm.weight"
                           for name in changed), changed


def test_the_script_stops_at_its_deadline_and_saves(arith, tiny_model, tmp_path):
    """A deadline already past: the first step runs, the rest are skipped and said so, and the
    model trained so far is saved."""
    out = tmp_path / "grpo-1"
    report = run_script(workspace(tmp_path, arith), tiny_model, out, replace(TINY, iters=50),
                        "--deadline", f"{time.time():.1f}")
    assert report["steps"] == 1 and report["stopped"] == "deadline: 49 of 50 steps skipped"
    assert len(json.loads((out / "grpo_log.json").read_text())) == 1


def test_the_agent_routes_by_the_tasks_declaration(arith, tmp_path, capsys):
    """single_turn and episodes pick their script; a task that declares nothing, or a kind
    the agent does not know, runs no round and says why."""
    assert grpo.declared_kind(workspace(tmp_path / "a", arith)) == "single_turn"
    empty = tmp_path / "empty"
    empty.mkdir()
    ws = workspace(tmp_path / "b", empty)
    rounds = grpo.Rounds("grpo", ws)
    assert grpo.grpo_rounds(ws, "base", TINY, rounds) == 0 and rounds.submitted == 0
    assert "declares no environment or reward" in capsys.readouterr().out
    (empty / "rollouts.json").write_text(json.dumps({"kind": "episodes", "module": "m",
                                                     "env": "E"}))
    assert grpo.declared_kind(ws) == "episodes"
    (empty / "rollouts.json").write_text(json.dumps({"kind": "dialogue"}))
    assert grpo.declared_kind(ws) is None
    assert "declares kind 'dialogue'" in capsys.readouterr().out
    assert not list((ws / "code").iterdir())  # nothing installed, nothing run


def test_every_required_option_comes_from_the_settings():
    """The script has no second default: the agent's settings give every method option."""
    from a2rl.agents.grpo_single_train import arguments

    parsed = arguments().parse_args(["--model", "m", "--data", "d", "--out", "o",
                                     *grpo.single_turn_args(GrpoSettings())])
    settings = GrpoSettings()
    assert (parsed.steps, parsed.prompts, parsed.group, parsed.reply_tokens, parsed.kl) == (
        settings.iters, settings.games, settings.group, settings.reply_tokens, settings.kl)
