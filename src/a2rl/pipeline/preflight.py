"""``a2rl doctor --llm``: can the grid's LLM cells and paid graders start, and what will they
cost? For the grid given (default: the quick grid), in seconds and without running anything:

* each driver LLM's key is set, and the provider answers a one-token call with it (the call is
  made exactly as the recording proxy makes it: a2rl.llm.upstream);
* each LLM agent's CLI is installed at its pinned version;
* each task's data is present (``Task.data_status``);
* each paid judge's key is set and answers a one-token call; each search API's key is set
  (not called: a search is charged);
* a GPU where a cell asks for one (``resources.gpus``), and vLLM where the grid names it
  (``inference.backend=vllm``, a local driver's ``engine: vllm``);
* each run's grading caps fund the submissions it allows (a2rl.pipeline.spend).

Each failure is one line that says what to do. It ends with the grid's estimated API spend
(``a2rl plan``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import time
from typing import Any

import httpx

from a2rl.common.layout import Layout
from a2rl.config.compose import command_grid
from a2rl.config.types import DEFAULT_GRID, DriverConfig, RunConfig
from a2rl.llm.drivers import KEYED_PROVIDERS
from a2rl.llm.stacks import AgentNotInstalled, stack_of, tools_dir
from a2rl.llm.upstream import ProxySettings, upstream_headers, upstream_url
from a2rl.llm.wire import ANTHROPIC, GEMINI, GEMINI_PREFIX, OPENAI_CHAT
from a2rl.pipeline.doctor import Check
from a2rl.pipeline.spend import driver_config, grid_cell_configs, load_tasks, plan_of
from a2rl.pipeline.spend import render as render_plan
from a2rl.task.base import Task

PING_TIMEOUT_S = 30.0
PING_TEXT = "Reply with the word ok."
# each provider's protocol and the path its one-token call takes (as the proxy sends it)
PING_PROTOCOL = {"anthropic": (ANTHROPIC, "/v1/messages"),
                 "openai": (OPENAI_CHAT, "/v1/chat/completions"),
                 "openai_compatible": (OPENAI_CHAT, "/v1/chat/completions"),
                 "gemini": (GEMINI, "")}


# ---------------------------------------------------------------------------------- drivers


def ping_body(driver: DriverConfig) -> dict[str, Any]:
    """The smallest real request in the provider's protocol: one token of reply."""
    if driver.provider == "gemini":
        return {"contents": [{"role": "user", "parts": [{"text": PING_TEXT}]}],
                "generationConfig": {"maxOutputTokens": 1}}
    body: dict[str, Any] = {"model": driver.model,
                            "messages": [{"role": "user", "content": PING_TEXT}]}
    # OpenAI's own API takes max_completion_tokens (its reasoning models refuse max_tokens)
    body["max_completion_tokens" if driver.provider == "openai" else "max_tokens"] = 1
    return body


def ping(driver: DriverConfig, key: str | None, who: str) -> Check:
    """One one-token call to ``driver``'s provider with ``key``: ok when it answers 200."""
    protocol, path = PING_PROTOCOL[driver.provider]
    path = path or f"{GEMINI_PREFIX}{driver.model}:generateContent"
    settings = ProxySettings(provider=driver.provider, model=driver.model or "",
                             base_url=driver.base_url or "", api_key=key)
    url = upstream_url(protocol, "native", settings.base_url, path, settings.model, {},
                       driver.provider)
    headers = upstream_headers(protocol, "native", settings, {})
    started = time.monotonic()
    try:
        answer = httpx.post(url, json=ping_body(driver), headers=headers,
                            timeout=PING_TIMEOUT_S)
    except httpx.HTTPError as err:
        return Check(who, False, f"{driver.base_url} could not be reached "
                                 f"({type(err).__name__}: {err}); check the network or "
                                 f"driver.base_url")
    seconds = time.monotonic() - started
    if answer.status_code == 200:
        return Check(who, True, f"{driver.model} answered a one-token call in {seconds:.1f}s")
    said = answer.text[:200].replace("\n", " ")
    variable = f"${driver.api_key_env}" if driver.api_key_env else "its key"
    if answer.status_code in (401, 403):
        return Check(who, False, f"{driver.provider} refused the key in {variable} "
                                 f"(HTTP {answer.status_code}: {said}); set a valid key")
    if answer.status_code == 404:
        return Check(who, False, f"{driver.provider} has no model {driver.model!r} for this "
                                 f"key (HTTP 404: {said}); check driver.model")
    return Check(who, False, f"{driver.provider} answered HTTP {answer.status_code} ({said}); "
                             f"retry later, or check the account's quota")


def check_driver_key(driver: DriverConfig, who: str, call: bool = True) -> Check:
    """A keyed driver's key is set and (``call``) answers; keyless ones need nothing."""
    if driver.provider == "local":
        return check_local_driver(driver, who)
    if driver.provider not in PING_PROTOCOL:  # none, replay
        return Check(who, True, f"{driver.provider}: no key needed")
    key = os.environ.get(driver.api_key_env) if driver.api_key_env else None
    if not key and driver.provider in KEYED_PROVIDERS:
        return Check(who, False, f"${driver.api_key_env} is not set; export it in the "
                                 f"harness's environment (the agent never sees it)")
    if not call:
        return Check(who, True, f"${driver.api_key_env} is set (not called: --no-calls)")
    return ping(driver, key, who)


