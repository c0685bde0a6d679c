"""Online GRPO on a single-turn task's train prompts (GSM8K, HumanEval) with TRL's
``GRPOTrainer``, written into code/grpo_single_train.py by the a2rl reference agents `grpo` /
`sft_grpo` (the method: see a2rl/agents/grpo.py). It runs beside a copy of grpo_train.py, the
episodes script, whose layer freezing and deadline rule it shares.

The task declares in ``data/rollouts.json`` (kind ``single_turn``, a2rl.task.base.SingleTurn)
its prompts file and its reward, a function of a module in data/: the task's own rule (the
grader's extraction and comparison, or the train problem's tests), never the sealed split.

One step: ``--prompts`` train prompts (the grader's chat turns), ``--group`` replies sampled
for each (``--temperature``, at most ``--reply-tokens`` tokens), each scored by the reward;
TRL's GRPO loss on the group-relative advantages (its defaults otherwise: one optimisation
pass per generation, so the clipped ratio stays 1), with TRL's KL penalty to the model this
run started from when ``--kl`` > 0 (0 loads no reference model), and one optimizer step.
Only the top ``--train-layers`` decoder layers (and the final norm) train, as in the episodes
script, which keeps the backward pass cheap on CPU.

Precision: ``--precision`` (default ``$A2RL_PRECISION``, which the harness sets from
``a2rl.common.hardware``), and no gradient checkpointing (sft_train.py says why).
Deadline: with ``--deadline`` training stops after the last step that ends before it (judged
by the longest step so far, grpo_train.fits_before: a step's length varies with its replies')
and the model trained so far is saved.

Output: the model in ``--out`` with ``grpo_log.json``, one row per step (``success``: 100 x
the mean reward of its replies, as the episodes script's rows; ``seconds``; the last row also
``save_s``), written last, so that its presence means the model is complete.
"""
import importlib
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch
from datasets import Dataset
from grpo_train import ROLLOUTS_FILE, fits_before, freeze_lower_layers
from trainer_args import common_args, script_parser
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
from trl import GRPOConfig, GRPOTrainer

# column names TRL keeps for its own completions (never handed to a reward function)
TRL_COLUMNS = ("completion", "completion_ids")


def single_turn(data: Path) -> dict:
    """The task's single-turn declaration (``data/rollouts.json``); exits naming what is wrong
    when there is none."""
    path = data / ROLLOUTS_FILE
    if not path.is_file():
        raise SystemExit(f"{path} is missing: this task declares no reward for online training")
    declared = json.loads(path.read_text())
    missing = [k for k in ("module", "function", "prompts") if not declared.get(k)]
    if missing or declared.get("kind") != "single_turn":
        raise SystemExit(f"{path}: not a single_turn declaration (missing {missing}, kind "
                         f"{declared.get('kind')!r})")
    return declared


def prompt_rows(data: Path, declared: dict) -> list[dict]:
    """The prompts file's rows, each ``prompt`` made the chat the grader sends (the declared
    system turn, then the row's prompt as the user turn); the other fields stay, for the
    reward."""
    system = [{"role": "system", "content": declared["system"]}] if declared.get("system") else []
    rows = []
    with open(data / declared["prompts"]) as f:
        for line in filter(str.strip, f):
            row = json.loads(line)
            fields = {k: v for k, v in row.items() if k not in TRL_COLUMNS}
            rows.append({**fields, "prompt": system + [{"role": "user", "content": row["prompt"]}]})
    return rows


def reply_text(completion) -> str:
    """A completion as TRL hands it over (a list of messages for chat prompts) as text."""
    return completion[-1]["content"] if isinstance(completion, list) else completion


def task_reward(data: Path, declared: dict, columns: list[str]):
    """The declared reward function as TRL calls one: reply texts in, and only the prompt
    rows' own fields passed on (TRL adds its trainer state and loggers)."""
    sys.path.insert(0, str(data))
    function = getattr(importlib.import_module(declared["module"]), declared["function"])

    def reward(completions, **kwargs):
        return function([reply_text(c) for c in completions], **{k: kwargs[k] for k in columns})

    reward.__name__ = f"{declared['module']}.{declared['function']}"  # TRL logs it by name
    return reward


