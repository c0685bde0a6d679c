"""A hostile agent against the harness's readers after the run (issue 11 item 4): what the
integrity checks, the summary, the transcript reader and the report read of the agent's areas
(workspace/code, workspace/output, the agent folder, and the transcript collected from it). Links
to the sealed split, folders swapped for such links while they are read, FIFOs, a huge sparse
file and names that are not UTF-8: every reader finishes promptly, puts no sealed byte in what it
writes, and says what it left out.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from pathlib import Path

import pytest
from grader_rig import while_swapping

from a2rl.analysis import integrity
from a2rl.analysis.failures import LOG_TAIL_BYTES, failures_of
from a2rl.analysis.lineage import read_transcript
from a2rl.analysis.transcripts import TranscriptError, read_lines
from a2rl.common.layout import PreparedTaskPaths, RunPaths
from a2rl.common.records import RunRecord
from a2rl.config.compose import compose
from a2rl.llm.stacks import stack_of
from a2rl.pipeline import stages
from checkout import FIXTURE_DATA

pytestmark = pytest.mark.attacks

SEALED = "SEALED-ITEM-7c41 the quick brown fox jumps over the lazy dog near sealed river bank"
DENIAL = "Permission denied"  # a sealed line the tamper log would quote, were it read
ODD_NAME = b"r\xe9sum\xe9.py"  # Latin-1, not UTF-8


def sealed_items(n: int = 3) -> list[dict]:
    return [{"id": f"t{i}", "question": f"{SEALED} number {i} {DENIAL} code.git ledger.jsonl",
             "answer": str(i)} for i in range(n)]


@pytest.fixture
def cell(tmp_path) -> tuple[RunPaths, PreparedTaskPaths]:
    """A finished run's folder as the harness leaves it (workspace, agent.log, ledger) and
    its task's prepared folder with the sealed split beside it."""
    prepared = PreparedTaskPaths(tmp_path / "results" / "prepared" / "t")
    prepared.sealed.mkdir(parents=True)
    prepared.test.write_text("".join(json.dumps(i) + "\n" for i in sealed_items()))
    run = RunPaths(tmp_path / "results" / "runs" / "t" / "a" / "none" / "seed0")
    for area in ("code", "output", "data", "base_model"):
        (run.workspace / area).mkdir(parents=True)
    (run.workspace / "data" / "train.jsonl").write_text('{"question": "1 + 1?"}\n')
    (run.workspace / "code" / "train.py").write_text("print('train')\n")
    run.agent_log.write_text("agent started\n")
    run.ledger.write_text("")
    return run, prepared


def plant(run: RunPaths, prepared: PreparedTaskPaths) -> None:
    """What a hostile agent leaves in its areas: links to the sealed split and its folder,
    FIFOs, a 1 TiB sparse file and a file whose name is not UTF-8, and a transcript that is a
    FIFO or a link (as the harness once collected them by moving the agent's file)."""
    code, output = run.workspace / "code", run.workspace / "output"
    (code / "leak.jsonl").symlink_to(prepared.test)
    (code / "sealed_dir").symlink_to(prepared.sealed)
    os.mkfifo(code / "stall.py")
    os.mkfifo(output / "stall.txt")
    with open(output / "huge.txt", "wb") as fh:
        fh.truncate(2**40)
    with open(os.fsencode(code) + b"/" + ODD_NAME, "wb") as fh:
        fh.write(b"# Permission denied\n")
    (run.agent_files).mkdir()
    os.mkfifo(run.agent_files / "transcript.jsonl")
    run.transcript.symlink_to(prepared.test)


def assert_no_sealed(*texts: str) -> None:
    for text in texts:
        assert SEALED not in text and "SEALED-ITEM" not in text


def finishes_within(seconds: float, action):
    """``action()``'s result; fails (instead of hanging the test run) past ``seconds``."""
    result: list = []
    thread = threading.Thread(target=lambda: result.append(action()), daemon=True)
    started = time.monotonic()
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still reading after {seconds} s"
    assert result, "the reader failed"
    return result[0], time.monotonic() - started


def test_integrity_reads_no_link_fifo_or_sparse_file_and_notes_them(cell):
    run, prepared = cell
    plant(run, prepared)
    result, seconds = finishes_within(60, lambda: integrity.check_run_paths(run, prepared))
    written = run.integrity.read_text()
    assert_no_sealed(written)
    c = result["contamination"]
    assert c["checked"] and not c["flagged"] and result["tamper"]["count"] >= 1
    left = {e["path"]: e["reason"] for e in c["left_out"]}
    assert left["workspace/code/leak.jsonl"] == "a symbolic link (not followed)"
    assert left["workspace/code/sealed_dir"] == "a symbolic link (not followed)"
    assert "FIFO" in left["workspace/code/stall.py"]
    assert "FIFO" in left["workspace/output/stall.txt"]
    assert "sparse" in left["workspace/output/huge.txt"]
    assert left["transcript.jsonl"] == "a symbolic link (not followed)"
    # the odd name is read, and named with its bytes escaped
    sources = [a["source"] for a in result["tamper"]["attempts"]]
    assert "workspace/code/r\\xe9sum\\xe9.py:1" in sources
    assert str(run.root) not in written and str(prepared.root) not in written


