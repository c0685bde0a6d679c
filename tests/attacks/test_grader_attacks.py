"""A hostile agent against the real grader over its unix socket, issue 11 item 3: links and
magic links out of the workspace, folders and files swapped for links or FIFOs while the grader
copies, sockets, link cycles, names that are not UTF-8. Each attack must be refused with a clear
error that names no host path, answered in bounded time, leave nothing sealed in the store or
the ledger, and leave the grader serving (tests/attacks/grader_rig.py)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import time

import pytest
from grader_rig import while_swapping

pytestmark = pytest.mark.attacks


# ---- items 3: links, magic links, swaps, special files -------------------------------------


def test_symlinked_file_to_the_sealed_split_is_refused(rig):
    folder = rig.model("m")
    (folder / "config.json").unlink()
    (folder / "config.json").symlink_to(rig.sealed / "config.json")
    code, body = rig.post("output/m")
    assert code == 403 and "m/config.json is a link that leads outside" in body["error"]
    assert rig.ledger()[-1]["status_code"] == 403


@pytest.mark.parametrize("target", ["/proc/self/environ", "/proc/self/root/etc/passwd",
                                    "/proc/self/fd/0", "/proc/self"])
def test_links_to_the_harness_proc_are_refused(rig, target):
    folder = rig.model("m")
    (folder / "extra").symlink_to(target)
    (rig.ws / "output" / "p").symlink_to(target)
    for path in ("output/m", "output/p", target, f"/workspace/../..{target}"):
        code, body = rig.post(path)
        assert code == 403 and "outside the workspace" in body["error"], (path, body)
        assert target not in body["error"].replace(repr(path)[1:-1], "")
    assert not rig.store_files()


def test_submitted_folder_swapped_for_a_link_during_the_copy(rig):
    """A thread swaps output/m/extra between a real folder and a link to the host folder of
    sealed files as fast as it can while the agent submits again and again: every copy is
    the real folder's or refused, never the sealed files', and their names are never listed."""
    folder = rig.model("m")
    (folder / "extra").mkdir()
    (folder / "extra" / "notes.txt").write_text("mine\n")
    real, link = folder / "extra.real", folder / "extra.link"
    link.symlink_to(rig.sealed)

    def swap() -> None:
        os.rename(folder / "extra", real)
        os.rename(link, folder / "extra")
        os.rename(folder / "extra", link)
        os.rename(real, folder / "extra")

    answers = while_swapping(swap, lambda: rig.post("output/m"), 12)
    codes = {code for code, _ in answers}
    assert codes <= {200, 400, 403, 404, 409} and 403 in codes, answers  # the swap was seen
    # what was stored is the agent's own (with or without extra/, caught mid-rename)
    mine = {p.name for p in rig.tiny.iterdir()} | {"notes.txt"}
    assert {p.name for p in rig.store_files()} <= mine
    assert len(rig.ledger()) == 12


def test_top_level_folder_swapped_for_a_link_to_proc_self(rig):
    """The issue's 1.76 GB of pagemap: output/m becomes a link to /proc/self mid-submission."""
    folder = rig.model("m")
    link, real = rig.ws / "output" / "m.link", rig.ws / "output" / "m.real"
    link.symlink_to("/proc/self")

    def swap() -> None:
        os.rename(folder, real)
        os.rename(link, folder)
        os.rename(folder, link)
        os.rename(real, folder)

    answers = while_swapping(swap, lambda: rig.post("output/m", timeout=30), 8)
    assert {code for code, _ in answers} <= {200, 400, 403, 404, 409}, [
        b["error"] for c, b in answers if c not in (200, 400, 403, 404, 409)]
    assert sum(p.stat().st_size for p in rig.store_files()) < 50 * 2**20
    for path in rig.store_files():
        assert path.name not in ("pagemap", "environ", "mem")


def test_fifo_in_the_folder_is_refused_without_hanging(rig):
    folder = rig.model("m")
    os.mkfifo(folder / "tokenizer.model")
    started = time.monotonic()
    code, body = rig.post("output/m", timeout=20)
    assert code == 400 and "m/tokenizer.model is a FIFO (named pipe)" in body["error"]
    assert time.monotonic() - started < 10
    assert not rig.store_files()  # the partial copy is gone


def test_file_swapped_for_a_fifo_during_the_copy_never_stalls(rig):
    folder = rig.model("m")
    target = folder / "tokenizer.json"
    saved = target.read_bytes()

    def swap() -> None:
        target.unlink()
        os.mkfifo(target)
        target.unlink()
        target.write_bytes(saved)

    answers = while_swapping(swap, lambda: rig.post("output/m", timeout=20), 8)
    # 422: the copy caught the file half rewritten (empty), which is the agent's doing
    assert {code for code, _ in answers} <= {200, 400, 404, 409, 422}, answers
    rig.assert_serving()


def test_socket_and_fifo_as_the_submitted_path(rig):
    os.mkfifo(rig.ws / "output" / "pipe")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(rig.ws / "output" / "sock"))
    try:
        for name in ("pipe", "sock"):
            code, body = rig.post(f"output/{name}", timeout=20)
            assert code == 400 and "not a folder" in body["error"], body
    finally:
        listener.close()


def test_link_cycle_is_bounded(rig):
    folder = rig.model("m")
    (folder / "again").symlink_to(".")
    (folder / "up").symlink_to("../m")
    started = time.monotonic()
    code, body = rig.post("output/m", timeout=60)
    assert code == 413 and ("deep" in body["error"] or "files and folders" in body["error"])
    assert time.monotonic() - started < 30 and not rig.store_files()


def test_links_inside_the_workspace_still_work(rig):
    """What an honest agent does: a tokenizer file linked from base_model/, the submitted
    path itself a link to a checkpoint."""
    folder = rig.model("ckpt-3")
    shutil.copy(rig.tiny / "tokenizer.json", rig.ws / "base_model" / "tokenizer.json")
    (folder / "tokenizer.json").unlink()
    (folder / "tokenizer.json").symlink_to("/workspace/base_model/tokenizer.json")
    (rig.ws / "output" / "best").symlink_to("ckpt-3")
    code, body = rig.post("/workspace/output/best")
    assert code == 200, body
    stored = rig.service.store / body["artifact_hash"] / "artifact" / "tokenizer.json"
    assert stored.is_file() and not stored.is_symlink()


def test_non_utf8_file_names_do_not_break_the_grader(rig):
    folder = rig.ws / "output" / "odd"
    folder.mkdir()
    (folder / os.fsdecode(b"w\xffe\xfe.txt")).write_text("x")
    code, body = rig.post("output/odd")
    assert code == 422 and "not a model" in body["error"]
    assert "\\xff" in body["error"] or "w" in body["error"]
    json.dumps(rig.ledger())  # the ledger stays valid JSON
