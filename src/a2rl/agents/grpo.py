"""Reference agent ``grpo``: online GRPO from the base model, submitting each round's model (the
grader keeps the best so far), in the way the task declares in ``data/rollouts.json``
(a2rl.task.base): in the train games of an interactive task (household, ALFWorld, WebShop;
kind ``episodes``, ``code/grpo_train.py``, below) or on the train prompts of a single-turn task
(GSM8K, HumanEval; kind ``single_turn``, ``code/grpo_single_train.py``: TRL's GRPOTrainer with
the task's own reward, ``iters`` steps a round of ``games`` prompts x ``group`` replies of at
most ``reply_tokens`` tokens; its KL anchor is each round's start). A task that declares
neither gets the base model submitted, and the log says why.

Episodes: the agent runs ``code/grpo_train.py`` in rounds. One GRPO iteration:

1. pick ``games`` train games, favouring games the policy wins 20-80 % of the time (the ones
   with a learning signal; unseen games count as uncertain);
2. play ``group`` episodes of each in lockstep with the grader's runner and policy
   (``data/a2rl_envs.play`` and ``GeneratorPolicy`` over ``data/a2rl_episode_cache``'s
   ``ModelGenerator``: one batched sampled generation per step, temperature ``temp``, reply
   parsed to the closest admissible action; each episode keeps its KV cache across its steps
   under the append-only prompt), with the grader's prompt format (declared in
   ``data/rollouts.json``);
3. episode return = won - ``step_cost`` x steps (+ ``expert_bonus`` x the share of steps that
   took the environment's expert action, a shaping term the train games offer); advantage =
   (return - group mean) / group std (groups whose episodes all scored the same give no signal
   and are skipped);
4. policy-gradient steps on the executed action's tokens (+ end of turn) of every step of every
   episode with a non-zero advantage: loss = -A x mean token log-prob, one optimizer step per
   minibatch of whole episodes of about ``minibatch`` steps (an append-style episode is one
   sequence, scored in one forward pass), each sample used once (GRPO with one iteration per
   generation; the policy moves a few small steps per batch of rollouts, so the PPO ratio stays
   near 1 and is left out); no KL term. Only the top ``train_layers`` layers (and the final
   norm) are trained, which keeps the backward pass cheap on CPU.

Cost on CPU: the prompts dominate (with the rewrite prompt a ~300-token prompt per step of
every episode, ~10 generated tokens; the append-only prompt encodes only each step's new
tokens in the rollouts and scores a whole episode in one pass in the update), so rollouts run
on a bf16 copy of the model and updates under bf16 autocast where the hardware computes bf16
natively (``$A2RL_PRECISION``, decided by a2rl.common.hardware; about 2x and 1.6x faster
than fp32 on a 2-core CPU with AVX512-BF16, several times slower where bf16 is emulated, so
fp32 there), and the vocabulary projection is applied to action positions only.

Budget: each round gets a deadline (the budget's end less ``reserve_s``); an iteration
starts only when, at the speed measured so far, it ends before it, and a round that fits no
iteration is skipped and says so in the log.

Sampling by generation (not by ranking the admissible actions by log-probability) keeps the
training policy the same as the grader's (greedy generation + parsing); the gradient still
goes only through the admissible action that was executed.

Settings: ``GrpoSettings`` (settings.py: rounds, iters, games, group, lr, temp,
train_layers, minibatch, step_cost, expert_bonus, max_steps, max_new_tokens, reply_tokens, kl,
reserve_s), from
``$A2RL_AGENT_SETTINGS``. Precision: the agent config's ``precision`` (auto | bf16 | fp32),
passed as A2RL_PRECISION.
The environment is the one the task declares in ``data/rollouts.json`` (grpo_train.data_env;
a2rl.task.base.Rollouts): its module and class in data/, its train games, and the episode
outcome that is the reward (household and ALFWorld games: won or lost; WebShop: the final score).
"""

import json
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from plan import Rounds, deadline, run_until
from plan import log as plan_log
from settings import GrpoSettings, load

HERE = Path(__file__).resolve().parent
GRPO_SCRIPT = HERE / "grpo_train.py"
SINGLE_TURN_SCRIPT = HERE / "grpo_single_train.py"
# the scripts each kind of declaration runs in code/ (the single-turn script imports the
# episodes script's layer freezing and deadline rule; not sft_train's callback, whose SFTTrainer
# in code/ would make the run's route read as SFT)
SCRIPTS = {"episodes": [GRPO_SCRIPT],
           "single_turn": [SINGLE_TURN_SCRIPT, GRPO_SCRIPT, HERE / "trainer_args.py"]}
ROLLOUTS_FILE = "rollouts.json"  # a2rl.task.base.ROLLOUTS_FILE (the agent runs without a2rl)


def log(message):
    plan_log("grpo", message)


def method_args(settings: GrpoSettings) -> list[str]:
    """The GRPO script's method options, from the agent's settings (their one default)."""
    return ["--iterations", str(settings.iters), "--games", str(settings.games),
            "--group", str(settings.group), "--lr", str(settings.lr),
            "--minibatch", str(settings.minibatch), "--temperature", str(settings.temp),
            "--max-steps", str(settings.max_steps), "--step-cost", str(settings.step_cost),
            "--expert-bonus", str(settings.expert_bonus),
            "--train-layers", str(settings.train_layers),
            "--max-new-tokens", str(settings.max_new_tokens), "--kl", str(settings.kl)]


