"""Reference agent ``sft``: copies the TRL SFT script (``sft_train.py``) into code/train.py,
trains the base model on data/train.jsonl in rounds, saves each round to output/ckpt-<k>,
submits it, and goes on while the budget leaves room for another round.

Budget: each round trains until the budget's end less ``reserve_s`` at the latest (the
script stops after the last step that fits, judged by its own measured step time, and saves);
a later round runs only if at least a quarter of its steps fit, at the speed measured so far
(with LoRA, which restarts from the base, more steps than the last round's).
What was cut or skipped is said in the log. If not even one step fitted, the base model is
submitted, so that the run still ends with a valid submission.

Settings: ``SftSettings`` (settings.py: steps, batch, lr, max_len, lora, max_rounds,
reserve_s), from ``$A2RL_AGENT_SETTINGS``. Precision: the agent config's ``precision``, passed
as A2RL_PRECISION.
"""

import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from plan import Rounds, deadline, run_round
from plan import log as plan_log
from settings import SftSettings, load

TRAIN_SCRIPT = Path(__file__).resolve().with_name("sft_train.py")
TRAINER_ARGS = TRAIN_SCRIPT.with_name("trainer_args.py")  # the script imports it


def log(message):
    plan_log("sft", message)


def install_train_script(ws: Path) -> Path:
    target = ws / "code" / "train.py"
    shutil.copy(TRAIN_SCRIPT, target)
    shutil.copy(TRAINER_ARGS, ws / "code" / TRAINER_ARGS.name)
    return target


def train_round(ws: Path, model: str, out: Path, steps: int, offset: int, until: float, *,
                batch: int, lr: float, max_len: int, reserve_s: float, lora: bool = False):
    """One SFT round that ends by ``until``: the script's report (steps done, step time), or
    None when it failed or was still running at the deadline (logged)."""
    cmd = [sys.executable, str(ws / "code" / "train.py"), "--model", model,
           "--data", str(ws / "data" / "train.jsonl"), "--out", str(out),
           "--steps", str(steps), "--batch", str(batch), "--lr", str(lr),
           "--max-len", str(max_len),
           "--seed", os.environ.get("A2RL_SEED", "0"), "--offset", str(offset),
           "--deadline", f"{until:.1f}"] + (["--lora"] if lora else [])
    return run_round("sft", cmd, until, ws, out, reserve_s)


def steps_that_fit(until: float, step_s: float, overhead_s: float) -> int:
    return max(0, int((until - time.time() - overhead_s) / max(step_s, 1e-3)))


def main() -> int:
    ws = Path(os.environ["A2RL_WORKSPACE"])
    settings = load(SftSettings)
    install_train_script(ws)
    steps, lora = settings.steps, settings.lora
    model, speed, rounds = str(ws / "base_model"), None, Rounds("sft", ws)
    for k in range(1, settings.max_rounds + 1):
        # LoRA rounds restart from the base with a longer schedule; full fine-tuning continues
        round_steps = steps * k if lora else steps
        until = deadline(settings.reserve_s)
        if speed is not None:
            fit = steps_that_fit(until, *speed)
            # a LoRA round restarts from the base: fewer steps than the last round's is worse
            enough = round_steps - steps if lora else max(1, round_steps // 4)
            if fit < max(1, enough):
                rounds.skip(k, f"{fit} of its {round_steps} steps fit in "
                               f"{until - time.time():.0f}s at {speed[0]:.1f}s a step")
                break
        started = time.time()
        out = ws / "output" / f"ckpt-{k}"
        log(f"round {k}: training {round_steps} steps from {model}")
        report = train_round(ws, model, out, round_steps, k - 1, until, batch=settings.batch,
                             lr=settings.lr, max_len=settings.max_len,
                             reserve_s=settings.reserve_s, lora=lora)
        if report is None or report["steps"] == 0:
            break
        # seconds a step, and the round's fixed cost (loading, tokenizing, saving)
        speed = (report["step_s"], time.time() - started - report["steps"] * report["step_s"])
        if not rounds.submit(out, report):
            break
        if not lora:
            model = str(out)
    return rounds.finish()


if __name__ == "__main__":
    sys.exit(main())
