"""agent.network wired for a run (a2rl.pipeline.network): the config's policies, the sandbox's
forwarded ports, the egress proxy with its log and the summary's hosts. What a sandboxed process
can reach under each policy: tests/attacks/test_network_attacks.py."""

from __future__ import annotations

import json
import shutil
import socket
from types import SimpleNamespace

import pytest

from a2rl.analysis.summary import network_of
from a2rl.common.clock import BudgetClock
from a2rl.common.events import EventLog
from a2rl.common.layout import RunPaths
from a2rl.common.records import RunRecord
from a2rl.config.checks import ConfigError
from a2rl.config.compose import compose
from a2rl.isolation.egress import EgressProxy, host_allowed
from a2rl.isolation.sandbox import Sandbox
from a2rl.pipeline.network import EGRESS_PORT, network_record, network_session, withheld_hosts
from a2rl.report.markdown import _network

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")


def llm_agent(*overrides: str):
    return compose(["agent=claude_code", "driver=replay", *overrides])


def session_parts(tmp_path):
    run = RunPaths(tmp_path / "run")
    for name in ("workspace/code", "workspace/output", "tools", "grader"):
        (run.root / name).mkdir(parents=True, exist_ok=True)
    events = EventLog(run.events, BudgetClock(60, True))
    return run, events, run.root / "grader"


def test_policies_are_checked_and_llm_agents_default_to_llm():
    assert llm_agent().agent.network == "llm"
    assert compose(["agent=sft"]).agent.network == "none"
    with pytest.raises(ConfigError, match="none.*llm.*allowlist.*open.*no longer accepted"):
        llm_agent("agent.network=true")
    with pytest.raises(ConfigError, match="LLM unreachable"):
        llm_agent("agent.network=none")


def test_llm_forwards_the_proxy_port_only(tmp_path):
    cfg = llm_agent()
    run, events, grader = session_parts(tmp_path)
    sandbox = Sandbox("bwrap", run.workspace, run.root / "tools", grader, cfg.agent.network)
    with network_session(cfg, sandbox, run, grader, 41234, events) as env:
        assert env == {} and sandbox.forwards == {41234: "/run/a2rl/llm.sock"}
    assert network_record(cfg) == {"policy": "llm"}


def test_open_is_recorded_and_forwards_nothing(tmp_path):
    cfg = llm_agent("agent.network=open")
    run, events, grader = session_parts(tmp_path)
    sandbox = Sandbox("bwrap", run.workspace, run.root / "tools", grader, cfg.agent.network)
    with network_session(cfg, sandbox, run, grader, 41234, events) as env:
        assert env == {} and sandbox.forwards == {}
    kinds = [json.loads(line)["kind"] for line in run.events.read_text().splitlines()]
    assert "network_open" in kinds
    assert network_record(cfg) == {"policy": "open", "public_sources": {
        "names": ["pypi"], "hosts": ["pypi.org", "files.pythonhosted.org"], "access": "open"}}
    assert "--unshare-net" not in sandbox.command(["true"], {})


def connect_through(sock_path, target: str, extra: str = "") -> str:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(10)
        client.connect(str(sock_path))
        client.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n{extra}\r\n".encode())
        return client.recv(4096).decode().split("\r\n")[0]


def test_allowlist_starts_the_egress_proxy_and_the_summary_lists_its_hosts(tmp_path):
    # household: a task whose sealed split no public host serves
    cfg = llm_agent("task=household", "agent.network=allowlist",
                    "++agent.allowlist=[localhost,.example.org]")
    run, events, grader = session_parts(tmp_path)
    sandbox = Sandbox("bwrap", run.workspace, run.root / "tools", grader, cfg.agent.network)
    with network_session(cfg, sandbox, run, grader, 41234, events) as env:
        assert env["HTTPS_PROXY"] == env["http_proxy"] == f"http://127.0.0.1:{EGRESS_PORT}"
        assert "127.0.0.1" in env["NO_PROXY"]
        assert sandbox.forwards == {41234: "/run/a2rl/llm.sock",
                                    EGRESS_PORT: "/run/a2rl/egress.sock"}
        # an allowlisted name that resolves to the host itself is still refused
        assert connect_through(grader / "egress.sock", "localhost:443").endswith("403 Forbidden")
        assert connect_through(grader / "egress.sock", "pypi.org:443").endswith("403 Forbidden")
    assert not (grader / "egress.sock").exists()
    log = [json.loads(line) for line in run.egress.read_text().splitlines()]
    assert [(e["host"], e["allowed"], e["outcome"]) for e in log] == [
        ("localhost", False, "refused"), ("pypi.org", False, "refused")]
    assert "non-public" in log[0]["reason"] and "allowlist" in log[1]["reason"]
    assert network_record(cfg) == {"policy": "allowlist",
                                   "allowlist": ["localhost", ".example.org"]}
    record = RunRecord(task="t", agent="a", driver="d", seed=0, started="s", ended="e",
                       agent_seconds=1.0, exit_code=0, status="completed", time_limit_s=60,
                       sandbox="bwrap", network=network_record(cfg))
    summary = network_of(record, run)
    assert summary["policy"] == "allowlist"
    assert [(h["host"], h["port"], h["allowed"], h["connections"]) for h in summary["hosts"]] \
        == [("localhost", 443, False, 1), ("pypi.org", 443, False, 1)]
    shown = "\n".join(_network(SimpleNamespace(network=summary)))  # summary.md's section
    assert "Policy: allowlist" in shown and "| pypi.org | 443 | refused | 1 |" in shown



