"""The disk quota's parts (a2rl.isolation.quota) that the whole-cell attacks in
tests/attacks/test_disk_quota_attacks.py do not reach: the copy back of a loop disk, the loop
disk a killed harness left mounted, the watchdog's walk."""

from __future__ import annotations

import functools
import os
import stat
from pathlib import Path
from types import SimpleNamespace

import pytest

from a2rl.isolation import quota
from a2rl.isolation.quota import DiskQuota, LoopDisk, LoopUnavailable, measure
from a2rl.pipeline.runner import fresh_run_dir

MIB = 2**20


def nothing(*args, **kwargs) -> None:
    pass


@functools.cache
def loop_disk_works() -> bool:
    """Whether this machine lets the harness mount a loop disk (root, loop devices)."""
    import tempfile

    if not quota.loop_possible():
        return False
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "f"
        folder.mkdir()
        try:
            LoopDisk(DiskQuota(16 * MIB, 100), [folder], Path(tmp), nothing).start().release()
        except LoopUnavailable:
            return False
    return True


needs_loop = pytest.mark.skipif(not loop_disk_works(), reason="no loop disk here (not root, "
                                "or no loop devices)")


def mounted_below(root: Path) -> list[str]:
    return [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()
            if line.split()[4].startswith(str(root) + "/")]


@needs_loop
def test_loop_disk_copies_the_agents_files_back_as_they_are(tmp_path):
    """After the run the folder holds what the agent left on its disk: links as links (never
    what they point to), hard links as one file, a FIFO as a FIFO, owners and modes, a deep
    tree; the image is gone and nothing stays mounted."""
    folder = tmp_path / "workspace" / "output"
    folder.mkdir(parents=True)
    (folder / "before.txt").write_text("made before the disk")
    disk = LoopDisk(DiskQuota(32 * MIB, 500), [folder], tmp_path, nothing).start()
    assert mounted_below(tmp_path) and (folder / "before.txt").read_text() == "made before the disk"
    (folder / "model.bin").write_bytes(b"\1" * 4096)
    os.link(folder / "model.bin", folder / "model-link.bin")
    os.symlink("/etc/passwd", folder / "passwd")
    os.mkfifo(folder / "fifo")
    deep = folder.joinpath(*["d"] * 40)
    deep.mkdir(parents=True)
    (deep / "leaf").write_text("leaf")
    os.chown(folder / "model.bin", 1_800_000_123, 1_800_000_123)
    os.chmod(folder / "model.bin", 0o640)

    disk.release()

    assert not mounted_below(tmp_path)
    assert not (tmp_path / quota.IMAGE).exists() and not (tmp_path / quota.MOUNT_POINT).exists()
    assert (folder / "before.txt").read_text() == "made before the disk"
    info = (folder / "model.bin").stat()
    assert (info.st_uid, stat.S_IMODE(info.st_mode), info.st_nlink) == (1_800_000_123, 0o640, 2)
    assert os.readlink(folder / "passwd") == "/etc/passwd"
    assert stat.S_ISFIFO((folder / "fifo").lstat().st_mode)
    assert (deep / "leaf").read_text() == "leaf"


@needs_loop
def test_a_loop_disk_a_killed_harness_left_mounted_is_unmounted_before_the_run_is_cleared(
        tmp_path):
    """A harness killed during a run leaves the agent's loop disk mounted in the run folder;
    the next attempt of the cell unmounts it before it clears the folder."""
    run_root = tmp_path / "seed0"
    folder = run_root / "workspace" / "code"
    folder.mkdir(parents=True)
    LoopDisk(DiskQuota(16 * MIB, 100), [folder], run_root, nothing).start()  # never released
    (folder / "train.py").write_text("print(1)")
    assert mounted_below(run_root)

    fresh_run_dir(SimpleNamespace(root=run_root))

    assert not mounted_below(run_root) and list(run_root.iterdir()) == []


def test_the_watchdogs_walk_stops_once_past_the_quota(tmp_path):
    """The walk counts every entry below the folders (links not followed) and stops at the
    first past the limit, however many a folder holds."""
    for i in range(300):
        (tmp_path / f"f{i}").write_bytes(b"x" * 5000)
    (tmp_path / "sub").mkdir()
    os.symlink("/usr", tmp_path / "sub" / "usr")

    whole, unreadable = measure([tmp_path])
    assert whole.files == 302 and whole.bytes >= 300 * 4096 and not unreadable
    cut, _ = measure([tmp_path], DiskQuota(10**12, 50))
    assert cut.files == 51
