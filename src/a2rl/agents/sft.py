"""Reference agent ``sft``: writes a TRL SFTTrainer script into code/, trains the base model on
data/train.jsonl in rounds, saves each round to output/ckpt-<k>, submits it, and goes on while
the budget leaves room for another round.

Settings (environment): A2RL_SFT_STEPS (steps per round, 20), A2RL_SFT_BATCH (8),
A2RL_SFT_LR (5e-5), A2RL_SFT_LORA (0/1), A2RL_SFT_MAX_ROUNDS (5), A2RL_SFT_MAX_LEN (512:
household prompts with their history run past 256 tokens).
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

TRAIN_SCRIPT = r'''"""SFT with TRL, written by the a2rl reference agent `sft`."""
import argparse
import json
import random

import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import SFTConfig, SFTTrainer


def to_example(row):
    if "messages" in row:
        return {"messages": row["messages"]}
    if "prompt" in row and "completion" in row:
        prompt, completion = row["prompt"], row["completion"]
    elif "question" in row and "answer" in row:
        prompt, completion = row["question"], row["answer"]
    else:
        raise ValueError(f"cannot tell prompt from answer in fields {sorted(row)}")
    return {"prompt": [{"role": "user", "content": prompt}],
            "completion": [{"role": "assistant", "content": completion}]}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--max-len", type=int, default=256)
    p.add_argument("--lora", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--offset", type=int, default=0)
    a = p.parse_args()
    torch.manual_seed(a.seed)
    rows = [json.loads(line) for line in open(a.data) if line.strip()]
    random.Random(a.seed).shuffle(rows)
    need = a.steps * a.batch
    start = (a.offset * need) % max(1, len(rows))
    picked = [rows[(start + i) % len(rows)] for i in range(need)]
    dataset = Dataset.from_list([to_example(r) for r in picked])
    tokenizer = AutoTokenizer.from_pretrained(a.model)
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32)
    peft_config = None
    if a.lora:
        from peft import LoraConfig
        peft_config = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0,
                                 target_modules="all-linear", task_type="CAUSAL_LM")
    args = SFTConfig(output_dir=a.out + ".trainer", max_steps=a.steps,
                     per_device_train_batch_size=a.batch, learning_rate=a.lr,
                     lr_scheduler_type="constant_with_warmup", warmup_steps=2,
                     max_length=a.max_len, logging_steps=5, save_strategy="no",
                     report_to="none", use_cpu=True, seed=a.seed, completion_only_loss=True)
    trainer = SFTTrainer(model=model, args=args, train_dataset=dataset,
                         processing_class=tokenizer, peft_config=peft_config)
    trainer.train()
    trainer.save_model(a.out)
    tokenizer.save_pretrained(a.out)
    print(json.dumps({"saved": a.out, "steps": a.steps}))


if __name__ == "__main__":
    main()
'''


def setting(name, default, kind=int):
    return kind(os.environ.get(f"A2RL_SFT_{name}", default))


def status():
    out = subprocess.run(["a2rl", "status"], capture_output=True, text=True)
    return json.loads(out.stdout) if out.returncode == 0 else {}


def log(message):
    print(f"[sft-agent {time.strftime('%H:%M:%S')}] {message}", flush=True)


def main() -> int:
    ws = Path(os.environ["A2RL_WORKSPACE"])
    (ws / "code" / "train.py").write_text(TRAIN_SCRIPT)
    steps, batch = setting("STEPS", 20), setting("BATCH", 8)
    lora = setting("LORA", 0) == 1
    model, round_seconds = str(ws / "base_model"), None
    for k in range(1, setting("MAX_ROUNDS", 5) + 1):
        left = status().get("time_left_s", float(os.environ.get("A2RL_TIME_LIMIT_S", 0)))
        if round_seconds is not None and left < 1.2 * round_seconds:
            log(f"stopping: {left:.0f}s left, a round takes about {round_seconds:.0f}s")
            break
        started = time.monotonic()
        out = ws / "output" / f"ckpt-{k}"
        # LoRA rounds restart from the base with a longer schedule; full fine-tuning continues
        round_steps = steps * k if lora else steps
        cmd = [sys.executable, str(ws / "code" / "train.py"), "--model", model,
               "--data", str(ws / "data" / "train.jsonl"), "--out", str(out),
               "--steps", str(round_steps), "--batch", str(batch), "--lr", str(setting("LR", 5e-5, float)),
               "--max-len", str(setting("MAX_LEN", 512)), "--seed", os.environ.get("A2RL_SEED", "0"),
               "--offset", str(k - 1)] + (["--lora"] if lora else [])
        log(f"round {k}: training {round_steps} steps from {model}")
        if subprocess.call(cmd, cwd=ws / "code") != 0:
            log("training failed")
            return 1
        answer = subprocess.run(["a2rl", "submit", str(out)], capture_output=True, text=True)
        log(f"round {k}: submitted {out.name}: {answer.stdout.strip()} {answer.stderr.strip()}")
        if answer.returncode != 0:
            break
        if not lora:
            model = str(out)
        round_seconds = time.monotonic() - started
    return 0


if __name__ == "__main__":
    sys.exit(main())