def test_folder_swapped_for_a_link_while_the_integrity_scan_reads(cell):
    """code/lib flips between a folder and a link to the sealed folder while the scan walks:
    every scan finishes and none reads the split through the link."""
    run, prepared = cell
    lib = run.workspace / "code" / "lib"
    lib.mkdir()
    for i in range(200):
        (lib / f"m{i:03d}.py").write_text(f"X = {i}\n")
    spare, link = lib.with_name(".lib.real"), lib.with_name(".lib.link")
    link.symlink_to(prepared.sealed)

    def swap() -> None:
        os.rename(lib, spare)
        os.rename(link, lib)
        os.rename(lib, link)
        os.rename(spare, lib)

    results = while_swapping(swap, lambda: integrity.check_run_paths(run, prepared), 10)
    for result in results:
        assert_no_sealed(json.dumps(result))
        assert not result["contamination"]["flagged"]


@pytest.mark.parametrize("stack", ["claude_code", "openhands", "mini_swe_agent"])
@pytest.mark.parametrize("kind", ["link", "fifo", "sparse"])
def test_transcript_swapped_for_a_link_fifo_or_sparse_file_is_not_collected(tmp_path, stack,
                                                                             kind):
    agent_dir, sealed = tmp_path / "agent", tmp_path / "sealed.jsonl"
    agent_dir.mkdir()
    sealed.write_text(json.dumps({"text": SEALED}) + "\n")
    name = getattr(stack_of(stack), "TRAJECTORY", "transcript.jsonl")
    if kind == "link":
        (agent_dir / name).symlink_to(sealed)
    elif kind == "fifo":
        os.mkfifo(agent_dir / name)
    else:
        with open(agent_dir / name, "wb") as fh:
            fh.truncate(2**40)
    dest = tmp_path / "run" / "transcript.jsonl"
    dest.parent.mkdir()
    collected, _ = finishes_within(
        20, lambda: stack_of(stack).collect_transcript(agent_dir, dest))
    assert collected is False and not dest.exists() and not dest.is_symlink()
    assert sealed.read_text().startswith("{")  # the target is left alone


def test_transcript_readers_refuse_a_link_or_fifo_without_hanging(tmp_path):
    sealed = tmp_path / "sealed.jsonl"
    sealed.write_text(json.dumps({"type": "user", "text": SEALED}) + "\n")
    link, fifo = tmp_path / "link.jsonl", tmp_path / "fifo.jsonl"
    link.symlink_to(sealed)
    os.mkfifo(fifo)
    for path in (link, fifo):
        assert finishes_within(10, lambda p=path: read_transcript(p))[0] == []
        with pytest.raises(TranscriptError) as caught:
            read_lines(path)
        assert str(tmp_path) not in str(caught.value)


def test_a_huge_agent_log_is_read_by_its_tail_only(tmp_path):
    log = tmp_path / "agent.log"
    with open(log, "wb") as fh:
        fh.truncate(8 * 2**30)  # 8 GiB of nothing, then the end of a real log
        fh.seek(0, os.SEEK_END)
        fh.write(b"Traceback (most recent call last):\n  File \"x.py\"\nValueError: late\n")
    run = RunRecord(task="t", agent="a", driver="none", seed=0, started="s", ended="e",
                    agent_seconds=1.0, exit_code=1, status="agent_failed", time_limit_s=60.0,
                    sandbox="bwrap")
    found, seconds = finishes_within(10, lambda: failures_of([], [], run, log))
    assert seconds < 5 and LOG_TAIL_BYTES < 2**21
    assert "ValueError: late" in found[0]["excerpt"]


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_summary_export_and_report_of_a_real_run_with_a_hostile_workspace(tmp_path,
                                                                          tiny_model):
    """A real noop cell in the sandbox; then the agent's areas get what a hostile agent leaves
    there, and the stages after the run (final grade, summary, export, report) run as the
    workflow runs them: they finish, hold no sealed byte, and the summary names what it left
    out."""
    cfg = compose(["grid=ci", "agent=noop", f"paths.root={tmp_path}",
                   f"paths.data={FIXTURE_DATA}", "task.params.test_size=6",
                   "task.params.train_size=16", "task.inference.max_new_tokens=8",
                   "budget.time_limit_s=120"])
    shutil.copytree(tiny_model, stages.layout_of(cfg).model(cfg.task.model.name))
    prepared = stages.prepare_task(cfg)
    stages.measure_baseline(cfg)
    run = stages.run_agent(cfg)
    plant(run, prepared)
    needles = [json.loads(line)["question"][:60]
               for line in prepared.test.read_text().splitlines()]

    def after_the_run():
        stages.final_grade(cfg)
        stages.summarize_run(cfg)
        stages.export_model(cfg)
        return stages.build_report([run.root], stages.layout_of(cfg))

    report, seconds = finishes_within(600, after_the_run)
    outputs = {p: p.read_text(errors="replace") for p in
               [run.summary_json, run.summary_md, run.integrity,
                *Path(report).parent.rglob("*.html")]}
    for path, text in outputs.items():
        assert not [n for n in needles if n in text], path
    md = run.summary_md.read_text()
    assert "Not read for the checks" in md and "symbolic link (not followed)" in md
    assert "workspace/code/stall.py" in md
    assert json.loads(run.summary_json.read_text())["submissions"]["valid"] == 1
