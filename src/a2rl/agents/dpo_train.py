"""DPO with TRL, written into code/train.py by the a2rl reference agent `dpo` (next to
code/sft_train.py, whose data reading and deadline callback it shares).

Pairs: for each training row the prompt (one user turn), the row's target reply as ``chosen``
and the starting model's own sampled reply as ``rejected``: the model learns to move towards
the target and away from what it says now, without a judge (none is available to the agent).
Rows whose sample equals the target are dropped (no preference to learn).

Precision: ``--precision`` (default ``$A2RL_PRECISION``, set by the harness from
``a2rl.common.hardware``); bf16 autocast only there, and no gradient checkpointing (TRL turns it
on by default; it only trades time for memory a 135M model does not need).

Deadline: with ``--deadline`` (Unix time) sampling stops early when it has used half of the
time left, and training stops after the last step that ends before the deadline; the model
trained so far is saved. ``train_log.json`` in the output folder reports what was done.
"""
import json
import os
import sys
import time

import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import DPOConfig, DPOTrainer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sft_train import StopBeforeDeadline, round_rows, to_example
from sft_train import arguments as sft_arguments
from trainer_args import common_args


def prompt_and_target(row):
    """(user turn, target reply) of a training row, in any format sft_train reads."""
    example = to_example(row)
    if "messages" in example:
        turns = example["messages"]
        users = [t for t in turns if t["role"] == "user"]
        return users[-1]["content"], turns[-1]["content"]
    return example["prompt"][0]["content"], example["completion"][0]["content"]


def sample_replies(model, tokenizer, prompts, max_new_tokens, temperature, batch, until):
    """One sampled reply per prompt (chat template, left padding); stops at ``until`` (Unix
    time) and returns the replies sampled so far."""
    tokenizer.padding_side = "left"
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    texts = [tokenizer.apply_chat_template([{"role": "user", "content": p}], tokenize=False,
                                           add_generation_prompt=True) for p in prompts]
    replies = []
    model.eval()
    with torch.inference_mode():
        for start in range(0, len(texts), batch):
            if until and time.time() > until:
                break
            enc = tokenizer(texts[start:start + batch], return_tensors="pt", padding=True,
                            add_special_tokens=False)
            out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=True,
                                 temperature=temperature, top_k=0, top_p=1.0,
                                 pad_token_id=tokenizer.pad_token_id)
            new = out[:, enc["input_ids"].shape[1]:]
            replies += tokenizer.batch_decode(new, skip_special_tokens=True)
    return replies


def build_pairs(rows, replies):
    pairs = []
    for row, rejected in zip(rows, replies):
        prompt, chosen = prompt_and_target(row)
        if rejected.strip() == chosen.strip():
            continue
        pairs.append({"prompt": [{"role": "user", "content": prompt}],
                      "chosen": [{"role": "assistant", "content": chosen}],
                      "rejected": [{"role": "assistant", "content": rejected}]})
    return pairs


def training_config(a, precision, steps):
    return DPOConfig(max_steps=steps, per_device_train_batch_size=a.batch, learning_rate=a.lr,
                     beta=a.beta, lr_scheduler_type="constant_with_warmup", warmup_steps=2,
                     max_length=a.max_len, logging_steps=5,
                     **common_args(a.out, a.seed, precision,
                                   use_cpu=not torch.cuda.is_available()))


def arguments():
    """sft_train's options (model, data, out, steps, batch, lr, max-len, lora, seed, offset,
    precision, deadline) and DPO's own; no defaults: the agent passes its settings
    (DpoSettings in a2rl/agents/settings.py)."""
    p = sft_arguments()
    p.add_argument("--beta", type=float, required=True)
    p.add_argument("--sample-tokens", type=int, required=True,
                   help="max new tokens of each sampled (rejected) reply")
    p.add_argument("--temperature", type=float, required=True)
    return p


def main():
    a = arguments().parse_args()
    torch.manual_seed(a.seed)
    picked = round_rows(a)
    tokenizer = AutoTokenizer.from_pretrained(a.model)
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32)
    began = time.time()
    # sampling may use half of the time left; training needs the rest
    sample_until = began + (a.deadline - began) / 2 if a.deadline else 0.0
    replies = sample_replies(model, tokenizer, [prompt_and_target(r)[0] for r in picked],
                             a.sample_tokens, a.temperature, max(a.batch, 8), sample_until)
    pairs = build_pairs(picked, replies)
    sample_s = time.time() - began
    steps = min(a.steps, len(pairs) // a.batch)
    report = {"saved": a.out, "steps": 0, "planned_steps": a.steps, "pairs": len(pairs),
              "sampled": len(replies), "sample_s": round(sample_s, 1),
              "precision": a.precision, "step_s": 0.0}
    if steps < 1:
        report["stopped"] = f"only {len(pairs)} pairs sampled before the deadline"
    else:
        peft_config = None
        if a.lora:
            from peft import LoraConfig
            peft_config = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0,
                                     target_modules="all-linear", task_type="CAUSAL_LM")
        deadline = StopBeforeDeadline(a.deadline)
        trainer = DPOTrainer(model=model, args=training_config(a, a.precision, steps),
                             train_dataset=Dataset.from_list(pairs), processing_class=tokenizer,
                             peft_config=peft_config, callbacks=[deadline])
        trainer.train()
        done = trainer.state.global_step
        trainer.save_model(a.out)
        tokenizer.save_pretrained(a.out)
        report |= {"steps": done, "skipped_steps": a.steps - done,
                   "step_s": round(deadline.step_s or 0.0, 2)}
        if deadline.stopped_at is not None or steps < a.steps:
            report["stopped"] = (f"deadline: {a.steps - done} of {a.steps} steps skipped"
                                 f" ({len(pairs)} pairs)")
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "train_log.json"), "w") as f:
        json.dump(report, f)
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
