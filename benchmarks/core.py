"""Benchmark the two costs every evaluation pays: generation, and the grader around it.

    python benchmarks/core.py --n 64 --batch-size 32 --max-new-tokens 64 --threads 2 \
        --out results/bench/core.json
    python benchmarks/core.py --tiny --n 8 --batch-size 4 --max-new-tokens 8   # quick check

1. Generation: the same N sealed gsm8k_arith test prompts (chat-formatted as the grader does),
   greedy, through ``a2rl.task.inference.HFGenerator`` batched (``--batch-size``) and one prompt
   at a time, interleaved batch by batch (see ``bench_generation``); tokens/s, prompts/s, their
   ratio (also per round and per CPU second), and how many completions differ. Counts come from
   the token ids generate() returned: a row's new tokens run up to and including its first end
   of sequence token; "decode slots" are rows x decoding steps of each generate() call, so
   ``decode_efficiency`` = new tokens / slots shows what padding and early-stopped rows cost.
2. One submission through a real GradingService + GradingServer (unix socket, a2rl.grading.client),
   the base model copied into output/, evaluated by the task's own ``evaluate`` on the same N
   items. The POST's wall time is split into HTTP round trip, copy + hash, materialize,
   evaluation, ledger + mirror + event, and the rest (path checks, lock, cache look-up);
   overhead = total - evaluation, reported as a share of the evaluation.

Torch threads contend with anything else running on the machine: on a busy 2-core machine a
2-thread OpenMP team waits at every parallel region for a descheduled thread, and measured
2-10x slower than ``--threads 1`` there. The JSON records CPU seconds and the load average
around each round so a number measured on a busy machine says so.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

TASK = "gsm8k_arith"
TOKEN = "bench-token"
TARGET_SPEEDUP = 5.0
TARGET_OVERHEAD_SHARE = 0.03


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=None,
                        help="HF model folder (default: the task's base model under "
                             "resources/models/, converted from the wheel when missing)")
    parser.add_argument("--tiny", action="store_true",
                        help="build and use the tiny random test model (quick check)")
    parser.add_argument("--n", type=int, default=64, help="prompts (sealed test items)")
    parser.add_argument("--batch-size", type=int, default=32, help="batched generation's size")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2,
                        help="torch threads (they contend with other work on the machine)")
    parser.add_argument("--out", type=Path, default=Path("results/bench/core.json"))
    args = parser.parse_args(argv)
    if args.tiny and args.model is not None:
        parser.error("--tiny and --model exclude each other")
    for name in ("n", "batch_size", "max_new_tokens", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')}={getattr(args, name)}; expected >= 1")
    return args


# ----------------------------------------------------------------------------- setup


def compose_task_config(args: argparse.Namespace):
    """The gsm8k_arith cell with the benchmark's test size and decoding length, and the HF
    inference settings it measures."""
    from a2rl.config import compose

    cfg = compose([f"task={TASK}", f"++task.params.test_size={args.n}",
                   f"++task.params.max_new_tokens={args.max_new_tokens}"])
    cfg.task.inference = dataclasses.replace(
        cfg.task.inference, backend="hf", batch_size=args.batch_size,
        max_new_tokens=args.max_new_tokens, torch_threads=args.threads)
    return cfg


def base_model(args: argparse.Namespace, cfg, scratch: Path) -> Path:
    from a2rl.config import ModelConfig
    from a2rl.models import build_tiny_model, prepare_base_model
    from a2rl.pipeline import prepare_model

    if args.tiny:
        return build_tiny_model(scratch / "tiny")
    if args.model is None:
        return prepare_model(cfg)  # resources/models/<name>, built when missing
    return prepare_base_model(ModelConfig(name=args.model.name, source="path",
                                          path=str(args.model)), args.model)


def load_avg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


# ----------------------------------------------------------------------------- generation


class GenerateProbe:
    """Stands in for ``model.generate`` and counts what each call computed."""

    def __init__(self, generator):
        self.inner = generator.model.generate
        self.eos_ids = set(generator.eos_ids)
        self.calls: list[dict[str, int]] = []
        generator.model.generate = self

    def __call__(self, **kwargs):
        out = self.inner(**kwargs)
        ids, mask = kwargs["input_ids"], kwargs["attention_mask"]
        new = out[:, ids.shape[1]:].tolist()
        self.calls.append({"rows": ids.shape[0], "prompt_slots": ids.numel(),
                           "prompt_tokens": int(mask.sum()), "steps": len(new[0]) if new else 0,
                           "new_tokens": sum(self._useful(row) for row in new)})
        return out

    def _useful(self, row: list[int]) -> int:
        for pos, tok in enumerate(row):
            if tok in self.eos_ids:
                return pos + 1
        return len(row)

    def totals(self) -> dict[str, Any]:
        total = {k: sum(c[k] for c in self.calls) for k in
                 ("prompt_slots", "prompt_tokens", "new_tokens")}
        slots = sum(c["rows"] * c["steps"] for c in self.calls)
        return total | {"generate_calls": len(self.calls), "decode_slots": slots,
                        "decode_efficiency": round(total["new_tokens"] / slots, 4) if slots else 0,
                        "prompt_efficiency": round(total["prompt_tokens"] /
                                                   total["prompt_slots"], 4)
                        if total["prompt_slots"] else 0}


class TimedMode:
    """One way of generating (a generator and its batch size), timed over several calls."""

    def __init__(self, generator, warm_up: list[str]):
        generator.generate(warm_up, max_new_tokens=2)  # first-call costs out of the way
        self.generator = generator
        self.probe = GenerateProbe(generator)
        self.wall = 0.0
        self.cpu = 0.0

    def generate(self, prompts: list[str], max_new_tokens: int) -> tuple[list[str], float]:
        """Completions and the wall seconds they took."""
        wall, cpu = time.perf_counter(), time.process_time()
        completions = self.generator.generate(prompts, max_new_tokens=max_new_tokens)
        took = time.perf_counter() - wall
        self.wall += took
        self.cpu += time.process_time() - cpu
        return completions, took

    def report(self, n_prompts: int) -> dict[str, Any]:
        counts = self.probe.totals()
        return {"batch_size": self.generator.cfg.batch_size, "seconds": round(self.wall, 3),
                "cpu_seconds": round(self.cpu, 3),
                "prompts_per_s": round(n_prompts / self.wall, 4),
                "tokens_per_s": round(counts["new_tokens"] / self.wall, 3),
                "tokens_per_cpu_s": round(counts["new_tokens"] / self.cpu, 3), **counts}


def bench_generation(model_dir: Path, prompts: list[str], inference) -> dict[str, Any]:
    """Both modes on the same prompts, interleaved so that a change in the machine's load hits
    both alike: round by round, one prompt at a time on the first half of a batch's prompts,
    the batch batched, then one at a time on the second half (an A-B-A sandwich: under a load
    that drifts steadily both modes see the same mean load). The rounds are the batches
    HFGenerator itself forms over all prompts (longest first), so the batched mode computes
    exactly what one ``generate(prompts)`` call would."""
    from a2rl.task import HFGenerator, encode_prompt

    single = dataclasses.replace(inference, batch_size=1)
    modes = {"batched": TimedMode(HFGenerator(model_dir, inference), prompts[:2]),
             "single": TimedMode(HFGenerator(model_dir, single), prompts[:2])}
    tokenizer = modes["batched"].generator.tokenizer
    lengths = [len(encode_prompt(tokenizer, p)) for p in prompts]
    order = sorted(range(len(prompts)), key=lambda i: -lengths[i])
    completions: dict[str, list[str]] = {name: [""] * len(prompts) for name in modes}
    rounds = []
    for start in range(0, len(order), inference.batch_size):
        idx = order[start:start + inference.batch_size]
        half = (len(idx) + 1) // 2
        load = load_avg()
        seconds = {"batched": 0.0, "single": 0.0}
        for name, part in (("single", idx[:half]), ("batched", idx), ("single", idx[half:])):
            if not part:
                continue
            texts, took = modes[name].generate([prompts[i] for i in part],
                                               inference.max_new_tokens)
            seconds[name] += took
            for i, text in zip(part, texts, strict=True):
                completions[name][i] = text
        rounds.append({"prompts": len(idx), "batched_s": round(seconds["batched"], 3),
                       "single_s": round(seconds["single"], 3),
                       "speedup": round(seconds["single"] / seconds["batched"], 3),
                       "load_avg_before": load, "load_avg_after": load_avg()})
    batched, single = (modes[name].report(len(prompts)) for name in ("batched", "single"))
    mismatched = [i for i, (x, y) in enumerate(zip(completions["batched"], completions["single"],
                                                   strict=True)) if x != y]
    speedup = batched["tokens_per_s"] / single["tokens_per_s"]
    return {"batched": batched, "single": single, "rounds": rounds,
            "speedup_tokens_per_s": round(speedup, 3),
            "speedup_prompts_per_s": round(batched["prompts_per_s"] / single["prompts_per_s"], 3),
            "speedup_cpu": round(batched["tokens_per_cpu_s"] / single["tokens_per_cpu_s"], 3),
            "mismatches": len(mismatched), "mismatched_items": mismatched[:20],
            "target_speedup": TARGET_SPEEDUP, "meets_target": speedup >= TARGET_SPEEDUP,
            "prompt_tokens_mean": round(sum(lengths) / len(lengths), 1),
            "example_completion": completions["batched"][0]}


# ----------------------------------------------------------------------------- submission


class Stopwatch:
    """Named durations, summed over calls; safe to use from the server's worker thread."""

    def __init__(self):
        self.seconds: dict[str, float] = {}

    def wrap(self, name: str, fn: Callable) -> Callable:
        def timed(*args, **kwargs):
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started
        return timed

    def get(self, name: str) -> float:
        return self.seconds.get(name, 0.0)


