"""Reference agent ``grpo``: online GRPO in the train games of an interactive task (household /
ALFWorld), starting from the base model, submitting each round's model (the grader keeps the
best so far).

It writes ``code/grpo_train.py`` (below) and runs it in rounds. One GRPO iteration:

1. pick ``games`` train games, favouring games the policy wins 20-80 % of the time (the ones
   with a learning signal; unseen games count as uncertain);
2. play ``group`` episodes of each in lockstep (``data/a2rl_envs.play``, one batched sampled
   generation per step, temperature ``temp``, reply parsed to the closest admissible action),
   with the grader's prompt (``data/household_env.PROMPT``);
3. episode return = won - ``step_cost`` x steps (+ ``expert_bonus`` x the share of steps that
   took the environment's expert action, a shaping term the train games offer); advantage =
   (return - group mean) / group std (groups whose episodes all scored the same give no signal
   and are skipped);
4. policy-gradient steps on the executed action's tokens (+ end of turn) of every step of every
   episode with a non-zero advantage: loss = -A x mean token log-prob, one optimizer step per
   minibatch of ``minibatch`` samples, each sample used once (GRPO with one iteration per
   generation; the policy moves a few small steps per batch of rollouts, so the PPO ratio stays
   near 1 and is left out); no KL term. Only the top ``train_layers`` layers (and the final
   norm) are trained, which keeps the backward pass cheap on CPU.

Cost on CPU: the prompts dominate (a ~300-token prompt per step of every episode, ~10
generated tokens), so rollouts run on a bf16 copy of the model and updates under bf16 autocast
where the CPU has AVX512-BF16 (about 2x and 1.6x faster than fp32 on this 2-core machine), and
the vocabulary projection is applied to action positions only.

Sampling by generation (not by ranking the admissible actions by log-probability) keeps the
training policy the same as the grader's (greedy generation + parsing); the gradient still
goes only through the admissible action that was executed.

Settings (environment): A2RL_GRPO_ROUNDS (4), A2RL_GRPO_ITERS (3 per round), A2RL_GRPO_GAMES
(8 per iteration), A2RL_GRPO_GROUP (4), A2RL_GRPO_LR (1e-5), A2RL_GRPO_TEMP (1.0),
A2RL_GRPO_TRAIN_LAYERS (15), A2RL_GRPO_MINIBATCH (16), A2RL_GRPO_STEP_COST (0.01),
A2RL_GRPO_EXPERT_BONUS (0),
A2RL_GRPO_PRECISION (auto | bf16 | fp32), A2RL_GRPO_MAX_STEPS (from data/README, default 12).
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

GRPO_SCRIPT = r'''"""Online GRPO in the train games, written by the a2rl reference agents `grpo` / `sft_grpo`."""
import argparse
import copy
import json
import math
import random
import sys
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def chat(tokenizer, user):
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template([{"role": "user", "content": user}],
                                             tokenize=False, add_generation_prompt=True)
    return user


def encode(tokenizer, text):
    bos = tokenizer.bos_token
    return tokenizer(text, add_special_tokens=not (bos and text.startswith(bos)))["input_ids"]


class SamplingPolicy:
    """One batched sampled generation for all unfinished episodes; replies parsed to actions."""

    def __init__(self, model, tokenizer, parse_action, choice, temperature, max_new_tokens=16):
        self.model, self.tok, self.parse, self.Choice = model, tokenizer, parse_action, choice
        self.temperature, self.max_new_tokens = temperature, max_new_tokens
        self.eos = [i for i in {tokenizer.eos_token_id,
                                tokenizer.convert_tokens_to_ids("<|im_end|>")} if i is not None
                    and i != tokenizer.unk_token_id]

    @torch.no_grad()
    def choose(self, views):
        ids = [encode(self.tok, chat(self.tok, v.prompt)) for v in views]
        batch = self.tok.pad({"input_ids": ids}, padding=True, return_tensors="pt")
        out = self.model.generate(**batch, do_sample=self.temperature > 0,
                                  temperature=self.temperature or None, top_k=0, top_p=1.0,
                                  max_new_tokens=self.max_new_tokens, eos_token_id=self.eos,
                                  pad_token_id=self.tok.pad_token_id)
        texts = self.tok.batch_decode(out[:, batch["input_ids"].shape[1]:],
                                      skip_special_tokens=True)
        choices = []
        for v, text in zip(views, texts):
            action, method = self.parse(text, v.admissible)
            choices.append(self.Choice(action, text, method))
        return choices


def use_bf16(choice):
    """bf16 where the hardware does it fast (a GPU, or a CPU with AVX512-BF16/AMX: about 2x
    faster rollouts and 1.6x faster updates than fp32 on 2 cores); fp32 elsewhere."""
    if choice != "auto":
        return choice == "bf16"
    if torch.cuda.is_available():
        return True
    check = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
    return bool(check and check())


def action_logprobs(model, tokenizer, prompts, actions, eos_id):
    """Mean log-prob of each action's tokens (+ end of turn) after its chat-formatted prompt.
    The vocabulary projection runs on the action positions only (a fifth of the model's
    FLOPs per token would go to prompt positions whose logits are never used)."""
    seqs, starts = [], []
    for p, a in zip(prompts, actions):
        prompt_ids = encode(tokenizer, chat(tokenizer, p))
        action_ids = tokenizer(a, add_special_tokens=False)["input_ids"] + [eos_id]
        seqs.append(prompt_ids + action_ids)
        starts.append(len(prompt_ids))
    width = max(map(len, seqs))
    pad = tokenizer.pad_token_id
    input_ids = torch.full((len(seqs), width), pad)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        input_ids[i, :len(s)] = torch.tensor(s)
        mask[i, :len(s)] = 1
    hidden = model.model(input_ids=input_ids, attention_mask=mask).last_hidden_state
    out = []
    for i, s in enumerate(seqs):
        positions = torch.arange(starts[i] - 1, len(s) - 1)
        logits = model.lm_head(hidden[i, positions]).float()
        targets = input_ids[i, positions + 1]
        out.append(torch.log_softmax(logits, -1).gather(-1, targets[:, None]).mean())
    return torch.stack(out)


def freeze_lower_layers(model, train_layers):
    """Train only the top ``train_layers`` decoder layers and the final norm: the frozen lower
    layers build no autograd graph, so the backward pass stops at them."""
    layers = model.model.layers
    keep = max(0, len(layers) - train_layers)
    for param in model.parameters():
        param.requires_grad = False
    for layer in layers[keep:]:
        for param in layer.parameters():
            param.requires_grad = True
    for param in model.model.norm.parameters():
        param.requires_grad = True
    return [q for q in model.parameters() if q.requires_grad]


def pick_games(games, stats, n):
    """``n`` distinct games, favouring those won 20-80 % of the time so far (groups whose
    episodes all end alike carry no signal); unseen games count as uncertain."""
    def weight(g):
        won, played = stats.get(g, [0, 0])
        return 1.0 if played == 0 or 0.2 <= won / played <= 0.8 else 0.25

    picked, pool = [], list(games)
    while pool and len(picked) < n:
        g = random.choices(pool, weights=[weight(x) for x in pool])[0]
        pool.remove(g)
        picked.append(g)
    return picked


def expert_agreement(episode):
    """Share of an episode's steps whose action is the environment's expert action from that
    state (0 when no step has an expert label)."""
    labelled = [s for s in episode.steps if s.get("expert")]
    return sum(s["action"] == s["expert"] for s in labelled) / len(labelled) if labelled else 0.0


def episode_return(episode, step_cost, expert_bonus):
    """won - step_cost x steps + expert_bonus x expert agreement: the bonus shapes the sparse
    win signal so that groups which all lose (or all win) still rank their episodes."""
    return (float(episode.won) - step_cost * episode.n_steps
            + expert_bonus * expert_agreement(episode))


def group_samples(picked, episodes, group, step_cost, stats, expert_bonus=0.0):
    """(prompt, action, advantage) for every step of every episode whose group's returns
    differ (``episode_return``); advantage = (return - group mean) / group std. Updates
    ``stats`` (per-game wins and plays)."""
    samples = []
    for k, g in enumerate(picked):
        episodes_k = episodes[k * group:(k + 1) * group]
        returns = [episode_return(e, step_cost, expert_bonus) for e in episodes_k]
        won, played = stats.get(g, [0, 0])
        stats[g] = [won + sum(e.won for e in episodes_k), played + len(episodes_k)]
        mean = sum(returns) / len(returns)
        std = math.sqrt(sum((r - mean) ** 2 for r in returns) / len(returns))
        if std < 1e-6:
            continue
        for e, r in zip(episodes_k, returns):
            samples.extend((s["prompt"], s["action"], (r - mean) / std) for s in e.steps)
    return samples


def update(model, tok, opt, params, samples, minibatch, eos_id, bf16):
    """One pass over the samples in shuffled minibatches, one optimizer step each: loss =
    -advantage x mean action-token log-prob. Each sample is used once and the policy moves
    only a few small steps per batch of rollouts, so the PPO ratio stays near 1 and is left
    out (GRPO with one iteration per generation)."""
    random.shuffle(samples)
    losses = []
    for i in range(0, len(samples), minibatch):
        chunk = samples[i:i + minibatch]
        adv = torch.tensor([c[2] for c in chunk])
        opt.zero_grad()
        with torch.autocast(model.device.type, dtype=torch.bfloat16, enabled=bf16):
            lp = action_logprobs(model, tok, [c[0] for c in chunk], [c[1] for c in chunk],
                                 eos_id)
        loss = -(adv * lp.float()).mean()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        losses.append(float(loss.detach()))
    return losses


def arguments():
    """The script's options (``scripts/probe_grpo.py`` checks its pass-through options here)."""
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--iterations", type=int, default=3)
    p.add_argument("--games", type=int, default=8)
    p.add_argument("--group", type=int, default=4)
    p.add_argument("--lr", type=float, default=1e-5)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--max-steps", type=int, default=12)
    p.add_argument("--step-cost", type=float, default=0.01)
    p.add_argument("--expert-bonus", type=float, default=0.0,
                   help="return bonus x share of steps that took the env's expert action")
    p.add_argument("--train-layers", type=int, default=15)
    p.add_argument("--minibatch", type=int, default=16)
    p.add_argument("--precision", default="auto", choices=("auto", "bf16", "fp32"))
    p.add_argument("--stats", default=None, help="json file of per-game win counts (kept)")
    p.add_argument("--seed", type=int, default=0)
    return p


