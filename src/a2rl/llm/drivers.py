"""The driver side of a run: the recording proxy (and, for the replay driver, the scripted
server behind it), and the launch of an LLM agent's CLI against it.

``driver_session(cfg, run, events)`` is a context manager yielding the run's ``LLMProxy`` (None
for driver ``none``). ``StackRun`` prepares an LLM agent: its tools folder (checked before the
clock starts), the sandbox mounts, the command line and environment, and collecting its
transcript afterwards. The runner uses both; nothing here knows about grading.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Optional

from a2rl.common.events import EventLog
from a2rl.common.layout import Layout, RunPaths
from a2rl.config.types import RunConfig
from a2rl.llm.local_driver import LocalModelServer
from a2rl.llm.proxy import LLMProxy
from a2rl.llm.replay import ReplayScript, ReplayServer
from a2rl.llm.stacks import (
    AGENT_DIR_VIEW,
    CLI_VIEW,
    AgentStack,
    Launch,
    LaunchContext,
    build_prompt,
    stack_of,
    tools_dir,
)
from a2rl.llm.upstream import ProxySettings

KEYED_PROVIDERS = ("anthropic", "openai", "gemini")
DEFAULT_REPLAY_SCRIPT = "replay_train_and_submit.yaml"


class DriverKeyMissing(RuntimeError):
    """The driver's API key variable is not set (a harness failure, before the run starts)."""


def replay_script(cfg: RunConfig) -> ReplayScript:
    """The replay driver's script: driver.script (relative to paths.root) or the packaged one."""
    if cfg.driver.script:
        path = Path(cfg.driver.script)
        return ReplayScript.load(path if path.is_absolute() else Path(cfg.paths.root) / path)
    packaged = resources.files("a2rl").joinpath("templates", DEFAULT_REPLAY_SCRIPT)
    import yaml

    return ReplayScript.parse(yaml.safe_load(packaged.read_text()), str(packaged))


def api_key(cfg: RunConfig) -> Optional[str]:
    """The driver's real key, from the variable ``driver.api_key_env`` names."""
    variable = cfg.driver.api_key_env
    key = os.environ.get(variable) if variable else None
    if cfg.driver.provider in KEYED_PROVIDERS and not key:
        raise DriverKeyMissing(f"driver {cfg.driver.name!r} needs its API key in ${variable}; "
                               f"set it in the harness's environment (the agent never sees it)")
    return key or None


def check_driver(cfg: RunConfig) -> None:
    """Fail before anything starts when an LLM agent has no driver or a keyless one."""
    if cfg.agent.kind == "llm" and cfg.driver.provider == "none":
        raise DriverKeyMissing(f"agent {cfg.agent.name!r} needs a driver LLM; got driver none")
    if cfg.driver.provider != "none":
        api_key(cfg)


@contextmanager
def driver_session(cfg: RunConfig, run: RunPaths, events: EventLog,
                   socket_path: Optional[Path] = None,
                   local_model: Optional[Path] = None) -> Iterator[Optional[LLMProxy]]:
    """Start the run's proxy (and the replay or local model server behind it); yields the
    proxy, None for driver none. ``socket_path``: the proxy listens there too (a sandbox
    without the host's network). ``local_model``: the local driver's model folder."""
    if cfg.driver.provider == "none":
        yield None
        return
    with ExitStack() as stack:
        base_url, key = cfg.driver.base_url, api_key(cfg)
        if cfg.driver.provider == "local":
            server = stack.enter_context(local_server(cfg, run, events, local_model))
            base_url, key = server.url, server.key
        if cfg.driver.provider == "replay":
            script = replay_script(cfg)
            server = stack.enter_context(ReplayServer(script, cfg.driver.model or "replay"))
            base_url = server.url
            events.emit("replay_start", url=server.url, script=script.source,
                        turns=len(script.steps))
        rates = cfg.driver.prices.rates()
        settings = ProxySettings(
            provider=cfg.driver.provider, model=cfg.driver.model or "replay",
            base_url=base_url or "", api_key=key,
            openai_base_url=cfg.driver.openai_base_url,
            price_in_per_mtok=rates.input, price_out_per_mtok=rates.output,
            price_cached_in_per_mtok=rates.cached_input,
            max_tokens=cfg.budget.llm_max_tokens, max_usd=cfg.budget.llm_max_usd)
        proxy = LLMProxy(settings, run.llm_calls, "a2rl-" + secrets.token_urlsafe(24),
                         on_exhausted=lambda totals: events.emit("llm_budget_exhausted",
                                                                 **totals),
                         on_record=lambda entry: events.emit("llm_call", **call_event(entry)),
                         socket_path=socket_path)
        stack.enter_context(proxy)
        if cfg.driver.provider == "local":
            # stopped before the proxy: a reply still being generated for the stopped agent
            # ends at once (the proxy records it as cut by the run's end) instead of holding
            # the proxy's shutdown
            stack.callback(server.stop)
            stack.callback(setattr, proxy.log, "run_ended", True)
        events.emit("proxy_start", url=proxy.url, provider=settings.provider,
                    model=settings.model, max_tokens=settings.max_tokens,
                    max_usd=settings.max_usd)
        try:
            yield proxy
        finally:
            events.emit("proxy_stop", **proxy.log.totals())


