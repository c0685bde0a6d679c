"""The ``a2rl`` command.

    a2rl run [OVERRIDES...]                 one cell through every stage (a Hydra app)
    a2rl run -m agent=noop,sft seed=0,1,2   a Hydra sweep: one job per combination
    a2rl stage NAME [OVERRIDES...]          one stage of one cell
    a2rl leaderboard [--all] [OVERRIDES...] rebuild results/leaderboard.{csv,md,json}
    a2rl report [--all] [--screenshots DIR] [OVERRIDES...]
                                            leaderboard + static HTML report (results/report/)
    a2rl narrate --driver NAME [OVERRIDES...] optional LLM-written narrative of one run
    a2rl doctor [--json] [grid=NAME] [OVERRIDES...]
                                            can this machine run the grid? (a2rl.pipeline.doctor)
    a2rl tasks [--json] [OVERRIDES...]      the installed tasks: level, metric, data status
    a2rl agents [--json]                    the installed agents and agent stacks, with status
    a2rl new task NAME [--interactive] [--dir DIR]
                                            a task plugin package to fill in (pipeline/scaffold.py)
    a2rl new agent NAME [--dir DIR]         an agent plugin package to fill in (same)
    a2rl score TASK --replies FILE          score replies without a model (a2rl.grading.score)
    a2rl score TASK ARGS...                 the task's own scorer, e.g. alpacaeval --annotations
    a2rl submit PATH | a2rl status          inside a workspace: talk to this run's grader

OVERRIDES are Hydra's (``task=gsm8k budget=ci task.params.test_size=50``); see conf/.
``a2rl run`` is a Hydra app, so ``--cfg job`` prints the composed config, ``--help`` lists the
groups, and ``-m`` sweeps; Hydra's own output goes under results/hydra/ and the working directory
stays put. After each job it rebuilds the leaderboard from every summarized run under
results/runs/, so a sweep ends with a leaderboard covering it. ``a2rl leaderboard`` covers the
cells of the composed grid (``grid=paper``), or with ``--all`` every summarized run.

Imports stay lazy: ``a2rl submit`` runs inside the sandbox and needs only the standard library.
"""

from __future__ import annotations

import contextlib
import io
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

USAGE = """usage: a2rl COMMAND [ARGS...]

commands:
  run [OVERRIDES...]               run one cell through every stage; a Hydra app
                                   (-m sweeps, --cfg job prints the config, --help)
  stage NAME [OVERRIDES...]        run one stage of one cell; NAME is one of
                                   {stages}
  leaderboard [--all] [OVERRIDES...]
                                   rebuild results/leaderboard.{{csv,md,json}} from the
                                   grid's runs (--all: every summarized run)
  report [--all] [--screenshots DIR] [OVERRIDES...]
                                   the leaderboard and the static HTML report
                                   (results/report/index.html); --screenshots DIR also saves
                                   PNGs of the leaderboard and a run page (headless chromium)
  narrate --driver NAME [OVERRIDES...]
                                   an LLM-written narrative.md of one run through the driver
                                   conf/driver/NAME.yaml (optional; never used by summaries)
  doctor [--json] [grid=NAME] [OVERRIDES...]
                                   check this machine for a grid (default quick) in about a
                                   minute: sandbox, agents' Python, model, precision, timed
                                   training and generation, each cell's predicted plan
  tasks [--json] [OVERRIDES...]    the task ids the installed task plugins provide, with
                                   level, metric, data status and package; broken plugins
                                   with their package and problem (exit 1)
  agents [--json]                  the installed agents and agent stacks (plugins): name,
                                   kind, package and status; broken plugins with their
                                   package and problem (exit 1)
  new task NAME [--interactive] [--dir DIR]
                                   write a working task plugin package (a tiny static task,
                                   or an interactive one) to install and fill in
  new agent NAME [--dir DIR]       write a working agent plugin package (a scripted agent
                                   that submits the base model) to install and fill in
  score TASK --replies FILE [OVERRIDES...]
                                   score JSONL replies ({{"id"|"item", "reply"}}) as the
                                   grader does, one JSON line each (see a2rl.grading.score)
  score TASK ARGS...               a task's own scorer (a2rl_tasks.<task>.score), e.g.
                                   alpacaeval --annotations FILE: AlpacaEval 2.0's metrics of
                                   alpaca_eval judge annotations, as one JSON object
  submit PATH                      (in a workspace) submit a model folder to the grader
  status                           (in a workspace) the grader's view of this run

OVERRIDES are Hydra overrides of conf/config.yaml, e.g. task=gsm8k agent=sft seed=1.
""".format(stages=", ".join(STAGES))


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
        _configure_logging()
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
            _configure_logging()
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