@contextlib.contextmanager
def timing_grader_steps(watch: Stopwatch) -> Iterator[None]:
    """Time the grader's copy + hash and materialize steps where the grader looks them up (the
    grader copies; a2rl.grading.artifacts.score_artifact materializes, in a child process
    under limits: a2rl.grading.loading)."""
    from a2rl.grading import artifacts, grader

    saved = {(module, name): getattr(module, name) for module, name in (
        (grader, "copy_artifact"), (artifacts, "materialize_limited"))}
    try:
        for (module, name), fn in saved.items():
            setattr(module, name, watch.wrap(name, fn))
        yield
    finally:
        for (module, name), fn in saved.items():
            setattr(module, name, fn)


def bench_submission(model_dir: Path, task, prepared, inference, scratch: Path) -> dict[str, Any]:
    from a2rl.common import BudgetClock, EventLog
    from a2rl.grading import GraderSettings, GradingServer, GradingService, Ledger, submit
    from a2rl.isolation import provision_workspace

    run = scratch / "run"
    workspace = run / "workspace"
    provision_workspace(workspace, prepared.data, model_dir, "benchmark", link_model=False)
    submitted = workspace / "output" / "model"
    shutil.copytree(model_dir, submitted)
    watch = Stopwatch()
    evaluate = watch.wrap("evaluation",
                          lambda folder: task.evaluate(folder, prepared.test, inference))
    clock = BudgetClock(24 * 3600)
    clock.start()
    service = GradingService(
        GraderSettings(task=TASK, split="test", baseline=None, max_submissions=10,
                       workspace=workspace, store=run / "store",
                       base_model=workspace / "base_model", mirror=workspace / "scores.json"),
        evaluate=evaluate, ledger=Ledger(run / "ledger.jsonl"), clock=clock,
        events=EventLog(run / "events.jsonl", clock))
    service.submit = watch.wrap("server", service.submit)
    service._record = watch.wrap("record", service._record)
    socket_dir = Path(tempfile.mkdtemp(prefix="a2rl-bench-sock-"))  # AF_UNIX paths are short
    load_before = load_avg()
    try:
        with GradingServer(service, TOKEN, socket_dir / "grader.sock") as server, \
                timing_grader_steps(watch):
            started = time.perf_counter()
            code, body = submit(str(submitted), url=server.url, token=TOKEN)
            total = time.perf_counter() - started
            if code != 200:
                raise RuntimeError(f"the grader answered {code}: {body}")
            first = dict(watch.seconds)  # the resubmission below adds to the same watch
            started = time.perf_counter()
            cached_code, cached = submit(str(submitted), url=server.url, token=TOKEN)
            cached_total = time.perf_counter() - started
    finally:
        shutil.rmtree(socket_dir, ignore_errors=True)
    return split_submission(total, first) | {
        "score": body.get("score"), "n": body.get("n"),
        "cached_resubmit": {"status": cached_code, "cached": cached.get("cached"),
                            "seconds": round(cached_total, 4)},
        "artifact_bytes": sum(f.stat().st_size for f in submitted.rglob("*") if f.is_file()),
        "load_avg_before": load_before, "load_avg_after": load_avg()}


