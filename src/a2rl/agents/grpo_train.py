"""Online GRPO in the train games, written into code/grpo_train.py by the a2rl reference
agents `grpo` / `sft_grpo` (the method: see a2rl/agents/grpo.py).

Precision: ``--precision`` (default ``$A2RL_PRECISION``, set by the harness from
``a2rl.common.hardware``): with bf16, rollouts run on a bf16 copy of the policy and updates
under bf16 autocast; with fp32 (any CPU without native bf16) everything stays fp32.
Deadline: with ``--deadline`` an iteration starts only if it should end before it, and each
finished iteration is saved; a round with no iteration saves nothing.
"""
import argparse
import copy
import importlib
import json
import math
import os
import random
import shutil
import sys
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def runner():
    """The task's copy of the episode runner (``data/a2rl_envs.py``, on sys.path once main
    runs; tests that load this script alone register a2rl's own under that name)."""
    import a2rl_envs as envs

    return envs


def step_sequences(tokenizer, steps, eos_id):
    """The token sequences one episode's steps are scored on: [(ids, [(start, end, advantage)])]
    for ``steps`` [(prompt, text, advantage)] in order (``text``: what the policy said,
    ``sampled_text``), a span per step (its tokens and the end of turn, ``eos_id``). The
    prompts are encoded as the rollout's policy encoded them (``a2rl_envs``): an append-style
    step whose prompt extends the last step's prompt and text joins its sequence, so one
    forward pass scores a whole episode; a rewrite-style step (one user turn), the step after
    the chat's window slid, or the step after a reply the chat recorded as another action
    starts a new one."""
    envs = runner()
    chat, seqs = envs.ChatTokens(tokenizer), []
    for prompt, text, advantage in steps:
        if isinstance(prompt, list):
            ids = chat.ids(prompt)
        else:
            ids = envs.encode_prompt(tokenizer, envs.render_chat(
                tokenizer, [{"role": "user", "content": prompt}], True))
        text_ids = tokenizer(text, add_special_tokens=False)["input_ids"] + [eos_id]
        span = (len(ids), len(ids) + len(text_ids), advantage)
        if seqs and ids[:len(seqs[-1][0])] == seqs[-1][0]:
            seqs[-1] = (ids + text_ids, seqs[-1][1] + [span])
        else:
            seqs.append((ids + text_ids, [span]))
    return seqs


def span_logprobs(model, seqs, pad_id):
    """Log-probs of every span's tokens, one 1-D tensor per span in order, from one forward
    pass over the right-padded sequences. The vocabulary projection runs on the span positions
    only (a fifth of the model's FLOPs per token would go to prompt positions whose logits are
    never used)."""
    width = max(len(ids) for ids, _ in seqs)
    input_ids = torch.full((len(seqs), width), pad_id)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, (ids, _) in enumerate(seqs):
        input_ids[i, :len(ids)] = torch.tensor(ids)
        mask[i, :len(ids)] = 1
    hidden = model.model(input_ids=input_ids, attention_mask=mask).last_hidden_state
    out = []
    for i, (_, spans) in enumerate(seqs):
        for start, end, _ in spans:
            positions = torch.arange(start - 1, end - 1)
            logits = model.lm_head(hidden[i, positions]).float()
            targets = input_ids[i, positions + 1]
            out.append(torch.log_softmax(logits, -1).gather(-1, targets[:, None])[:, 0])
    return out


def token_logprobs(model, tokenizer, prompts, actions, eos_id):
    """Log-probs of each action's tokens (+ end of turn) after its prompt, one 1-D tensor per
    action (each (prompt, action) scored as a step of its own)."""
    seqs = [seq for p, a in zip(prompts, actions)
            for seq in step_sequences(tokenizer, [(p, a, 0.0)], eos_id)]
    return span_logprobs(model, seqs, tokenizer.pad_token_id)


def per_action_mean(token_lps):
    """One value per action: the mean of its tokens' log-probs."""
    return torch.stack([t.mean() for t in token_lps])


