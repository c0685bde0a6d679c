"""A hostile agent against the code recorder (code.git snapshots of the workspace), issue 11
item 4: links to the sealed split, folders and files swapped for links or FIFOs while the
snapshot reads them, special files, names that are not UTF-8, entry floods. A snapshot must
finish promptly, hold nothing from outside the workspace (no content, no host file name), and
never fail because of what the agent left.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import time
from pathlib import Path

import pytest
from grader_rig import while_swapping

from a2rl.common.beneath import Limits
from a2rl.common.clock import BudgetClock
from a2rl.common.events import EventLog
from a2rl.grading import recording
from a2rl.grading.grader import GraderSettings, GradingService
from a2rl.grading.ledger import Ledger
from a2rl.task.base import EvalResult

pytestmark = pytest.mark.attacks

SEALED = b"SEALED-ITEM-51d0e2"
SEALED_NAME = "sealed_split_feed.jsonl"


@pytest.fixture
def ws(tmp_path) -> Path:
    workspace = tmp_path / "workspace"
    for area in ("code", "output", "data", "base_model"):
        (workspace / area).mkdir(parents=True)
    (workspace / "code" / "train.py").write_text("print('train')\n")
    sealed = tmp_path / "sealed"
    sealed.mkdir()
    (sealed / SEALED_NAME).write_bytes(SEALED + b"\n")
    return workspace


def sealed_dir(ws: Path) -> Path:
    return ws.parent / "sealed"


def all_objects(repo: Path) -> bytes:
    """Every object of the repository, trees (file names) and blobs (contents) alike."""
    return subprocess.run(["git", "--git-dir", str(repo), "cat-file", "--batch-all-objects",
                           "--batch"], capture_output=True, check=True).stdout


def assert_nothing_sealed(repo: Path, names: bool = False) -> None:
    """No sealed content in any object; with ``names``, no host file name either (where no
    link the agent wrote names it: a link is recorded with its target's text)."""
    objects = all_objects(repo)
    assert SEALED not in objects
    assert not names or SEALED_NAME.encode() not in objects


def snapshots_during(swap, recorder: recording.CodeRecorder, n: int = 20) -> list:
    """``n`` snapshots taken while another thread keeps calling ``swap``."""
    names = iter(range(n))
    return while_swapping(swap, lambda: recorder.snapshot(f"s{next(names)}"), n)


def test_link_to_the_sealed_split_is_recorded_as_a_link(ws, tmp_path):
    target = sealed_dir(ws) / SEALED_NAME
    (ws / "code" / "data.jsonl").symlink_to(target)
    repo = tmp_path / "code.git"
    snap = recording.CodeRecorder(repo, ws).snapshot("s1")
    listing = subprocess.run(["git", "--git-dir", str(repo), "ls-tree", "-r", snap.commit],
                             capture_output=True, text=True, check=True).stdout
    assert "120000 blob" in listing.split("code/data.jsonl")[0].splitlines()[-1]
    assert SEALED not in all_objects(repo)  # the link's text only, never its target's bytes


def test_file_swapped_for_a_link_while_snapshotting(ws, tmp_path):
    """The issue's attack: code/data.txt flips between a file and a link to the sealed split
    while the recorder reads; 20 snapshots hold the file's bytes or the link, never the split."""
    path = ws / "code" / "data.txt"
    spare, link = ws / "code" / ".data.real", ws / "code" / ".data.link"
    path.write_text("mine\n")
    link.symlink_to(sealed_dir(ws) / SEALED_NAME)

    def swap() -> None:
        os.rename(path, spare)
        os.rename(link, path)
        os.rename(path, link)
        os.rename(spare, path)

    snaps = snapshots_during(swap, recording.CodeRecorder(tmp_path / "code.git", ws))
    assert len({s.commit for s in snaps}) == 20
    assert_nothing_sealed(tmp_path / "code.git")


def test_folder_swapped_for_a_link_while_snapshotting(ws, tmp_path):
    sub = ws / "code" / "lib"
    sub.mkdir()
    (sub / "util.py").write_text("X = 1\n")
    spare, link = ws / "code" / ".lib.real", ws / "code" / ".lib.link"
    link.symlink_to(sealed_dir(ws))

    def swap() -> None:
        os.rename(sub, spare)
        os.rename(link, sub)
        os.rename(sub, link)
        os.rename(spare, sub)

    snapshots_during(swap, recording.CodeRecorder(tmp_path / "code.git", ws))
    assert_nothing_sealed(tmp_path / "code.git", names=True)


def test_fifo_socket_and_device_are_left_out_without_stalling(ws, tmp_path):
    os.mkfifo(ws / "code" / "pipe.py")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(ws / "code" / "sock.py"))
    try:
        os.mknod(ws / "code" / "null.py", stat.S_IFCHR | 0o666, os.makedev(1, 3))
        device = True
    except PermissionError:  # not root: devices cannot be made, the rest still counts
        device = False
    started = time.monotonic()
    try:
        snap = recording.CodeRecorder(tmp_path / "code.git", ws).snapshot("s1")
    finally:
        listener.close()
    assert time.monotonic() - started < 10
    reasons = {s["path"]: s["reason"] for s in snap.skipped}
    assert reasons["code/pipe.py"] == "a FIFO (named pipe)"
    assert reasons["code/sock.py"] == "a socket"
    if device:
        assert reasons["code/null.py"] == "a character device"
    assert recording.tree_files(tmp_path / "code.git", snap.commit) == ["code/train.py"]