def split_submission(total: float, seconds: dict[str, float]) -> dict[str, Any]:
    """The POST's wall time by step; ``other`` is server time outside the timed steps."""
    server = seconds.get("server", 0.0)
    steps = {"http_round_trip": total - server,
             "copy_hash": seconds.get("copy_artifact", 0.0),
             "materialize": seconds.get("materialize_limited", 0.0),
             "evaluation": seconds.get("evaluation", 0.0),
             "ledger_mirror": seconds.get("record", 0.0)}
    steps["other"] = server - sum(v for k, v in steps.items() if k != "http_round_trip")
    overhead = total - steps["evaluation"]
    share = overhead / steps["evaluation"] if steps["evaluation"] else float("nan")
    return {"total_s": round(total, 4), "steps_s": {k: round(v, 4) for k, v in steps.items()},
            "overhead_s": round(overhead, 4), "overhead_share": round(share, 5),
            "target_overhead_share": TARGET_OVERHEAD_SHARE,
            "meets_target": share <= TARGET_OVERHEAD_SHARE}


# ----------------------------------------------------------------------------- report


def render(result: dict[str, Any]) -> str:
    cfg, gen, sub = result["config"], result["generation"], result["submission"]
    verdict = {True: "met", False: "NOT met"}
    lines = [(f"model {cfg['model']}  task {cfg['task']}  n={cfg['n']}  "
              f"max_new_tokens={cfg['max_new_tokens']}  torch threads={cfg['threads']}  "
              f"cpus={cfg['cpu_count']}"),
             "",
             ("generation     batch  seconds  cpu s  prompts/s  tokens/s  new tokens  "
              "decode eff.")]
    for name, label in (("batched", "batched"), ("single", "one at a time")):
        g = gen[name]
        lines.append(f"{label:<14} {g['batch_size']:>5}  {g['seconds']:>7.2f}  "
                     f"{g['cpu_seconds']:>5.1f}  {g['prompts_per_s']:>9.2f}  "
                     f"{g['tokens_per_s']:>8.1f}  {g['new_tokens']:>10}  "
                     f"{g['decode_efficiency']:>11.2f}")
    lines.append(f"speedup {gen['speedup_tokens_per_s']:.2f}x tokens/s (target >= "
                 f"{gen['target_speedup']:.0f}x: {verdict[gen['meets_target']]}); "
                 f"mismatched completions {gen['mismatches']}/{cfg['n']}")
    lines.append(f"per CPU second {gen['speedup_cpu']:.2f}x; by round "
                 + ", ".join(f"{r['speedup']:.2f}x (load {r['load_avg_before'][0]:.1f}->"
                             f"{r['load_avg_after'][0]:.1f})" for r in gen["rounds"]))
    lines += ["", f"submission (one POST over the unix socket, evaluation on {cfg['n']} items)",
              "step                seconds  % of evaluation"]
    evaluation = sub["steps_s"]["evaluation"]
    for step, seconds in sub["steps_s"].items():
        pct = 100 * seconds / evaluation if evaluation else float("nan")
        lines.append(f"{step:<18} {seconds:>8.3f}  {pct:>15.2f}")
    lines.append(f"{'total':<18} {sub['total_s']:>8.3f}")
    lines.append(f"overhead {sub['overhead_s']:.3f} s = {100 * sub['overhead_share']:.2f} % of "
                 f"evaluation (target <= {100 * sub['target_overhead_share']:.0f} %: "
                 f"{verdict[sub['meets_target']]}); cached resubmission "
                 f"{sub['cached_resubmit']['seconds']:.3f} s")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch

    from a2rl.common import (
        PreparedTaskPaths,
        describe,
        iter_jsonl,
        resolve_precision,
        write_json_atomic,
    )
    from a2rl.pipeline import load_task_of
    from a2rl.task import format_chat

    torch.set_num_threads(args.threads)
    cfg = compose_task_config(args)
    inference = cfg.task.inference
    with tempfile.TemporaryDirectory(prefix="a2rl-bench-") as tmp:
        scratch = Path(tmp)
        model_dir = base_model(args, cfg, scratch)
        task = load_task_of(cfg)
        prepared = PreparedTaskPaths(scratch / "prepared")
        task.prepare(prepared)
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        prompts = [format_chat(tokenizer, item["prompt"], item.get("system"))
                   for item in iter_jsonl(prepared.test)]
        generation = bench_generation(model_dir, prompts, inference)
        submission = bench_submission(model_dir, task, prepared, inference, scratch)
    result = {"config": {"model": "tiny" if args.tiny else str(model_dir), "task": TASK,
                         "n": len(prompts), "batch_size": args.batch_size,
                         "max_new_tokens": args.max_new_tokens, "threads": args.threads,
                         "cpu_count": os.cpu_count(), "torch": torch.__version__,
                         "python": platform.python_version()},
              "generation": generation, "submission": submission,
              "hardware": describe(inference=resolve_precision(inference.precision))}
    write_json_atomic(args.out, result)
    print(render(result))
    print(f"wrote {args.out}")
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
