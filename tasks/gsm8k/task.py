"""GSM8K-style math word problems scored by exact match of the final number.

prepare() draws the splits in the order test -> validation -> train, each de-duplicated by
normalized question against the splits drawn before it (and within itself), topping up from
the source until it has the requested size. Drawing test first keeps the sealed test split a
function of the source and the test parameters alone, so changing train_size or train_seed never
changes what models are graded on (nor the baseline cache key), while train still never shares a
question with test or validation.

Sealed items carry the exact user turn (``prompt``) and system turn (``system``) the grader uses,
so a split file fixes the whole evaluation protocol and its hash covers it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from a2rl.common.files import iter_jsonl, write_jsonl_atomic
from a2rl.common.layout import PreparedTaskPaths
from a2rl.config.types import ConfigError, InferenceConfig, TaskConfig
from a2rl.task.base import EvalResult, ReplyScore, SingleTurn, Task, ship_package

from .extract import extract_answer, is_correct
from .params import GSM8KParams
from .sources import make_source, normalize_question

# A procedural source gets this many draws per requested item before prepare() gives up on
# finding enough distinct questions (tiny generator spaces, e.g. 1-digit chain sums).
MAX_DRAWS_PER_ITEM = 8
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


def draw_split(source, role: str, seed: int, size: int | None,
               exclude: set[str]) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """``size`` distinct items for ``role`` whose questions are not in ``exclude`` (all of them
    when ``size`` is None and the source is a fixed pool), and how many were dropped."""
    count = size if source.procedural else 0
    while True:
        picked, seen = [], set()
        stats = {"dropped_overlap": 0, "dropped_duplicate": 0}
        candidates = source.candidates(role, seed, count)
        for item in candidates:
            key = normalize_question(item["question"])
            if key in exclude:
                stats["dropped_overlap"] += 1
            elif key in seen:
                stats["dropped_duplicate"] += 1
            else:
                seen.add(key)
                picked.append(item)
                if size is not None and len(picked) == size:
                    return picked, stats
        if size is None:
            return picked, stats
        if not source.procedural:
            raise ConfigError(f"task.params.{role}_size={size} but the source has only "
                              f"{len(picked)} distinct {role} items left after removing "
                              f"{stats['dropped_overlap']} shared with other splits")
        if count >= size * MAX_DRAWS_PER_ITEM:
            raise ConfigError(f"task.params.{role}_size={size}: only {len(picked)} distinct "
                              f"{role} items in {count} draws; the generator's space is too "
                              f"small for this size (lower it or widen source.kwargs)")
        count = min(2 * count + 16, size * MAX_DRAWS_PER_ITEM)




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
        test, test_stats = draw_split(source, "test", p.test_seed, p.test_size, set())
        taken = {normalize_question(item["question"]) for item in test}
        validation, val_stats = [], {"dropped_overlap": 0, "dropped_duplicate": 0}
        if p.validation_size:
            validation, val_stats = draw_split(source, "validation", p.validation_seed,
                                               p.validation_size, taken)
            taken |= {normalize_question(item["question"]) for item in validation}
        train, train_stats = draw_split(source, "train", p.train_seed, p.train_size, taken)
        if len(train) < p.shots:
            raise ConfigError(f"task.params.shots={p.shots} but train has only {len(train)} items")

        shots = train[:p.shots]
        # "prompt" is the user turn the grader would send for this question (zero-shot), so a
        # prompt/completion trainer sees what the grader sends
        write_jsonl_atomic(out.data / "train.jsonl",
                     [{"id": item["id"], "question": item["question"], "answer": item["answer"],
                       "prompt": user_prompt(item["question"], self.params.instruction)}
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
            "params": p.to_dict(),
        }

    def rollouts(self) -> SingleTurn:
        """The train prompts (train.jsonl's ``prompt``: zero-shot, where the grader's turn adds
        ``shots`` worked examples when the config asks for some) with the grader's system turn,
        rewarded by the grader's rule (``reward.py``, copied to data/reward/)."""
        return SingleTurn(module="reward", function="reward", prompts="train.jsonl",
                          system=self.params.system_prompt)

    def twin_split(self, prepared: PreparedTaskPaths, folder: Path, seed: int) -> Path | None:
        source = make_source(self.params.source, self.data_root)
        if not source.procedural:
            return None
        test = list(iter_jsonl(prepared.test))
        train = list(iter_jsonl(prepared.data / "train.jsonl"))
        taken = {normalize_question(item["question"]) for item in test + train}
        twin, _ = draw_split(source, "test", seed, len(test), taken)
        shots = train[:self.params.shots]  # prepare's shots: the first train items
        folder.mkdir(parents=True, exist_ok=True)
        write_jsonl_atomic(folder / "twin.jsonl", [
            self._sealed({**item, "id": f"twin-{i}"}, shots) for i, item in enumerate(twin)])
        return folder / "twin.jsonl"

    def _sealed(self, item: dict[str, Any], shots: list[dict[str, Any]]) -> dict[str, Any]:
        return {**item, "prompt": user_prompt(item["question"], self.params.instruction, shots),
                "system": self.params.system_prompt}

    def _data_readme(self, n_train: int) -> str:
        example = user_prompt("<question>", self.params.instruction)
        system = self.params.system_prompt
        return (
            "# Training data\n\n"
            f"`train.jsonl`: {n_train} math word problems, one JSON object per line:\n\n"
            "- `id`: item id\n"
            "- `question`: the problem\n"
            "- `answer`: a worked solution whose last line is `#### <number>` "
            "(GSM8K format; `<<a*b=c>>` marks calculator steps)\n\n"
            "The held-out problems are of the same kind. The grader gives the model one chat turn "
            "(the model's chat template, with the generation prompt added) and greedily decodes "
            "the reply. The user turn is:\n\n"
            f"```\n{example}\n```\n\n"
            + (f"with the system turn:\n\n```\n{system}\n```\n\n" if system else
               "with no system turn of its own (the template's default, if any).\n\n")
            + (f"The grader's user turn also holds {self.params.shots} worked examples from this "
               "file between the instruction and the question.\n\n" if self.params.shots else "")
            + "The reply scores 1 when its final number equals the answer's: the number after "
            "the first `####` it directly follows, else in the last `\\boxed{}`, else after "
            "the last \"answer is\", else the last number in the reply.\n\n"
            "`reward/`: that rule as a Python package (no dependencies): "
            "`reward.reward(completions, answer)` scores reply texts against train rows' "
            "`answer` fields, 1.0 or 0.0 each. `rollouts.json` declares it, with the prompts "
            "file, for online training (e.g. TRL's GRPOTrainer).\n"
        )

    # ---- scoring ----------------------------------------------------------------------------

    def _turns(self, item: dict[str, Any], split: Path) -> tuple[str, str | None]:
        if "prompt" in item:
            return item["prompt"], item.get("system")
        if self.params.shots:
            raise ValueError(f"{split}: item {item.get('id')!r} has no 'prompt' field and "
                             f"shots={self.params.shots}; re-run prepare to write one")
        return user_prompt(item["question"], self.params.instruction), self.params.system_prompt

    def evaluate(self, model_dir: Path, split: Path, inference: InferenceConfig) -> EvalResult:
        from a2rl.task.inference import chat_replies

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
