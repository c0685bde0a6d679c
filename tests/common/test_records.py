"""The run's records (a2rl.common.records): what is written reads back as the same record and
the same bytes; a malformed or older record is refused with an error naming where and what."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from a2rl.common.files import write_json_atomic
from a2rl.common.records import (
    ANSWER,
    MIRROR,
    FinalRecord,
    LedgerEntry,
    RecordError,
    RunRecord,
    RunSummary,
    SubmissionItem,
    read_ledger,
)

T0 = "2026-11-30T05:40:00.123Z"
VALID = {"submission_id": 3, "time": T0, "elapsed_s": 61.2, "model_path": "output/ckpt-1",
         "valid": True, "error": None, "status_code": 200, "artifact_hash": "ab" * 32,
         "cached": False, "split": "test", "equals_base": False, "score": 45.0, "stderr": 4.9,
         "n": 100, "eval_seconds": 20.1, "best": 45.0, "baseline": 20.0, "improvement": 25.0,
         "artifact_bytes": 865808, "code_commit": "c0ffee" * 6 + "abcd"}
REJECTED = {"submission_id": 4, "time": T0, "elapsed_s": 70.0, "model_path": ["output/a"],
            "valid": False, "error": "model_path must be a non-empty string",
            "status_code": 400}
RUN = {"task": "gsm8k_arith", "agent": "noop", "driver": "none", "seed": 0, "started": T0,
       "ended": T0, "agent_seconds": 0.257, "exit_code": 0, "status": "completed",
       "time_limit_s": 480, "sandbox": "bwrap", "feedback": "test", "submissions": 1,
       "hardware": {"cpu_cores": 2, "precision": {"agent": "bf16", "inference": "fp32"}},
       "grader_restarts": 0}
FINAL = {"task": "gsm8k_arith", "agent": "noop", "driver": "none", "seed": 0,
         "feedback": "test", "baseline": 0.0, "no_valid_submission": False, "rescored": False,
         "selected_submission": 1, "artifact_hash": "ab" * 32, "test_score": 8.5,
         "test_stderr": 1.98, "n": 200, "improvement": 8.5, "breakdown": None}


def text(data: dict) -> str:
    return json.dumps(data, sort_keys=True)


@pytest.mark.parametrize("record, kind", [(VALID, LedgerEntry), (REJECTED, LedgerEntry),
                                          (RUN, RunRecord), (FINAL, FinalRecord)])
def test_a_record_reads_back_as_the_same_bytes(record, kind):
    read = kind.from_json(json.loads(text(record)), "test")
    assert text(read.to_json()) == text(record)
    assert kind.from_json(read.to_json(), "again") == read
    # numbers keep their type: an int limit stays an int, a float score a float
    if kind is RunRecord:
        assert isinstance(read.time_limit_s, int) and isinstance(read.agent_seconds, float)


def test_fields_of_a_valid_submission_are_not_written_for_a_rejected_one():
    rejected = LedgerEntry.from_json(REJECTED, "test")
    assert rejected.score is None and rejected.cached is None
    assert set(rejected.to_json()) == set(REJECTED)
    with pytest.raises(RecordError, match="a rejected submission has no score"):
        LedgerEntry.from_json(REJECTED | {"score": 1.0}, "ledger.jsonl line 4")
    with pytest.raises(RecordError, match="a valid submission needs a score"):
        LedgerEntry.from_json({k: v for k, v in VALID.items() if k != "score"}, "line 3")


def test_what_the_grader_shows_the_agent():
    entry = LedgerEntry.from_json(VALID, "test")
    # the answer's keys in the order the agent's log prints them
    assert list(entry.shown_in(ANSWER)) == [
        "submission_id", "score", "best", "baseline", "improvement", "elapsed_s", "cached",
        "stderr", "n", "split", "artifact_hash", "equals_base"]
    assert entry.shown_in(MIRROR) == {k: VALID[k] for k in (
        "submission_id", "time", "elapsed_s", "model_path", "valid", "score", "error",
        "cached")}
    assert LedgerEntry.from_json(REJECTED, "t").shown_in(MIRROR)["score"] is None


def test_an_llm_run_writes_its_stack_and_proxy_fields_and_a_reference_run_does_not():
    plain = RunRecord.from_json(RUN, "run.json")
    assert not {"stack", "stack_version", "transcript", "driver_model", "llm"} & set(
        plain.to_json())
    llm = replace(plain, stack="claude_code", stack_version="2.0.1", transcript=None,
                  driver_model="claude-sonnet-4-5", llm={"calls": 3})
    written = llm.to_json()
    assert written["transcript"] is None and written["stack"] == "claude_code"
    assert written["llm"] == {"calls": 3}
    assert RunRecord.from_json(written, "run.json") == llm


def test_files_round_trip(tmp_path):
    final = FinalRecord.from_json(FINAL, "test")
    final.save(tmp_path / "final.json")
    assert FinalRecord.load(tmp_path / "final.json") == final
    assert FinalRecord.load_if_present(tmp_path / "missing.json") is None
    lines = [text(VALID), text(REJECTED), '{"submission_id": 5, "val']  # a torn last line
    (tmp_path / "ledger.jsonl").write_text("\n".join(lines))
    assert [e.submission_id for e in read_ledger(tmp_path / "ledger.jsonl")] == [3, 4]
    assert read_ledger(tmp_path / "nothing.jsonl") == []


def test_malformed_and_older_records_name_the_file_line_and_field(tmp_path):
    ledger = tmp_path / "ledger.jsonl"
    old = {k: v for k, v in VALID.items() if k not in ("status_code", "time")}
    ledger.write_text(text(VALID) + "\n\n" + text(old) + "\n")
    with pytest.raises(RecordError) as err:
        read_ledger(ledger)
    message = str(err.value)
    assert f"{ledger} line 3: not a valid ledger entry" in message
    assert "status_code: field required" in message and "time: field required" in message
    assert "older a2rl" in message

    cases = [(VALID | {"score": "45"}, "score"), (VALID | {"valid": 1}, "valid"),
             (VALID | {"surprise": 1}, "surprise: unexpected keyword argument")]
    for record, words in cases:
        with pytest.raises(RecordError, match=words):
            LedgerEntry.from_json(record, "ledger.jsonl line 1")
    with pytest.raises(RecordError, match="expected a JSON object"):
        LedgerEntry.from_json([1, 2], "ledger.jsonl line 1")
    with pytest.raises(RecordError, match="status: input should be 'completed'"):
        RunRecord.from_json(RUN | {"status": "finished"}, "run.json")

    (tmp_path / "run.json").write_text('{"task": ')
    with pytest.raises(RecordError, match=r"run\.json: not JSON .*expected a run\.json record"):
        RunRecord.load(tmp_path / "run.json")
    write_json_atomic(tmp_path / "final.json", {k: v for k, v in FINAL.items()
                                                 if k != "test_score"})
    with pytest.raises(RecordError, match="test_score: field required"):
        FinalRecord.load(tmp_path / "final.json")


def test_a_summary_reads_back_with_its_nested_records(tmp_path, blank_summary):
    entry = LedgerEntry.from_json(VALID, "test")
    item = SubmissionItem.of(entry, parent="base", methods=["SFT"])
    assert (item.id, item.score, item.code_commit, item.parent) == (
        3, 45.0, VALID["code_commit"], "base")
    summary = replace(blank_summary, submissions=replace(
        blank_summary.submissions, total=1, valid=1, items=[item]))
    summary.save(tmp_path / "summary.json")
    assert RunSummary.load(tmp_path / "summary.json") == summary
    broken = summary.to_json()
    broken["submissions"]["items"][0]["valid"] = "yes"
    with pytest.raises(RecordError, match=r"summary\.json: submissions: items\[0\]: .*valid"):
        RunSummary.from_json(broken, "summary.json")
