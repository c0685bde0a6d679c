"""Reference agent ``dpo``: copies the TRL DPO script (``dpo_train.py``, with the SFT script it
shares code with) into code/, and in rounds builds preference pairs from data/train.jsonl (the
row's target reply chosen, the current model's own sampled reply rejected), trains with
``DPOTrainer``, saves output/dpo-<k> and submits it, while the budget leaves room for another
round. Works on any task whose training rows have targets (prompt/completion,
question/answer or messages).

Budget: as ``sft`` (``plan``): each round ends by the budget's end less ``reserve_s``;
a later round runs only if a quarter of the last round's time (sampling included) is left;
without any trained checkpoint the base model is submitted.

Settings: ``DpoSettings`` (settings.py: steps, batch, lr, beta, max_len, sample_tokens,
temperature, lora, max_rounds, reserve_s), from ``$A2RL_AGENT_SETTINGS``. Precision: the agent
config's ``precision``, passed as A2RL_PRECISION.
"""

import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from plan import Rounds, deadline, run_round
from plan import log as plan_log
from settings import DpoSettings, load

HERE = Path(__file__).resolve().parent


def log(message):
    plan_log("dpo", message)


def install_train_script(ws: Path) -> Path:
    """code/train.py (DPO) and code/sft_train.py and trainer_args.py, which it imports."""
    for imported in ("sft_train.py", "trainer_args.py"):
        shutil.copy(HERE / imported, ws / "code" / imported)
    target = ws / "code" / "train.py"
    shutil.copy(HERE / "dpo_train.py", target)
    return target


def method_args(s: DpoSettings) -> list[str]:
    """The training script's options for these settings."""
    return ["--steps", str(s.steps), "--batch", str(s.batch), "--lr", str(s.lr),
            "--beta", str(s.beta), "--max-len", str(s.max_len),
            "--sample-tokens", str(s.sample_tokens), "--temperature", str(s.temperature)] + (
                ["--lora"] if s.lora else [])


def train_round(ws: Path, model: str, out: Path, offset: int, until: float,
                s: DpoSettings):
    """One round: sample rejected replies from ``model``, train, save by ``until``. The
    script's report, or None when it failed or was stopped at the deadline (logged)."""
    cmd = [sys.executable, str(ws / "code" / "train.py"), "--model", model,
           "--data", str(ws / "data" / "train.jsonl"), "--out", str(out), *method_args(s),
           "--seed", os.environ.get("A2RL_SEED", "0"), "--offset", str(offset),
           "--deadline", f"{until:.1f}"]
    return run_round("dpo", cmd, until, ws, out, s.reserve_s)


def main() -> int:
    ws = Path(os.environ["A2RL_WORKSPACE"])
    settings = load(DpoSettings)
    install_train_script(ws)
    model, round_s, rounds = str(ws / "base_model"), None, Rounds("dpo", ws)
    for k in range(1, settings.max_rounds + 1):
        until = deadline(settings.reserve_s)
        if round_s is not None and until - time.time() < round_s / 4:
            rounds.skip(k, f"{until - time.time():.0f}s left, a round took {round_s:.0f}s")
            break
        started = time.time()
        out = ws / "output" / f"dpo-{k}"
        log(f"round {k}: sampling and {settings.steps} DPO steps from {model}")
        report = train_round(ws, model, out, k - 1, until, settings)
        if report is None or report["steps"] == 0:
            break
        round_s = time.time() - started
        if not rounds.submit(out, report):
            break
        model = str(out)
    return rounds.finish()


if __name__ == "__main__":
    sys.exit(main())