def action_logprobs(model, tokenizer, prompts, actions, eos_id):
    """Mean log-prob of each action's tokens (``token_logprobs``), one per action."""
    return per_action_mean(token_logprobs(model, tokenizer, prompts, actions, eos_id))


# the k3 estimate of one token is kept below this (verl's low_var_kl and OpenRLHF clamp it at
# 10): a sampled token the policy has made rare gives exp(ref - logp) in the thousands, and on
# household games that one term took a KL-anchored iteration's mean KL from 0.13 to 95 (the
# round scored about the same with the cap: docs/results/2026-12-06-grpo-household-200.md)
KL_TOKEN_MAX = 10.0


def kl_to_reference(policy_lps, ref_lps):
    """Per action: the mean over its tokens of the k3 estimator of KL(policy || reference),
    exp(ref - logp) - (ref - logp) - 1 (as TRL's GRPO): >= 0, and 0 where the two agree; each
    token's at most ``KL_TOKEN_MAX`` (beyond it the term gives no gradient)."""
    out = []
    for lp, ref in zip(policy_lps, ref_lps):
        delta = (ref.float() - lp.float()).clamp(-20.0, 20.0)  # exp stays finite
        out.append((torch.exp(delta) - delta - 1).clamp(max=KL_TOKEN_MAX).mean())
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


def episode_return(episode, step_cost, expert_bonus, reward="won"):
    """won (or, with ``reward="score"``, the episode's final score: WebShop's reward in [0, 1])
    - step_cost x steps + expert_bonus x expert agreement: the bonus shapes the sparse win
    signal so that groups which all lose (or all win) still rank their episodes."""
    outcome = float(episode.won) if reward == "won" else float(episode.score)
    return outcome - step_cost * episode.n_steps + expert_bonus * expert_agreement(episode)


def sampled_text(step):
    """What the policy sampled at ``step``, the text its policy gradient is of: the reply as
    generated, an empty one too (the action where a step kept no reply). A reply mapped onto
    another action (``closest``: 29 of 192 steps of the household SFT policy at temperature 1)
    scored as that action would raise or lower the odds of tokens the policy never sampled."""
    return step["reply"] if "reply" in step else step["action"]


def group_samples(picked, episodes, group, step_cost, stats, expert_bonus=0.0, reward="won"):
    """Per episode whose group's returns differ (``episode_return``), its steps' (prompt,
    sampled text, advantage), in order; advantage = (return - group mean) / group std. Updates
    ``stats`` (per-game wins and plays)."""
    samples = []
    for k, g in enumerate(picked):
        episodes_k = episodes[k * group:(k + 1) * group]
        returns = [episode_return(e, step_cost, expert_bonus, reward) for e in episodes_k]
        won, played = stats.get(g, [0, 0])
        stats[g] = [won + sum(e.won for e in episodes_k), played + len(episodes_k)]
        mean = sum(returns) / len(returns)
        std = math.sqrt(sum((r - mean) ** 2 for r in returns) / len(returns))
        if std < 1e-6:
            continue
        for e, r in zip(episodes_k, returns):
            samples.append([(s["prompt"], sampled_text(s), (r - mean) / std) for s in e.steps])
    return samples


# padded tokens per forward pass of the update. A 12-step episode of real ALFWorld is one chat
# of about 3,500 tokens; two of them padded into one pass (an explicit mask: SDPA's math path,
# which keeps every layer's attention weights for the backward pass) took the agent past its
# 18 GB memory limit. Alone, a sequence needs no mask and runs SDPA's memory-efficient kernel.
MICRO_BATCH_TOKENS = 4096


def micro_batches(seqs, max_tokens=MICRO_BATCH_TOKENS):
    """``seqs`` in order, in groups whose padded size (sequences x the longest) stays within
    ``max_tokens``; a longer sequence is a group of its own."""
    groups = []
    for seq in seqs:
        if groups:
            widest = max(len(ids) for ids, _ in [*groups[-1], seq])
            if widest * (len(groups[-1]) + 1) <= max_tokens:
                groups[-1].append(seq)
                continue
        groups.append([seq])
    return groups


