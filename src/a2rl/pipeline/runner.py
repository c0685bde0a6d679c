"""One agent run: workspace, grader, sandboxed agent, budget, in that order."""

from __future__ import annotations

import os
import secrets
import shutil
import sys
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

from a2rl.common.clock import BudgetClock
from a2rl.common.events import EventLog
from a2rl.common.files import read_json, utc_now, write_json_atomic
from a2rl.common.hardware import AGENT_DEVICE, describe, one_line, resolve_precision
from a2rl.common.layout import RunPaths
from a2rl.config.types import RunConfig
from a2rl.grading.grader import GraderSettings, GradingServer, GradingService
from a2rl.grading.ledger import Ledger
from a2rl.grading.recording import CodeRecorder
from a2rl.isolation.procs import run_until
from a2rl.isolation.sandbox import HOME, Sandbox
from a2rl.isolation.workspace import make_writable, provision_workspace, render_description
from a2rl.llm.drivers import StackRun, check_driver, driver_session
from a2rl.llm.proxy import llm_totals
from a2rl.task.base import Task


def feedback_split(cfg: RunConfig, prepared) -> tuple[str, Path]:
    if cfg.task.feedback == "validation":
        if not prepared.validation.exists():
            raise FileNotFoundError(
                f"task.feedback=validation but {prepared.validation} is missing: set a "
                "validation size in the task's params")
        return "validation", prepared.validation
    return "test", prepared.test


def fresh_run_dir(run: RunPaths) -> None:
    if run.root.exists():
        make_writable(run.root)
        shutil.rmtree(run.root)
    run.root.mkdir(parents=True)


def write_tools(tools: Path, python: str) -> None:
    """The read-only /opt/a2rl of the sandbox: the ``a2rl`` client and the reference agents."""
    (tools / "bin").mkdir(parents=True)
    (tools / "agents").mkdir()
    shutil.copy(resources.files("a2rl.grading").joinpath("client.py"), tools / "a2rl_client.py")
    for agent in resources.files("a2rl").joinpath("agents").iterdir():
        if agent.name.endswith(".py") and not agent.name.startswith("_"):
            shutil.copy(agent, tools / "agents" / agent.name)
    launcher = (f"#!{python}\nimport sys\nsys.path.insert(0, {str(tools)!r})\n"
                "sys.path.insert(0, '/opt/a2rl')\n"
                "from a2rl_client import main\nsys.exit(main())\n")
    (tools / "bin" / "a2rl").write_text(launcher)
    (tools / "bin" / "a2rl").chmod(0o755)


def run_hardware(cfg: RunConfig) -> dict[str, Any]:
    """The hardware record of a run, with the precision the agent is told to train in and the
    grader generates in."""
    return describe(agent=agent_precision(cfg),
                    inference=resolve_precision(cfg.task.inference.precision))


def agent_precision(cfg: RunConfig) -> str:
    """The precision the agent is told to train in, for the device it trains on."""
    return resolve_precision(cfg.agent.precision, AGENT_DEVICE)


