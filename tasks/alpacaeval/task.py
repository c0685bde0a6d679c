"""AlpacaEval (L2): open-ended instructions, scored by a judge model against GPT-4 Turbo's
reference outputs; the score is the length-controlled win rate.

prepare() seals the test instructions (with their reference outputs and the exact chat turns
the grader sends) and writes the agent's training data: the rest of the 805 with the reference
outputs as targets (offline variant) or the first rows of tatsu-lab/alpaca (the paper's).

evaluate() generates one greedy reply per sealed instruction, asks the judge (``judge``) which of
reference and reply is better (both orders, averaged, unless configured off) and computes
alpaca_eval's metrics from the resulting annotations (``metric``). An empty reply (nothing left
after dropping undecodable bytes and control characters) loses without a judge call.
"""

from __future__ import annotations

import time
import unicodedata
from pathlib import Path
from typing import Any

from a2rl.task import (
    ConfigError,
    EvalResult,
    Harness,
    InferenceConfig,
    PaidApi,
    PreparedTaskPaths,
    Task,
    TaskConfig,
    iter_jsonl,
    render_readme,
    write_jsonl_atomic,
)

from .judge import (
    CachedJudge,
    HttpSettings,
    JudgeUsage,
    LocalHFJudge,
    OpenAIJudge,
    Pair,
    ProxiedJudge,
    VerdictCache,
    template_text,
)
from .metric import REFERENCE_GENERATOR, compute_metrics, installed_hub_files
from .params import AlpacaEvalParams
from .sources import alpaca_rows, instruction_key, load_eval_set, split_eval_set

SUBMISSION = "submission"  # generator_2 in the annotations
EVAL_SET_SIZE = 805  # AlpacaEval's instructions
# a judge call's prompt: the template, the instruction, the reference and the model's reply
# (the config's own estimate, conf/task/alpacaeval.yaml)
JUDGE_CALL_TOKENS = 1000


