"""How often a policy's sampled reply is not the action the episode recorded (a one-off for
issue #32): GRPO's rollouts at temperature 1, played by the agent's data folder's own runner
as the GRPO script plays them, counting each step's parse method (``exact``, ``closest``, ...)
and the steps whose reply differs from the action the chat then shows. Before commit 5628ba2
the GRPO loss scored the recorded action, not the reply, at those steps.

    python experiments/grpo_probe/mapped_replies.py --data <prepared>/household/data \
        --model <checkpoint> [--games 8 --group 4 --temperature 1.0]
"""

from __future__ import annotations

import argparse
import collections
import importlib
import json
import random
import sys
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="an agent's data folder (data/rollouts.json)")
    ap.add_argument("--model", required=True)
    ap.add_argument("--games", type=int, default=8)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--max-steps", type=int, default=12)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    sys.path.insert(0, a.data)
    import torch
    from a2rl_envs import GeneratorPolicy, PromptFormat, play
    from a2rl_episode_cache import ModelGenerator
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from a2rl.agents.grpo_train import data_env

    declared = data_env(Path(a.data))  # checked as the GRPO script checks it
    env_module = importlib.import_module(declared["module"])
    fmt = PromptFormat(**declared["prompt"]) if declared.get("prompt") else env_module.PROMPT
    games = env_module.load_games(Path(a.data) / declared["games"])
    random.seed(a.seed)
    torch.manual_seed(a.seed)
    tok = AutoTokenizer.from_pretrained(a.model)
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.bfloat16).eval()
    policy = GeneratorPolicy(ModelGenerator(model, tok, a.temperature), 16,
                             actions=declared.get("actions", "closest"))
    picked = random.sample(list(games), a.games)
    episodes = play([g for g in picked for _ in range(a.group)],
                    getattr(env_module, declared["env"]), policy, a.max_steps, fmt)
    steps = [s for e in episodes for s in e.steps]
    print(json.dumps({"episodes": len(episodes), "won": sum(e.won for e in episodes),
                      "steps": len(steps),
                      "methods": collections.Counter(s["method"] for s in steps),
                      "reply_is_not_the_action": sum(s["reply"] != s["action"] for s in steps)}))


if __name__ == "__main__":
    main()
