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
    a2rl doctor --llm [--no-calls] [--json] [grid=NAME] [OVERRIDES...]
                                            keys, agent CLIs, data, GPU, grading budgets and
                                            the API spend of the grid (a2rl.pipeline.preflight)
    a2rl plan [--json] [grid=NAME] [OVERRIDES...]
                                            the grid's estimated API spend (a2rl.pipeline.spend)
    a2rl tasks [--json] [OVERRIDES...]      the installed tasks: level, metric, data status
    a2rl agents [--json]                    the installed agents and agent stacks, with status
    a2rl data status|fetch|export ...       the tasks' official data (a2rl.data.command)
    a2rl new task NAME [--interactive] [--dir DIR]
                                            a task plugin package to fill in (pipeline/scaffold.py)
    a2rl new agent NAME [--dir DIR]         an agent plugin package to fill in (same)
    a2rl score TASK --replies FILE          score replies without a model (a2rl.grading.score)
    a2rl score TASK ARGS...                 the task's own scorer, e.g. alpacaeval --annotations
    a2rl status [RESULTS | grid=NAME] [--json] [--watch]
                                            every cell of a grid as it runs (a2rl.analysis.status)
    a2rl view [RESULTS | grid=NAME] [--port N]
                                            the report, live, on localhost (a2rl.report.live)
    a2rl submit PATH | a2rl status          inside a workspace: talk to this run's grader
    a2rl timeline [LOG] [--out FILE]        where a grid's wall time went (a2rl.analysis)
    a2rl compare BEFORE AFTER [--only CELL] two results trees, field by field (compare_runs.py)

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
import importlib
import io
import logging
import os
import sys
from pathlib import Path

from a2rl.pipeline.jobs import STAGES, run_leaderboard, run_report, run_stages, stage_function

log = logging.getLogger("a2rl")

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
  doctor --llm [--no-calls] [--json] [grid=NAME] [OVERRIDES...]
                                   pre-flight of the grid's LLM cells and paid graders, in
                                   seconds: each driver's and judge's key set and answering a
                                   one-token call (--no-calls: only set), agent CLIs at their
                                   pins, task data, GPU and vLLM where asked, grading caps
                                   against submission limits; then the API spend estimate
  plan [--json] [grid=NAME] [OVERRIDES...]
                                   the grid's estimated API spend (drivers, judges, search)
                                   from its budgets and prices, assumptions stated; exit 1
                                   when a run's grading cap does not fund its submissions
  tasks [--json] [OVERRIDES...]    the task ids the installed task plugins provide, with
                                   level, metric, data status and package; broken plugins
                                   with their package and problem (exit 1)
  agents [--json]                  the installed agents and agent stacks (plugins): name,
                                   kind, package and status; broken plugins with their
                                   package and problem (exit 1)
  data status [--json] | fetch NAME... [--mirror URL] [--from DIR] [--accept-unpinned]
       | export DIR [NAME...]      the tasks' official data under paths.data: what is
                                   installed and missing; download and verify it; copy it
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
  status [RESULTS | grid=NAME [OVERRIDES...]] [--json] [--watch]
                                   every cell of a grid's results folder while it runs:
                                   state, elapsed/budget, submissions, best score, last
                                   event, cost (reads the run folders, never a grader)
  view [RESULTS | grid=NAME [OVERRIDES...]] [--port N]
                                   serve the report on http://127.0.0.1:N/, its pages
                                   following the running cells (read-only)
  submit PATH                      (in a workspace) submit a model folder to the grader
  status                           (in a workspace, where A2RL_GRADER_URL is set) the
                                   grader's view of this run
  timeline [LOG] [--out FILE]      each job of a Snakemake log (default: the newest under
                                   .snakemake/log/) with its seconds, per rule and in all
  compare BEFORE AFTER [--only CELL]
                                   two results trees of one grid, record by record, times and
                                   run identifiers aside (exit 1 when a field differs)

OVERRIDES are Hydra overrides of conf/config.yaml, e.g. task=gsm8k agent=sft seed=1.
""".format(stages=", ".join(STAGES))


def run_cell(cfg) -> None:
    """Every stage of one cell, in order, then the leaderboard over all summarized runs."""
    from a2rl.analysis.leaderboard import build_leaderboard, discover_run_roots
    from a2rl.common.files import held_lock
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
    # cells run at once (a sweep's, or several `a2rl run`s) share these files: one writes them
    # at a time, each from the runs present when its turn comes, so the last sees them all
    with held_lock(layout.report_lock):
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
        # argparse would print its own help and exit; Hydra's help composes the config, which
        # needs the plugins' configs (the agents' and tasks' groups) too
        return [*args, override]
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
    if "--llm" in args:  # the pre-flight of LLM cells and paid graders
        return importlib.import_module("a2rl.pipeline.preflight").main(args)
    return _delegate("doctor")(args)


def _score(args: list[str]) -> int:
    from a2rl.config.compose import compose
    from a2rl.grading import score

    return score.main(args, compose)


def in_workspace() -> bool:
    """Whether this process runs as an agent, in a workspace: the harness gives an agent its
    grader's address (A2RL_GRADER_URL) and nothing else has it. There `a2rl status` asks the
    run's grader; on the host it reads a grid's results folder (a2rl.analysis.status). The
    sandbox's own `a2rl` is the grader client alone (a2rl.pipeline.runner.write_tools); this
    keeps the same answer for an agent that runs the project's command there."""
    return bool(os.environ.get("A2RL_GRADER_URL"))


# commands whose module's main(args) does the work, imported only when the command runs (every
# command imports this module: `a2rl submit` and `--help` too, which need none of them)
DELEGATED = {
    "doctor": "a2rl.pipeline.doctor", "new": "a2rl.pipeline.scaffold",
    "plan": "a2rl.pipeline.spend",
    "tasks": "a2rl.task.listing", "agents": "a2rl.pipeline.agent_plugins",
    "status": "a2rl.analysis.status", "view": "a2rl.report.live", "data": "a2rl.data.command",
    # tools over finished grids
    "timeline": "a2rl.analysis.grid_timeline", "compare": "a2rl.analysis.compare_runs",
}


def _delegate(command: str):
    def handler(args: list[str]) -> int:
        return importlib.import_module(DELEGATED[command]).main(args)
    return handler


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE, end="", file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "submit" or (command == "status" and in_workspace()):
        from a2rl.grading import client

        return client.main(argv)
    if command == "run":
        return _run_app(rest)
    handlers = {"stage": _stage, "leaderboard": _leaderboard, "report": _report,
                "narrate": _narrate, "score": _score,
                **{name: _delegate(name) for name in DELEGATED},
                "doctor": _doctor}
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
