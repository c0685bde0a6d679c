"""What the workflow's jobs call (workflow/scripts/, Snakemake's ``script:`` rules) and the
``a2rl`` command reuses: stages of one composed cell, with their output in the job's log
(``run_stages``), and the leaderboard and report of a set of runs. A library module, so that
the workflow never imports the command line (a2rl.pipeline.cli)."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import traceback
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger("a2rl")

# the per-cell stages of a2rl.pipeline.stages, in the order `a2rl run` calls them
STAGES = ("prepare_model", "prepare_task", "measure_baseline", "run_agent", "final_grade",
          "summarize_run", "export_model")
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def stage_function(name: str):
    """The function of ``a2rl.pipeline.stages`` called ``name`` (one of STAGES)."""
    if name not in STAGES:
        raise ValueError(f"unknown stage {name!r}; expected one of {', '.join(STAGES)}")
    from a2rl.pipeline import stages

    return getattr(stages, name)


@contextlib.contextmanager
def log_output(path: os.PathLike | str | None) -> Iterator[None]:
    """Send this process's stdout and stderr (file descriptors 1 and 2, so child processes and
    native libraries too) and the ``logging`` records to ``path`` while the block runs. An
    exception is written to the log and then raised as usual. ``None``: change nothing."""
    if path is None:
        configure_logging()
        yield
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    try:
        with path.open("w") as fh:
            os.dup2(fh.fileno(), 1)
            os.dup2(fh.fileno(), 2)
            configure_logging()
            try:
                yield
            except BaseException:
                traceback.print_exc()
                raise
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])


def configure_logging() -> None:
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format=LOG_FORMAT, stream=sys.stderr)


def run_stages(names: Sequence[str], overrides: Sequence[str], log_path: str | None = None,
               expect: Iterable[os.PathLike | str] = ()) -> list[Any]:
    """Compose the cell of ``overrides`` once and run the stages ``names`` on it in order,
    logging to ``log_path``; returns what each returned. ``expect``: files the stages must have
    written (a Snakemake rule's outputs); their absence means the rule's paths and
    ``a2rl.common.layout`` disagree, which is an error."""
    from a2rl.config.compose import compose
    from a2rl.pipeline.agent_settings import check_settings

    functions = [stage_function(name) for name in names]
    results = []
    with log_output(log_path):
        cfg = check_settings(compose(overrides))
        for name, function in zip(names, functions, strict=True):
            log.info("stage %s: %s", name, " ".join(overrides))
            results.append(function(cfg))
            log.info("stage %s done", name)
        missing = [str(p) for p in expect if not Path(p).exists()]
        if missing:
            raise RuntimeError(f"stages {', '.join(names)} finished without writing {missing}; "
                               f"the workflow's output paths and a2rl.common.layout disagree")
    return results


def run_prepare_model(model: str, dest: os.PathLike | str, log_path: str | None = None) -> Path:
    """Make the base model folder ``dest`` from the model's config alone (``model``: a
    ``ModelConfig`` as JSON). The folder is shared by every grid that names the model, so the
    job that makes it depends on that config, not on a grid's overrides: another grid's
    overrides leave it, and the cells built on it, up to date."""
    import json

    from a2rl.config.task import ModelConfig
    from a2rl.models.provision import prepare_base_model

    with log_output(log_path):
        log.info("stage prepare_model: %s", model)
        path = prepare_base_model(ModelConfig(**json.loads(model)), Path(dest))
        log.info("stage prepare_model done")
    return path


def run_leaderboard(overrides: Sequence[str], run_roots: Iterable[os.PathLike | str],
                    log_path: str | None = None):
    """Build the leaderboard of ``run_roots`` where the config of ``overrides`` puts results."""
    from a2rl.common.files import held_lock
    from a2rl.common.layout import Layout
    from a2rl.config.compose import compose
    from a2rl.pipeline.stages import build_leaderboard

    with log_output(log_path):
        layout = Layout.from_paths(compose(overrides).paths)
        roots = [Path(r) for r in run_roots]
        with held_lock(layout.report_lock):
            board = build_leaderboard(roots, layout)
        log.info("leaderboard of %d runs, %d rows: %s", len(roots), len(board),
                 layout.leaderboard_csv)
    return board


def run_report(overrides: Sequence[str], run_roots: Iterable[os.PathLike | str],
               log_path: str | None = None, leaderboard: bool = True) -> Path:
    """Build the HTML report of ``run_roots`` (after the leaderboard, unless ``leaderboard``
    is false: the workflow builds that in its own rule); returns index.html."""
    from a2rl.common.files import held_lock
    from a2rl.common.layout import Layout
    from a2rl.config.compose import compose
    from a2rl.pipeline.stages import build_leaderboard, build_report

    with log_output(log_path):
        layout = Layout.from_paths(compose(overrides).paths)
        roots = [Path(r) for r in run_roots]
        with held_lock(layout.report_lock):  # not while a finishing cell writes them
            if leaderboard:
                build_leaderboard(roots, layout)
            index = build_report(roots, layout)
        log.info("report of %d runs: %s", len(roots), index)
    return index
