"""One agent run: workspace, grader, sandboxed agent, budget, in that order."""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Optional

from a2rl.common.clock import BudgetClock
from a2rl.common.contract import render_description
from a2rl.common.events import EventLog
from a2rl.common.files import iter_jsonl, read_json, utc_now, write_json_atomic
from a2rl.common.hardware import AGENT_DEVICE, describe, one_line, resolve_precision
from a2rl.common.layout import Layout, RunPaths
from a2rl.common.plugins import PluginError
from a2rl.common.records import LedgerEntry, RunRecord, read_ledger
from a2rl.config.types import RunConfig, config_record
from a2rl.grading.ledger import grading_totals
from a2rl.grading.recording import CodeRecorder, record_final_code
from a2rl.isolation.agent_python import AgentPythonMissing, agent_python_dir, interpreter
from a2rl.isolation.limits import GIB, ResourceLimits, confine, limits_of
from a2rl.isolation.procs import ProcessOutcome, run_until
from a2rl.isolation.quota import DiskGuard, guard_disk, quota_of, unmount_below
from a2rl.isolation.sandbox import HOME, TOOLS, Sandbox
from a2rl.isolation.workspace import make_writable, provision_workspace
from a2rl.llm.drivers import DriverKeyMissing, StackRun, check_driver, driver_session
from a2rl.llm.local_driver import LocalServerFailed
from a2rl.llm.proxy import LLMProxy, llm_totals
from a2rl.llm.stacks import AgentNotInstalled
from a2rl.pipeline.agent_plugins import agent_scripts
from a2rl.pipeline.agent_settings import settings_env
from a2rl.pipeline.grader_process import GraderSpec
from a2rl.pipeline.network import network_record, network_session, proxy_socket
from a2rl.pipeline.spend import check_grading_budget
from a2rl.pipeline.supervisor import GraderDied, GraderSupervisor
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
        unmount_below(run.root)  # the agent's loop disk, left mounted by a killed harness
        make_writable(run.root)
        shutil.rmtree(run.root)
    run.root.mkdir(parents=True)


