"""Append-only episode prompts with per-episode KV caches vs the rewritten prompt (issue #32).

    python benchmarks/episode_tokens.py --n 50 --max-steps 12 --threads 2 \
        --out results/bench/episode_tokens.json
    python benchmarks/episode_tokens.py --tiny --n 4 --max-steps 3 --grpo-games 2 \
        --grpo-group 2 --grpo-iterations 1 --out /tmp/episode_tokens.json   # quick check

One run on the same household games (a fresh ``household`` task prepared into ``--work``, its
sealed test games and train games), the model through ``a2rl.task.inference`` (HF on CPU,
greedy, fp32, the household task's inference settings), the grader's runner and policy:

- ``eval_rewrite``: today's default path before this change (``prompt_format=rewrite``: one
  user turn rewritten every step; bucketed prompt pass from the shared prefix's cache);
- ``eval_append``: the new default (an append-only chat; each episode keeps its KV cache across
  its steps and only new tokens are encoded), its step turns listing the actions as
  ``--step-actions`` says (default: all, the task's default);
- ``eval_append_sequential``: the new path one episode at a time; its episodes must equal
  ``eval_append``'s (``same_episodes``);
- ``tokens``: prompt tokens run through the model per episode step, from each path's own
  counters (``measured``) and on the same episodes (``same_episodes``: ``eval_append``'s
  actions replayed under the rewrite prompt, its prompts counted as today's path computes
  them: the whole prompt but the prefix all prompts share), and what the append path would
  encode with each step-turn action list (``step_actions``: all, changes, first);
- ``grpo_rewrite`` / ``grpo_append``: the reference GRPO script
  (``src/a2rl/agents/grpo_train.py``, run as the agents run it, the agent's default settings
  but ``--grpo-*``) on the same train games, equal rollouts (games x group episodes of at most
  max_steps): seconds per iteration (rollouts + update) from its log.

Targets (issue #32): tokens <= 0.3x, evaluation >= 2x, lockstep >= 4x one at a time with the
same episodes, a GRPO iteration >= 2x. The report records the machine (hardware, load before
and after each phase, nice) and is written to ``--out``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_MODEL = REPO / "resources" / "models" / "smollm2-135m-instruct"


def arguments() -> argparse.ArgumentParser:
    from a2rl.task import STEP_ACTIONS

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=str(DEFAULT_MODEL))
    ap.add_argument("--tiny", action="store_true", help="a freshly built tiny random model")
    ap.add_argument("--work", default="results/bench/episode_tokens",
                    help="folder for the prepared games and the GRPO outputs (reused)")
    ap.add_argument("--n", type=int, default=50, help="sealed test games played")
    ap.add_argument("--max-steps", type=int, default=12)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--skip-sequential", action="store_true")
    ap.add_argument("--skip-grpo", action="store_true")
    ap.add_argument("--grpo-games", type=int, default=None, help="default: the agent's")
    ap.add_argument("--grpo-group", type=int, default=None, help="default: the agent's")
    ap.add_argument("--grpo-iterations", type=int, default=2)
    ap.add_argument("--step-actions", default="all", choices=STEP_ACTIONS,
                    help="the append path's step-turn action list (task.params.step_actions)")
    ap.add_argument("--out", default=None)
    return ap


def prepare(work: Path, n: int, max_steps: int, train_games: int, step_actions: str = "all"):
    """The household task prepared into ``work`` (kept between runs of the same sizes)."""
    from a2rl.common import PreparedTaskPaths
    from a2rl.config import TaskConfig
    from a2rl.pipeline import write_rollouts
    from a2rl.task import load_task

    params = {"source": "household", "test_games": n, "train_games": train_games,
              "max_steps": max_steps, "trajectories_per_game": 1, "random_seeds": 1,
              "step_actions": step_actions}
    task = load_task(TaskConfig(id="household", package="alfworld", level="L3",
                                params=params), work)
    listed = "" if step_actions == "all" else f"_{step_actions}"  # its rollouts.json differs
    folder = work / f"prepared_{n}_{train_games}_{max_steps}{listed}"
    out = PreparedTaskPaths(folder)
    if not (out.data / "rollouts.json").is_file():
        shutil.rmtree(folder, ignore_errors=True)
        out.data.mkdir(parents=True)
        out.sealed.mkdir(parents=True)
        task.prepare(out)
        write_rollouts(task, out.data)
    return task, out


def load_now() -> float:
    return round(os.getloadavg()[0], 2)


def actions(episodes) -> list:
    return [(e.won, [s["action"] for s in e.steps]) for e in episodes]


class Replay:
    """Plays back recorded actions (one list per game, by episode index)."""

    def __init__(self, recorded: list[list[str]]):
        self.recorded = recorded

    def choose(self, views):
        from a2rl.task import Choice

        return [Choice(self.recorded[v.episode][v.step]) for v in views]


def play_timed(task, out, generator, fmt, lockstep: bool = True) -> tuple[list, dict]:
    """The grader's play of the sealed games (AlfworldTask.evaluate's calls) with ``fmt``."""
    from a2rl.task import GeneratorPolicy, play, success_rate

    rows, games, root = task._games(out.test)
    generator.reset()
    before, started = load_now(), time.perf_counter()
    episodes = play(games, task._env_factory(), GeneratorPolicy(generator,
                                                                 task.params.max_new_tokens),
                    task.params.max_steps, fmt, lockstep=lockstep, root=root)
    seconds = round(time.perf_counter() - started, 2)
    stats = generator.stats
    steps = sum(e.n_steps for e in episodes)
    encoded = stats.prompt_tokens - stats.prefix_reused_tokens + stats.prefix_computed_tokens
    print(f"{fmt.style} lockstep={lockstep}: {seconds} s, {steps} steps", file=sys.stderr,
          flush=True)
    return episodes, {"seconds": seconds, "steps": steps, "success": success_rate(episodes),
                      "load_before": before, "load_after": load_now(),
                      "prompt_tokens_encoded": encoded,
                      "prompt_tokens_encoded_per_step": round(encoded / max(1, steps), 1),
                      "generation": stats.as_dict()}


def tokens_on_same_episodes(task, out, tokenizer, episodes, rewrite) -> dict:
    """Per step of ``episodes`` (append-style, played by the model): the tokens the append
    path encodes (what the chat added since the last step) and the tokens today's rewrite
    path computes for the same state (its whole prompt but the prefix all of a step's prompts
    share, which its prefix cache computes once), from the prompts themselves."""
    from a2rl.task import (
        STEP_ACTIONS,
        ChatTokens,
        common_prefix_len,
        encode_prompt,
        play,
        render_chat,
    )

    rows, games, root = task._games(out.test)
    replayed = play(games, task._env_factory(), Replay([a for _, a in actions(episodes)]),
                    task.params.max_steps, rewrite, keep_prompts=True, root=root)
    new = {}  # by the step turn's action list (PromptFormat.step_actions), same actions
    for listed in STEP_ACTIONS:
        appended = play(games, task._env_factory(), Replay([a for _, a in actions(episodes)]),
                        task.params.max_steps, dataclasses.replace(task.fmt, step_actions=listed),
                        keep_prompts=True, root=root)
        new[listed] = sum(appended_tokens(ChatTokens(tokenizer), ep) for ep in appended)
    old, steps, prefixes = 0, 0, set()
    for k in range(max(e.n_steps for e in replayed)):  # the prompts of one lockstep call
        batch = [encode_prompt(tokenizer, render_chat(
            tokenizer, [{"role": "user", "content": e.steps[k]["prompt"]}], True))
            for e in replayed if e.n_steps > k]
        shared = common_prefix_len(batch) if len(batch) > 1 else 0
        old += sum(len(ids) - shared for ids in batch)
        if shared and tuple(batch[0][:shared]) not in prefixes:  # computed once, then cached
            prefixes.add(tuple(batch[0][:shared]))
            old += shared
        steps += len(batch)
    played = task.fmt.step_actions
    return {"steps": steps, "rewrite_per_step": round(old / steps, 1),
            "append_per_step": round(new[played] / steps, 1),
            "ratio": round(new[played] / old, 3),
            # what a smaller step turn would encode on these episodes (the actions the model
            # chose under the played format, replayed: its replies under another would differ)
            "step_actions": {k: {"append_per_step": round(v / steps, 1),
                                 "ratio": round(v / old, 3)} for k, v in new.items()}}


def appended_tokens(chat, episode) -> int:
    """The tokens an episode's chat gained step to step: what the append path encodes."""
    total, last = 0, 0
    for step in episode.steps:
        ids = chat.ids(step["prompt"])
        total += len(ids) - last
        last = len(ids)
    return total