def agent_env(cfg: RunConfig, sandbox: Sandbox, grader_url: str, http_url: str, token: str,
              time_limit_s: float) -> dict[str, str]:
    python_bin = str(Path(sys.executable).parent)
    threads = str(cfg.agent.torch_threads or os.cpu_count() or 1)
    home = HOME if sandbox.kind == "bwrap" else str(Path(sandbox.workspace).parent / "home")
    env = {"PATH": f"{sandbox.tools_view}/bin:{python_bin}:/usr/local/bin:/usr/bin:/bin",
           "HOME": home, "TMPDIR": "/tmp", "LANG": "C.UTF-8",
           "A2RL_WORKSPACE": sandbox.workspace_view, "A2RL_TOOLS": sandbox.tools_view,
           "A2RL_GRADER_URL": grader_url, "A2RL_GRADER_HTTP": http_url, "A2RL_TOKEN": token,
           "A2RL_TIME_LIMIT_S": str(time_limit_s), "A2RL_TASK": cfg.task.id,
           "A2RL_MAX_SUBMISSIONS": str(cfg.budget.max_submissions),
           "A2RL_SEED": str(cfg.seed), "OMP_NUM_THREADS": threads,
           "A2RL_PRECISION": agent_precision(cfg),
           "A2RL_TORCH_THREADS": threads, "PYTHONUNBUFFERED": "1",
           "TOKENIZERS_PARALLELISM": "false", "HF_HOME": f"{home}/hf"}
    if not cfg.agent.network:
        env |= {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    # the GPUs this job was given (Slurm and the other schedulers set it): the agent uses those
    # only, as the grader and vLLM do in the harness's own process
    if "CUDA_VISIBLE_DEVICES" in os.environ:
        env["CUDA_VISIBLE_DEVICES"] = os.environ["CUDA_VISIBLE_DEVICES"]
    env |= {k: str(v) for k, v in cfg.agent.env.items()}
    return env


def expand_command(cfg: RunConfig, sandbox: Sandbox) -> list[str]:
    values = {"python": sys.executable, "agents": f"{sandbox.tools_view}/agents",
              "workspace": sandbox.workspace_view}
    return [part.format(**values) for part in cfg.agent.command]


def execute(cfg: RunConfig, task: Task, run: RunPaths, prepared, base_model: Path,
            baseline: dict[str, Any]) -> dict[str, Any]:
    """Run the agent phase of one cell; returns what run.json records."""
    fresh_run_dir(run)
    check_driver(cfg)  # an LLM agent's key and tools are checked before anything starts
    stack_run = StackRun.prepare(cfg, run) if cfg.agent.stack else None
    split_name, split = feedback_split(cfg, prepared)
    base_scored = baseline.get(split_name) or {}
    split_baseline = base_scored.get("score")
    tools = run.root / "tools"
    write_tools(tools, sys.executable)
    grader_dir = Path(tempfile.mkdtemp(prefix="a2rl-grader-"))
    grader_dir.chmod(0o755)
    sandbox = Sandbox(cfg.sandbox, run.workspace, tools, grader_dir, cfg.agent.network,
                      **(stack_run.mounts() if stack_run else {}))
    clock = BudgetClock(cfg.budget.time_limit_s, cfg.budget.count_eval_time)
    events = EventLog(run.events, clock)
    if cfg.sandbox == "none":
        events.emit("error", message="sandbox=none: the agent runs WITHOUT isolation")
    token = secrets.token_urlsafe(24)
    submit_command = "a2rl submit"
    hardware = run_hardware(cfg)
    description = render_description(task.description(), {
        "hardware": one_line(hardware), "precision": hardware["precision"]["agent"],
        "time_limit_min": round(cfg.budget.time_limit_s / 60, 1),
        "eval_note": "" if cfg.budget.count_eval_time else " (evaluation time not counted)",
        "max_submissions": cfg.budget.max_submissions, "feedback": split_name,
        "workspace": sandbox.workspace_view, "submit_command": submit_command,
        "grader_url": "$A2RL_GRADER_URL", "base_model": f"{sandbox.workspace_view}/base_model",
        "data_dir": f"{sandbox.workspace_view}/data"})
    provision_workspace(run.workspace, prepared.data, base_model, description,
                        link_model=cfg.sandbox == "bwrap")
    if cfg.sandbox == "none":
        (run.workspace.parent / "home").mkdir(exist_ok=True)
    service = GradingService(
        GraderSettings(task=cfg.task.id, split=split_name, baseline=split_baseline,
                       max_submissions=cfg.budget.max_submissions,
                       base_hash=baseline.get("model_hash"), base_scored=base_scored or None),
        workspace=run.workspace, store=run.store, ledger=Ledger(run.ledger),
        base_model=base_model,
        evaluate=lambda model_dir: task.evaluate(model_dir, split, cfg.task.inference),
        clock=clock, events=events, mirror=run.scores_mirror, alias=sandbox.workspace_view,
        recorder=CodeRecorder(run.code_repo, run.workspace), evals=run.evals)
    started = utc_now()
    try:
        with GradingServer(service, token, grader_dir / "grader.sock") as server, \
                driver_session(cfg, run, events) as proxy:
            env = agent_env(cfg, sandbox, f"unix:{sandbox.grader_dir_view}/grader.sock",
                            server.http_url, token, cfg.budget.time_limit_s)
            command = expand_command(cfg, sandbox)
            if stack_run is not None:  # an LLM agent's CLI, pointed at the run's proxy
                launch = stack_run.launch(cfg, sandbox, proxy, description, env["HOME"])
                command, env = launch.argv, env | launch.env
            argv = sandbox.command(command, env)
            clock.start()
            events.emit("agent_start", agent=cfg.agent.name, driver=cfg.driver.name,
                        sandbox=cfg.sandbox, command=command)
            # a used-up LLM budget ends the agent like the time budget does
            time_left = (clock.time_left if proxy is None else
                         lambda: 0.0 if proxy.exhausted else clock.time_left())
            outcome = run_until(argv, sandbox.host_env(env), run.workspace, run.agent_log,
                                time_left, cfg.budget.kill_grace_s,
                                on_warning=lambda left: events.emit("budget_warning",
                                                                    time_left_s=round(left, 1)))
            if outcome.killed:
                events.emit("budget_kill", survivors=outcome.survivors_killed)
            events.emit("agent_exit", exit_code=outcome.exit_code, seconds=outcome.seconds,
                        survivors_killed=outcome.survivors_killed)
            service.wait_idle()
            record_final_code(service.recorder, events, outcome.exit_code)
    finally:
        shutil.rmtree(grader_dir, ignore_errors=True)
    llm_exhausted = proxy is not None and proxy.exhausted
    status = ("llm_budget_exhausted" if llm_exhausted else
              "budget_exhausted" if outcome.killed else
              "completed" if outcome.exit_code == 0 else "agent_failed")
    record = {"task": cfg.task.id, "agent": cfg.agent.name, "driver": cfg.driver.name,
              "seed": cfg.seed, "started": started, "ended": utc_now(),
              "agent_seconds": round(outcome.seconds, 3), "exit_code": outcome.exit_code,
              "status": status, "time_limit_s": cfg.budget.time_limit_s,
              "sandbox": cfg.sandbox, "feedback": split_name,
              "submissions": len(service.ledger.entries), "hardware": hardware}
    if stack_run is not None:
        record |= stack_run.finish(run) | {"stack": cfg.agent.stack,
                                           "stack_version": cfg.agent.version}
    if proxy is not None:
        record |= {"driver_model": proxy.settings.model, "llm": llm_totals(run.root)}
    write_json_atomic(run.run_json, record)
    return record


def record_final_code(recorder: CodeRecorder, events: EventLog, exit_code) -> None:
    """Commit the agent's code as it left it (tag ``final``); a failure is logged, not raised."""
    try:
        snap = recorder.snapshot(f"final: agent exited ({exit_code})", tag="final")
        events.emit("code_snapshot", commit=snap.commit, files=snap.files, tag="final",
                    changed=snap.changed)
    except Exception as err:
        events.emit("error", message=f"final code snapshot failed: {type(err).__name__}: {err}")


def load_baseline(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise FileNotFoundError(f"no baseline at {path}: run the baseline stage first")
    return read_json(path)
