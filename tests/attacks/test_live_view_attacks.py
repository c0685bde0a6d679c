"""``a2rl view`` (a2rl.report.live) against what a hostile agent or a hostile page could try:
paths out of the report (../, encoded, through a link the report folder holds) to the sealed
splits, the run folders and files beyond the results folder; requests without the token
(an agent with agent.network=open shares the host's loopback), from another host name (DNS
rebinding) or that write; and the agent's own strings (a submission's model path and error, a
job log's last error) on the live pages, which must stay text. The real server on a loopback
port; the run folder written by the harness's own writers."""

from __future__ import annotations

import http.client
import json
import threading

import pytest
from test_report_escaping_attacks import Tags

from a2rl.common.files import write_json_atomic
from a2rl.common.layout import Layout, cell_path
from a2rl.config.types import AgentConfig, PathsConfig, RunConfig, TaskConfig
from a2rl.grading.ledger import Ledger
from a2rl.report.live import make_server
from live_runs import started_run

pytestmark = pytest.mark.attacks

PAYLOAD = "<script>f()</script><img src=x onerror=f()>"
SEALED = "SEALED-ANSWER-42"
TASK = "gsm8k_arith"


@pytest.fixture
def served(tmp_path):
    """A results folder with a running cell (hostile strings in its ledger), a failed one (a
    hostile error in its job log), a sealed split, a static report holding a link to the sealed
    split, and a secret beyond the results folder; the live server on it."""
    results = tmp_path / "results" / "ci"
    layout = Layout(results, tmp_path / "resources")
    cfg = RunConfig(task=TaskConfig(id=TASK, package="gsm8k", level="L1"),
                    agent=AgentConfig(name="sft", command=["{python}", "x.py"]),
                    paths=PathsConfig(root=str(tmp_path), results="results/ci"))
    run, events = started_run(cfg)
    Ledger(run.ledger).append(elapsed_s=1.0, model_path=PAYLOAD, status_code=400, valid=False,
                              error=PAYLOAD)
    events.emit("submission", submission_id=1, valid=False, error=PAYLOAD)
    failed = layout.log("run_agent", cell_path(TASK, "noop", "none", 0))
    failed.parent.mkdir(parents=True)
    failed.write_text(f"INFO a2rl: stage run_agent: x\nTraceback (most recent call last):\n"
                      f"ValueError: {PAYLOAD}\n")
    write_json_atomic(layout.grid_plan, {"label": "ci", "cells": [
        {"task": TASK, "agent": "noop", "driver": "none", "seed": 0}]})
    sealed = layout.prepared(TASK).test
    sealed.parent.mkdir(parents=True)
    sealed.write_text(json.dumps({"answer": SEALED}) + "\n")
    layout.report.mkdir(parents=True)
    (layout.report / "index.html").write_text("<p>static</p>")
    (layout.report / "leak.jsonl").symlink_to(sealed)
    (tmp_path / "secret.txt").write_text(SEALED)
    server = make_server(results, port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    server.report.close()


def get(server, path: str, token: bool = True, host: str | None = None,
        method: str = "GET") -> tuple[int, str]:
    """``path`` sent as written (no client-side normalisation of ../)."""
    port = server.server_address[1]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    if token:
        sep = "&" if "?" in path else "?"
        path = f"{path}{sep}token={server.url.split('token=')[1]}"
    conn.putrequest(method, path, skip_host=True)
    conn.putheader("Host", host or f"127.0.0.1:{port}")
    conn.endheaders()
    response = conn.getresponse()
    body = response.read().decode(errors="replace")
    conn.close()
    return response.status, body


@pytest.mark.parametrize("path", [
    "/../secret.txt", "/../../secret.txt", "/%2e%2e/%2e%2e/secret.txt",
    "/..%2f..%2fsecret.txt", "/plots/../../secret.txt", "/plots/%2e%2e/%2e%2e/secret.txt",
    "/../prepared/gsm8k_arith/sealed/test.jsonl", "/%2e%2e/prepared/gsm8k_arith/sealed/test.jsonl",
    "/leak.jsonl", "/../runs/gsm8k_arith/sft/none/seed0/ledger.jsonl",
    "/runs/..%2f..%2f..%2fsecret.txt.html", "/runs/gsm8k_arith__..__none__seed0.html",
    "//etc/passwd", "/%00index.html", "/plots/..%00/secret.txt",
])
def test_no_path_leaves_the_report(served, path):
    status, body = get(served, path)
    assert status == 404, (path, status, body[:200])
    assert SEALED not in body and "root:" not in body


def test_the_report_and_the_live_pages_are_served(served):
    assert get(served, "/api/status")[0] == 200
    status, body = get(served, "/runs/gsm8k_arith__sft__none__seed0.html")
    assert status == 200 and "Submissions" in body
    for figure in ("/plots/leaderboard.svg", "/plots/gsm8k_arith__sft__none__seed0.svg"):
        status, body = get(served, figure)
        assert status == 200 and "<svg" in body, figure


def test_without_the_token_from_another_name_or_writing_it_refuses(served):
    assert get(served, "/", token=False)[0] == 403
    assert get(served, "/api/status", token=False)[0] == 403
    assert get(served, "/?token=guess", token=False)[0] == 403
    assert get(served, "/", host="attacker.example:80")[0] == 421
    assert get(served, "/", host="attacker.example")[0] == 421
    assert get(served, "/", method="POST")[0] == 405
    assert get(served, "/", method="DELETE")[0] == 405


def test_the_agents_strings_stay_text_on_the_live_pages(served):
    for path in ("/", "/runs/gsm8k_arith__sft__none__seed0.html"):
        status, body = get(served, path)
        assert status == 200, body[:500]
        page = Tags(body)
        # the page's own script only (the poll; no transcript here, so no viewer's script)
        assert [t for t, _ in page.tags].count("script") == 1 and body.count("<script") == 1
        assert not [a for _, a in page.tags if any(k.startswith("on") for k in a)]
        assert [a["src"] for t, a in page.tags if t == "img"] in ([], [
            a["src"] for t, a in page.tags if t == "img" and a["src"].startswith(
                ("plots/", "../plots/"))])
        assert PAYLOAD in page.visible
