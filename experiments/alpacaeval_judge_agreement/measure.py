"""How far offline AlpacaEval judges agree with the published GPT-4 Turbo annotations (issue #30):
the judge of ``alpacaeval_local`` (SmolLM2-135M-Instruct reading AlpacaEval 2.0's weighted-judge
template, both orders averaged) and the other judges that run offline here.

The published annotations (``<data>/alpacaeval/results/<model>/weighted_alpaca_eval_gpt4_turbo/
annotations.json``: ``preference`` in [1, 2], output_1 the GPT-4 Turbo reference, output_2 the
model) prefer the reference on 96-98 % of items, so plain agreement would reward a judge that
always says "reference". The sample is therefore stratified by GPT-4 Turbo's verdict:
``--per-class`` items it gave to the model and as many it gave to the reference, drawn with
``--seed`` from the models' annotations pooled. Every judge kind sees the same sample for the
same ``--per-class`` and ``--seed``.

Judges (``--judge-kind``):

- ``pairwise``: the task's own judge (``tasks/alpacaeval/judge.py``: ``LocalHFJudge``, and the
  task's ``preference_of``), asked in both orders; so this measures the judge the offline task
  uses.
- ``pointwise``: the model scores each reply on its own, and the reply with the higher score
  wins (the score difference is the continuous preference). One forward pass per reply over
  the chat [user: instruction, assistant: reply, user: QUESTION] (for a model without a chat
  template, plain text: "Instruction: ... Reply: ... Question: ... Answer:") gives two scores:
  ``yes_no``, the log-odds of "Yes" against "No" as the answer to QUESTION (the judge's own
  verdict on the reply, read from probabilities as AlpacaEval reads ``m``/``M``), and
  ``mean_loglik``, the mean log-probability of the reply's tokens given the instruction (how
  natural the model finds the reply; length-normalised, since a sum would favour short
  replies). Order-free by construction: no reply is ever shown beside the other.
- ``length``: no model; the longer reply (in characters, as AlpacaEval's length-controlled GLM
  counts them) wins. GPT-4 judges favour longer replies (hence the length-controlled win rate),
  so this says how much of a judge's agreement length alone gives. Order-free.

Reported for each judge, each with its standard error:

- ``agreement``: both judges pick the same winner (on this balanced sample, it is the balanced
  accuracy: chance, and an always-"reference" judge, score 50 %);
- ``recall_model`` / ``recall_reference``: agreement within each of GPT-4 Turbo's classes;
- ``auc``: P(the local preference of a GPT-4 "model wins" item > that of a "reference wins" item),
  ties counted half (Mann-Whitney; 0.5 is chance), SE by Hanley and McNeil;
- ``length_spearman``: the rank correlation of the local preference with log(model reply length
  / reference length): how far the judge follows length;
- ``beyond_length``: what the judge adds to length in predicting GPT-4 Turbo's verdict (the
  coefficient of its standardized preference in a logistic regression on both; see
  ``beyond_length``);
- pairwise only: ``order_consistency`` (the two orders name the same output: the judge's
  agreement with itself) and ``mean_p_first`` (how often, on average, it names the first
  output: position bias).

    python experiments/alpacaeval_judge_agreement/measure.py --per-class 25 \
        --out experiments/alpacaeval_judge_agreement/agreement.json
    python experiments/alpacaeval_judge_agreement/measure.py --judge-kind pointwise \
        --per-class 25 --out experiments/alpacaeval_judge_agreement/pointwise.json

``--gguf FILE`` loads the pointwise judge from a GGUF file instead of ``--judge``'s folder (a
model shipped in a PyPI wheel, dequantized to float32 by transformers). A pointwise run appends
each judged item to ``<out>.partial.jsonl``, alternating GPT-4 Turbo's two classes; if it is
stopped, ``--from-partial`` summarizes what it judged (``items_judged``, ``complete: false``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))

from a2rl_tasks.alpacaeval.judge import LocalHFJudge, Pair  # noqa: E402
from a2rl_tasks.alpacaeval.sources import instruction_key  # noqa: E402
from a2rl_tasks.alpacaeval.task import clean_output, preference_of  # noqa: E402

MODELS = ("alpaca-7b", "falcon-7b-instruct", "gpt4_gamed")
ANNOTATOR = "weighted_alpaca_eval_gpt4_turbo"
KINDS = ("pairwise", "pointwise", "length")
QUESTION = ("Is the reply above a helpful, correct and complete answer to the instruction? "
            "Answer Yes or No.")
POINTWISE_SCORES = ("yes_no", "mean_loglik")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=not os.environ.get("A2RL_DATA"),
                        default=Path(os.environ.get("A2RL_DATA", ".")) / "alpacaeval",
                        help="alpaca_eval's results and leaderboard (default: "
                             "$A2RL_DATA/alpacaeval)")
    parser.add_argument("--judge-kind", choices=KINDS, default="pairwise")
    parser.add_argument("--judge", type=Path,
                        default=REPO / "resources" / "models" / "smollm2-135m-instruct",
                        help="the judge model's HF folder (pairwise, pointwise)")
    parser.add_argument("--gguf", type=Path,
                        help="pointwise: load the judge from this GGUF file instead")
    parser.add_argument("--per-class", type=int, default=25,
                        help="items of each GPT-4 Turbo verdict (all 'model wins' when fewer)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=4, help="pairwise only")
    parser.add_argument("--out", type=Path, help="default: agreement.json beside this script "
                        "for the pairwise judge, <kind>.json for the others")
    parser.add_argument("--from-partial", action="store_true",
                        help="pointwise: summarize the rows a stopped run left beside --out "
                        "(<out>.partial.jsonl) instead of judging")
    args = parser.parse_args(argv)
    if (args.gguf or args.from_partial) and args.judge_kind != "pointwise":
        parser.error("--gguf and --from-partial are for --judge-kind pointwise")
    if args.out is None:  # never one judge's results over another's
        name = "agreement" if args.judge_kind == "pairwise" else args.judge_kind
        args.out = Path(__file__).with_name(f"{name}.json")
    if args.from_partial and not args.out.with_suffix(".partial.jsonl").is_file():
        parser.error(f"--from-partial: no {args.out.with_suffix('.partial.jsonl')} (the rows a "
                     f"stopped pointwise run with this --out leaves)")
    return args


def annotated_items(data: Path) -> list[dict[str, Any]]:
    """Every published annotation with a verdict and two non-empty outputs."""
    items = []
    for model in MODELS:
        path = data / "results" / model / ANNOTATOR / "annotations.json"
        for row in json.loads(path.read_text()):
            first, second = clean_output(row["output_1"]), clean_output(row["output_2"])
            if row.get("preference") is None or not first or not second:
                continue
            items.append({"model": model, "instruction": row["instruction"],
                          "reference": first, "output": second,
                          "gpt4_preference": float(row["preference"])})
    return items


def stratified_sample(items: list[dict[str, Any]], per_class: int,
                      seed: int) -> list[dict[str, Any]]:
    """``per_class`` items GPT-4 Turbo gave to the model and as many it gave to the reference
    (ties at 1.5 left out: they name no winner)."""
    rng = random.Random(seed)
    model_wins = [x for x in items if x["gpt4_preference"] > 1.5]
    ref_wins = [x for x in items if x["gpt4_preference"] < 1.5]
    n = min(per_class, len(model_wins), len(ref_wins))
    return rng.sample(model_wins, n) + rng.sample(ref_wins, n)


def proportion(hits: int, n: int) -> dict[str, float]:
    p = hits / n if n else math.nan
    return {"value": round(100 * p, 2), "se": round(100 * math.sqrt(p * (1 - p) / n), 2)
            if n else math.nan, "n": n}


def auc(positives: list[float], negatives: list[float]) -> dict[str, float]:
    """Mann-Whitney AUC with Hanley and McNeil's (1982) standard error."""
    n1, n0 = len(positives), len(negatives)
    wins = sum((p > q) + 0.5 * (p == q) for p in positives for q in negatives)
    a = wins / (n1 * n0)
    q1, q2 = a / (2 - a), 2 * a * a / (1 + a)
    var = (a * (1 - a) + (n1 - 1) * (q1 - a * a) + (n0 - 1) * (q2 - a * a)) / (n1 * n0)
    return {"value": round(a, 4), "se": round(math.sqrt(max(var, 0.0)), 4),
            "n_model_wins": n1, "n_reference_wins": n0}