def main():
    a = arguments().parse_args()
    sys.path.insert(0, a.data)
    from household_env import PROMPT, HouseholdEnv, load_games
    from a2rl_envs import Choice, parse_action, play

    random.seed(a.seed)
    torch.manual_seed(a.seed)
    bf16 = use_bf16(a.precision)
    tok = AutoTokenizer.from_pretrained(a.model)
    tok.padding_side = "left"
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32)
    params = freeze_lower_layers(model, a.train_layers)
    opt = torch.optim.AdamW(params, lr=a.lr, weight_decay=0.0)
    # rollouts run on a bf16 copy, refreshed from the fp32 weights before each iteration
    sampler = copy.deepcopy(model).to(torch.bfloat16) if bf16 else model
    eos_id = tok.convert_tokens_to_ids("<|im_end|>")
    if eos_id is None or eos_id == tok.unk_token_id:
        eos_id = tok.eos_token_id

    games = load_games(Path(a.data) / "games")
    stats_path = Path(a.stats) if a.stats else None
    stats = json.loads(stats_path.read_text()) if stats_path and stats_path.exists() else {}
    policy = SamplingPolicy(sampler, tok, parse_action, Choice, a.temperature)
    log = []
    for it in range(a.iterations):
        started = time.time()
        picked = pick_games(games, stats, a.games)
        if sampler is not model:
            sampler.load_state_dict(model.state_dict())
        sampler.eval()
        episodes = play([g for g in picked for _ in range(a.group)], HouseholdEnv, policy,
                        a.max_steps, PROMPT, keep_prompts=True)
        rolled = time.time()
        samples = group_samples(picked, episodes, a.group, a.step_cost, stats, a.expert_bonus)
        model.train()
        losses = update(model, tok, opt, params, samples, a.minibatch, eos_id, bf16)
        row = {"iteration": it, "episodes": len(episodes),
               "success": 100.0 * sum(e.won for e in episodes) / len(episodes),
               "train_steps": len(samples), "updates": len(losses),
               "loss": sum(losses) / max(1, len(losses)),
               "rollout_s": round(rolled - started, 1),
               "update_s": round(time.time() - rolled, 1),
               "seconds": round(time.time() - started, 1)}
        log.append(row)
        print(json.dumps(row), flush=True)
    model.save_pretrained(a.out)
    tok.padding_side = "right"
    tok.save_pretrained(a.out)
    if stats_path:
        stats_path.write_text(json.dumps(stats))
    Path(a.out, "grpo_log.json").write_text(json.dumps(log, indent=1))
    print(json.dumps({"saved": a.out, "success": [r["success"] for r in log]}))


