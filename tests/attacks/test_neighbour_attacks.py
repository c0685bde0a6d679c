"""A neighbouring run against this run's grader (issue #28, finding 5). The grader listens on
127.0.0.1:<port> besides its unix socket, so an agent with ``agent.network=open`` (the host's
network, shared) reaches every other run's grader on loopback. The neighbour here is a hostile
program in the real sandbox with the open network; the victim is a real grader server on its
unix socket and its TCP port, with the rate limit a run has (30 invalid submissions a minute).
Without the victim's token the neighbour must learn nothing and cost the victim nothing: not its
rate bucket, not a ledger line, not an event of its report."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from grader_rig import TOKEN, Rig
from hostile_sandbox import attack, make_cell

from a2rl.analysis.integrity import check_tamper
from a2rl.common.records import read_ledger
from a2rl.grading import client

pytestmark = [pytest.mark.attacks,
              pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")]

PER_MINUTE = 30  # invalid submissions a minute, a run's default (budget.invalid_per_minute)
FLOOD = 40  # token-less submissions of each kind, past the whole bucket
# the neighbour: it found the port on loopback; every route, then a flood of submissions
# without a token, with a wrong one and with an empty one
NEIGHBOUR = r'''
import http.client
port = int(sys.argv[1])
def call(method, route, token=None, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    conn.request(method, route, body=body, headers=headers)
    answer = conn.getresponse()
    text = answer.read().decode(errors="replace")
    conn.close()
    return [answer.status, text]
for name, route in (("health", "/health"), ("status", "/status"), ("docs", "/docs"),
                    ("openapi", "/openapi.json"), ("nothing", "/nothing")):
    attempt(name, lambda route=route: call("GET", route))
body = json.dumps({"model_path": "output/anything"})
flood = int(sys.argv[2])
tokens = [None] * flood + ["guess"] * flood + [""] * flood
attempt("submit", lambda: sorted({call("POST", "/submit", t, body)[0] for t in tokens}))
report()
'''


@pytest.fixture
def victim(tmp_path, tiny_model):
    """A run's real grader on its unix socket and 127.0.0.1 port, its invalid-rate limit as a
    run has it."""
    with Rig(tmp_path / "victim", tiny_model, invalid_per_minute=float(PER_MINUTE)) as rig:
        yield rig


def neighbour_attacks(tmp_path, victim: Rig) -> dict:
    """What the neighbour's program, in its open-network sandbox, got from the victim's port."""
    cell = make_cell(tmp_path / "neighbour")
    cell.sandbox.network = "open"
    return attack(cell, NEIGHBOUR, str(victim.server.port), str(FLOOD), timeout_s=120).result


def own(victim: Rig, method: str, route: str, token: str = TOKEN) -> tuple[int, dict]:
    """A call of the victim's own agent, on its unix socket."""
    return client.request(method, route, url=victim.server.url, token=token, timeout=30)


def test_health_needs_the_token(tmp_path, victim):
    """No route answers without the token (health, status, the framework's own pages, a path
    that does not exist): a neighbour cannot tell a grader from any other refusing server.
    The run's own agent, with its token, is answered on both sockets."""
    result = neighbour_attacks(tmp_path, victim)
    for name in ("health", "status", "docs", "openapi", "nothing"):
        status, text = result[name]
        assert status == 401, (name, result[name])
        assert "task" not in text and "ok" not in text.lower().replace("token", ""), text
    assert own(victim, "GET", "/health", token="")[0] == 401
    assert own(victim, "GET", "/health") == (200, {"status": "ok"})
    assert client.request("GET", "/health", url=victim.server.http_url, token=TOKEN,
                          timeout=30) == (200, {"status": "ok"})


def test_a_neighbour_without_the_token_cannot_spend_the_runs_rate_bucket(tmp_path, victim):
    """After the neighbour's flood the victim's valid submission is graded (not 429), and its
    own invalid ones still have the whole bucket: exactly PER_MINUTE are processed, then 429."""
    result = neighbour_attacks(tmp_path, victim)
    assert result["submit"] == [401], result
    victim.model("good")
    code, body = victim.post("output/good")
    assert code == 200 and body["submission_id"] == 1, body
    codes = [victim.post("output/missing")[0] for _ in range(PER_MINUTE + 1)]
    assert codes == [404] * PER_MINUTE + [429], codes


def test_a_neighbour_without_the_token_leaves_no_trace_in_the_runs_ledger_or_report(
        tmp_path, victim, capfd):
    """The flood writes nothing the run's agent or report reads: no ledger line, no entry in
    scores.json, no event (so no tamper attempt in the integrity report), nothing in /status.
    The grader's own log counts the refusals."""
    result = neighbour_attacks(tmp_path, victim)
    assert result["submit"] == [401], result
    own_code, _ = own(victim, "POST", "/submit", token="wrong")
    assert own_code == 401
    assert read_ledger(victim.service.ledger.path) == []
    assert json.loads((victim.ws / "scores.json").read_text())["submissions"] == []
    events = [json.loads(line) for line in victim.service.events.path.read_text().splitlines()]
    assert {e["kind"] for e in events} <= {"grader_start"}, events
    tamper = check_tamper(read_ledger(victim.service.ledger.path), [])
    assert (tamper["count"], tamper["rejected_count"]) == (0, 0), tamper
    code, status = own(victim, "GET", "/status")
    assert code == 200
    assert (status["invalid_recorded"], status["invalid_refused_unrecorded"]) == (0, 0)
    refused = 5 + 3 * FLOOD + 1  # the routes, the flood, the own agent's wrong token
    counts = [int(n) for n in re.findall(r"refused (\d+) requests? without the run's token",
                                         capfd.readouterr().err)]
    assert counts and refused / 2 < max(counts) <= refused, counts
