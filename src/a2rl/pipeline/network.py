"""What an agent's sandbox may reach on the network, wired for one run (``agent.network``).

- ``none``: nothing (the sandbox's own network namespace, a loopback only);
- ``llm``: the run's LLM proxy only: it listens on /run/a2rl/llm.sock as well, which the
  sandbox's port forwarder (a2rl/isolation/netrelay.py) serves on 127.0.0.1:<the proxy's port>
  inside, so the agent CLIs keep the proxy's http://127.0.0.1:<port> URL;
- ``allowlist``: that, plus an egress proxy (a2rl.isolation.egress) on /run/a2rl/egress.sock,
  forwarded to 127.0.0.1:EGRESS_PORT and named by HTTPS_PROXY/HTTP_PROXY: ``agent.allowlist``'s
  hosts only, every connection in egress.jsonl. The hosts that serve the task's sealed split
  publicly (``task.public_sources``) are withheld, refused even where the allowlist names
  them, unless the grid sets ``agent.allow_public_sources``;
- ``open``: the host's network namespace, shared (its internet, its loopback services, its
  abstract unix sockets); recorded in run.json and as a ``network_open`` event.

Under ``sandbox: none`` there is no isolation to keep: the agent reaches the proxy's TCP port.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Optional

from a2rl.common.events import EventLog
from a2rl.common.layout import RunPaths
from a2rl.config.types import RunConfig
from a2rl.isolation.egress import EgressProxy, unlogged_connections
from a2rl.isolation.sandbox import GRADER_DIR, Sandbox

LLM_SOCKET = "llm.sock"
EGRESS_SOCKET = "egress.sock"
# the egress proxy's port inside the sandbox (its own network namespace: nothing else there
# listens; the LLM proxy's port is an ephemeral one, far above)
EGRESS_PORT = 3128


def forwarded(sandbox: Sandbox) -> bool:
    """Whether the sandbox reaches the harness's services through forwarded unix sockets."""
    return sandbox.kind == "bwrap" and not sandbox.shares_network


def proxy_socket(sandbox: Sandbox, grader_dir: Path) -> Optional[Path]:
    """Where the LLM proxy listens besides its TCP port (None: the TCP port is reachable)."""
    return grader_dir / LLM_SOCKET if forwarded(sandbox) else None


@contextmanager
def network_session(cfg: RunConfig, sandbox: Sandbox, run: RunPaths, grader_dir: Path,
                    proxy_port: Optional[int], events: EventLog) -> Iterator[dict[str, str]]:
    """Set the sandbox's forwarded ports and start the egress proxy under ``allowlist``;
    yields the environment the agent gets for it (the proxy variables)."""
    policy = cfg.agent.network
    if policy == "open":
        events.emit("network_open", message="agent.network=open: the agent shares the host's "
                    "network (internet, loopback services, abstract unix sockets)")
    forwards: dict[int, str] = {}
    if proxy_port is not None and policy in ("llm", "allowlist") and forwarded(sandbox):
        forwards[proxy_port] = f"{GRADER_DIR}/{LLM_SOCKET}"
    if policy != "allowlist" or not forwarded(sandbox):
        sandbox.forwards = forwards
        yield {}
        return
    forwards[EGRESS_PORT] = f"{GRADER_DIR}/{EGRESS_SOCKET}"
    sandbox.forwards = forwards
    withheld = withheld_hosts(cfg)
    with EgressProxy(grader_dir / EGRESS_SOCKET, run.egress, cfg.agent.allowlist,
                     withheld=withheld, max_lines=cfg.budget.max_egress_log_lines) as egress:
        events.emit("egress_start", allowlist=list(cfg.agent.allowlist), withheld=withheld)
        yield proxy_env(f"http://127.0.0.1:{EGRESS_PORT}")
    if egress.unlogged:
        events.emit("egress_log_cut", logged=egress.logged, unlogged=dict(egress.unlogged))


def proxy_env(url: str) -> dict[str, str]:
    """The variables HTTP clients (pip, npm, curl, requests, httpx, huggingface_hub) read; the
    loopback (the LLM proxy's forwarded port) goes direct."""
    direct = "127.0.0.1,localhost,::1"
    return {"HTTPS_PROXY": url, "HTTP_PROXY": url, "https_proxy": url, "http_proxy": url,
            "NO_PROXY": direct, "no_proxy": direct}


def withheld_hosts(cfg: RunConfig) -> list[str]:
    """The hosts the egress proxy refuses whatever agent.allowlist says: those serving the
    task's sealed split publicly, unless the grid opted in (agent.allow_public_sources)."""
    return [] if cfg.agent.allow_public_sources else cfg.task.public_hosts


def public_sources_access(cfg: RunConfig) -> str:
    """What the sandbox could do with the hosts of task.public_sources: ``withheld`` (the egress
    proxy refused them), ``allowed`` (the grid opted in: reachable where agent.allowlist names
    them), ``open`` (the host's network) or ``unreachable`` (no route out but the LLM proxy)."""
    if cfg.sandbox == "none" or cfg.agent.network == "open":
        return "open"
    if cfg.agent.network == "allowlist":
        return "allowed" if cfg.agent.allow_public_sources else "withheld"
    return "unreachable"


def network_record(cfg: RunConfig, egress_log: Optional[Path] = None) -> dict[str, Any]:
    """run.json's ``network``: the policy; under allowlist, the hosts allowed and how many
    connections egress.jsonl (``egress_log``) left out past its cap; and where the sandbox
    reaches beyond the LLM proxy on a task with public sources, those sources' hosts and what
    the sandbox could do with them (``public_sources_access``)."""
    record: dict[str, Any] = {"policy": cfg.agent.network}
    if cfg.agent.network == "allowlist":
        record["allowlist"] = list(cfg.agent.allowlist)
        unlogged = unlogged_connections(egress_log) if egress_log else 0
        if unlogged:
            record["egress_unlogged"] = unlogged
    if cfg.sandbox == "none":
        record["isolated"] = False  # sandbox none: the host's network whatever the policy
    access = public_sources_access(cfg)
    if cfg.task.public_sources and access != "unreachable":
        record["public_sources"] = {"names": list(cfg.task.public_sources),
                                    "hosts": cfg.task.public_hosts, "access": access}
    return record