def write_tools(tools: Path, python: str, view: str, scripts: Optional[Path] = None) -> None:
    """The read-only /opt/a2rl of the sandbox (``view``: where the agent sees ``tools``): the
    ``a2rl`` client and, in agents/, the files of ``scripts`` (a reference agent's plugin
    folder, ``agent_scripts``) but its subfolders (its conf/) and private names (__init__.py).
    The launcher names ``view`` only: a host path in it would tell the agent where the run
    lives."""
    (tools / "bin").mkdir(parents=True)
    (tools / "agents").mkdir()
    shutil.copy(resources.files("a2rl.grading").joinpath("client.py"), tools / "a2rl_client.py")
    for script in (sorted(scripts.iterdir()) if scripts else []):
        if script.is_file() and not script.name.startswith(("_", ".")):
            shutil.copy(script, tools / "agents" / script.name)
    launcher = (f"#!{python}\nimport sys\nsys.path.insert(0, {view!r})\n"
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
    python_bin = str(Path(sandbox.interpreter).parent)  # the agents' own environment's bin/
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
    if cfg.agent.network not in ("allowlist", "open"):  # the hub is out of reach
        env |= {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    # the GPUs this job was given (Slurm and the other schedulers set it): the agent uses those
    # only, as the grader and vLLM do in the harness's own process
    if "CUDA_VISIBLE_DEVICES" in os.environ:
        env["CUDA_VISIBLE_DEVICES"] = os.environ["CUDA_VISIBLE_DEVICES"]
    env |= settings_env(cfg)
    env |= {k: str(v) for k, v in cfg.agent.env.items()}
    return env


def expand_command(cfg: RunConfig, sandbox: Sandbox) -> list[str]:
    values = {"python": sandbox.interpreter, "agents": f"{sandbox.tools_view}/agents",
              "workspace": sandbox.workspace_view}
    return [part.format(**values) for part in cfg.agent.command]


@dataclass
class Cell:
    """What the steps of one agent run share."""

    cfg: RunConfig
    run: RunPaths
    sandbox: Sandbox
    clock: BudgetClock
    events: EventLog
    grader_dir: Path  # holds the grader's socket; mounted at /run/a2rl in the sandbox
    split_name: str  # what feedback scores are computed on
    hardware: dict[str, Any]
    stack_run: Optional[StackRun]  # an LLM agent's CLI; None for a script agent
    limits: ResourceLimits  # the agent's memory, processes and tmpfs (a2rl.isolation.limits)
    # what the agent's host folders may hold (a2rl.isolation.quota); set once they are made
    disk: DiskGuard = field(default_factory=lambda: DiskGuard(None, [], lambda *a, **k: None))


class InfraFailed(RuntimeError):
    """The harness failed, not the agent: run.json says infra_failed with ``reason``. The
    workflow retries such a run (workflow/rules/run.smk); an agent's own failure never is."""

    def __init__(self, reason: str):
        super().__init__(f"infrastructure failure, the run does not count: {reason}")
        self.reason = reason


# harness failures raised before or around the agent, by type: the reason's category
INFRA_ERRORS: tuple[tuple[type[BaseException], str], ...] = (
    (DriverKeyMissing, "missing_key"), (AgentNotInstalled, "agent_not_installed"),
    (AgentPythonMissing, "agent_not_installed"),  # the agents' Python environment
    (PluginError, "agent_not_installed"),  # the agent's plugin is missing or broken
    (GraderDied, "grader_died"), (LocalServerFailed, "local_server_failed"),
    (MemoryError, "harness_oom"))
# calls that failed on the provider's side (not the agent's request): an outage when they end
# a run that did not finish
OUTAGE_STATUSES = (429, 500, 502, 503, 504, 529)
OUTAGE_CALLS = 3


def execute(cfg: RunConfig, task: Task, run: RunPaths, prepared, base_model: Path,
            baseline: dict[str, Any]) -> dict[str, Any]:
    """Run the agent phase of one cell; returns what run.json records. A harness failure
    (missing key, agent CLI not installed, the grader or the harness itself failing, the
    driver's provider down) writes run.json with status infra_failed and raises InfraFailed."""
    fresh_run_dir(run)
    write_json_atomic(run.config, config_record(cfg))  # for readers while it runs
    started = utc_now()
    try:
        record = run_cell(cfg, task, run, prepared, base_model, baseline)
    except Exception as err:
        reason = infra_reason(err)
        infra_record(cfg, run, started, reason).save(run.run_json)
        raise InfraFailed(reason) from err
    if record["status"] == "infra_failed":
        RunRecord(**record).save(run.run_json)
        raise InfraFailed(record["reason"])
    RunRecord(**record).save(run.run_json)  # checked: a malformed run.json is never written
    return record


def infra_reason(err: BaseException) -> str:
    """``<category>: <message>`` of a harness failure (harness_error when not a known one)."""
    category = next((name for kind, name in INFRA_ERRORS if isinstance(err, kind)),
                    "harness_error")
    return f"{category}: {type(err).__name__}: {err}"[:2000]


def infra_record(cfg: RunConfig, run: RunPaths, started: str, reason: str) -> RunRecord:
    """run.json of a run the harness could not carry through."""
    return RunRecord(task=cfg.task.id, agent=cfg.agent.name, driver=cfg.driver.name,
                     seed=cfg.seed, started=started, ended=utc_now(), agent_seconds=0.0,
                     exit_code=None, status="infra_failed", reason=reason,
                     time_limit_s=cfg.budget.time_limit_s, sandbox=cfg.sandbox,
                     submissions=len(read_ledger(run.ledger)))


def provider_outage(run: RunPaths) -> Optional[str]:
    """The reason when the run's last LLM calls all failed on the provider's side (none
    answered, or the provider answered 429/5xx), else None."""
    calls = list(iter_jsonl(run.llm_calls)) if run.llm_calls.exists() else []
    last = calls[-OUTAGE_CALLS:]
    if not last or not all(c.get("outcome") == "connection_error" or (
            c.get("outcome") == "upstream_error" and c.get("status") in OUTAGE_STATUSES)
            for c in last):
        return None
    return (f"provider_outage: the last {len(last)} LLM calls failed "
            f"({last[-1].get('status')}: {str(last[-1].get('error'))[:300]})")


def grader_crash(entries: list[LedgerEntry]) -> Optional[str]:
    """The reason when the grader failed on a submission by its own fault (HTTP 500: an
    internal grader error, not the submission's and not a judge outage), else None."""
    crashed = [e for e in entries if e.status_code == 500]
    if not crashed:
        return None
    return f"grader_crash: submission {crashed[0].submission_id}: {crashed[0].error}"[:2000]


def run_cell(cfg: RunConfig, task: Task, run: RunPaths, prepared, base_model: Path,
             baseline: dict[str, Any]) -> dict[str, Any]:
    check_driver(cfg)  # an LLM agent's key and tools are checked before anything starts
    stack_run = StackRun.prepare(cfg, run) if cfg.agent.stack else None
    scripts = agent_scripts(cfg)  # so is a reference agent's plugin
    python = agent_python(cfg)
    # after the machine's own checks (they need no task): a paid judge's cap funds the
    # submissions allowed
    check_grading_budget(cfg, task)
    split_name, split = feedback_split(cfg, prepared)
    cell = set_up_cell(cfg, run, split_name, stack_run, python, scripts)
    description = task_description(cell, task)
    provision_workspace(run.workspace, prepared.data, base_model, description,
                        link_model=cfg.sandbox == "bwrap")
    if cfg.sandbox == "none":
        (run.workspace.parent / "home").mkdir(exist_ok=True)
    grader = GraderSupervisor(grader_spec(cell, split, base_model, baseline), cell.clock,
                              cell.events, run.grader_log,
                              cfg.budget.grader_restarts, cfg.budget.eval_timeout_s)
    started = utc_now()
    cell.disk = guard_disk(quota_of(cfg.budget), cell.sandbox.writable, run.root,
                           cell.events.emit)
    try:
        outcome, proxy = serve_and_run_agent(cell, grader, description)
    finally:
        cell.disk.release()  # the grader and the code recorder are done with the folders
        shutil.rmtree(cell.grader_dir, ignore_errors=True)
        cell.sandbox.unstage()
    outcome.resources = resources_record(outcome.resources or {}, cell.disk)
    record = run_record(cell, started, outcome, proxy, read_ledger(run.ledger))
    record["grader_restarts"] = grader.restarts
    if grader.failure:  # the grader died past its restarts: the agent was stopped for it
        record |= {"status": "infra_failed", "reason": f"grader_died: {grader.failure}"}
    return record


def agent_python(cfg: RunConfig) -> Path:
    """The agents' Python environment, never the harness's: that one holds the task packages
    and their data (a HumanEval copy with the sealed half). Raises AgentPythonMissing."""
    python = agent_python_dir(Layout.from_paths(cfg.paths).resources)
    interpreter(python)
    return python


def set_up_cell(cfg: RunConfig, run: RunPaths, split_name: str,
                stack_run: Optional[StackRun], python: Path,
                scripts: Optional[Path] = None) -> Cell:
    """The sandbox's tools (with the agent's ``scripts``) and grader folder, the sandbox, the
    budget clock and the event log."""
    tools = run.root / "tools"
    grader_dir = Path(tempfile.mkdtemp(prefix="a2rl-grader-"))
    grader_dir.chmod(0o755)
    limits = limits_of(cfg.budget)
    sandbox = Sandbox(cfg.sandbox, run.workspace, tools, grader_dir, cfg.agent.network,
                      python=python, tmpfs_bytes=limits.tmpfs_bytes,
                      **(stack_run.mounts() if stack_run else {}))
    write_tools(tools, sandbox.interpreter, TOOLS if cfg.sandbox == "bwrap" else str(tools),
                scripts)
    clock = BudgetClock(cfg.budget.time_limit_s, cfg.budget.count_eval_time)
    events = EventLog(run.events, clock)
    if cfg.sandbox == "none":
        events.emit("error", message="sandbox=none: the agent runs WITHOUT isolation")
    return Cell(cfg, run, sandbox, clock, events, grader_dir, split_name, run_hardware(cfg),
                stack_run, limits)


def task_description(cell: Cell, task: Task) -> str:
    """description.md: the task's own part inside the agent's contract
    (a2rl.common.contract), with the run's budget, hardware and paths as its values."""
    cfg, view, limits = cell.cfg, cell.sandbox.workspace_view, cell.limits
    quota = quota_of(cfg.budget)  # a2rl.isolation.quota: the disk rule, where there is one
    return render_description(task.description(), {
        "memory_gb": round(limits.memory_bytes / GIB, 1), "max_processes": limits.max_processes,
        "tmpfs_gb": round(limits.tmpfs_bytes / GIB, 1),
        "disk_gb": None if quota is None else f"{round(quota.bytes / GIB, 1):g}",
        "disk_files": None if quota is None else quota.files,
        "hardware": one_line(cell.hardware), "precision": cell.hardware["precision"]["agent"],
        "time_limit_min": round(cfg.budget.time_limit_s / 60, 1),
        "count_eval_time": cfg.budget.count_eval_time,
        "max_submissions": cfg.budget.max_submissions, "feedback": cell.split_name,
        "workspace": view, "grader_url": "$A2RL_GRADER_URL", "base_model": f"{view}/base_model",
        "data_dir": f"{view}/data"})


def grader_spec(cell: Cell, split: Path, base_model: Path,
                baseline: dict[str, Any]) -> GraderSpec:
    """What the grader's process grades (a2rl.pipeline.grader_process); its sockets and its
    clock are filled in by the supervisor."""
    return GraderSpec(cfg=cell.cfg, run_root=cell.run.root, split_name=cell.split_name,
                      split=split, base_model=base_model, baseline=baseline,
                      alias=cell.sandbox.workspace_view, token=secrets.token_urlsafe(24),
                      socket_path=cell.grader_dir / "grader.sock", unix_fd=-1, tcp_fd=-1,
                      report_fd=-1, clock=cell.clock.state())


def serve_and_run_agent(cell: Cell, grader: GraderSupervisor, description: str
                        ) -> tuple[ProcessOutcome, Optional[LLMProxy]]:
    """Serve the grader (its own process) and an LLM agent's proxy while the agent runs; then
    wait for the last evaluation and record the agent's final code."""
    cfg, sandbox = cell.cfg, cell.sandbox
    with grader, driver_session(cfg, cell.run, cell.events,
                                proxy_socket(sandbox, cell.grader_dir),
                                local_driver_model(cfg)) as proxy, \
            network_session(cfg, sandbox, cell.run, cell.grader_dir,
                            proxy.port if proxy else None, cell.events) as network_env:
        env = agent_env(cfg, sandbox, f"unix:{sandbox.grader_dir_view}/grader.sock",
                        grader.http_url, grader.spec.token, cfg.budget.time_limit_s) | network_env
        command, env = agent_command(cell, proxy, description, env)
        outcome = run_in_sandbox(cell, command, env, proxy, grader)
    # the grader has finished its last evaluation and stopped
    record_final_code(CodeRecorder(cell.run.code_repo, cell.run.workspace), cell.events,
                      outcome.exit_code)
    return outcome, proxy


def local_driver_model(cfg: RunConfig) -> Optional[Path]:
    """The local driver's model folder, provisioned under resources/models/ like a base model
    (None for other drivers)."""
    if cfg.driver.provider != "local":
        return None
    from a2rl.models.provision import prepare_base_model

    serve = cfg.driver.serve.model
    return prepare_base_model(serve, Layout.from_paths(cfg.paths).model(serve.name))


def agent_command(cell: Cell, proxy: Optional[LLMProxy], description: str,
                  env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """The agent's command line and environment, as it sees them (before the sandbox)."""
    command = expand_command(cell.cfg, cell.sandbox)
    if cell.stack_run is not None:  # an LLM agent's CLI, pointed at the run's proxy
        launch = cell.stack_run.launch(cell.cfg, cell.sandbox, proxy, description, env["HOME"])
        command, env = launch.argv, env | launch.env
    return command, env


def run_in_sandbox(cell: Cell, command: list[str], env: dict[str, str],
                   proxy: Optional[LLMProxy], grader: GraderSupervisor) -> ProcessOutcome:
    """Start the clock and run the agent in its sandbox until it exits, a budget ends or the
    grader is gone for good."""
    cfg, clock, events = cell.cfg, cell.clock, cell.events
    with confine(cell.limits, cell.sandbox) as confinement:
        argv = confinement.wrap(cell.sandbox.command(command, env, conceal=True))
        # evaluations not counted: the agent waits, paused, while one runs (a2rl.common.clock)
        clock.pause_agent_with(confinement.pause, confinement.resume)
        clock.start()
        grader.clock_started()
        # the budget too: `a2rl status` reads it while the run goes on (a2rl.analysis.status)
        events.emit("agent_start", agent=cfg.agent.name, driver=cfg.driver.name,
                    sandbox=cfg.sandbox, network=cfg.agent.network, command=command,
                    time_limit_s=cfg.budget.time_limit_s,
                    count_eval_time=cfg.budget.count_eval_time,
                    max_submissions=cfg.budget.max_submissions,
                    resources=resources_record(confinement.record(), cell.disk))
        # a used-up LLM budget ends the agent like the time budget does; so does a grader
        # that died past its restarts
        def time_left() -> float:
            gone = grader.failure or (proxy is not None and proxy.exhausted)
            left = 0.0 if gone else clock.time_left()
            if left <= 0:  # a paused agent is stopped for good: it must run to end
                confinement.resume()
            return left
        outcome = run_until(argv, cell.sandbox.host_env(env), cell.run.workspace,
                            cell.run.agent_log, time_left, cfg.budget.kill_grace_s,
                            on_warning=lambda left: events.emit("budget_warning",
                                                                time_left_s=round(left, 1)),
                            spare=grader.pids, over_quota=cell.disk.check,
                            poll_s=cell.disk.poll_s,
                            log_cap=int(cfg.budget.max_agent_log_mb * 2**20),
                            on_start=lambda pid: setattr(confinement, "root_pid", pid))
        clock.pause_agent_with(lambda: None, lambda: None)  # the agent is gone
        outcome.resources = confinement.record()
    if outcome.resources["oom_kills"]:  # past its memory: the agent's failure, not the harness's
        events.emit("agent_oom", **outcome.resources)
    if outcome.killed:
        events.emit("budget_kill", survivors=outcome.survivors_killed)
    if outcome.log_cut_bytes:
        events.emit("agent_log_cut", cut_bytes=outcome.log_cut_bytes,
                    cap_bytes=int(cfg.budget.max_agent_log_mb * 2**20))
    events.emit("agent_exit", exit_code=outcome.exit_code, seconds=outcome.seconds,
                survivors_killed=outcome.survivors_killed)
    return outcome


def resources_record(confined: dict[str, Any], disk: DiskGuard) -> dict[str, Any]:
    """run.json's resources: the confinement's limits and the disk quota's, with what enforced
    each."""
    enforced = dict(confined.get("enforced_by", {})) | {"disk": disk.enforced_by}
    return confined | disk.record() | {"enforced_by": enforced}


def run_record(cell: Cell, started: str, outcome: ProcessOutcome, proxy: Optional[LLMProxy],
               entries: list[LedgerEntry]) -> dict[str, Any]:
    """What run.json records: how the agent ended, an LLM agent's stack and calls, and what
    grading cost (a judge's calls)."""
    cfg, run = cell.cfg, cell.run
    llm_exhausted = proxy is not None and proxy.exhausted
    status = ("llm_budget_exhausted" if llm_exhausted else
              "disk_quota_exceeded" if outcome.quota_exceeded else
              "budget_exhausted" if outcome.killed else
              "completed" if outcome.exit_code == 0 else "agent_failed")
    infra = grader_crash(entries) or (provider_outage(run) if proxy is not None
                                      and status == "agent_failed" else None)
    record = {"task": cfg.task.id, "agent": cfg.agent.name, "driver": cfg.driver.name,
              "seed": cfg.seed, "started": started, "ended": utc_now(),
              "agent_seconds": round(outcome.seconds, 3), "exit_code": outcome.exit_code,
              "status": status, "time_limit_s": cfg.budget.time_limit_s,
              "sandbox": cfg.sandbox, "feedback": cell.split_name,
              "submissions": len(entries), "hardware": cell.hardware,
              "resources": outcome.resources, "network": network_record(cfg, run.egress)}
    if outcome.log_cut_bytes:
        record["log_cut_bytes"] = outcome.log_cut_bytes
    if cell.stack_run is not None:
        record |= cell.stack_run.finish(run) | {"stack": cfg.agent.stack,
                                                "stack_version": cfg.agent.version}
    if proxy is not None:
        record |= {"driver_model": proxy.settings.model, "llm": llm_totals(run.root)}
    grading = grading_totals(entries)
    if grading:
        record["grading_usage"] = grading
    if infra:
        record |= {"status": "infra_failed", "reason": infra}
    return record


def load_baseline(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise FileNotFoundError(f"no baseline at {path}: run the baseline stage first")
    return read_json(path)