if __name__ == "__main__":
    main()
'''


def setting(name, default, kind=int):
    return kind(os.environ.get(f"A2RL_GRPO_{name}", str(default)))


def status():
    out = subprocess.run(["a2rl", "status"], capture_output=True, text=True, check=False)
    return json.loads(out.stdout) if out.returncode == 0 else {}


def log(message):
    print(f"[grpo-agent {time.strftime('%H:%M:%S')}] {message}", flush=True)


def time_left(default_s: float) -> float:
    return status().get("time_left_s", default_s)


def grpo_rounds(ws: Path, model: str, first_round: int = 1) -> int:
    """Run GRPO rounds from ``model`` while the budget allows, each from the previous round's
    model, and submit every round's model: the grader's answer (score, best so far) is the
    feedback, and sampled train success is no guide across rounds because the games picked
    shift towards the uncertain ones. Returns 0, or 1 when the training script fails."""
    script = ws / "code" / "grpo_train.py"
    script.write_text(GRPO_SCRIPT)
    limit = float(os.environ.get("A2RL_TIME_LIMIT_S", "0"))
    round_seconds = None
    for k in range(first_round, first_round + setting("ROUNDS", 4)):
        left = time_left(limit)
        if round_seconds is not None and left < 1.3 * round_seconds:
            log(f"stopping: {left:.0f}s left, a round takes about {round_seconds:.0f}s")
            break
        started = time.monotonic()
        out = ws / "output" / f"grpo-{k}"
        cmd = [sys.executable, str(script), "--model", model, "--data", str(ws / "data"),
               "--out", str(out), "--iterations", str(setting("ITERS", 3)),
               "--games", str(setting("GAMES", 8)), "--group", str(setting("GROUP", 4)),
               "--lr", str(setting("LR", 1e-5, float)),
               "--minibatch", str(setting("MINIBATCH", 16)),
               "--precision", setting("PRECISION", "auto", str),
               "--temperature", str(setting("TEMP", 1.0, float)),
               "--max-steps", str(setting("MAX_STEPS", 12)),
               "--step-cost", str(setting("STEP_COST", 0.01, float)),
               "--expert-bonus", str(setting("EXPERT_BONUS", 0.0, float)),
               "--train-layers", str(setting("TRAIN_LAYERS", 15)),
               "--stats", str(ws / "code" / "grpo_stats.json"),
               "--seed", str(int(os.environ.get("A2RL_SEED", "0")) * 100 + k)]
        log(f"round {k}: GRPO from {model}")
        if subprocess.call(cmd, cwd=ws / "code") != 0:
            log("GRPO failed")
            return 1
        round_seconds = time.monotonic() - started  # training only: the grading may be free
        success = [r["success"] for r in json.loads((out / "grpo_log.json").read_text())]
        answer = subprocess.run(["a2rl", "submit", str(out)], capture_output=True, text=True,
                                check=False)
        log(f"round {k} ({round_seconds:.0f}s): sampled train success {success}; submitted: "
            f"{answer.stdout.strip()} {answer.stderr.strip()}")
        if answer.returncode != 0:
            break
        model = str(out)
    return 0


def main() -> int:
    ws = Path(os.environ["A2RL_WORKSPACE"])
    return grpo_rounds(ws, str(ws / "base_model"))


if __name__ == "__main__":
    sys.exit(main())