def _configure_logging() -> None:
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


def run_leaderboard(overrides: Sequence[str], run_roots: Iterable[os.PathLike | str],
                    log_path: str | None = None):
    """Build the leaderboard of ``run_roots`` where the config of ``overrides`` puts results."""
    from a2rl.common.layout import Layout
    from a2rl.config.compose import compose
    from a2rl.pipeline.stages import build_leaderboard

    with log_output(log_path):
        layout = Layout.from_paths(compose(overrides).paths)
        roots = [Path(r) for r in run_roots]
        board = build_leaderboard(roots, layout)
        log.info("leaderboard of %d runs, %d rows: %s", len(roots), len(board),
                 layout.leaderboard_csv)
    return board


def run_report(overrides: Sequence[str], run_roots: Iterable[os.PathLike | str],
               log_path: str | None = None, leaderboard: bool = True) -> Path:
    """Build the HTML report of ``run_roots`` (after the leaderboard, unless ``leaderboard``
    is false: the workflow builds that in its own rule); returns index.html."""
    from a2rl.common.layout import Layout
    from a2rl.config.compose import compose
    from a2rl.pipeline.stages import build_leaderboard, build_report

    with log_output(log_path):
        layout = Layout.from_paths(compose(overrides).paths)
        roots = [Path(r) for r in run_roots]
        if leaderboard:
            build_leaderboard(roots, layout)
        index = build_report(roots, layout)
        log.info("report of %d runs: %s", len(roots), index)
    return index


def run_cell(cfg) -> None:
    """Every stage of one cell, in order, then the leaderboard over all summarized runs."""
    from a2rl.analysis.leaderboard import build_leaderboard, discover_run_roots
    from a2rl.common.layout import Layout
    from a2rl.report import build_report

    cell = f"{cfg.task.id}/{cfg.agent.name}/{cfg.driver.name}/seed{cfg.seed}"
    for name in STAGES:
        log.info("%s: stage %s", cell, name)
        if name == "prepare_task":  # the cells of a sweep share their task's data
            stage_function(name)(cfg, reuse=True)
        else:
            stage_function(name)(cfg)
    layout = Layout.from_paths(cfg.paths)
    board = build_leaderboard(discover_run_roots(layout), layout)
    index = build_report(discover_run_roots(layout), layout)
    log.info("%s: done; leaderboard (%d rows) at %s, report at %s", cell, len(board),
             layout.leaderboard_md, index)


def _run_app(args: list[str]) -> int:
    """``a2rl run``: a Hydra app over conf/, so sweeps (-m) and Hydra's flags work."""
    import hydra

    from a2rl.config.compose import (
        CONFIG_NAME,
        HYDRA_VERSION_BASE,
        conf_dir,
        searchpath_override,
        to_checked,
    )
    from a2rl.pipeline.agent_settings import check_settings

    @hydra.main(config_path=str(conf_dir()), config_name=CONFIG_NAME,
                version_base=HYDRA_VERSION_BASE)
    def app(dict_cfg) -> None:
        run_cell(check_settings(to_checked(dict_cfg)))

    saved = sys.argv
    sys.argv = ["a2rl run", *with_override(args, searchpath_override())]
    try:
        app()
    finally:
        sys.argv = saved
    return 0


