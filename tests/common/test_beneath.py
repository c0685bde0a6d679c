"""Opening below a folder without following links, with openat2 and with the per-component
O_NOFOLLOW fallback used where the kernel or a seccomp filter refuses openat2."""

from __future__ import annotations

import errno
import os

import pytest

from a2rl.common import beneath
from a2rl.common.beneath import READ_FLAGS, Limits, Refused, TreeReader, open_beneath


@pytest.fixture(params=["openat2", "components"])
def mode(request, monkeypatch):
    monkeypatch.setattr(beneath, "_openat2_works", request.param == "openat2")
    return request.param


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "root"
    (root / "a").mkdir(parents=True)
    (root / "a" / "f").write_text("mine")
    (tmp_path / "secret").write_text("host")
    (root / "a" / "out").symlink_to(tmp_path)
    (root / "a" / "in").symlink_to("f")
    fd = os.open(root, os.O_PATH | os.O_DIRECTORY)
    yield fd
    os.close(fd)


def test_regular_path_opens(mode, tree):
    fd = open_beneath(tree, "a/f", READ_FLAGS)
    assert os.read(fd, 10) == b"mine"
    os.close(fd)


@pytest.mark.parametrize("path, code", [("a/out/secret", errno.ELOOP), ("a/in", errno.ELOOP),
                                        ("../secret", errno.EXDEV), ("a/../../secret",
                                                                      errno.EXDEV)])
def test_links_and_escapes_are_refused(mode, tree, path, code):
    with pytest.raises(OSError) as err:
        open_beneath(tree, path, READ_FLAGS)
    # O_DIRECTORY | O_NOFOLLOW on a link in the middle says ENOTDIR: refused all the same
    assert err.value.errno in ({code, errno.ENOTDIR} if mode == "components" else {code})


def test_fifo_is_refused_without_opening(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    reader = TreeReader(Limits(max_bytes=100))
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        (name, info), = reader.listing(fd, "x", 0)
        with pytest.raises(Refused, match="x/pipe is a FIFO"):
            reader.open_entry(fd, name, "x/pipe", info.st_mode)
    finally:
        os.close(fd)