def log_length_ratio(item: dict[str, Any]) -> float:
    return math.log(len(item["output"]) / len(item["reference"]))


def beyond_length(rows: list[dict[str, Any]], preference: str) -> dict[str, float] | None:
    """What the judge tells of GPT-4 Turbo's verdict that length does not, in the spirit of
    AlpacaEval's length-controlled win rate: the logistic regression of GPT-4 Turbo's verdict
    on the log length ratio and the judge's preference (its ranks, standardized), fitted by
    Newton's method; ``coef`` is the preference's log-odds per standard deviation, with its
    standard error from the Fisher information (``z`` above 2: the judge adds to length).
    Where length and the preference separate the two verdicts perfectly no finite fit exists:
    None."""
    import numpy as np
    from scipy.stats import rankdata

    # ranks: a few extreme preferences (a degenerate reply) would otherwise set the scale
    pref = rankdata([r[preference] for r in rows])
    pref = (pref - pref.mean()) / (pref.std() or 1.0)
    x = np.column_stack([np.ones(len(rows)), [r["log_length_ratio"] for r in rows], pref])
    y = np.array([r["gpt4_model_wins"] for r in rows], dtype=float)
    beta = np.zeros(3)
    with np.errstate(all="ignore"):
        for _ in range(50):
            p = 1 / (1 + np.exp(-x @ beta))
            info = x.T @ (x * (p * (1 - p))[:, None])
            try:
                step = np.linalg.solve(info, x.T @ (y - p))
            except np.linalg.LinAlgError:
                return None
            beta += step
            if np.abs(step).max() < 1e-8:
                break
        else:  # separated: the coefficients grow without end
            return None
    se = float(np.sqrt(np.linalg.inv(info)[2, 2]))
    return {"coef": round(float(beta[2]), 4), "se": round(se, 4),
            "z": round(float(beta[2]) / se, 2), "length_coef": round(float(beta[1]), 4)}


