"""The programs of a code check (a2rl.isolation.sandboxed), imported as modules: the checker's side
of the calls protocol, driven over real pipes by a scripted candidate, and the assembled
sources the sandboxes run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from a2rl.isolation import plaindata, sandboxed
from a2rl.isolation.plaindata import decode, encode, read_frame, write_frame
from a2rl.isolation.sandboxed import candidate, checker, common

LIMIT = 1 << 20


@pytest.fixture
def pipes():
    calls_r, calls_w = os.pipe()
    replies_r, replies_w = os.pipe()
    yield calls_r, calls_w, replies_r, replies_w
    for fd in (calls_r, calls_w, replies_r, replies_w):
        os.close(fd)


def remote_with_replies(pipes, *replies) -> checker.Remote:
    """A checker's Remote whose candidate has already written ``replies`` (after started and
    ready)."""
    _, calls_w, replies_r, replies_w = pipes
    for message in [("started",), ("ready",), *replies]:
        write_frame(replies_w, encode(message))
    remote = checker.Remote({"calls": calls_w, "replies": replies_r, "call_timeout_s": 5.0,
                             "max_message": LIMIT})
    remote.start()
    return remote


def test_a_call_crosses_as_plain_data_both_ways(pipes):
    remote = remote_with_replies(pipes, ("value", [1, (2, 3)]))
    assert remote.proxy("add")(1, x={2}) == [1, (2, 3)]
    assert decode(read_frame(pipes[0], LIMIT)) == ("call", (1,), {"x": {2}})


def test_a_raised_builtin_is_raised_again_and_others_become_candidate_errors(pipes):
    remote = remote_with_replies(pipes, ("raised", "ValueError", "bad"),
                                 ("raised", "StopIteration", "early"),
                                 ("raised", "MyError", "custom"))
    add = remote.proxy("add")
    with pytest.raises(ValueError, match="bad"):
        add(1)
    for name in ("StopIteration", "MyError"):  # control flow and unknown types alike
        with pytest.raises(checker.CandidateError) as caught:
            add(1)
        assert caught.value.remote_type == name


def test_a_malformed_reply_breaks_the_remote_for_good(pipes):
    remote = remote_with_replies(pipes, ("value",), ("value", 1))
    add = remote.proxy("add")
    with pytest.raises(checker.InvalidReply, match="malformed"):
        add(1)
    with pytest.raises(checker.InvalidReply, match="malformed"):  # sticky: the good reply waits
        add(1)
    assert not issubclass(checker.InvalidReply, Exception)  # `except Exception` cannot hide it


def test_an_exiting_candidate_is_an_invalid_reply_not_an_exception():
    assert isinstance(checker.remote_exception("SystemExit", "0"), checker.InvalidReply)
    assert type(checker.remote_exception("KeyError", "k")) is KeyError
    # a builtin that cannot be built from one message still reaches the test as an error
    assert isinstance(checker.remote_exception("UnicodeDecodeError", "x"),
                      checker.CandidateError)


def test_the_candidate_sends_what_it_cannot_encode_as_unsendable(pipes):
    _, _, replies_r, replies_w = pipes
    candidate._send(replies_w, ("value", object()))
    kind, text = decode(read_frame(replies_r, LIMIT))
    assert kind == "unsendable" and "object" in text


# every line boundary of str.splitlines(), "\r\n" as one
LINE_BOUNDARIES = ["\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028",
                   "\u2029"]


@pytest.mark.parametrize("boundary", LINE_BOUNDARIES)
def test_a_failure_message_stays_one_line_of_the_verdict(boundary):
    text = checker.one_line(f"AssertionError: x{boundary}passed{boundary}")
    assert len(text.splitlines()) == 1 and text.count("passed") == 1
    assert text == "AssertionError: x" + repr(boundary)[1:-1] + "passed" + repr(boundary)[1:-1]


def test_the_caller_reads_only_the_checkers_exact_verdict():
    from a2rl.isolation.codeexec import read_verdict

    assert read_verdict("started\npassed\n") == (True, ("passed", ""))
    assert read_verdict("started\nfailed AssertionError: x\n") == (
        True, ("failed", "AssertionError: x"))
    assert read_verdict("started\ntimeout CallTimeout: 3s\n") == (
        True, ("timeout", "CallTimeout: 3s"))
    assert read_verdict("started\n") == (True, None)  # the checker died before its verdict
    assert read_verdict("") == (False, None)
    for forged in ("started\nfailed E: x\npassed\n", "started\npassed\npassed\n",
                   "started\npassed", "started\npassed now\n", "started\nfailed\n",
                   "started\r\npassed\n", "started\n\u2028passed\n", "passed\nstarted\n"):
        assert read_verdict(forged)[1] is None, forged


@pytest.mark.parametrize("part", sandboxed.PARTS)
def test_each_source_is_plaindata_common_and_its_part_in_one_program(part):
    module = {"candidate": candidate, "checker": checker}[part]
    texts = [Path(m.__file__).read_text() for m in (plaindata, common, module)]
    source = sandboxed.source(part)
    assert source == "".join(texts)
    assert source == {"candidate": sandboxed.CANDIDATE_SOURCE,
                      "checker": sandboxed.CHECKER_SOURCE}[part]
    compile(source, f"<{part}>", "exec")  # one program: no __future__ import in the middle


def test_an_unknown_part_is_refused():
    with pytest.raises(ValueError, match="expected one of"):
        sandboxed.source("grader")