def test_file_swapped_for_a_fifo_never_stalls_a_snapshot(ws, tmp_path):
    path = ws / "code" / "notes.md"

    def swap() -> None:
        path.write_text("notes\n")
        path.unlink()
        os.mkfifo(path)
        path.unlink()

    started = time.monotonic()
    snapshots_during(swap, recording.CodeRecorder(tmp_path / "code.git", ws))
    assert time.monotonic() - started < 60


def test_names_that_are_not_utf8_are_recorded(ws, tmp_path):
    odd = os.fsencode(ws / "code") + b"/r\xe9sum\xe9.py"
    with open(odd, "wb") as fh:
        fh.write(b"print('latin-1 name')\n")
    repo = tmp_path / "code.git"
    snap = recording.CodeRecorder(repo, ws).snapshot("s1")
    names = subprocess.run(["git", "--git-dir", str(repo), "ls-tree", "-r", "-z",
                            "--name-only", snap.commit], capture_output=True,
                           check=True).stdout.split(b"\0")
    assert b"code/r\xe9sum\xe9.py" in names and snap.files == 2
    assert recording.commits(repo)[0]["files"]  # reading back does not choke on it


def test_entry_flood_and_sparse_file_are_bounded(ws, tmp_path):
    flood = ws / "code" / "flood"
    flood.mkdir()
    for i in range(3000):
        (flood / f"f{i:04d}.py").write_text("")
    with open(ws / "code" / "huge.py", "wb") as fh:
        fh.truncate(2**40)  # 1 TiB apparent
    started = time.monotonic()
    files, skipped = recording.select_files(ws, limits=Limits(max_bytes=2**20, max_entries=500))
    assert time.monotonic() - started < 10
    assert len(files) <= 500
    reasons = " ".join(s["reason"] for s in skipped)
    assert "more than 500 files and folders" in reasons
    snap = recording.CodeRecorder(tmp_path / "code.git", ws).snapshot("s1")
    assert any(s["path"] == "code/huge.py" and "larger than" in s["reason"]
               for s in snap.skipped)


def test_hostile_code_folder_does_not_break_grading(ws, tmp_path, tiny_model):
    """Through the real grader: a FIFO, a link to the sealed split and an odd name in code/;
    the submission is graded and its snapshot committed and tagged."""
    os.mkfifo(ws / "code" / "stall.py")
    (ws / "code" / "leak.py").symlink_to(sealed_dir(ws) / SEALED_NAME)
    with open(os.fsencode(ws / "code") + b"/\xff.py", "wb") as fh:
        fh.write(b"x = 1\n")
    shutil.copytree(tiny_model, ws / "output" / "m")
    run = tmp_path / "run"
    clock = BudgetClock(600)
    clock.start()
    service = GradingService(
        GraderSettings(task="t", split="test", baseline=25.0, max_submissions=10, workspace=ws,
                       store=run / "store", base_model=tiny_model),
        evaluate=lambda model_dir: EvalResult(per_item=[1.0, 0.0]),
        ledger=Ledger(run / "ledger.jsonl"), clock=clock,
        events=EventLog(run / "events.jsonl", clock),
        recorder=recording.CodeRecorder(run / "code.git", ws))
    code, body = service.submit("output/m")
    assert code == 200, body
    entry = service.ledger.entries[-1]
    assert entry.code_commit and recording.tags(run / "code.git") == {
        "submission-1": entry.code_commit}
    assert_nothing_sealed(run / "code.git")
    events = (run / "events.jsonl").read_text().splitlines()
    assert not [e for e in map(json.loads, events) if e["kind"] == "error"]