def grpo_phase(out, model: Path, fmt, work: Path, a, style: str) -> dict:
    """The reference GRPO script for ``--grpo-iterations`` iterations, its data folder
    declaring ``fmt`` as the grader's prompt; seconds from its log."""
    from a2rl.agents import grpo
    from a2rl.agents.grpo import GrpoSettings

    data = work / f"data_{style}"
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir(parents=True)
    for entry in out.data.iterdir():
        if entry.name != "rollouts.json":
            (data / entry.name).symlink_to(entry.resolve())
    declared = json.loads((out.data / "rollouts.json").read_text())
    (data / "rollouts.json").write_text(json.dumps(declared | {"prompt": dataclasses.asdict(fmt)}))
    settings = dataclasses.replace(
        GrpoSettings(), iters=a.grpo_iterations, max_steps=a.max_steps,
        **{k: v for k, v in (("games", a.grpo_games), ("group", a.grpo_group)) if v})
    script = work / "grpo_train.py"
    shutil.copy(grpo.GRPO_SCRIPT, script)
    target = work / f"grpo_{style}"
    before, started = load_now(), time.perf_counter()
    result = subprocess.run(
        [sys.executable, str(script), "--model", str(model), "--data", str(data),
         "--out", str(target), *grpo.method_args(settings), "--precision", "fp32", "--seed", "0"],
        capture_output=True, text=True, check=False,
        env={**os.environ, "OMP_NUM_THREADS": str(a.threads), "TQDM_DISABLE": "1"})
    if result.returncode != 0:
        raise RuntimeError(f"grpo_train.py ({style}) failed: {result.stderr[-3000:]}")
    log = json.loads((target / "grpo_log.json").read_text())
    iteration = [r["seconds"] for r in log]
    print(f"grpo {style}: {iteration}", file=sys.stderr, flush=True)
    return {"games": settings.games, "group": settings.group, "max_steps": settings.max_steps,
            "iterations": log, "seconds_per_iteration": round(sum(iteration) / len(iteration), 2),
            "wall_s": round(time.perf_counter() - started, 1), "load_before": before,
            "load_after": load_now()}


