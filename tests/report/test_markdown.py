"""summary.md and the run's HTML page drawn from one RunSummary: the integrity section and the
outcome's verdict say the same in both, the Markdown briefly (first rows, cut details), the
HTML in full."""

from __future__ import annotations

import html
import re
from dataclasses import replace

import pytest

from a2rl.analysis.view import integrity_view, status_text
from a2rl.common.layout import RunPaths
from a2rl.config.compose import compose
from a2rl.pipeline.network import network_record
from a2rl.report.markdown import render_markdown, write_markdown
from a2rl.report.run_page import run_page

EVIDENCE = [{"split": "test", "id": f"gsm8k-test-{i}", "coverage": 0.5 + i / 100,
             "files": ["workspace/code/extra_train.jsonl"], "example": f"natalia sold {i} clips"}
            for i in range(12)]
ATTEMPTS = [{"kind": "sealed_reference", "source": f"agent.log:{i}",
             "detail": f"open('/results/sealed/test.jsonl') # {i} " + "x" * 200}
            for i in range(25)]
FLAGGED = {"contamination": {"checked": True, "flagged": True, "n": 8, "files_scanned": 4,
                             "contaminated_items": 12,
                             "splits": {"test": {"contaminated": 12, "judged": 16}},
                             "evidence": EVIDENCE},
           "tamper": {"count": 25, "rejected_count": 1, "attempts": ATTEMPTS}}


def visible(page: str) -> str:
    """The text of an HTML page as a reader sees it (tags dropped, entities decoded)."""
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def test_integrity_is_said_once_and_drawn_twice(tmp_path, blank_summary):
    summary = replace(blank_summary, integrity=FLAGGED)
    md = render_markdown(summary)
    page = visible(run_page(summary, RunPaths(tmp_path / "run"), "plot.svg"))

    md_flag = "**CONTAMINATION FLAGGED**"
    verdict = ("CONTAMINATION FLAGGED (12 sealed items found in the agent's files); "
               "25 tamper attempt(s)")
    assert f"| Integrity | {verdict.replace('CONTAMINATION FLAGGED', md_flag)} |" in md
    assert verdict in page
    sentences = ["Contamination (8-gram overlap of the sealed splits with 4 files the agent "
                 "wrote or fetched): ", "; test: 12 of 16 items.",
                 "Tamper log: 25 attempt(s) to reach sealed paths or the ledger; "
                 "1 rejected submission(s)."]
    for sentence in sentences:
        assert sentence in md and sentence in page
    assert "fetched): **FLAGGED**; test" in md and "fetched): FLAGGED; test" in page

    # the Markdown lists the first 10 items and 20 attempts with details cut; the page all
    section = md.split("## Integrity")[1]
    assert "gsm8k-test-9 " in section and "gsm8k-test-10 " not in section
    assert "| 50.0 % |" in section and "50.0 %" in page  # coverage worded the same
    assert "agent.log:19 " in section and "agent.log:20 " not in section
    assert f"| agent.log:3 | {ATTEMPTS[3]['detail'][:160]} |" in section
    assert ATTEMPTS[3]["detail"][:161] not in section
    assert "gsm8k-test-11" in page and "agent.log:24" in page and "x" * 200 in page


def test_a_run_without_integrity_checks_says_so(tmp_path, blank_summary):
    md = render_markdown(blank_summary)
    assert "| Integrity | not checked |" in md
    assert md.split("## Integrity")[1].split("## ")[0].strip() == "Not checked."
    unchecked = {"contamination": {"checked": False, "reason": "no sealed split found"},
                 "tamper": {"count": 0}}
    view = integrity_view(unchecked)
    assert not view.checked and view.tamper_count == 0
    md = write_markdown(replace(blank_summary, integrity=unchecked),
                        tmp_path / "summary.md").read_text()
    assert "Contamination: not checked (no sealed split found)." in md
    assert "| Integrity | contamination not checked; 0 tamper attempt(s) |" in md


@pytest.mark.parametrize(("overrides", "said"), [
    (["agent.network=allowlist"], "these hosts were withheld: the egress proxy refused them"),
    (["agent.network=allowlist", "++agent.allow_public_sources=true"],
     "these hosts were reachable: the grid set agent.allow_public_sources"),
    (["agent.network=open"], "these hosts were reachable: the sandbox shared the host's network"),
])
def test_the_network_policy_is_said_once_and_drawn_twice(overrides, said, tmp_path,
                                                         blank_summary):
    """Which policy a run had, and whether the public original of its sealed split was within
    the agent's reach (a2rl.pipeline.network.network_record)."""
    cfg = compose(["task=gsm8k", "agent=claude_code", "driver=replay", *overrides])
    summary = replace(blank_summary, network=network_record(cfg))
    md = render_markdown(summary).split("## Network")[1]
    page = visible(run_page(summary, RunPaths(tmp_path / "run"), "plot.svg"))
    page = page.split("Network")[-1]
    sources = ("The sealed split is public (huggingface: huggingface.co, .huggingface.co, "
               "hf.co, .hf.co); ")
    assert sources + said.replace("reachable", "**reachable**") in md
    assert sources + said in page
    policy = ("Policy: allowlist (allowlist: pypi.org, files.pythonhosted.org, huggingface.co, "
              "cdn-lfs.huggingface.co, registry.npmjs.org).")
    assert (policy in md and policy in page) == ("agent.network=allowlist" in overrides)
    assert ("Policy: open." in md and "Policy: open." in page) == ("agent.network=open"
                                                                   in overrides)


def test_an_agent_process_killed_at_its_memory_limit_is_said_beside_its_status(tmp_path,
                                                                                blank_summary):
    """A training script killed by the memory cgroup shows in the agent's log only as exit -9:
    the outcome says so in both formats; a run without the event says nothing of memory."""
    oom = {"kind": "agent_oom", "elapsed_s": 183.9, "oom_kills": 1, "memory_bytes": 18993721344}
    summary = replace(blank_summary, timeline=[*blank_summary.timeline, oom])
    said = "1 process(es) killed at its memory limit of 17.7 GiB"
    assert said in render_markdown(summary).split("| Agent status |")[1].split("\n")[0]
    assert said in visible(run_page(summary, RunPaths(tmp_path / "run"), "plot.svg"))
    assert "memory limit" not in render_markdown(blank_summary)


def test_the_agent_status_reads_the_same_in_both_formats(tmp_path, blank_summary):
    """One wording of how the agent ended (a2rl.analysis.view.status_text): its exit code, the
    seconds of its budget it used, and a memory kill when there was one."""
    summary = replace(blank_summary, exit_code=-9, agent_seconds=183.94)
    line = status_text(summary)
    assert line.startswith(f"{summary.status} (exit -9, 183.9 s of ")
    assert line in render_markdown(summary).split("| Agent status |")[1].split("\n")[0]
    assert line in visible(run_page(summary, RunPaths(tmp_path / "run"), "plot.svg"))
    assert status_text(replace(summary, exit_code=None, agent_seconds=None)) == summary.status