@contextmanager
def local_server(cfg: RunConfig, run: RunPaths, events: EventLog,
                 folder: Optional[Path]) -> Iterator[LocalModelServer]:
    """The local driver's model server for the run, announced and stopped in events.jsonl."""
    if folder is None:
        raise ValueError("driver local: the harness gives driver_session the model folder")
    server = LocalModelServer(cfg.driver.serve, folder, cfg.driver.model, run.local_server_log)
    started = time.monotonic()
    with server:
        events.emit("local_server_start", engine=server.engine, model=cfg.driver.model,
                    folder=str(folder), pid=server.pid,
                    seconds=round(time.monotonic() - started, 1))
        try:
            yield server
        finally:
            events.emit("local_server_stop", engine=server.engine)


CALL_EVENT_FIELDS = ("call", "model", "protocol", "outcome", "status", "input_tokens",
                     "output_tokens", "cached_input_tokens", "latency_s", "cost_usd")


def call_event(entry: dict[str, Any]) -> dict[str, Any]:
    """The details of the ``llm_call`` event of one llm_calls.jsonl record (the record's
    ``call`` number links the two; an error message is kept short)."""
    details = {k: entry.get(k) for k in CALL_EVENT_FIELDS}
    if entry.get("error"):
        details["error"] = str(entry["error"])[:200]
    return details


@dataclass
class StackRun:
    """An LLM agent's stack prepared for one run."""

    stack: AgentStack
    tools: Path
    agent_dir: Path  # host side; mounted read-write at AGENT_DIR_VIEW under bwrap

    @classmethod
    def prepare(cls, cfg: RunConfig, run: RunPaths) -> "StackRun":
        """Check the tools folder (raises AgentNotInstalled) and make the agent folder."""
        stack = stack_of(cfg.agent.stack)
        tools = tools_dir(Layout.from_paths(cfg.paths).resources, stack.name,
                          cfg.agent.version)
        stack.check_installed(tools, cfg.agent.version)
        run.agent_files.mkdir(parents=True, exist_ok=True)
        run.agent_files.chmod(0o777)
        return cls(stack, tools, run.agent_files)

    def mounts(self) -> dict[str, Any]:
        """Sandbox arguments: the tools read-only at CLI_VIEW (its venv there too), the agent
        folder read-write."""
        venvs = {f"{CLI_VIEW}/{venv.relative_to(self.tools)}": venv
                 for venv in self.stack.venvs(self.tools)}
        return {"ro_views": {CLI_VIEW: self.tools}, "venvs": venvs,
                "extra_rw": {AGENT_DIR_VIEW: self.agent_dir}}

    def launch(self, cfg: RunConfig, sandbox, proxy: LLMProxy, description: str,
               home: str) -> Launch:
        """The command line and extra environment; writes the launch's files first."""
        agent_view = AGENT_DIR_VIEW if sandbox.kind == "bwrap" else str(self.agent_dir)
        tools_view = CLI_VIEW if sandbox.kind == "bwrap" else str(self.tools)
        ctx = LaunchContext(prompt=build_prompt(description, sandbox.workspace_view),
                            model=proxy.settings.model, provider=proxy.settings.provider,
                            proxy_url=proxy.url, api_key=proxy.dummy_key,
                            tools_dir=tools_view, agent_dir=agent_view,
                            workspace=sandbox.workspace_view, home=home,
                            time_limit_s=cfg.budget.time_limit_s, args=list(cfg.agent.args))
        launch = self.stack.launch(ctx)
        for name, text in launch.files.items():
            path = self.agent_dir / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        for folder in [self.agent_dir, *self.agent_dir.rglob("*")]:  # the agent runs as uid 1000
            if folder.is_dir():
                folder.chmod(0o777)
        return launch

    def finish(self, run: RunPaths) -> dict[str, Any]:
        """Collect the transcript into run.transcript; what run.json records of it."""
        found = self.stack.collect_transcript(self.agent_dir, run.transcript)
        return {"transcript": run.transcript.name if found else None}
