"""Measure what GRPO adds on an interactive task: run the reference agents' GRPO script
(``src/a2rl/agents/grpo_train.py``) for a few rounds from a starting model (e.g. the ``sft``
run's checkpoint) and score the start and every round's model on the sealed test games with the
grader's own evaluation (greedy generation, lockstep). Paired on the same games, so the report
gives each round's gain over the start with a paired standard error.

    python experiments/grpo_probe/probe.py \
        --start results/runs/household/sft/none/seed0/workspace/output/ckpt-1 \
        --rounds 3 --iterations 3 --out results/bench/grpo_probe.json

A bigger sealed test set without touching the shared prepared folder: ``--set`` config
overrides and ``--results`` a results root where the task is prepared (train games come from the
same seeds, so they are the same games the start checkpoint was trained on):

    python experiments/grpo_probe/probe.py --start ... --set task.params.test_games=200 \
        --results /tmp/probe-results --kl 0.05 --out grpo_probe.json

``--tiny`` runs a seconds-long check with a tiny random model on a few games (tests use it).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def paired_gain(start: list[float], now: list[float]) -> tuple[float, float]:
    """Mean per-game difference (0-100 scale) and its standard error."""
    diffs = [100.0 * (b - a) for a, b in zip(start, now, strict=True)]
    mean = sum(diffs) / len(diffs)
    if len(diffs) < 2:
        return mean, 0.0
    var = sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1)
    return mean, math.sqrt(var / len(diffs))


def discordant(start: list[float], now: list[float]) -> tuple[int, int]:
    """Games newly won and newly lost relative to the start (the pairs that move the mean)."""
    won = sum(1 for a, b in zip(start, now, strict=True) if b > a)
    lost = sum(1 for a, b in zip(start, now, strict=True) if b < a)
    return won, lost


def load_household(overrides: list[str], prepare: bool):
    """The composed config, the task and its prepared folder. Without ``prepare`` the folder
    must exist already (``a2rl prepare``/a run made it): a probe never rewrites the test games
    another run is being compared on."""
    from a2rl.config import compose
    from a2rl.pipeline import layout_of, load_task_of, prepare_task

    cfg = compose(["task=household", *overrides])
    if prepare:
        prepared = prepare_task(cfg, reuse=True)
    else:
        prepared = layout_of(cfg).prepared(cfg.task.id)
        if not prepared.test.exists():
            raise SystemExit(f"{prepared.test} is missing: prepare the task first "
                             "(a2rl stage prepare_task task=household)")
    return cfg, load_task_of(cfg), prepared


def score(task, model: Path, prepared, inference) -> dict:
    result = task.evaluate(model, prepared.test, inference)
    return {"model": str(model), "score": result.score, "stderr": result.stderr,
            "per_item": result.per_item, "seconds": round(result.seconds, 1),
            "mean_steps": result.breakdown.get("mean_steps")}


def earlier_rounds(report: Path, start: Path, test_sha256: str) -> list[dict]:
    """The rounds of an earlier probe's report (round 0: the start's scores), checked to be of
    the same start on the same test games (the per-game results every round is paired with)."""
    earlier = json.loads(report.read_text())
    if (Path(earlier["start"]).resolve() != start.resolve()
            or earlier.get("test_sha256") != test_sha256):
        raise SystemExit(f"{report} scored {earlier['start']} on other test games "
                         f"(sha256 {earlier.get('test_sha256')}), not {start} on {test_sha256}: "
                         "evaluate the start again")
    return earlier["rounds"]


def grpo_round(script: Path, model: Path, data: Path, out: Path, grpo_args: list[str],
               seed: int, reference: Path) -> list[dict]:
    """One GRPO round from ``model``; its KL penalty (if any) anchors to ``reference``, the
    probe's start, in every round (as the agents' rounds do)."""
    cmd = [sys.executable, str(script), "--model", str(model), "--data", str(data),
           "--out", str(out), "--stats", str(out.parent / "stats.json"), "--seed", str(seed),
           "--reference", str(reference), *grpo_args]
    subprocess.run(cmd, check=True)
    return json.loads((out / "grpo_log.json").read_text())


def load_grpo_script(path: Path):
    spec = importlib.util.spec_from_file_location("grpo_train", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Other options (--iterations, --games, --group, --lr, --temperature, --max-steps, "
               "--train-layers, --minibatch, --expert-bonus, --precision, ...) go to the GRPO "
               "script unchanged; the others are the grpo agent's defaults (GrpoSettings).")
    ap.add_argument("--start", help="model folder GRPO starts from")
    ap.add_argument("--tiny", action="store_true", help="tiny random model, ci-sized games")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", default=None, help="folder for the rounds' models (default: tmp)")
    ap.add_argument("--out", default=None, help="write the report (JSON) here")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="config override (e.g. task.params.test_games=200); needs --results")
    ap.add_argument("--results", default=None,
                    help="results root to prepare the task in (never the shared one)")
    ap.add_argument("--start-report", default=None,
                    help="take the start's scores from this earlier probe report (same start, "
                         "same test games) instead of evaluating it again; with --rounds 0 a "
                         "probe only evaluates the start, so several probes can share it")
    ap.add_argument("--resume", action="store_true",
                    help="go on from the report at --out: its rounds are kept, and a round whose "
                         "model --work holds but the report does not is scored, not trained")
    ap.add_argument("--no-prepare", action="store_true",
                    help="use the task prepared under --results as it is (a probe beside this "
                         "one may be reading it; preparing again would rewrite it)")
    a, grpo_args = ap.parse_known_args(argv)
    from a2rl.agents.grpo import GRPO_SCRIPT, GrpoSettings, method_args
    from a2rl.common import describe, resolve_precision, write_text_atomic

    if not (a.start or a.tiny):
        ap.error("--start is required without --tiny")
    if a.set and not (a.results or a.tiny):
        ap.error("--set changes the task: give --results, a folder to prepare it in")
    work = Path(a.work or tempfile.mkdtemp(prefix="grpo-probe-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    # the tiny check prepares its small games under the work folder, never over the real ones
    results = Path(a.results).resolve() if a.results else work / "results" if a.tiny else None
    overrides = [*(["grid=ci"] if a.tiny else []), *a.set,
                 *([f"paths.results={results}"] if results else [])]
    if a.resume and not (a.out and a.work):
        ap.error("--resume needs the --out report and the --work folder of the stopped probe")
    cfg, task, prepared = load_household(overrides,
                                         prepare=results is not None and not a.no_prepare)
    start = Path(a.start) if a.start else None
    if a.tiny:
        from a2rl.models import build_tiny_model
        start = build_tiny_model(work / "tiny")
    script = work / "grpo_train.py"
    shutil.copy(GRPO_SCRIPT, script)
    # the precision the harness would hand an agent on this machine, unless --precision says
    os.environ.setdefault("A2RL_PRECISION", resolve_precision("auto"))
    # the agent's defaults, then the pass-through options (the last of a repeated option wins),
    # checked by the GRPO script's own parser before anything runs
    grpo_args = [*method_args(GrpoSettings()), *grpo_args]
    settings = vars(load_grpo_script(script).arguments().parse_args(
        ["--model", str(start), "--data", str(prepared.data), "--out", str(work), *grpo_args]))

    report = {"start": str(start), "settings": {"rounds": a.rounds, "seed": a.seed,
                                                **{k: v for k, v in settings.items()
                                                   if k not in ("model", "data", "out",
                                                                "stats", "seed", "reference")}},
              "task": cfg.task.id, "overrides": a.set, "test_games": None, "rounds": [],
              "hardware": describe(agent=settings["precision"],
                                   inference=resolve_precision(cfg.task.inference.precision))}
    report["test_sha256"] = hashlib.sha256(prepared.test.read_bytes()).hexdigest()
    done = earlier_rounds(Path(a.out), start, report["test_sha256"])[1:] if a.resume else []
    first = (earlier_rounds(Path(a.start_report), start, report["test_sha256"])[0]
             if a.start_report else score(task, start, prepared, cfg.task.inference))
    report["test_games"] = len(first["per_item"])
    report["rounds"] += [{"round": 0, "train_s": 0.0, **first}, *done]
    print(json.dumps({k: first[k] for k in ("score", "stderr", "seconds")}), flush=True)
    if a.out:
        write_text_atomic(Path(a.out), json.dumps(report, indent=1))
    model = work / f"grpo-{done[-1]['round']}" if done else start
    elapsed = done[-1]["train_s"] if done else 0.0
    for k in range(len(done) + 1, a.rounds + 1):
        out = work / f"grpo-{k}"
        if a.resume and (out / "grpo_log.json").is_file():  # trained before the probe stopped
            log = json.loads((out / "grpo_log.json").read_text())
            elapsed += sum(r["seconds"] for r in log)
        else:
            began = time.monotonic()
            log = grpo_round(script, model, prepared.data, out, grpo_args, a.seed * 100 + k,
                             start)
            elapsed += time.monotonic() - began
        now = score(task, out, prepared, cfg.task.inference)
        gain, se = paired_gain(first["per_item"], now["per_item"])
        won, lost = discordant(first["per_item"], now["per_item"])
        row = {"round": k, "train_s": round(elapsed, 1), "gain": gain, "gain_stderr": se,
               "newly_won": won, "newly_lost": lost, "train_kl": [r.get("kl") for r in log],
               "train_success": [r["success"] for r in log], **now}
        report["rounds"].append(row)
        print(json.dumps({k2: row[k2] for k2 in ("round", "train_s", "score", "gain",
                                                  "gain_stderr", "newly_won", "newly_lost",
                                                  "train_success", "train_kl")}), flush=True)
        if a.out:  # after every round: a long probe stopped early keeps what it measured
            write_text_atomic(Path(a.out), json.dumps(report, indent=1))
        model = out
    return report


if __name__ == "__main__":
    main()