def summarize(rows: list[dict[str, Any]], preference: str = "local_preference",
              threshold: float = 1.5) -> dict[str, Any]:
    """The statistics of one judge whose continuous preference for the model's reply is
    ``row[preference]``; the model wins where it exceeds ``threshold``."""
    from scipy.stats import spearmanr

    wins = [r[preference] > threshold for r in rows]
    gpt_model = [w for r, w in zip(rows, wins, strict=True) if r["gpt4_model_wins"]]
    gpt_ref = [w for r, w in zip(rows, wins, strict=True) if not r["gpt4_model_wins"]]
    rho = spearmanr([r[preference] for r in rows], [r["log_length_ratio"] for r in rows])
    extra = {} if preference == "log_length_ratio" else {
        "beyond_length": beyond_length(rows, preference)}
    return {
        "agreement": proportion(sum(w == r["gpt4_model_wins"]
                                    for r, w in zip(rows, wins, strict=True)), len(rows)),
        "recall_model": proportion(sum(gpt_model), len(gpt_model)),
        "recall_reference": proportion(len(gpt_ref) - sum(gpt_ref), len(gpt_ref)),
        "auc": auc([r[preference] for r in rows if r["gpt4_model_wins"]],
                   [r[preference] for r in rows if not r["gpt4_model_wins"]]),
        "length_spearman": round(float(rho.statistic), 4),
    } | extra


def order_statistics(rows: list[dict[str, Any]]) -> dict[str, Any]:
    consistent = [(r["p_ref_first"] > 0.5) != (r["p_model_first"] > 0.5) for r in rows]
    firsts = [p for r in rows for p in (r["p_ref_first"], r["p_model_first"])]
    return {"order_consistency": proportion(sum(consistent), len(rows)),
            "mean_p_first": round(sum(firsts) / len(firsts), 4)}


