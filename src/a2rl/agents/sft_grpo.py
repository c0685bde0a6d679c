"""Reference agent ``sft_grpo``: SFT warm-up on the expert trajectories, then online GRPO in the
train games (interactive tasks: household / ALFWorld).

1. Warm-up: the ``sft`` agent's TRL script (``code/train.py``) on ``data/train.jsonl`` (step-level
   prompt -> expert action, in the grader's prompt format) for A2RL_SFT_STEPS x
   A2RL_SFT_WARMUP_ROUNDS steps (defaults 40 x 1; A2RL_SFT_BATCH 8, A2RL_SFT_LR 5e-5); submit.
2. GRPO rounds from the warm-up model (``grpo.py``: sampled lockstep rollouts, group-relative
   advantages, policy-gradient steps on the executed action tokens), submitting each round's
   model, while the budget allows.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from grpo import grpo_rounds, log
from sft import TRAIN_SCRIPT, setting


def main() -> int:
    ws = Path(os.environ["A2RL_WORKSPACE"])
    (ws / "code" / "train.py").write_text(TRAIN_SCRIPT)
    model = str(ws / "base_model")
    steps = setting("STEPS", 40)
    for k in range(1, setting("WARMUP_ROUNDS", 1) + 1):
        out = ws / "output" / f"sft-{k}"
        cmd = [sys.executable, str(ws / "code" / "train.py"), "--model", model,
               "--data", str(ws / "data" / "train.jsonl"), "--out", str(out),
               "--steps", str(steps), "--batch", str(setting("BATCH", 8)),
               "--lr", str(setting("LR", 5e-5, float)), "--max-len", str(setting("MAX_LEN", 512)),
               "--seed", os.environ.get("A2RL_SEED", "0"), "--offset", str(k - 1)]
        started = time.monotonic()
        log(f"warm-up round {k}: SFT {steps} steps from {model}")
        if subprocess.call(cmd, cwd=ws / "code") != 0:
            log("SFT warm-up failed")
            return 1
        answer = subprocess.run(["a2rl", "submit", str(out)], capture_output=True, text=True,
                                check=False)
        log(f"warm-up round {k}: submitted {out.name} after {time.monotonic() - started:.0f}s: "
            f"{answer.stdout.strip()} {answer.stderr.strip()}")
        model = str(out)
    return grpo_rounds(ws, model, first_round=1)


if __name__ == "__main__":
    sys.exit(main())
