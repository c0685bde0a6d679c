"""Reference agent ``dpo``: copies the TRL DPO script (``dpo_train.py``, with the SFT script it
shares code with) into code/, and in rounds builds preference pairs from data/train.jsonl (the
row's target reply chosen, the current model's own sampled reply rejected), trains with
``DPOTrainer``, saves output/dpo-<k> and submits it, while the budget leaves room for another
round. Works on any task whose training rows have targets (prompt/completion,
question/answer or messages).

Budget: as ``sft`` (``plan``): each round ends by the budget's end less ``A2RL_RESERVE_S``;
a later round runs only if a quarter of the last round's time (sampling included) is left;
without any trained checkpoint the base model is submitted.

Settings (environment): A2RL_DPO_STEPS (steps per round, 20), A2RL_DPO_BATCH (4),
A2RL_DPO_LR (5e-6), A2RL_DPO_BETA (0.1), A2RL_DPO_LORA (0/1), A2RL_DPO_MAX_ROUNDS (3),
A2RL_DPO_MAX_LEN (768), A2RL_DPO_SAMPLE_TOKENS (128), A2RL_DPO_TEMPERATURE (0.8).
Precision: A2RL_PRECISION, as for sft.
"""

import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from plan import deadline, run_round, submit, submit_base_model
from plan import log as plan_log

HERE = Path(__file__).resolve().parent


def setting(name, default, kind=int):
    return kind(os.environ.get(f"A2RL_DPO_{name}", default))


def log(message):
    plan_log("dpo", message)


def install_train_script(ws: Path) -> Path:
    """code/train.py (DPO) and code/sft_train.py, which it imports."""
    shutil.copy(HERE / "sft_train.py", ws / "code" / "sft_train.py")
    target = ws / "code" / "train.py"
    shutil.copy(HERE / "dpo_train.py", target)
    return target


def train_round(ws: Path, model: str, out: Path, steps: int, offset: int, until: float):
    """One round: sample rejected replies from ``model``, train, save by ``until``. The
    script's report, or None when it failed or was stopped at the deadline (logged)."""
    cmd = [sys.executable, str(ws / "code" / "train.py"), "--model", model,
           "--data", str(ws / "data" / "train.jsonl"), "--out", str(out),
           "--steps", str(steps), "--batch", str(setting("BATCH", 4)),
           "--lr", str(setting("LR", 5e-6, float)), "--beta", str(setting("BETA", 0.1, float)),
           "--max-len", str(setting("MAX_LEN", 768)),
           "--sample-tokens", str(setting("SAMPLE_TOKENS", 128)),
           "--temperature", str(setting("TEMPERATURE", 0.8, float)),
           "--seed", os.environ.get("A2RL_SEED", "0"), "--offset", str(offset),
           "--deadline", f"{until:.1f}"] + (["--lora"] if setting("LORA", 0) == 1 else [])
    return run_round("dpo", cmd, until, ws, out)


def main() -> int:
    ws = Path(os.environ["A2RL_WORKSPACE"])
    install_train_script(ws)
    steps = setting("STEPS", 20)
    model, round_s, submitted = str(ws / "base_model"), None, 0
    for k in range(1, setting("MAX_ROUNDS", 3) + 1):
        until = deadline()
        if round_s is not None and until - time.time() < round_s / 4:
            log(f"skipping round {k} and after: {until - time.time():.0f}s left, a round "
                f"took {round_s:.0f}s")
            break
        started = time.time()
        out = ws / "output" / f"dpo-{k}"
        log(f"round {k}: sampling and {steps} DPO steps from {model}")
        report = train_round(ws, model, out, steps, k - 1, until)
        if report is None or report["steps"] == 0:
            break
        round_s = time.time() - started
        if not submit("dpo", out):
            break
        submitted += 1
        if report.get("stopped"):
            break
        model = str(out)
    if not submitted:
        submit_base_model("dpo", ws, "no trained checkpoint was submitted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