def base_row(x: dict[str, Any]) -> dict[str, Any]:
    """A judged item's record: the item by its instruction's content hash (the annotations
    stay under --data, CC BY-NC; no text of theirs is copied into the study's JSON)."""
    return {"model": x["model"], "item": instruction_key(x["instruction"]),
            "gpt4_preference": x["gpt4_preference"],
            "gpt4_model_wins": x["gpt4_preference"] > 1.5,
            "log_length_ratio": round(log_length_ratio(x), 6)}


# ---- judges: each returns (rows, {score name: summary}) -------------------------------------

def judge_pairwise(sample: list[dict[str, Any]], args: argparse.Namespace):
    judge = LocalHFJudge(args.judge, weights_hash="experiment", batch_size=args.batch_size)
    forward = [Pair(x["instruction"], x["reference"], x["output"]) for x in sample]
    backward = [Pair(x["instruction"], x["output"], x["reference"]) for x in sample]
    verdicts = judge.judge(forward + backward)
    rows = []
    for x, fwd, bwd in zip(sample, verdicts[:len(sample)], verdicts[len(sample):], strict=True):
        local = preference_of(fwd.p_first, bwd.p_first)
        rows.append(base_row(x) | {
            "p_ref_first": round(fwd.p_first, 6), "p_model_first": round(bwd.p_first, 6),
            "local_preference": round(local, 6), "local_model_wins": local > 1.5})
    return rows, {"pairwise": summarize(rows) | order_statistics(rows)}


def judge_length(sample: list[dict[str, Any]], args: argparse.Namespace):
    rows = [base_row(x) | {"length_model": len(x["output"]),
                           "length_reference": len(x["reference"])} for x in sample]
    return rows, {"length": summarize(rows, "log_length_ratio", 0.0)}


