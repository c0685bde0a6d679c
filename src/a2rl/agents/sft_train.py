"""SFT with TRL, written into code/train.py by the a2rl reference agents `sft` and `sft_grpo`.

Precision: ``--precision`` (default ``$A2RL_PRECISION``, which the harness sets from
``a2rl.common.hardware``: bf16 only where the hardware computes it natively). TRL's own defaults,
bf16 autocast and gradient checkpointing, are both overridden: emulated bf16 made one step of
batch 8 x 512 tokens take 313 s on an AVX2-only CPU where fp32 takes 28 s, and checkpointing
only trades time for memory a 135M model does not need.

Long chats: an interactive task's rows are its episodes' chats (a system turn, the goal's user
turn, then an assistant and a user turn per step). A row past ``--max-len`` tokens keeps its
system turn, its first user turn and its latest steps that fit, dropping the oldest whole steps,
as the grader drops them from an episode that outgrows its window (``a2rl_prompts.py``); cutting
the tokens at the end instead (TRL's truncation) would cut the action to learn.

Memory: a step of ``--batch`` rows is run in micro-batches of at most ``MICRO_BATCH_TOKENS``
tokens (gradient accumulation, the same update): 8 rows of 1,024 tokens at once took 18.5 GB on
SmolLM2-135M, past the sandbox's memory limit on a 24 GB machine.

Deadline: with ``--deadline`` (Unix time) training stops after the last step that ends before
it, judged by the mean step time so far, and the model trained so far is saved; the log says
how many planned steps were skipped. The caller reserves time after the deadline to submit.
"""
import json
import os
import random
import sys
import time

import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
from trl import SFTConfig, SFTTrainer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from trainer_args import common_args, script_parser  # copied beside this script

MICRO_BATCH_TOKENS = 4096


def micro_batch(batch, max_len):
    """Rows per forward pass: the largest divisor of ``batch`` whose rows fit in
    ``MICRO_BATCH_TOKENS`` tokens (at least one row)."""
    fits = max(1, MICRO_BATCH_TOKENS // max_len)
    return max(d for d in range(1, batch + 1) if batch % d == 0 and d <= fits)


def chat_tokens(tokenizer, turns):
    """Tokens of a chat as TRL encodes a prompt-completion row (prompt and completion
    templated together)."""
    return len(tokenizer.apply_chat_template(turns, tokenize=True, return_dict=False))


def fit_chat(tokenizer, example, max_len):
    """``example`` with its prompt's oldest whole steps dropped until prompt and completion fit
    in ``max_len`` tokens (system and first user turn kept); unchanged if it fits or is not a
    chat of steps. Returns the example and whether steps were dropped."""
    prompt = example.get("prompt")
    if not isinstance(prompt, list) or len(prompt) < 4 or prompt[0]["role"] != "system":
        return example, False
    head, pairs = prompt[:2], [prompt[i:i + 2] for i in range(2, len(prompt) - 1, 2)]
    # a turn left over after the pairs, kept (a task's rows have none: their last pair ends
    # with the current observation)
    last = prompt[2 + 2 * len(pairs):]

    def with_pairs(start):
        kept = [t for pair in pairs[start:] for t in pair]
        return {**example, "prompt": head + kept + last}

    def fits(start):
        row = with_pairs(start)
        return chat_tokens(tokenizer, row["prompt"] + row["completion"]) <= max_len

    if fits(0):
        return example, False
    low, high = 1, len(pairs)  # the fewest dropped pairs that fit (or all of them)
    while low < high:
        mid = (low + high) // 2
        if fits(mid):
            high = mid
        else:
            low = mid + 1
    return with_pairs(low), True


def to_example(row):
    if "messages" in row:
        return {"messages": row["messages"]}
    if "prompt" in row and "completion" in row:
        prompt, completion = row["prompt"], row["completion"]
    elif "question" in row and "answer" in row:
        prompt, completion = row["question"], row["answer"]
    else:
        raise ValueError(f"cannot tell prompt from answer in fields {sorted(row)}")
    # an interactive task's append-style prompt is already a chat (system, user, assistant, ...)
    turns = prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
    return {"prompt": turns, "completion": [{"role": "assistant", "content": completion}]}


class StopBeforeDeadline(TrainerCallback):
    """Stops training when the next step, at the mean step time so far, would end after the
    deadline."""

    def __init__(self, deadline):
        self.deadline = deadline
        self.began = None
        self.step_s = None
        self.stopped_at = None

    def on_train_begin(self, args, state, control, **kwargs):
        self.began = time.time()

    def on_step_end(self, args, state, control, **kwargs):
        now = time.time()
        self.step_s = (now - self.began) / max(1, state.global_step)
        unfinished = state.global_step < state.max_steps
        if self.deadline and now + self.step_s > self.deadline and unfinished:
            control.should_training_stop = True
            self.stopped_at = state.global_step


def training_config(a, precision):
    """The TRL config; precision and gradient checkpointing are set explicitly (see above)."""
    micro = micro_batch(a.batch, a.max_len)
    return SFTConfig(max_steps=a.steps, per_device_train_batch_size=micro,
                     gradient_accumulation_steps=a.batch // micro, learning_rate=a.lr,
                     lr_scheduler_type="constant_with_warmup", warmup_steps=2,
                     max_length=a.max_len, logging_steps=5, completion_only_loss=True,
                     **common_args(a.out, a.seed, precision))


def arguments():
    """The shared options and SFT's (SftSettings in a2rl/agents/settings.py)."""
    p = script_parser()
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--lr", type=float, required=True)
    p.add_argument("--max-len", type=int, required=True)
    p.add_argument("--lora", action="store_true")
    p.add_argument("--offset", type=int, default=0)
    return p


def round_rows(a):
    """This round's rows: the data shuffled by the seed, the ``offset``-th window of
    steps x batch rows (wrapping around), so consecutive rounds see new rows."""
    with open(a.data) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    random.Random(a.seed).shuffle(rows)
    need = a.steps * a.batch
    start = (a.offset * need) % max(1, len(rows))
    return [rows[(start + i) % len(rows)] for i in range(need)]


def main():
    a = arguments().parse_args()
    torch.manual_seed(a.seed)
    picked = round_rows(a)
    tokenizer = AutoTokenizer.from_pretrained(a.model)
    fitted = [fit_chat(tokenizer, to_example(r), a.max_len) for r in picked]
    dataset = Dataset.from_list([example for example, _ in fitted])
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32)
    peft_config = None
    if a.lora:
        from peft import LoraConfig
        peft_config = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0,
                                 target_modules="all-linear", task_type="CAUSAL_LM")
    deadline = StopBeforeDeadline(a.deadline)
    trainer = SFTTrainer(model=model, args=training_config(a, a.precision),
                         train_dataset=dataset, processing_class=tokenizer,
                         peft_config=peft_config, callbacks=[deadline])
    trainer.train()
    done = trainer.state.global_step
    trainer.save_model(a.out)
    tokenizer.save_pretrained(a.out)
    report = {"saved": a.out, "steps": done, "planned_steps": a.steps,
              "skipped_steps": a.steps - done, "precision": a.precision,
              "step_s": deadline.step_s or 0.0,
              "rows_with_steps_dropped": sum(dropped for _, dropped in fitted)}
    if deadline.stopped_at is not None:
        report["stopped"] = f"deadline: {a.steps - done} of {a.steps} steps skipped"
    with open(os.path.join(a.out, "train_log.json"), "w") as f:
        json.dump(report, f)
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