def minibatches(episodes, size):
    """The episodes in groups of about ``size`` steps (whole episodes: an append-style episode
    is scored in one pass), in the given order."""
    out, steps = [], 0
    for episode in episodes:
        if not out or steps >= size:
            out.append([])
            steps = 0
        out[-1].append(episode)
        steps += len(episode)
    return out


def update(model, tok, opt, params, samples, minibatch, eos_id, bf16, reference=None,
           kl=0.0):
    """One pass over the samples (per episode, its steps' (prompt, action, advantage)) in
    shuffled minibatches of about ``minibatch`` steps, one optimizer step each: loss =
    -advantage x mean action-token log-prob (+ kl x the mean k3 KL to ``reference`` per action,
    ``kl_to_reference``). Each sample is used once and the policy moves only a few small steps
    per batch of rollouts, so the PPO ratio stays near 1 and is left out (GRPO with one
    iteration per generation). A minibatch's forward and backward passes run in
    ``micro_batches`` whose gradients add up to the minibatch's (each part's sums divided by
    the minibatch's action count). Returns the minibatches' losses and mean KLs."""
    samples = list(samples)
    random.shuffle(samples)
    losses, kls = [], []
    for chunk in minibatches(samples, minibatch):
        seqs = [seq for steps in chunk for seq in step_sequences(tok, steps, eos_id)]
        actions = sum(len(spans) for _, spans in seqs)
        opt.zero_grad()
        loss_sum, kl_sum = 0.0, 0.0
        for part in micro_batches(seqs):
            loss, kl_part = part_loss(model, tok, part, bf16, reference, actions)
            if kl_part is not None:
                loss = loss + kl * kl_part
                kl_sum += float(kl_part.detach())
            loss.backward()
            loss_sum += float(loss.detach())
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        losses.append(loss_sum)
        if reference is not None:
            kls.append(kl_sum)
    return losses, kls


def part_loss(model, tok, seqs, bf16, reference, actions):
    """The policy-gradient loss of ``seqs`` (a part of a minibatch of ``actions`` actions):
    -(advantage x mean action-token log-prob) summed over its actions / ``actions``, and the
    KL to ``reference`` likewise (None without one)."""
    adv = torch.tensor([span[2] for _, spans in seqs for span in spans])
    with torch.autocast(model.device.type, dtype=torch.bfloat16, enabled=bf16):
        lps = span_logprobs(model, seqs, tok.pad_token_id)
        if reference is not None:
            with torch.no_grad():
                ref_lps = span_logprobs(reference, seqs, tok.pad_token_id)
    loss = -(adv * per_action_mean(lps).float()).sum() / actions
    if reference is None:
        return loss, None
    return loss, kl_to_reference(lps, ref_lps).sum() / actions


def fits_before(deadline, log, estimate):
    """Whether one more iteration, as long as the longest so far with its save (or
    ``estimate`` before the first), ends before ``deadline``. Iterations vary (the update grows
    with the samples that carry a signal), so the longest, not the mean. Without a deadline,
    always; before any measurement, only if the deadline has not passed."""
    seconds = [r["seconds"] + r.get("save_s", 0.0) for r in log] or (
        [estimate] if estimate > 0 else [0.0])
    return not deadline or time.time() + max(seconds) <= deadline


ROLLOUTS_FILE = "rollouts.json"  # a2rl.task.base.ROLLOUTS_FILE (this script runs without a2rl)


def data_env(data: Path) -> dict:
    """The task's declaration of the environment its data folder ships (``data/rollouts.json``:
    ``module`` with PROMPT and load_games, its class ``env``, the train ``games`` folder, and
    the ``reward``: ``won`` or ``score``). A task without one cannot be rolled out here."""
    path = data / ROLLOUTS_FILE
    if not path.is_file():
        raise SystemExit(f"{path} is missing: this task ships no environment for online "
                         "rollouts (an interactive task declares one; see the task's README)")
    declared = json.loads(path.read_text())
    missing = [k for k in ("module", "env", "reward") if not declared.get(k)]
    if missing or declared.get("kind", "episodes") != "episodes":
        raise SystemExit(f"{path}: not an episodes declaration (missing {missing}, kind "
                         f"{declared.get('kind')!r})")
    return {"games": "games", **declared}


