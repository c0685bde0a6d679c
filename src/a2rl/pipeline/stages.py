"""The pipeline's stages as plain functions of one composed RunConfig. Snakemake rules, DVC
stages and the ``a2rl run`` Hydra app all call these and nothing else.

prepare_model -> prepare_task -> measure_baseline -> run_agent -> final_grade -> summarize_run
-> export_model, then build_leaderboard and build_report over the grid's runs.

Paths: ``Layout.from_paths(cfg.paths)``; a task's results are keyed by ``cfg.task.id``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from pathlib import Path
from typing import Any

from a2rl.common.files import read_json, utc_now, write_json_atomic
from a2rl.common.layout import Layout, PreparedTaskPaths, RunPaths
from a2rl.common.records import FinalRecord, RunSummary
from a2rl.config.types import RunConfig

log = logging.getLogger(__name__)
TASK_CODE = ("common", "config", "task", "isolation")  # what a task's preparation may run


def layout_of(cfg: RunConfig) -> Layout:
    return Layout.from_paths(cfg.paths)


def run_paths(cfg: RunConfig) -> RunPaths:
    return layout_of(cfg).run(cfg.task.id, cfg.agent.name, cfg.driver.name, cfg.seed)


def prepare_model(cfg: RunConfig) -> Path:
    """Make the task's base model folder under resources/models/{model.name}."""
    from a2rl.models.provision import prepare_base_model
    return prepare_base_model(cfg.task.model, layout_of(cfg).model(cfg.task.model.name))


def base_model_dir(cfg: RunConfig) -> Path:
    return layout_of(cfg).base_model(cfg.task.model)


def load_task_of(cfg: RunConfig):
    """The cell's task with the pipeline's harness (a2rl.pipeline.harness.load_task_of),
    imported when a stage needs it: the harness brings the LLM proxy's libraries."""
    from a2rl.pipeline.harness import load_task_of as load
    return load(cfg)


def prepare_task(cfg: RunConfig, reuse: bool = False) -> PreparedTaskPaths:
    """Write results/prepared/{task.id}/ (data/, sealed/, prepared.json). ``reuse``: keep what
    is there when it was prepared from the same task config and the same code (``a2rl run``
    uses it; Snakemake decides for itself what is out of date)."""
    task = load_task_of(cfg)
    out = layout_of(cfg).prepared(cfg.task.id)
    fingerprint = task_fingerprint(cfg, task)
    if reuse and _prepared_with(out, fingerprint):
        log.info("results/prepared/%s is up to date (fingerprint %s); reused", cfg.task.id,
                 fingerprint[:12])
        return out
    out.data.mkdir(parents=True, exist_ok=True)
    out.sealed.mkdir(parents=True, exist_ok=True)
    facts = task.prepare(out)
    write_rollouts(task, out.data)
    write_json_atomic(out.manifest, {"task": cfg.task.id, "name": cfg.task.package,
                                     "prepared": utc_now(), "fingerprint": fingerprint, **facts})
    return out


def write_rollouts(task, data: Path) -> None:
    """``data/rollouts.json``: the task's declaration of how agents train online on it
    (``Task.rollouts``: an environment's episodes, or single-turn prompts and their reward), or
    none when it ships neither."""
    from a2rl.task.base import ROLLOUTS_FILE

    rollouts = task.rollouts()
    if rollouts is None:
        (data / ROLLOUTS_FILE).unlink(missing_ok=True)
    else:
        write_json_atomic(data / ROLLOUTS_FILE, rollouts.to_dict())


def task_fingerprint(cfg: RunConfig, task) -> str:
    """Hash of the task's config and of the code that prepares it (the task's package and
    a2rl packages tasks use; not the reference agents or the report, which never touch a
    task's data), so a changed generator never reuses stale data."""
    import inspect

    import a2rl

    digest = hashlib.sha256(json.dumps(
        {"id": cfg.task.id, "name": cfg.task.package, "params": cfg.task.params,
         "data": str(cfg.paths.data)}, sort_keys=True, default=str).encode())
    sources = sorted(Path(inspect.getfile(type(task))).parent.rglob("*.py"))
    for package in TASK_CODE:
        sources += sorted((Path(a2rl.__file__).parent / package).rglob("*.py"))
    for source in sources:
        digest.update(source.read_bytes())
    return digest.hexdigest()


def _prepared_with(out: PreparedTaskPaths, fingerprint: str) -> bool:
    try:
        manifest = json.loads(out.manifest.read_text())
    except (OSError, ValueError):
        return False
    return (manifest.get("fingerprint") == fingerprint and out.test.is_file()
            and out.data.is_dir() and any(out.data.iterdir()))