def single_turn_args(settings: GrpoSettings) -> list[str]:
    """The single-turn script's method options, from the same settings."""
    return ["--steps", str(settings.iters), "--prompts", str(settings.games),
            "--group", str(settings.group), "--lr", str(settings.lr),
            "--temperature", str(settings.temp), "--reply-tokens", str(settings.reply_tokens),
            "--train-layers", str(settings.train_layers), "--kl", str(settings.kl)]


def round_seed(k: int) -> str:
    return str(int(os.environ.get("A2RL_SEED", "0")) * 100 + k)


def grpo_command(ws: Path, script: Path, model: str, out: Path, k: int, until: float,
                 iter_s: float, settings: GrpoSettings, reference: str) -> list[str]:
    return [sys.executable, str(script), "--model", model, "--data", str(ws / "data"),
            "--out", str(out), *method_args(settings), "--reference", reference,
            "--stats", str(ws / "code" / "grpo_stats.json"),
            "--deadline", f"{until:.1f}", "--iter-estimate", f"{iter_s:.1f}",
            "--seed", round_seed(k)]


def single_turn_command(ws: Path, model: str, out: Path, k: int, until: float,
                        settings: GrpoSettings) -> list[str]:
    return [sys.executable, str(ws / "code" / SINGLE_TURN_SCRIPT.name), "--model", model,
            "--data", str(ws / "data"), "--out", str(out), *single_turn_args(settings),
            "--deadline", f"{until:.1f}", "--seed", round_seed(k)]


def declared_kind(ws: Path) -> str | None:
    """How the task says agents train online on it (``data/rollouts.json``'s kind: episodes or
    single_turn); None, logged, when it declares no way this agent knows."""
    path = ws / "data" / ROLLOUTS_FILE
    if not path.is_file():
        log(f"no data/{ROLLOUTS_FILE}: this task declares no environment or reward for online "
            "training, so there is nothing to run GRPO on")
        return None
    kind = json.loads(path.read_text()).get("kind", "episodes")
    if kind not in SCRIPTS:
        log(f"data/{ROLLOUTS_FILE} declares kind {kind!r}; this agent knows {sorted(SCRIPTS)}")
        return None
    return kind


def install_scripts(ws: Path, kind: str) -> None:
    for script in SCRIPTS[kind]:
        shutil.copy(script, ws / "code" / script.name)


def grpo_rounds(ws: Path, model: str, settings: GrpoSettings, rounds: Rounds) -> int:
    """Run GRPO rounds from ``model`` while the budget allows, each from the previous round's
    model, and submit every round's model: the grader's answer (score, best so far) is the
    feedback, and sampled train success is no guide across rounds because the games picked
    shift towards the uncertain ones. The task's declaration picks the script (episodes or
    single-turn); with none, no round runs. Returns 0, or 1 when the training script fails;
    ``rounds`` counts what was submitted."""
    kind = declared_kind(ws)
    if kind is None:
        return 0
    install_scripts(ws, kind)
    script = ws / "code" / GRPO_SCRIPT.name
    unit = "steps" if kind == "single_turn" else "iterations"
    iter_s = 0.0  # the longest iteration (single-turn: step) so far, with its save
    anchor = model  # every round's KL penalty pulls towards the model the first round started from
    for k in range(1, settings.rounds + 1):
        until = deadline(settings.reserve_s)
        if time.time() + iter_s > until:
            log(f"skipping round {k} and after: {until - time.time():.0f}s before the deadline, "
                f"an iteration takes about {iter_s:.0f}s")
            break
        out = ws / "output" / f"grpo-{k}"
        log(f"round {k}: GRPO from {model}")
        command = (single_turn_command(ws, model, out, k, until, settings)
                   if kind == "single_turn" else
                   grpo_command(ws, script, model, out, k, until, iter_s, settings, anchor))
        code = run_until(command, until, ws / "code", settings.reserve_s)
        if code is not None and code != 0:
            log("GRPO failed")
            return 1
        if not (out / "grpo_log.json").exists():
            log(f"round {k}: no {unit} finished and saved before the deadline; nothing to "
                "submit")
            break
        if code is None:
            log(f"round {k} was still running at the deadline and was stopped; submitting its "
                f"last finished iteration")
        rows = json.loads((out / "grpo_log.json").read_text())
        iter_s = max(r["seconds"] + r.get("save_s", 0.0) for r in rows)
        log(f"round {k} ({len(rows)} {unit}, the longest {iter_s:.0f}s): sampled train "
            f"success {[round(r['success'], 1) for r in rows]}")
        if not rounds.submit(out, {"stopped": code is None}):
            break
        model = rounds.last
    return 0


def main() -> int:
    ws = Path(os.environ["A2RL_WORKSPACE"])
    rounds = Rounds("grpo", ws)
    code = grpo_rounds(ws, str(ws / "base_model"), load(GrpoSettings), rounds)
    rounds.finish("no GRPO round was submitted")
    return code


if __name__ == "__main__":
    sys.exit(main())