def with_override(args: list[str], override: str) -> list[str]:
    """``args`` of ``a2rl run`` with ``override`` (the installed plugins' configs on the search
    path) added after the user's overrides. Hydra's parser takes the overrides as one run of
    positional words, so flags move in front of them (``--cfg job`` may follow overrides)."""
    if any(a in ("-h", "--help", "--hydra-help") for a in args):
        return list(args)
    from hydra._internal.utils import get_args_parser

    try:
        with contextlib.redirect_stderr(io.StringIO()):
            overrides = get_args_parser().parse_args(args).overrides
    except SystemExit:  # malformed: Hydra itself says why
        return list(args)
    flags = list(args)
    for word in reversed(overrides):
        del flags[len(flags) - 1 - flags[::-1].index(word)]
    return [*flags, *overrides, override]


def _stage(args: list[str]) -> int:
    if not args or args[0] not in STAGES:
        print(f"usage: a2rl stage NAME [OVERRIDES...]; NAME is one of {', '.join(STAGES)}",
              file=sys.stderr)
        return 2
    run_stages([args[0]], args[1:])
    return 0


def _leaderboard(args: list[str]) -> int:
    from a2rl.analysis.leaderboard import discover_run_roots, grid_run_roots
    from a2rl.common.layout import Layout
    from a2rl.config.compose import compose

    every = "--all" in args
    overrides = [a for a in args if a != "--all"]
    cfg = compose(overrides)
    layout = Layout.from_paths(cfg.paths)
    roots = discover_run_roots(layout) if every else grid_run_roots(cfg)
    run_leaderboard(overrides, roots)
    print(layout.leaderboard_md.read_text(), end="")
    return 0


def _report(args: list[str]) -> int:
    from a2rl.analysis.leaderboard import discover_run_roots, grid_run_roots
    from a2rl.common.layout import Layout
    from a2rl.config.compose import compose

    every = "--all" in args
    shots = None
    rest: list[str] = []
    items = iter(args)
    for arg in items:
        if arg == "--screenshots":
            shots = next(items, None)
            if shots is None:
                print("a2rl report: --screenshots needs a folder", file=sys.stderr)
                return 2
        elif arg != "--all":
            rest.append(arg)
    cfg = compose(rest)
    layout = Layout.from_paths(cfg.paths)
    roots = discover_run_roots(layout) if every else grid_run_roots(cfg)
    index = run_report(rest, roots)
    print(index)
    if shots:
        from a2rl.report.screenshot import screenshot_report

        for path in screenshot_report(index.parent, Path(shots)):
            print(path)
    return 0


def _narrate(args: list[str]) -> int:
    from a2rl.config.compose import compose
    from a2rl.pipeline.stages import run_paths
    from a2rl.report.narrative import write_narrative

    if "--driver" not in args or args.index("--driver") + 1 >= len(args):
        print("usage: a2rl narrate --driver NAME [OVERRIDES...]", file=sys.stderr)
        return 2
    i = args.index("--driver")
    driver_name, overrides = args[i + 1], args[:i] + args[i + 2:]
    cfg = compose(overrides)
    driver = compose([*overrides, f"driver={driver_name}"]).driver
    print(write_narrative(run_paths(cfg).summary_md, driver))
    return 0


def _doctor(args: list[str]) -> int:
    from a2rl.pipeline.doctor import main as doctor

    return doctor(args)


def _score(args: list[str]) -> int:
    from a2rl.grading import score

    return score.main(args)


def _new(args: list[str]) -> int:
    from a2rl.pipeline.scaffold import main as new

    return new(args)


def _tasks(args: list[str]) -> int:
    from a2rl.task.listing import main as tasks

    return tasks(args)


def _agents(args: list[str]) -> int:
    from a2rl.pipeline.agent_plugins import main as agents

    return agents(args)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE, end="", file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command in ("submit", "status"):
        from a2rl.grading import client

        return client.main(argv)
    if command == "run":
        return _run_app(rest)
    handlers = {"stage": _stage, "leaderboard": _leaderboard, "report": _report,
                "narrate": _narrate, "doctor": _doctor, "score": _score, "tasks": _tasks,
                "agents": _agents,
                "new": _new}
    if command not in handlers:
        print(f"a2rl: unknown command {command!r}\n\n{USAGE}", end="", file=sys.stderr)
        return 2
    from a2rl.config.types import ConfigError
    from a2rl.task.base import TaskNotImplemented

    try:
        return handlers[command](rest)
    except (ConfigError, TaskNotImplemented) as err:
        print(f"a2rl {command}: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