def file_hash(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def measure_baseline(cfg: RunConfig) -> dict[str, Any]:
    """Score the base model on the sealed split(s); writes results/baseline/{task.id}/baseline.json
    (cached by task, model hash and split hash; never cached when it failed)."""
    from a2rl.models.hf_folder import content_hash
    from a2rl.pipeline.spend import check_grading_budget
    layout = layout_of(cfg)
    task = load_task_of(cfg)
    # before a paid judge grades the baseline: the runs it is for must be fundable (the
    # runner checks each cell again)
    check_grading_budget(cfg, task)
    prepared = layout.prepared(cfg.task.id)
    model_dir = base_model_dir(cfg)
    model_hash = content_hash(model_dir)
    record: dict[str, Any] = {"task": cfg.task.id, "model": cfg.task.model.name,
                              "model_hash": model_hash, "validation": None,
                              "hardware": _grading_hardware(cfg)}
    splits = [("test", prepared.test)]
    if cfg.task.feedback == "validation" or prepared.validation.exists():
        splits.append(("validation", prepared.validation))
    for name, split in splits:
        if split.exists():
            record[name] = _cached_score(layout, cfg, task, model_dir, model_hash, split)
    write_json_atomic(layout.baseline(cfg.task.id), record)
    return record


def _grading_hardware(cfg: RunConfig) -> dict[str, Any]:
    from a2rl.common.hardware import describe, resolve_precision
    return describe(inference=resolve_precision(cfg.task.inference.precision))


def _cached_score(layout: Layout, cfg: RunConfig, task, model_dir: Path, model_hash: str,
                  split: Path) -> dict[str, Any]:
    """The split's score, cached by task, model, split, inference settings and the task's own
    grading settings (``Task.grading_settings``: an interactive task's prompt format), with the
    precision ``auto`` resolved to on this machine in the key: scores generated in different
    precisions or prompts are never mixed up. The cached record keeps the hardware that
    measured it."""
    from a2rl.common.hardware import resolve_precision
    precision = resolve_precision(cfg.task.inference.precision)
    settings = task.grading_settings()  # the prompt format: no score reused under another
    key = hashlib.sha256((f"{cfg.task.id}|{model_hash}|{file_hash(split)}|"
                          f"{cfg.task.inference}|{precision}"
                          + (f"|{json.dumps(settings, sort_keys=True)}" if settings else "")
                          ).encode()).hexdigest()[:32]
    cache = layout.baseline_cache(key)
    if cache.exists():
        return read_json(cache) | {"cached": True}
    started = time.monotonic()
    result = task.evaluate(model_dir, split, cfg.task.inference)  # raises: nothing is cached
    scored = result.to_dict() | {"seconds": round(time.monotonic() - started, 3),
                                 "hardware": _grading_hardware(cfg)}
    write_json_atomic(cache, scored)
    return scored | {"cached": False}


def run_agent(cfg: RunConfig) -> RunPaths:
    """Provision the workspace, start the grader, run the agent sandboxed within its budget.
    Writes the run directory (workspace/, ledger.jsonl, events.jsonl, agent.log, run.json)."""
    from a2rl.pipeline.runner import execute, load_baseline
    layout = layout_of(cfg)
    task = load_task_of(cfg)
    run = run_paths(cfg)
    baseline = load_baseline(layout.baseline(cfg.task.id))
    execute(cfg, task, run, layout.prepared(cfg.task.id), base_model_dir(cfg), baseline)
    return run


def final_grade(cfg: RunConfig) -> FinalRecord:
    """Score the selected submission (best feedback score, earliest on ties) on the test split;
    writes final.json. With test feedback the ledger's score is the test score (greedy decoding
    is deterministic), so nothing is re-evaluated; with validation feedback it is rescored."""
    from a2rl.grading.ledger import Ledger
    layout = layout_of(cfg)
    run = run_paths(cfg)
    baseline = read_json(layout.baseline(cfg.task.id))["test"]
    best = Ledger(run.ledger).best()
    if best is None:
        scored = {"score": baseline["score"], "stderr": baseline["stderr"], "n": baseline["n"]}
    elif best.split == "test":
        details = run.evals / f"{best.submission_id}.json"
        scored = {"score": best.score, "stderr": best.stderr, "n": best.n,
                  "breakdown": read_json(details).get("breakdown") if details.exists() else None}
    else:
        scored = _rescore_on_test(cfg, run, best.artifact_hash)
    record = FinalRecord(
        task=cfg.task.id, agent=cfg.agent.name, driver=cfg.driver.name, seed=cfg.seed,
        feedback=cfg.task.feedback, baseline=baseline["score"],
        no_valid_submission=best is None,
        rescored=best is not None and best.split != "test",
        selected_submission=None if best is None else best.submission_id,
        artifact_hash=None if best is None else best.artifact_hash,
        test_score=scored["score"], test_stderr=scored.get("stderr"), n=scored.get("n"),
        improvement=round(scored["score"] - baseline["score"], 4),
        breakdown=scored.get("breakdown"),
        twin=None if best is None else _twin_check(cfg, run, best.artifact_hash, scored,
                                                   selected_from(Ledger(run.ledger), best)))
    record.save(run.final)
    return record


def selected_from(ledger, best) -> int:
    """How many distinct artifacts scored on test the selected one was the best of: all the
    valid ones with test feedback, 1 when it was selected on validation (no curse on test)."""
    if best.split != "test":
        return 1
    return len({e.artifact_hash for e in ledger.valid if e.split == "test"})


def _twin_check(cfg: RunConfig, run: RunPaths, artifact_hash: str,
                scored: dict[str, Any], selected: int = 1) -> dict[str, Any]:
    """The selected artifact scored on a twin of the test split drawn now, and the verdict
    (a2rl.grading.twin); not checked for a task whose test split is a fixed pool."""
    from a2rl.grading.twin import draw_seed, not_checked, verdict
    task = load_task_of(cfg)
    seed = draw_seed()
    try:
        split = task.twin_split(layout_of(cfg).prepared(cfg.task.id), run.root / "twin", seed)
    except (ValueError, RuntimeError) as err:  # too few unused items left (a small world)
        log.warning("%s: no twin split could be drawn: %s", cfg.task.id, err)
        return not_checked(f"no twin could be drawn from seed {seed}: {err}")
    if split is None:
        return not_checked("the test split is a fixed pool; no twin can be drawn")
    result = _score_stored(cfg, run, artifact_hash, task, split)
    twin = {"seed": seed, "score": round(result.score, 4),
            "stderr": round(result.stderr, 4), "n": result.n}
    return verdict(scored["score"], scored.get("stderr"), twin, selected)


def _rescore_on_test(cfg: RunConfig, run: RunPaths, artifact_hash: str) -> dict[str, Any]:
    """The stored artifact scored on the sealed test split, as the grader scores it."""
    test = layout_of(cfg).prepared(cfg.task.id).test
    return _score_stored(cfg, run, artifact_hash, load_task_of(cfg), test).to_dict()


def _score_stored(cfg: RunConfig, run: RunPaths, artifact_hash: str, task, split: Path):
    """The stored artifact scored on ``split`` as the grader scores it (raises past the
    evaluation deadline)."""
    from a2rl.grading.artifacts import score_artifact, stored_artifact
    result, _ = score_artifact(stored_artifact(run.store, artifact_hash), base_model_dir(cfg),
                               lambda model_dir: task.evaluate(model_dir, split,
                                                               cfg.task.inference),
                               timeout_s=cfg.budget.eval_timeout_s)
    return result


def summarize_run(cfg: RunConfig) -> RunSummary:
    """Check the run's integrity and summarize it (integrity.json, summary.json), then render
    the summary as summary.md."""
    from a2rl.analysis.summary import summarize_run as summarize
    from a2rl.report.markdown import write_markdown
    summary = summarize(cfg)
    write_markdown(summary, run_paths(cfg).summary_md)
    return summary


def export_model(cfg: RunConfig) -> Path:
    """Copy (hard-link) the selected artifact to results/models/{task}/{agent}/{driver}/seed{k}/
    (model/ and selected.json), where DVC tracks it."""
    from a2rl.analysis.lineage import export_selected
    run = run_paths(cfg)
    dest = layout_of(cfg).selected_model(cfg.task.id, cfg.agent.name, cfg.driver.name, cfg.seed)
    export_selected(run.final, run.store, dest)
    return dest


def build_leaderboard(run_roots: list[Path], layout: Layout):
    from a2rl.analysis.leaderboard import build_leaderboard as build
    return build(run_roots, layout)


def build_report(run_roots: list[Path], layout: Layout) -> Path:
    """The static HTML report of ``run_roots`` under results/report/ (index.html)."""
    from a2rl.report import build_report as build
    return build(run_roots, layout)