def pointwise_summaries(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {name: summarize(rows, f"{name}_preference", 0.0) for name in POINTWISE_SCORES}


def partial_pointwise(sample: list[dict[str, Any]], args: argparse.Namespace):
    """The rows a stopped pointwise run wrote, in sample order, with the annotations' values
    read again from --data (a row kept without them, as a report keeps it, is summarized too)."""
    done = {(r["model"], r["item"]): r for r in map(
        json.loads, args.out.with_suffix(".partial.jsonl").read_text().splitlines())}
    rows = [base_row(x) | done[key] for x in sample
            if (key := (x["model"], instruction_key(x["instruction"]))) in done]
    return rows, pointwise_summaries(rows)


def judge_pointwise(sample: list[dict[str, Any]], args: argparse.Namespace):
    from a2rl.task import progress

    if args.from_partial:
        return partial_pointwise(sample, args)
    scorer = PointwiseScorer(args.judge, args.gguf)
    # the classes alternate and each row is appended to a side file as it comes, so that a run
    # stopped early still leaves a near-balanced sample (a slow judge on a shared CPU)
    half = len(sample) // 2
    order = [i for pair in zip(range(half), range(half, len(sample)), strict=True) for i in pair]
    partial = args.out.with_suffix(".partial.jsonl")
    partial.parent.mkdir(parents=True, exist_ok=True)
    partial.write_text("")
    rows: dict[int, dict[str, Any]] = {}
    for i in progress(order, desc="pointwise", unit="pair"):
        x = sample[i]
        ref = scorer.score(x["instruction"], x["reference"])
        out = scorer.score(x["instruction"], x["output"])
        row = base_row(x)
        for name in POINTWISE_SCORES:
            row |= {f"{name}_reference": round(ref[name], 6), f"{name}_model": round(out[name], 6),
                    f"{name}_preference": round(out[name] - ref[name], 6)}
        rows[i] = row
        with partial.open("a") as f:
            f.write(json.dumps(row) + "\n")
    ordered = [rows[i] for i in range(len(sample))]
    partial.unlink()
    return ordered, pointwise_summaries(ordered)


JUDGES = {"pairwise": judge_pairwise, "pointwise": judge_pointwise, "length": judge_length}


class PointwiseScorer:
    """A causal LM scoring one reply at a time (batch 1: no padding to get wrong, and only the
    logits that are read are computed, which matters for a 262k-token vocabulary)."""

    def __init__(self, model_dir: Path, gguf: Path | None = None):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        source = {"pretrained_model_name_or_path": gguf.parent, "gguf_file": gguf.name} \
            if gguf else {"pretrained_model_name_or_path": model_dir}
        self.tokenizer = AutoTokenizer.from_pretrained(**source)
        self.model = AutoModelForCausalLM.from_pretrained(**source, dtype=torch.float32).eval()
        self.chat = bool(getattr(self.tokenizer, "chat_template", None))
        # the answer follows the generation cue directly in a chat, after a space in plain text
        space = "" if self.chat else " "
        self.yes, self.no = (self._first_token(space + w) for w in ("Yes", "No"))
        self.max_tokens = getattr(self.model.config, "max_position_embeddings", None)

    def _first_token(self, text: str) -> int:
        return self.tokenizer.encode(text, add_special_tokens=False)[0]

    def _texts(self, instruction: str, reply: str) -> tuple[str, str]:
        """The text before the reply and the text after it."""
        if not self.chat:
            return (f"Instruction:\n{instruction}\n\nReply:\n",
                    f"\n\nQuestion: {QUESTION}\nAnswer:")
        turns = [{"role": "user", "content": instruction},
                 {"role": "assistant", "content": reply},
                 {"role": "user", "content": QUESTION}]
        full = self.tokenizer.apply_chat_template(turns, tokenize=False,
                                                  add_generation_prompt=True)
        at = full.find(reply, full.find(instruction) + len(instruction))
        if at < 0:
            raise ValueError("the chat template changed the reply; cannot locate its tokens")
        return full[:at], full[at + len(reply):]

    def score(self, instruction: str, reply: str) -> dict[str, float]:
        import torch

        from a2rl.task import encode_prompt

        before, after = self._texts(instruction, reply)
        head = encode_prompt(self.tokenizer, before)
        body = self.tokenizer.encode(reply, add_special_tokens=False)
        tail = self.tokenizer.encode(after, add_special_tokens=False)
        if self.max_tokens and len(head) + len(body) + len(tail) > self.max_tokens:
            body = body[:self.max_tokens - len(head) - len(tail)]  # the question must be seen
        ids = head + body + tail
        # position p's logits predict token p + 1: the reply's tokens, then the answer
        keep = torch.tensor([*range(len(head) - 1, len(head) + len(body) - 1), len(ids) - 1])
        with torch.inference_mode():
            logits = self.model(input_ids=torch.tensor([ids]), logits_to_keep=keep).logits[0]
        logprobs = logits.float().log_softmax(-1)
        reply_lp = logprobs[torch.arange(len(body)), torch.tensor(body)]
        last = logprobs[-1]
        return {"yes_no": float(last[self.yes] - last[self.no]),
                "mean_loglik": float(reply_lp.mean())}


# per-item values copied from AlpacaEval's published annotations (CC BY-NC): GPT-4 Turbo's
# preference and the side it gave the item (the class the sample is stratified by)
ANNOTATION_FIELDS = ("gpt4_preference", "gpt4_model_wins")


def published(row: dict[str, Any]) -> dict[str, Any]:
    """A row as the report keeps it: without the annotations' values (``ANNOTATION_FIELDS``),
    read through --data and never kept in the repository. Its model and item key find them
    there again (``annotated_items``, ``instruction_key``)."""
    return {k: v for k, v in row.items() if k not in ANNOTATION_FIELDS}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sample = stratified_sample(annotated_items(args.data), args.per_class, args.seed)
    started = time.perf_counter()
    rows, summaries = JUDGES[args.judge_kind](sample, args)
    seconds = time.perf_counter() - started
    judge = None if args.judge_kind == "length" else str(args.gguf or args.judge)
    result = {"judge_kind": args.judge_kind,
              "judge": judge and judge.removeprefix(str(REPO) + "/"),
              "models": list(MODELS), "per_class": args.per_class, "seed": args.seed,
              "items_judged": len(rows), "complete": len(rows) == len(sample),
              "summary": summaries,
              "judge_seconds": None if args.from_partial else round(seconds, 1),
              "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(),
                          "loadavg_after": [round(v, 2) for v in os.getloadavg()]},
              "rows": [published(r) for r in rows]}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(summaries, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
