"""What the reference agents' TRL training scripts (sft_train, dpo_train, grpo_single_train)
share: the options each takes (the model, the data, where to save, the seed, the precision the
harness chose, the round's deadline) and what every TRL config sets alike (where the Trainer
writes, no checkpoints or reports, no gradient checkpointing, the model's KV cache kept). Copied
into code/ beside the script that imports it, as the scripts are (standalone: no a2rl)."""

import argparse
import os


def script_parser():
    """The options every training script takes; the script adds its method's, with no
    defaults (the agent passes its settings, a2rl/agents/settings.py)."""
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=0)
    # the harness decides (a2rl.common.hardware): bf16 only where the hardware computes it natively
    p.add_argument("--precision", choices=("bf16", "fp32"),
                   default=os.environ.get("A2RL_PRECISION", "fp32"))
    p.add_argument("--deadline", type=float, default=0.0,
                   help="Unix time by which training must end (0: none)")
    return p


def common_args(out, seed, precision, use_cpu=True):
    """Keyword arguments for a TRL ``*Config``: TRL turns gradient checkpointing on by default,
    which only trades time for memory a small model does not need; the Trainer writes
    ``use_cache`` into the saved model's config (default False), and the model would then run
    without its KV cache wherever its config decides. The sandbox exposes no GPU: the harness
    chose the precision for the CPU."""
    return dict(output_dir=out + ".trainer", save_strategy="no", report_to="none",
                use_cpu=use_cpu, seed=seed, bf16=precision == "bf16", fp16=False,
                activation_checkpointing=False, use_cache=True)