def check_local_driver(driver: DriverConfig, who: str) -> Check:
    from a2rl.llm.local_driver import resolve_engine

    serve = driver.serve
    engine = resolve_engine(serve.engine)
    if engine == "vllm" and importlib.util.find_spec("vllm") is None:
        return Check(who, False, "driver.serve.engine=vllm but vllm is not installed: "
                                 "pip install vllm (on a GPU machine), or engine: transformers")
    return Check(who, True, f"serves {serve.model.name} ({serve.model.source}) with {engine} "
                            f"for each run")


# ------------------------------------------------------------------------- agents, tasks


def check_cli(cfg: RunConfig) -> Check:
    name = f"agent {cfg.agent.name}"
    folder = tools_dir(Layout.from_paths(cfg.paths).resources, cfg.agent.stack,
                       cfg.agent.version)
    try:
        stack_of(cfg.agent.stack).check_installed(folder, cfg.agent.version)
    except AgentNotInstalled as err:
        return Check(name, False, f"{err}; run: python scripts/install_agents.py "
                                  f"{cfg.agent.stack}")
    return Check(name, True, f"{cfg.agent.stack} {cfg.agent.version} at {folder}")


def check_data(cfg: RunConfig, task: Task) -> Check:
    status = task.data_status()
    if status.startswith("missing"):
        return Check(f"data {cfg.task.id}", False,
                     f"{status}; run: a2rl data fetch {cfg.task.id} (into paths.data, "
                     f"$A2RL_DATA)")
    return Check(f"data {cfg.task.id}", True, status)


def check_paid_apis(cfg: RunConfig, task: Task, call: bool) -> list[Check]:
    checks = []
    for api in task.paid_apis():
        who = f"{api.kind} of {cfg.task.id}"
        if api.driver is not None:
            checks.append(check_driver_key(driver_config(api.driver), who, call))
        elif api.key_env and not os.environ.get(api.key_env):
            checks.append(Check(who, False, f"${api.key_env} is not set; export it in the "
                                            f"harness's environment"))
        elif api.key_env:
            checks.append(Check(who, True, f"${api.key_env} is set (not called: each call is "
                                           f"charged)"))
    return checks


def check_gpu(configs: list[RunConfig]) -> list[Check]:
    """A GPU where a cell asks for one; vLLM where the grid names it."""
    asked = max([max(c.agent.resources.gpus, c.task.resources.gpus) for c in configs] or [0])
    wants_vllm = sorted({c.task.id for c in configs if c.task.inference.backend == "vllm"}
                        | {c.driver.name for c in configs if c.driver.serve is not None
                           and c.driver.serve.engine == "vllm"})
    if not asked and not wants_vllm:
        return []
    import torch

    checks = []
    found = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if asked:
        checks.append(Check("gpu", found >= asked, (
            f"{found} GPU(s); the grid asks {asked} a job" if found >= asked else
            f"the grid asks {asked} GPU(s) a job (resources.gpus) and torch sees {found}; run "
            f"it on a GPU machine (a CUDA build of torch), or a CPU grid (quick, smoke)")))
    if wants_vllm:
        present = importlib.util.find_spec("vllm") is not None
        checks.append(Check("vllm", present, "vllm is installed" if present else
                            f"{', '.join(wants_vllm)} ask(s) for vLLM and it is not installed: "
                            f"pip install vllm (needs a CUDA GPU)"))
    return checks


# ---------------------------------------------------------------------------------- report


def preflight(grid: str = DEFAULT_GRID, extra: list[str] | None = None,
              call: bool = True) -> dict[str, Any]:
    """Everything ``a2rl doctor --llm`` reports, as a dict."""
    started = time.monotonic()
    counted = grid_cell_configs(grid, extra or [])
    configs = [cfg for cfg, _ in counted]
    tasks = load_tasks(counted)
    checks: list[Check] = []
    for name in sorted({c.driver.name for c in configs if c.driver.provider != "none"}):
        driver = next(c.driver for c in configs if c.driver.name == name)
        checks.append(check_driver_key(driver, f"driver {name}", call))
    llm_agents = {c.agent.name: c for c in configs if c.agent.kind == "llm"}
    checks += [check_cli(cfg) for _, cfg in sorted(llm_agents.items())]
    one_per_task = {c.task.id: c for c in configs}
    for task_id, cfg in sorted(one_per_task.items()):
        checks.append(check_data(cfg, tasks[task_id]))
        checks += check_paid_apis(cfg, tasks[task_id], call)
    checks += check_gpu(configs)
    spend = plan_of(grid, counted, tasks)
    checks += [Check("budget", False, p) for p in spend["budget_disagreements"]]
    return {"grid": grid, "checks": [c.__dict__ for c in checks],
            "ok": all(c.ok for c in checks), "plan": spend,
            "seconds": round(time.monotonic() - started, 1)}


def render(report: dict[str, Any]) -> str:
    lines = [f"a2rl doctor --llm: grid {report['grid']}"]
    lines += [f"{'ok  ' if c['ok'] else 'FAIL'}      {c['name']}: {c['detail']}"
              for c in report["checks"]]
    lines.append(render_plan(report["plan"], failures=False))  # listed as checks above
    lines.append("verdict   " + ("ready" if report["ok"] else "see the FAIL lines above"))
    return "\n".join(lines)


def main(args: list[str]) -> int:
    grid, extra, flags = command_grid(args, ("--json", "--no-calls", "--llm"))
    report = preflight(grid, extra, call="--no-calls" not in flags)
    print(json.dumps(report, indent=1) if "--json" in flags else render(report))
    return 0 if report["ok"] else 1