def test_past_its_cap_the_egress_log_counts_connections_in_one_last_line(tmp_path):
    """budget.max_egress_log_lines=2 and four connections: two lines, then one counting the
    other two by outcome; run.json's network and an event carry the count, and the summary's
    host totals leave that line out."""
    cfg = llm_agent("agent.network=allowlist", "++agent.allowlist=[localhost]",
                    "budget.max_egress_log_lines=2")
    run, events, grader = session_parts(tmp_path)
    sandbox = Sandbox("bwrap", run.workspace, run.root / "tools", grader, cfg.agent.network)
    with network_session(cfg, sandbox, run, grader, 41234, events):
        for _ in range(4):
            connect_through(grader / "egress.sock", "pypi.org:443")
    log = [json.loads(line) for line in run.egress.read_text().splitlines()]
    assert [e["outcome"] for e in log] == ["refused", "refused", "unlogged"]
    assert log[-1]["connections"] == 2 and log[-1]["by_outcome"] == {"refused": 2}
    assert network_record(cfg, run.egress)["egress_unlogged"] == 2
    cut = [json.loads(line) for line in run.events.read_text().splitlines()
           if json.loads(line)["kind"] == "egress_log_cut"]
    assert cut and cut[0]["unlogged"] == {"refused": 2}
    hosts = network_of(None, run)["hosts"]
    assert [(h["host"], h["connections"]) for h in hosts] == [("pypi.org", 2)]

def test_the_egress_proxy_refuses_oversized_and_malformed_requests(tmp_path):
    log = tmp_path / "egress.jsonl"
    with EgressProxy(tmp_path / "egress.sock", log, ["pypi.org"]):
        assert connect_through(tmp_path / "egress.sock", "pypi.org:443",
                               "X-Pad: " + "a" * 70_000 + "\r\n").endswith("431 Request Header "
                                                                          "Fields Too Large")
        assert connect_through(tmp_path / "egress.sock", "pypi.org").endswith("400 Bad Request")
    outcomes = [json.loads(line)["outcome"] for line in log.read_text().splitlines()]
    assert outcomes == ["bad_request", "bad_request"]


def test_allowlist_matching():
    assert host_allowed("PyPI.org.", ["pypi.org"])
    assert host_allowed("cdn.example.org", [".example.org"])
    assert not host_allowed("example.org.evil.com", [".example.org", "example.org"])
    assert not host_allowed("notpypi.org", ["pypi.org"])


HUMANEVAL_HOSTS = ["huggingface.co", ".huggingface.co", "hf.co", ".hf.co", "pypi.org",
                   "files.pythonhosted.org"]


@pytest.mark.parametrize(("overrides", "access"), [
    (["agent.network=allowlist"], "withheld"),
    (["agent.network=allowlist", "++agent.allow_public_sources=true"], "allowed"),
    (["agent.network=open"], "open"),
    (["sandbox=none"], "open"),  # the host's network whatever the policy
    ([], None),  # llm: nothing but the LLM proxy, so nothing to say
])
def test_the_record_says_what_the_public_sources_were(overrides, access):
    """HumanEval's sealed problems are on the Hub and in a PyPI wheel: under allowlist the proxy
    withholds both services' hosts unless the grid opts in, and run.json says which."""
    cfg = llm_agent("task=humaneval", *overrides)
    record = network_record(cfg)
    assert withheld_hosts(cfg) == ([] if access == "allowed" else HUMANEVAL_HOSTS)
    if access is None:
        assert "public_sources" not in record
    else:
        assert record["public_sources"] == {"names": ["huggingface", "pypi"],
                                            "hosts": HUMANEVAL_HOSTS, "access": access}