class StepLog(TrainerCallback):
    """One row per GRPO step from TRL's logs (``logging_steps=1``): the mean reward x 100
    (``success``), its spread, the replies' mean length, the KL, and the step's seconds; and
    training stopped when one more step, as long as the longest so far, would end after
    ``deadline`` (0: none)."""

    def __init__(self, deadline):
        self.deadline = deadline
        self.rows = []
        self.last = None
        self.stopped_at = None

    def on_train_begin(self, args, state, control, **kwargs):
        self.last = time.time()

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or "reward" not in logs:  # the end-of-training summary has none
            return
        now = time.time()
        self.rows.append({"step": state.global_step, "success": 100.0 * logs["reward"],
                          "reward_std": logs.get("reward_std"),
                          "reply_tokens": logs.get("completions/mean_length"),
                          "kl": logs.get("kl", 0.0), "loss": logs.get("loss"),
                          "seconds": round(now - self.last, 1)})
        self.last = now
        if state.global_step < state.max_steps and not fits_before(self.deadline, self.rows, 0):
            control.should_training_stop = True
            self.stopped_at = state.global_step


def training_config(a) -> GRPOConfig:
    """TRL's config: a step is one generation batch (prompts x group replies) and one optimizer
    step; precision and checkpointing explicit, as in sft_train.training_config."""
    return GRPOConfig(max_steps=a.steps, per_device_train_batch_size=a.prompts * a.group,
                      gradient_accumulation_steps=1, num_generations=a.group,
                      max_completion_length=a.reply_tokens, temperature=a.temperature,
                      learning_rate=a.lr, lr_scheduler_type="constant", beta=a.kl,
                      disable_dropout=True, logging_steps=1,
                      **common_args(a.out, a.seed, a.precision))


def arguments():
    """The shared options and GRPO's (GrpoSettings in a2rl/agents/settings.py, as
    grpo.single_turn_args writes them)."""
    p = script_parser()
    p.add_argument("--steps", type=int, required=True, help="GRPO steps (optimizer steps)")
    p.add_argument("--prompts", type=int, required=True, help="train prompts per step")
    p.add_argument("--group", type=int, required=True, help="replies sampled per prompt")
    p.add_argument("--lr", type=float, required=True)
    p.add_argument("--temperature", type=float, required=True)
    p.add_argument("--reply-tokens", type=int, required=True,
                   help="tokens per sampled reply at most (a longer reply is cut)")
    p.add_argument("--train-layers", type=int, required=True)
    p.add_argument("--kl", type=float, required=True,
                   help="TRL's beta: KL penalty to the starting model (0: no reference model)")
    return p


def main():
    a = arguments().parse_args()
    data = Path(a.data)
    declared = single_turn(data)
    rows = prompt_rows(data, declared)
    reward = task_reward(data, declared, [k for k in rows[0] if k != "prompt"])
    torch.manual_seed(a.seed)
    tokenizer = AutoTokenizer.from_pretrained(a.model)
    padding_side, tokenizer.padding_side = tokenizer.padding_side, "left"  # as TRL generates
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32)
    freeze_lower_layers(model, a.train_layers)
    steps = StepLog(a.deadline)
    trainer = GRPOTrainer(model=model, reward_funcs=reward, args=training_config(a),
                          train_dataset=Dataset.from_list(rows), processing_class=tokenizer,
                          callbacks=[steps])
    trainer.train()
    saved = time.time()
    tokenizer.padding_side = padding_side  # saved as it came
    trainer.save_model(a.out)
    tokenizer.save_pretrained(a.out)
    if steps.rows:
        steps.rows[-1]["save_s"] = round(time.time() - saved, 1)
    with open(os.path.join(a.out, "grpo_log.json"), "w") as f:
        json.dump(steps.rows, f, indent=1)
    report = {"saved": a.out, "steps": trainer.state.global_step, "planned_steps": a.steps,
              "precision": a.precision, "success": [r["success"] for r in steps.rows]}
    if steps.stopped_at is not None:
        report["stopped"] = f"deadline: {a.steps - steps.stopped_at} of {a.steps} steps skipped"
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
