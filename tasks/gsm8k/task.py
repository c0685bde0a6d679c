"""GSM8K-style math word problems scored by exact match of the final number.

prepare() draws the splits in the order test -> validation -> train, each de-duplicated by
normalized question against the splits drawn before it (and within itself), topping up from
the source until it has the requested size. Drawing test first keeps the sealed test split a
function of the source and the test parameters alone, so changing train_size or train_seed never
changes what models are graded on (nor the baseline cache key), while train still never shares a
question with test or validation. For a procedural source, test and its twins come from a
held-out part of the generator's space with the same difficulty mix (``splits``).

Sealed items carry the exact user turn (``prompt``) and system turn (``system``) the grader uses,
so a split file fixes the whole evaluation protocol and its hash covers it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from a2rl.task import (
    ConfigError,
    EvalResult,
    InferenceConfig,
    PreparedTaskPaths,
    ReplyScore,
    SingleTurn,
    Task,
    TaskConfig,
    iter_jsonl,
    render_readme,
    ship_package,
    write_jsonl_atomic,
)

from . import lm_eval
from .extract import extract_answer, is_correct
from .params import GSM8KParams
from .sources import make_source, normalize_question
from .splits import draw_split, draw_test, draw_twin, held_out, histogram, no_stats

PROMPT_TAIL_CHARS = 300
_CALCULATOR = re.compile(r"<<[^<>]*>>")


def strip_calculator(solution: str) -> str:
    """GSM8K solutions annotate arithmetic as ``<<16-3-4=9>>9``; shots show them without."""
    return _CALCULATOR.sub("", solution)


def user_prompt(question: str, instruction: str, shots: Iterable[dict[str, Any]] = ()) -> str:
    """The user turn: the instruction, worked examples, then the question."""
    parts = [instruction.strip()] if instruction.strip() else []
    parts += [f"Question: {s['question']}\nAnswer: {strip_calculator(s['answer'])}" for s in shots]
    parts.append(f"Question: {question}")
    return "\n\n".join(parts)


class GSM8KTask(Task):
    metric = "accuracy: exact match of the final number"
    item_fields = ("gold",)

    def __init__(self, cfg: TaskConfig, data_root: Path):
        super().__init__(cfg, data_root)
        self.params = GSM8KParams.from_dict(cfg.params)
        self._source = None
        if cfg.feedback == "validation" and self.params.validation_size == 0:
            raise ConfigError("task.feedback=validation needs task.params.validation_size > 0")

    # ---- data -------------------------------------------------------------------------------

    def data_files(self) -> list[Path]:
        src = self.params.source
        return ([self.data_root / src.path / f"{split}.jsonl" for split in ("train", "test")]
                if src.kind == "jsonl" else [])

    def data_status(self) -> str:
        if self.params.source.kind == "hf":
            return f"from the Hub at prepare ({self.params.source.hf_id})"
        return super().data_status()

    def prepare(self, out: PreparedTaskPaths) -> dict[str, Any]:
        p = self.params
        source = make_source(p.source, self.data_root)
        if source.procedural:
            test, test_stats = draw_test(source, p.test_seed, p.test_size,
                                         p.held_out_share), no_stats()

            def keep(item: dict[str, Any]) -> bool:  # the part test and its twins draw from
                return not held_out(item["question"], p.held_out_share)
        else:
            test, test_stats = draw_split(source, "test", p.test_seed, p.test_size, set())

            def keep(item: dict[str, Any]) -> bool:
                return True
        taken = {normalize_question(item["question"]) for item in test}
        validation, val_stats = [], no_stats()
        if p.validation_size:
            validation, val_stats = draw_split(source, "validation", p.validation_seed,
                                               p.validation_size, taken, keep)
            taken |= {normalize_question(item["question"]) for item in validation}
        train, train_stats = draw_split(source, "train", p.train_seed, p.train_size, taken, keep)
        if len(train) < p.shots:
            raise ConfigError(f"task.params.shots={p.shots} but train has only {len(train)} items")

        shots = train[:p.shots]
        # "prompt" is the user turn the grader would send for this question (zero-shot), so a
        # prompt/completion trainer sees what the grader sends
        write_jsonl_atomic(out.data / "train.jsonl",
                     [{"id": item["id"], "question": item["question"], "answer": item["answer"],
                       "prompt": self._user_turn(item["question"])}
                      for item in train])
        (out.data / "README.md").write_text(self._data_readme(len(train)))
        here = Path(__file__).parent
        ship_package(out.data / "reward", here / "reward.py", here / "extract.py")
        write_jsonl_atomic(out.test, [self._sealed(item, shots) for item in test])
        if validation:
            write_jsonl_atomic(out.validation, [self._sealed(item, shots) for item in validation])
        else:
            out.validation.unlink(missing_ok=True)

        return {
            "task": self.cfg.package,
            "task_id": self.cfg.id,
            "source": source.describe(),
            "sizes": {"train": len(train), "validation": len(validation), "test": len(test)},
            "dropped": {"train": train_stats, "validation": val_stats, "test": test_stats},
            "seeds": {"train": p.train_seed, "validation": p.validation_seed,
                      "test": p.test_seed},
            "shots": [item["id"] for item in shots],
            "strata": {"train": histogram(train), "validation": histogram(validation),
                       "test": histogram(test)},
            "params": p.to_dict(),
        }

    def rollouts(self) -> SingleTurn:
        """The train prompts (train.jsonl's ``prompt``: zero-shot, where the grader's turn adds
        ``shots`` worked examples when the config asks for some) with the grader's system turn,
        rewarded by the grader's rule (``reward.py``, copied to data/reward/)."""
        return SingleTurn(module="reward", function="reward", prompts="train.jsonl",
                          system=self.params.system_prompt)

    def twin_split(self, prepared: PreparedTaskPaths, folder: Path, seed: int) -> Path | None:
        """A twin from the held-out part of the generator's space, with test's size and
        difficulty mix (``splits.draw_twin``)."""
        source = make_source(self.params.source, self.data_root)
        if not source.procedural:
            return None
        test = list(iter_jsonl(prepared.test))
        train = list(iter_jsonl(prepared.data / "train.jsonl"))
        taken = {normalize_question(item["question"]) for item in test + train}
        twin = draw_twin(source, seed, test, taken, self.params.held_out_share)
        shots = train[:self.params.shots]  # prepare's shots: the first train items
        folder.mkdir(parents=True, exist_ok=True)
        write_jsonl_atomic(folder / "twin.jsonl", [
            self._sealed({**item, "id": f"twin-{i}"}, shots) for i, item in enumerate(twin)])
        return folder / "twin.jsonl"

    def _user_turn(self, question: str, shots: list[dict[str, Any]] = ()) -> str:
        """The grader's user turn for ``question`` under ``params.protocol``."""
        if self.params.protocol == "lm_eval_cot":
            return lm_eval.cot_prompt(question)
        return user_prompt(question, self.params.instruction, shots)

    def _sealed(self, item: dict[str, Any], shots: list[dict[str, Any]]) -> dict[str, Any]:
        return {**item, "prompt": self._user_turn(item["question"], shots),
                "system": self.params.system_prompt}

    def _data_readme(self, n_train: int) -> str:
        return render_readme(Path(__file__).with_name("data_readme.md.j2"), {
            "n_train": n_train, "p": self.params, "example": self._user_turn("<question>")})

    # ---- scoring ----------------------------------------------------------------------------

    def _turns(self, item: dict[str, Any], split: Path) -> tuple[str, str | None]:
        if "prompt" in item:
            return item["prompt"], item.get("system")
        if self.params.shots:
            raise ValueError(f"{split}: item {item.get('id')!r} has no 'prompt' field and "
                             f"shots={self.params.shots}; re-run prepare to write one")
        return self._user_turn(item["question"]), self.params.system_prompt

    def evaluate(self, model_dir: Path, split: Path, inference: InferenceConfig) -> EvalResult:
        from a2rl.task import chat_replies

        started = time.perf_counter()
        items = list(iter_jsonl(split))
        if not items:
            raise ValueError(f"{split}: no items to evaluate")
        prompts, completions = chat_replies(
            Path(model_dir), inference, [self._turns(item, split) for item in items],
            self.params.max_new_tokens or inference.max_new_tokens)
        result = self.score_replies(items, completions, prompts)
        result.seconds = time.perf_counter() - started
        return result

    def score_replies(self, items: list[dict[str, Any]], completions: list[str],
                      prompts: list[str] | None = None) -> EvalResult:
        """Extract the final number of ``completions[i]`` and compare it with ``items[i]``'s."""
        started = time.perf_counter()
        per_item, records, methods = [], [], []
        for i, (item, completion) in enumerate(zip(items, completions, strict=True)):
            extraction = extract_answer(completion)
            correct = is_correct(extraction.value, item["gold"])
            per_item.append(1.0 if correct else 0.0)
            methods.append(extraction.method)
            prompt = prompts[i] if prompts else item.get("prompt", "")
            records.append({"id": item.get("id"), "prompt_tail": prompt[-PROMPT_TAIL_CHARS:],
                            "completion": completion, "extracted": extraction.value,
                            "method": extraction.method, "gold": item["gold"],
                            "correct": correct})
        n = len(items)
        breakdown = {
            "answered_pct": 100.0 * sum(m != "none" for m in methods) / n,
            "marker_pct": 100.0 * sum(m == "marker" for m in methods) / n,
        } if n else {}
        if n and self.params.protocol == "lm_eval_cot":  # what lm-eval itself would report
            golds = [item["gold"] for item in items]
            breakdown |= {name: 100.0 * sum(lm_eval.matches(pick(c), g) for c, g in
                                            zip(completions, golds, strict=True)) / n
                          for name, pick in (("lm_eval_strict_pct", lm_eval.strict_answer),
                                             ("lm_eval_flexible_pct", lm_eval.flexible_answer))}
        return EvalResult(per_item=per_item, seconds=time.perf_counter() - started,
                          records=records, breakdown=breakdown)

    def find_item(self, item_id: str) -> dict[str, Any]:
        """An item of the task's source, any split: ids name the split and the position in it
        (``gsm8k-test-12``, ``chain_sum-train-3``), so no split has to be drawn."""
        p = self.params
        if self._source is None:
            self._source = make_source(p.source, self.data_root)
        seeds = {"train": p.train_seed, "validation": p.validation_seed, "test": p.test_seed}
        return self._source.find(item_id, seeds)

    def score_each(self, items: list[dict[str, Any]], replies: list[str]) -> list[ReplyScore]:
        # a hand-written item may give its gold as a JSON number
        result = self.score_replies([{**item, "gold": str(item["gold"])} for item in items],
                                    replies)
        return [ReplyScore(score, "correct" if record["correct"] else "wrong",
                           f"extracted {record['extracted']} ({record['method']}), "
                           f"gold {record['gold']}")
                for score, record in zip(result.per_item, result.records, strict=True)]

    # ---- agent-facing -----------------------------------------------------------------------

    def description(self) -> str:
        return Path(__file__).with_name("description.md").read_text()