def clean_output(text: Any) -> str:
    """The reply as the judge sees it: a str without U+FFFD (bytes that did not decode) and
    without control characters other than newline and tab."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    text = str(text or "")
    return "".join(ch for ch in text if ch in "\n\t" or (
        ch != "\ufffd" and unicodedata.category(ch)[0] != "C")).strip()


def preference_of(p_ref_first: float, p_model_first: float | None) -> float:
    """alpaca_eval's preference in [1, 2] (2: the model's reply wins). Asked with the reference
    as m, P(m) is the reference winning: 2 - P(m); asked the other way round, 1 + P(m). Both
    orders are averaged."""
    forward = 2.0 - p_ref_first
    if p_model_first is None:
        return forward
    return (forward + 1.0 + p_model_first) / 2.0


class JudgedResult(EvalResult):
    """The score is the length-controlled win rate; its standard error is the raw win rate's
    (the GLM's own spread of predictions is not a sampling error: it is 0 for the length-only
    GLM). ``per_item`` holds each item's preference for the model's reply in [0, 1]."""

    def __init__(self, lc: float, se: float, **kwargs: Any):
        super().__init__(**kwargs)
        self.lc, self.se = lc, se

    @property
    def score(self) -> float:
        return self.lc

    @property
    def stderr(self) -> float:
        return self.se


class AlpacaEvalTask(Task):
    metric = "length-controlled win rate against the reference outputs"
    def __init__(self, cfg: TaskConfig, data_root: Path):
        super().__init__(cfg, data_root)
        self.params = AlpacaEvalParams.from_dict(cfg.params)
        if cfg.feedback == "validation":
            raise ConfigError("task alpacaeval has no validation split; use task.feedback=test")
        self.judge_spent_usd = 0.0  # over this task object's evaluations (one run)

    # ---- data -------------------------------------------------------------------------------

    def data_files(self) -> list[Path]:
        p = self.params
        if p.eval_source != "file":
            return []  # the Hub
        path = Path(p.eval_file)
        return [path if path.is_absolute() else self.data_root / path]

    def prepare(self, out: PreparedTaskPaths) -> dict[str, Any]:
        p = self.params
        items, where = load_eval_set(p, self.data_root)
        test, rest = split_eval_set(items, p)
        sealed = {instruction_key(x["instruction"]) for x in test}
        dropped = 0
        if p.train_source == "split":
            train = [self._train_row(x) for x in rest][:p.train_size]
        else:
            train, dropped = alpaca_rows(p, sealed)
        overlap = [r["id"] for r in train if instruction_key(r["instruction"]) in sealed]
        if overlap:  # split_eval_set and alpaca_rows filter already; this guards the guard
            raise RuntimeError(f"training rows share sealed instructions: {overlap[:5]}")
        write_jsonl_atomic(out.data / "train.jsonl", train)
        (out.data / "README.md").write_text(self._data_readme(len(train)))
        write_jsonl_atomic(out.test, [self._sealed(x) for x in test])
        out.validation.unlink(missing_ok=True)
        return {"task": self.cfg.package, "task_id": self.cfg.id,
                "source": {"eval_set": where, "eval_size": len(items),
                           "train": p.train_source},
                "sizes": {"train": len(train), "test": len(test), "validation": 0},
                "dropped": {"train_sharing_a_sealed_instruction": dropped},
                "ids": {"test": [x["index"] for x in test]},
                "params": p.to_dict()}

    def _train_row(self, item: dict[str, Any]) -> dict[str, Any]:
        return {"id": f"alpaca_eval/{item['index']}", "source": "alpaca_eval",
                "dataset": item["dataset"], "instruction": item["instruction"],
                "prompt": item["instruction"], "completion": item["reference"]}

    def _sealed(self, item: dict[str, Any]) -> dict[str, Any]:
        return {"id": f"alpaca_eval/{item['index']}", "index": item["index"],
                "instruction": item["instruction"], "reference": item["reference"],
                "dataset": item["dataset"], "generator": item["generator"],
                "prompt": item["instruction"], "system": self.params.system_prompt}

    def _data_readme(self, n_train: int) -> str:
        return render_readme(Path(__file__).with_name("data_readme.md.j2"),
                             {"n_train": n_train, "p": self.params})

    # ---- scoring ----------------------------------------------------------------------------

    def evaluate(self, model_dir: Path, split: Path, inference: InferenceConfig) -> EvalResult:
        from a2rl.task import chat_replies

        started = time.perf_counter()
        items = list(iter_jsonl(split))
        if not items:
            raise ValueError(f"{split}: no items to evaluate")
        _, replies = chat_replies(Path(model_dir), inference,
                                  [(x["prompt"], x.get("system")) for x in items],
                                  self.params.max_new_tokens)
        result = self.score_replies(items, replies)
        result.seconds = time.perf_counter() - started
        return result

    def score_replies(self, items: list[dict[str, Any]], replies: list[Any]) -> JudgedResult:
        """Judge ``replies[i]`` against ``items[i]``'s reference and compute the metrics.
        Raises JudgeFailed (GradingUnavailable) when the judge cannot answer."""
        if len(replies) != len(items):
            raise ValueError(f"{len(items)} items but {len(replies)} replies")
        outputs = [clean_output(r) for r in replies]
        judged = [i for i, o in enumerate(outputs) if o]
        forward = [Pair(items[i]["instruction"], items[i]["reference"], outputs[i])
                   for i in judged]
        backward = [Pair(items[i]["instruction"], outputs[i], items[i]["reference"])
                    for i in judged] if self.params.judge.both_orders else []
        judge = self.make_judge()
        try:
            verdicts, usage = judge.judge(forward + backward) if judged else ([], JudgeUsage())
        finally:
            self.judge_spent_usd = judge.spent_usd
            judge.close()
        fwd = dict(zip(judged, verdicts[:len(forward)]))
        bwd = dict(zip(judged, verdicts[len(forward):])) if backward else {}
        rows, records = [], []
        for i, (item, output) in enumerate(zip(items, outputs, strict=True)):
            if i in fwd:
                p_model_first = bwd[i].p_first if i in bwd else None
                preference = preference_of(fwd[i].p_first, p_model_first)
            else:  # empty reply: it loses, no judge asked
                p_model_first, preference = None, 1.0
            rows.append({"index": item["index"], "instruction": item["instruction"],
                         "output_1": item["reference"], "output_2": output,
                         "generator_1": REFERENCE_GENERATOR, "generator_2": SUBMISSION,
                         "preference": preference})
            records.append({"id": item["id"], "index": item["index"], "output": output,
                            "empty": not output,
                            "p_ref_first": fwd[i].p_first if i in fwd else None,
                            "p_model_first": p_model_first,
                            "cached": bool(i in fwd and fwd[i].cached),
                            "preference": preference})
        metrics = compute_metrics(rows, self.params.lc_glm, self._hub_files(),
                                  losses=[r["empty"] for r in records])
        for record, glm in zip(records, metrics["glm_preferences"], strict=True):
            record["glm_preference"] = glm
        return JudgedResult(
            lc=metrics["length_controlled_winrate"], se=metrics["standard_error"],
            per_item=[r["preference"] - 1.0 for r in rows], records=records,
            breakdown=self._breakdown(metrics, records, usage), usage=usage.to_dict()
            | {"judge": judge.backend.id})

    def _breakdown(self, metrics: dict[str, Any], records: list[dict[str, Any]],
                   usage: JudgeUsage) -> dict[str, Any]:
        both = [r for r in records if r["p_model_first"] is not None]
        # position consistency: both orders prefer the same reply (a weak judge often does not)
        agree = sum((r["p_ref_first"] > 0.5) == (r["p_model_first"] < 0.5) for r in both)
        return {"lc_win_rate": metrics["length_controlled_winrate"],
                "win_rate": metrics["win_rate"], "standard_error": metrics["standard_error"],
                "discrete_win_rate": metrics["discrete_win_rate"],
                "avg_length": metrics["avg_length"], "n_wins": metrics["n_wins"],
                "n_draws": metrics["n_draws"], "glm": metrics["glm"],
                "empty_pct": 100.0 * sum(r["empty"] for r in records) / len(records),
                "order_agreement_pct": 100.0 * agree / len(both) if both else None,
                "judge_calls": usage.calls, "judge_cache_hits": usage.cache_hits,
                "judge_cost_usd": round(usage.cost_usd, 6)}

    def _hub_files(self) -> dict[str, Path]:
        """The GLM's Hub files: those configured, else those installed under paths.data."""
        return installed_hub_files(self.data_root) | {
            name: (Path(path) if Path(path).is_absolute() else self.data_root / path)
            for name, path in self.params.hub_files.items()}

    # ---- the judge ----------------------------------------------------------------------------

    def make_judge(self) -> CachedJudge:
        """The configured backend with the run's cache (results/cache/tasks/<id>/judge.sqlite)
        and what is left of the judge budget."""
        j = self.params.judge
        template = template_text()
        cache = (VerdictCache(self.harness.layout.task_cache(self.cfg.id) / "judge.sqlite")
                 if self.harness is not None else None)
        backend = self._backend(template)
        return CachedJudge(backend, cache, template, max_usd=j.max_usd,
                           spent_usd=self.judge_spent_usd)

    def _backend(self, template: str):
        j = self.params.judge
        http = HttpSettings(base_url=j.base_url or "", model=str(j.model), answer=j.answer,
                            top_logprobs=j.top_logprobs, max_tokens=j.max_tokens,
                            timeout_s=j.timeout_s, retries=j.retries, backoff_s=j.backoff_s,
                            concurrency=j.concurrency, price_in_per_mtok=j.price_in_per_mtok,
                            price_out_per_mtok=j.price_out_per_mtok)
        if j.kind == "local":
            folder = self._judge_model_dir()
            return LocalHFJudge(folder, self._harness("the local judge").folder_hash(folder),
                                precision=j.precision, batch_size=j.batch_size,
                                max_input_tokens=j.max_input_tokens, template=template)
        if j.kind == "openai":
            import os
            http.api_key = os.environ.get(j.api_key_env) if j.api_key_env else None
            return OpenAIJudge(http, template)
        harness = self._harness("the API judge")
        driver = harness.driver(j.driver)
        calls = self.grading_calls or harness.layout.task_cache(self.cfg.id) / "judge_calls.jsonl"
        left = None if j.max_usd is None else max(j.max_usd - self.judge_spent_usd, 1e-9)
        proxy = harness.recording_proxy(driver, calls, left, http.timeout_s)
        return ProxiedJudge(driver, proxy, http, template=template)

    def _judge_model_dir(self) -> Path:
        model = self.params.judge.model_config()
        if model.source == "path":
            return Path(model.path)
        return self._harness("the local judge's model").model_folder(model)

    def _harness(self, what: str) -> Harness:
        if self.harness is None:
            raise ConfigError(f"{what} needs the harness (a2rl.task.base.Harness), which sets "
                              f"task.harness; a task built alone has none")
        return self.harness

    def paid_apis(self) -> list[PaidApi]:
        """A paid judge (kind api or openai): every sealed instruction judged once or in both
        orders; the verdict cache makes a repeated reply free, which this ignores."""
        j = self.params.judge
        if j.kind == "local":
            return []
        items = self.params.test_size or EVAL_SET_SIZE
        orders = 2 if j.both_orders else 1
        per_call = (JUDGE_CALL_TOKENS * j.price_in_per_mtok
                    + j.max_tokens * j.price_out_per_mtok) / 1e6
        return [PaidApi(
            "judge", driver=j.driver if j.kind == "api" else None,
            key_env=j.api_key_env if j.kind == "openai" else None,
            calls_per_eval=items * orders, input_tokens_per_call=JUDGE_CALL_TOKENS,
            output_tokens_per_call=j.max_tokens,
            usd_per_call=per_call if j.kind == "openai" else 0.0, max_usd=j.max_usd,
            cap_key="task.params.judge.max_usd",
            assumption=f"{items} instructions x {orders} order(s), ~{JUDGE_CALL_TOKENS} "
                       f"prompt tokens and at most {j.max_tokens} written a call, no cache hits")]

    # ---- agent-facing -----------------------------------------------------------------------

    def description(self) -> str:
        return Path(__file__).with_name("description.md").read_text()