def arguments():
    """The script's options (``experiments/grpo_probe/probe.py`` checks its pass-through
    options here)."""
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--out", required=True)
    # no defaults here: the agent passes its settings (GrpoSettings in a2rl/agents/settings.py,
    # as grpo.method_args writes them)
    p.add_argument("--iterations", type=int, required=True)
    p.add_argument("--games", type=int, required=True)
    p.add_argument("--group", type=int, required=True)
    p.add_argument("--lr", type=float, required=True)
    p.add_argument("--temperature", type=float, required=True)
    p.add_argument("--max-steps", type=int, required=True)
    p.add_argument("--step-cost", type=float, required=True)
    p.add_argument("--expert-bonus", type=float, required=True,
                   help="return bonus x share of steps that took the env's expert action")
    p.add_argument("--train-layers", type=int, required=True)
    p.add_argument("--minibatch", type=int, required=True)
    p.add_argument("--max-new-tokens", type=int, required=True,
                   help="reply length of a sampled action (a WebShop search needs ~15 tokens)")
    p.add_argument("--kl", type=float, required=True,
                   help="coefficient of the KL penalty to the reference model (0: none, and no "
                        "reference model is loaded)")
    p.add_argument("--reference", default=None,
                   help="model folder the KL anchors to (default: --model); later rounds pass "
                        "the first round's start so that the anchor stays the SFT policy")
    # the harness decides (a2rl.common.hardware): bf16 only where the hardware computes it natively
    p.add_argument("--precision", choices=("bf16", "fp32"),
                   default=os.environ.get("A2RL_PRECISION", "fp32"))
    p.add_argument("--deadline", type=float, default=0.0,
                   help="Unix time by which the round must end (0: none); iterations that "
                        "would end after it are skipped")
    p.add_argument("--iter-estimate", type=float, default=0.0,
                   help="seconds one iteration took in an earlier round (0: unknown)")
    p.add_argument("--stats", default=None, help="json file of per-game win counts (kept)")
    p.add_argument("--seed", type=int, default=0)
    return p


