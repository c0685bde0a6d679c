"""Reference agent ``sft_grpo``: SFT warm-up on the training data, then online GRPO in the way
the task declares in ``data/rollouts.json``: in the train games of an interactive task
(household, ALFWorld, WebShop) or on the train prompts of a single-turn task with its own
reward (GSM8K, HumanEval; TRL's GRPOTrainer). A task that declares neither keeps the warm-up's
submission, and the log says why.

1. Warm-up: the ``sft`` agent's TRL script (``code/train.py``) on ``data/train.jsonl`` (for the
   interactive tasks step-level prompt -> expert action, in the grader's prompt format; for the
   single-turn ones the train problems' worked answers) for ``warmup_steps`` x
   ``warmup_rounds`` steps (defaults 40 x 1); submit. The warm-up ends by the budget's deadline
   at the latest (it is the run's first valid submission; steps that do not fit are skipped and
   logged).
2. GRPO rounds from the warm-up model (``grpo.py``: sampled lockstep rollouts, group-relative
   advantages, policy-gradient steps on the executed action tokens; or TRL's GRPO on sampled
   replies to the train prompts), submitting each round's model, while the budget allows.

Settings: ``SftGrpoSettings`` (settings.py: warmup_* for the warm-up, the ``grpo`` agent's
fields for GRPO, reserve_s), from ``$A2RL_AGENT_SETTINGS``.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from grpo import grpo_rounds
from plan import Rounds, deadline, log
from settings import SftGrpoSettings, load
from sft import install_train_script, train_round


def main() -> int:
    ws = Path(os.environ["A2RL_WORKSPACE"])
    settings = load(SftGrpoSettings)
    install_train_script(ws)
    rounds, steps, report = Rounds("sft_grpo", ws), settings.warmup_steps, None
    for k in range(1, settings.warmup_rounds + 1):
        model, out = rounds.last or str(ws / "base_model"), ws / "output" / f"sft-{k}"
        log("sft_grpo", f"warm-up round {k}: SFT {steps} steps from {model}")
        report = train_round(ws, model, out, steps, k - 1, deadline(settings.reserve_s),
                             batch=settings.warmup_batch, lr=settings.warmup_lr,
                             max_len=settings.warmup_max_len, reserve_s=settings.reserve_s)
        if report is None or report["steps"] == 0 or not rounds.submit(out, report):
            break
    if not rounds.submitted:
        return rounds.finish("the SFT warm-up made no checkpoint in the budget")
    if report and report.get("stopped"):
        log("sft_grpo", "the warm-up was cut by the deadline: no time left for GRPO")
        return 0
    return grpo_rounds(ws, rounds.last, settings, rounds)


if __name__ == "__main__":
    sys.exit(main())