def main(argv: list[str] | None = None) -> dict:
    a = arguments().parse_args(argv)
    import torch

    from a2rl.common import describe, print_report
    from a2rl.config import InferenceConfig
    from a2rl.task import GeneratorPolicy, load_generator, play

    torch.set_num_threads(a.threads)
    os.environ.setdefault("TQDM_DISABLE", "1")
    work = Path(a.work)
    model = Path(a.model)
    if a.tiny:
        from a2rl.models import build_tiny_model
        model = build_tiny_model(Path(tempfile.mkdtemp()) / "tiny")
    train_games = max(4, a.grpo_games or 8)
    task, out = prepare(work, a.n, a.max_steps, train_games, a.step_actions)
    rewrite = dataclasses.replace(task.fmt, style="rewrite")
    # the household task's own inference settings (conf/task/household.yaml), fp32
    cfg = InferenceConfig(backend="hf", batch_size=64, max_new_tokens=24,
                          torch_threads=a.threads, precision="fp32")
    generator = load_generator(model, cfg)
    rows, games, root = task._games(out.test)
    # warm-up: the game engine and the model's first call, outside the timings
    play(games[:1], task._env_factory(), GeneratorPolicy(generator, 2), 1, task.fmt, root=root)

    phases = {}
    _, phases["eval_rewrite"] = play_timed(task, out, generator, rewrite)
    new_eps, phases["eval_append"] = play_timed(task, out, generator, task.fmt)
    if not a.skip_sequential:
        seq_eps, phases["eval_append_sequential"] = play_timed(task, out, generator, task.fmt,
                                                               lockstep=False)
        phases["eval_append_sequential"]["same_episodes"] = actions(seq_eps) == actions(new_eps)
    tokens = {"measured": {
        "rewrite_per_step": phases["eval_rewrite"]["prompt_tokens_encoded_per_step"],
        "append_per_step": phases["eval_append"]["prompt_tokens_encoded_per_step"]},
        "same_episodes": tokens_on_same_episodes(task, out, generator.tokenizer, new_eps,
                                                 rewrite)}
    tokens["measured"]["ratio"] = round(tokens["measured"]["append_per_step"]
                                        / tokens["measured"]["rewrite_per_step"], 3)
    generator.close()
    if not a.skip_grpo:
        phases["grpo_rewrite"] = grpo_phase(out, model, rewrite, work, a, "rewrite")
        phases["grpo_append"] = grpo_phase(out, model, task.fmt, work, a, "append")
    seconds = {k: v.get("seconds") or v.get("seconds_per_iteration") for k, v in phases.items()}
    targets = {
        "tokens_ratio (<= 0.3)": tokens["same_episodes"]["ratio"],
        "eval_speedup (>= 2)": round(seconds["eval_rewrite"] / seconds["eval_append"], 2)}
    if "eval_append_sequential" in seconds:
        targets["lockstep_vs_sequential (>= 4)"] = round(
            seconds["eval_append_sequential"] / seconds["eval_append"], 2)
        targets["same_episodes_lockstep_sequential"] = \
            phases["eval_append_sequential"]["same_episodes"]
    if "grpo_append" in seconds:
        targets["grpo_iteration_speedup (>= 2)"] = round(
            seconds["grpo_rewrite"] / seconds["grpo_append"], 2)
    report = {"model": str(model), "games": a.n, "max_steps": a.max_steps,
              "step_actions": a.step_actions,
              "threads": a.threads, "cpus": os.cpu_count(), "nice": os.nice(0),
              "targets": targets, "tokens": tokens, "phases": phases,
              "hardware": describe(inference="fp32")}
    print_report(report, a.out)
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