def main():
    a = arguments().parse_args()
    sys.path.insert(0, a.data)

    from a2rl_envs import GeneratorPolicy, PromptFormat, play
    try:
        from a2rl_episode_cache import ModelGenerator
    except ImportError as err:
        raise SystemExit(f"{a.data}/a2rl_episode_cache.py is missing ({err}): a task ships it "
                         "beside a2rl_envs.py (a2rl.task.base.ship_episode_modules)") from err

    declared = data_env(Path(a.data))
    reward = declared["reward"]
    env_module = importlib.import_module(declared["module"])
    make_env, load_games = getattr(env_module, declared["env"]), env_module.load_games
    # the grader's prompt, as the task declared it (older data folders: the module's)
    fmt = PromptFormat(**declared["prompt"]) if declared.get("prompt") else env_module.PROMPT
    live = int(declared.get("live", 0))  # episodes at once, as the grader plays them (0: all)

    random.seed(a.seed)
    torch.manual_seed(a.seed)
    bf16 = a.precision == "bf16"
    tok = AutoTokenizer.from_pretrained(a.model)
    tok.padding_side = "left"
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32)
    params = freeze_lower_layers(model, a.train_layers)
    opt = torch.optim.AdamW(params, lr=a.lr, weight_decay=0.0)
    # rollouts run on a bf16 copy, refreshed from the fp32 weights before each iteration
    sampler = copy.deepcopy(model).to(torch.bfloat16) if bf16 else model
    reference = None
    if a.kl > 0:
        reference = frozen_reference(
            model if a.reference in (None, a.model) else
            AutoModelForCausalLM.from_pretrained(a.reference, dtype=torch.float32), bf16)
    eos_id = tok.convert_tokens_to_ids("<|im_end|>")
    if eos_id is None or eos_id == tok.unk_token_id:
        eos_id = tok.eos_token_id

    games = load_games(Path(a.data) / declared["games"])
    stats_path = Path(a.stats) if a.stats else None
    stats = json.loads(stats_path.read_text()) if stats_path and stats_path.exists() else {}
    # the grader's runner and policy, sampling: what the agent trains on is played by the
    # same code as what scores it (append-style prompts reuse each episode's KV cache)
    policy = GeneratorPolicy(ModelGenerator(sampler, tok, a.temperature), a.max_new_tokens,
                             actions=declared.get("actions", "closest"))
    log = []
    for it in range(a.iterations):
        if not fits_before(a.deadline, log, a.iter_estimate):
            print(json.dumps({"stopped": f"deadline: {a.iterations - it} of {a.iterations} "
                                         f"iterations skipped"}), flush=True)
            break
        started = time.time()
        picked = pick_games(games, stats, a.games)
        if sampler is not model:
            sampler.load_state_dict(model.state_dict())
        sampler.eval()
        episodes = play([g for g in picked for _ in range(a.group)], make_env, policy,
                        a.max_steps, fmt, keep_prompts=True, live=live)
        rolled = time.time()
        samples = group_samples(picked, episodes, a.group, a.step_cost, stats, a.expert_bonus,
                                reward)
        model.train()
        losses, kls = update(model, tok, opt, params, samples, a.minibatch, eos_id, bf16,
                             reference, a.kl)
        row = {"iteration": it, "episodes": len(episodes),
               "success": 100.0 * sum(e.won for e in episodes) / len(episodes),
               "mean_score": sum(float(e.score) for e in episodes) / len(episodes),
               "train_steps": sum(map(len, samples)), "updates": len(losses),
               "loss": sum(losses) / max(1, len(losses)),
               "kl": sum(kls) / len(kls) if kls else 0.0,
               "live_bound": live, "peak_live": policy.generator.episodes.take_peak(),
               "rollout_s": round(rolled - started, 1),
               "update_s": round(time.time() - rolled, 1),
               "seconds": round(time.time() - started, 1)}
        log.append(row)
        if stats_path:
            stats_path.write_text(json.dumps(stats))
        # with a deadline every iteration is saved, so a round stopped at the deadline keeps
        # its last finished iteration; the save's time counts towards the next estimate
        if a.deadline or it == a.iterations - 1:
            saved = time.time()
            save(model, tok, a.out, log)
            row["save_s"] = round(time.time() - saved, 1)
        print(json.dumps(row), flush=True)
    if not log:
        print(json.dumps({"saved": None, "reason": "no iteration fitted before the deadline"}))
        return
    print(json.dumps({"saved": a.out, "success": [r["success"] for r in log]}))


def frozen_reference(model, bf16):
    """A frozen copy of ``model``, the KL anchor (for sft_grpo: the SFT policy); in bf16 where
    the rollouts are, since it only runs forward passes."""
    reference = copy.deepcopy(model)
    if bf16:
        reference = reference.to(torch.bfloat16)
    reference.eval()
    for param in reference.parameters():
        param.requires_grad = False
    return reference


def save(model, tok, out, log):
    """Write the model and ``grpo_log.json`` to ``out`` through a temporary folder and renames,
    so that a kill during the save never leaves a half-written model at ``out``."""
    out = Path(out)
    tmp, old = out.with_name(out.name + ".saving"), out.with_name(out.name + ".old")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tok.padding_side = "right"
    tok.save_pretrained(tmp)
    tok.padding_side = "left"
    (tmp / "grpo_log.json").write_text(json.dumps(log, indent=1))
    if out.exists():
        out.rename(old)
    tmp.rename(out)
    shutil.rmtree(old, ignore_errors=True)


if __name__ == "__main__":
    main()
