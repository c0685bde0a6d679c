"""Reading a tree another party controls (the agent's workspace) from the host, so that its
links cannot lead out and its special files cannot stall the reader.

Every path is opened relative to a directory descriptor with openat2(2) and RESOLVE_BENEATH |
RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS (one component at a time with O_NOFOLLOW where the
kernel or a seccomp filter refuses openat2): a folder swapped for a link between a check and a
read makes the read fail instead of following the link. Files are opened O_NONBLOCK and checked
with fstat on the open descriptor; only regular files and folders are used (a FIFO, device or
socket is refused by its lstat before any open, and again by fstat if it was swapped in).
``TreeReader`` caps the bytes, entries, depth and seconds of one walk. Every message names the
agent's relative path only, never a host path.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO, Iterator, Optional

SYS_OPENAT2 = 437  # one number on every architecture (Linux 5.6 added it after the unification)
RESOLVE_NO_MAGICLINKS, RESOLVE_NO_SYMLINKS, RESOLVE_BENEATH = 0x02, 0x04, 0x08
STRICT_RESOLVE = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS
READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
CHUNK = 1 << 20
SPARSE_MIN_BYTES = 1 << 20  # smaller files are never called sparse (filesystems round blocks)


class Refused(Exception):
    """A read the tree's owner made impossible or unsafe; ``status`` is the HTTP code a server
    answers with. The message names only the relative path inside the tree."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Limits:
    """What one walk may cost: bytes of all files, bytes of one file (None: ``max_bytes``),
    entries listed, folder depth, bytes of an entry's path below the walk's root, seconds; a
    file over ``SPARSE_MIN_BYTES`` with fewer allocated bytes than ``min_allocated`` of its
    apparent size is refused as sparse. (The path cap keeps a copy's destination under
    PATH_MAX: 32 folders of 255-byte names would pass the depth cap and break the copy.)"""

    max_bytes: int
    max_file_bytes: Optional[int] = None
    max_entries: int = 100_000
    max_depth: int = 32
    max_path_bytes: int = 1024
    seconds: float = 600.0
    min_allocated: float = 0.5


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64),
                ("resolve", ctypes.c_uint64)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_openat2_works: Optional[bool] = None  # None until the first call tells


def shown(rel: str) -> str:
    """A relative path fit for a message: bytes that are not UTF-8 as \\xNN escapes."""
    return os.fsencode(rel).decode("utf-8", "backslashreplace")


def _openat2(dirfd: int, path: str, flags: int) -> int:
    how = _OpenHow(flags, 0, STRICT_RESOLVE)
    for _ in range(16):  # EAGAIN: a concurrent rename; the kernel asks to retry
        fd = _libc.syscall(ctypes.c_long(SYS_OPENAT2), ctypes.c_int(dirfd),
                           ctypes.c_char_p(os.fsencode(path)), ctypes.byref(how),
                           ctypes.c_size_t(ctypes.sizeof(how)))
        if fd >= 0:
            return fd
        err = ctypes.get_errno()
        if err not in (errno.EAGAIN, errno.EINTR):
            raise OSError(err, os.strerror(err))
    raise OSError(errno.EAGAIN, os.strerror(errno.EAGAIN))


def _open_by_components(dirfd: int, path: str, flags: int) -> int:
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise OSError(errno.EXDEV, "path leaves the tree")
    current = dirfd
    try:
        for part in parts[:-1]:
            nxt = os.open(part, DIR_FLAGS, dir_fd=current)
            if current != dirfd:
                os.close(current)
            current = nxt
        return os.open(parts[-1], flags | os.O_NOFOLLOW, dir_fd=current)
    finally:
        if current != dirfd:
            os.close(current)


def open_beneath(dirfd: int, path: str, flags: int) -> int:
    """``path`` opened below the folder ``dirfd`` without following any link (ELOOP when a
    component is one, EXDEV when it would leave the folder)."""
    global _openat2_works
    if _openat2_works is not False:
        try:
            fd = _openat2(dirfd, path, flags)
            _openat2_works = True
            return fd
        except OSError as err:
            if _openat2_works or err.errno not in (errno.ENOSYS, errno.EPERM):
                raise
            _openat2_works = False  # an old kernel, or a seccomp filter that forbids it
    return _open_by_components(dirfd, path, flags)


def read_link(dirfd: int, name: str, rel: str) -> str:
    """The target of the link ``name`` in the folder ``dirfd`` (its text; nothing followed)."""
    try:
        return os.readlink(name, dir_fd=dirfd)
    except OSError as err:
        raise refusal(err, rel) from None


def kind_of(mode: int) -> str:
    for test, name in ((stat.S_ISREG, "file"), (stat.S_ISDIR, "folder"),
                       (stat.S_ISLNK, "symbolic link"), (stat.S_ISFIFO, "FIFO (named pipe)"),
                       (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "character device"),
                       (stat.S_ISBLK, "block device")):
        if test(mode):
            return name
    return "special file"


def refusal(err: OSError, rel: str) -> Refused:
    """The Refused for an OSError met while opening ``rel``."""
    where = shown(rel)
    if err.errno == errno.ENOENT:
        return Refused(f"{where} does not exist", 404)
    if err.errno in (errno.ELOOP, errno.EXDEV):
        return Refused(f"{where} is or became a symbolic link while it was read (links are "
                       "only followed inside the workspace, and not while they change)", 403)
    if err.errno == errno.EINVAL:  # readlink on what stopped being a link
        return Refused(f"{where} changed while it was read", 409)
    if err.errno == errno.ENOTDIR:
        return Refused(f"{where} is not a folder", 400)
    if err.errno in (errno.EACCES, errno.EPERM):
        return Refused(f"{where} cannot be read (permission denied)", 403)
    return Refused(f"{where} cannot be read ({errno.errorcode.get(err.errno, err.errno)})", 400)


class TreeReader:
    """One capped walk: every entry listed, byte read and second spent counts against
    ``limits``; going over raises Refused (413 for size, 408 for time)."""

    def __init__(self, limits: Limits):
        self.limits = limits
        self.deadline = time.monotonic() + limits.seconds
        self.bytes = 0
        self.entries = 0

    def check_time(self, rel: str) -> None:
        if time.monotonic() > self.deadline:
            raise Refused(f"reading took longer than {self.limits.seconds:g} s "
                          f"(stopped at {shown(rel)})", 408)

    def listing(self, dirfd: int, rel: str, depth: int) -> Iterator[tuple[str, os.stat_result]]:
        """(name, lstat) of each entry of the open folder ``dirfd`` (at ``rel``), sorted."""
        if depth > self.limits.max_depth:
            raise Refused(f"{shown(rel)} is nested more than {self.limits.max_depth} folders "
                          "deep", 413)
        names = []
        try:
            with os.scandir(dirfd) as it:
                for entry in it:
                    self.entries += 1
                    if self.entries > self.limits.max_entries:
                        raise Refused(f"more than {self.limits.max_entries} files and folders "
                                      f"(stopped in {shown(rel) or '.'})", 413)
                    if len(os.fsencode(os.path.join(rel, entry.name))) > \
                            self.limits.max_path_bytes:
                        raise Refused(f"a path in {shown(rel) or '.'} is longer than "
                                      f"{self.limits.max_path_bytes} bytes", 413)
                    names.append(entry.name)
        except OSError as err:
            raise refusal(err, rel) from None
        for name in sorted(names):
            self.check_time(rel)
            try:
                info = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
            except FileNotFoundError:
                continue  # removed meanwhile
            except OSError as err:
                raise refusal(err, f"{rel}/{name}") from None
            yield name, info

    def open_entry(self, dirfd: int, name: str, rel: str, mode: int) -> tuple[int, os.stat_result]:
        """Open a folder or regular file (``mode`` from its lstat) without following a link
        and without blocking; fstat must agree with what lstat said."""
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            raise Refused(f"{shown(rel)} is a {kind_of(mode)}; only files and folders are read")
        try:
            fd = open_beneath(dirfd, name, READ_FLAGS)
        except OSError as err:
            raise refusal(err, rel) from None
        info = os.fstat(fd)
        if stat.S_IFMT(info.st_mode) != stat.S_IFMT(mode):
            os.close(fd)
            raise Refused(f"{shown(rel)} changed from a {kind_of(mode)} to a "
                          f"{kind_of(info.st_mode)} while it was read", 409)
        if stat.S_ISREG(mode):
            self.check_size(info, rel)
        return fd, info

    def check_size(self, info: os.stat_result, rel: str) -> None:
        cap = self.limits.max_file_bytes
        if cap is not None and info.st_size > cap:
            raise Refused(f"{shown(rel)} is larger than {cap} bytes", 413)
        if self.bytes + info.st_size > self.limits.max_bytes:
            raise Refused(f"the files are larger than the limit of {self.limits.max_bytes} bytes "
                          f"(reached at {shown(rel)})", 413)
        allocated = info.st_blocks * 512
        if info.st_size > SPARSE_MIN_BYTES and allocated < info.st_size * self.limits.min_allocated:
            raise Refused(f"{shown(rel)} is a sparse file ({info.st_size} bytes long, "
                          f"{allocated} bytes on disk); write the data out in full", 413)

    def copy(self, fd: int, info: os.stat_result, rel: str, out: BinaryIO) -> int:
        """Copy the open regular file to ``out``, no more than its fstat size (a file growing
        meanwhile is refused); returns the bytes copied."""
        done = 0
        while True:
            self.check_time(rel)
            chunk = os.read(fd, min(CHUNK, info.st_size - done + 1))
            if not chunk:
                break
            done += len(chunk)
            if done > info.st_size:
                raise Refused(f"{shown(rel)} grew while it was read", 409)
            out.write(chunk)
        self.bytes += done
        return done

    def read(self, fd: int, info: os.stat_result, rel: str) -> bytes:
        import io

        buffer = io.BytesIO()
        self.copy(fd, info, rel, buffer)
        return buffer.getvalue()


# ------------------------------------------------------- whole files and walks for the readers


def open_folder(path: Path) -> int:
    """A descriptor of the harness's own folder ``path`` (a run folder, a workspace): the root
    every read of the agent's files below it starts from."""
    try:
        return os.open(path, DIR_FLAGS)
    except OSError as err:
        raise refusal(err, Path(path).name) from None


def open_file(dirfd: int, rel: str) -> tuple[int, os.stat_result]:
    """The regular file ``rel`` below the folder ``dirfd``, opened without following a link
    and without blocking (a FIFO, socket or device is refused before it is opened, by its
    lstat, and after, by fstat)."""
    try:
        before = os.stat(rel, dir_fd=dirfd, follow_symlinks=False)
        if not stat.S_ISREG(before.st_mode):
            raise Refused(f"{shown(rel)} is a {kind_of(before.st_mode)}; only files are read")
        fd = open_beneath(dirfd, rel, READ_FLAGS)
    except OSError as err:
        raise refusal(err, rel) from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise Refused(f"{shown(rel)} became a {kind_of(info.st_mode)} while it was read", 409)
    return fd, info


def open_file_below(root: Path, rel: str) -> tuple[int, os.stat_result]:
    """``open_file`` of ``rel`` below the harness's folder ``root``."""
    dirfd = open_folder(root)
    try:
        return open_file(dirfd, rel)
    finally:
        os.close(dirfd)


def read_file(root: Path, rel: str, max_bytes: int, tail: bool = False) -> bytes:
    """The bytes of the regular file ``rel`` below the folder ``root``; a file over
    ``max_bytes`` is refused (413), or with ``tail`` its last ``max_bytes`` bytes are read."""
    fd, info = open_file_below(root, rel)
    with os.fdopen(fd, "rb") as fh:
        if info.st_size > max_bytes:
            if not tail:
                raise Refused(f"{shown(rel)} is larger than {max_bytes} bytes", 413)
            fh.seek(info.st_size - max_bytes)
        return fh.read(max_bytes)


def copy_file(root: Path, rel: str, dest: Path, max_bytes: int) -> int:
    """Copy the regular file ``rel`` below the folder ``root`` to ``dest`` (replaced as a
    whole, never written through a link); returns its bytes. Refused when it is not a regular
    file, is over ``max_bytes`` or is sparse."""
    reader = TreeReader(Limits(max_bytes=max_bytes))
    fd, info = open_file_below(root, rel)
    dest = Path(dest)
    partial = dest.with_name(f".{dest.name}.partial")
    try:
        reader.check_size(info, rel)
        with open(partial, "wb") as out:
            done = reader.copy(fd, info, rel, out)
        os.replace(partial, dest)
        return done
    finally:
        os.close(fd)
        partial.unlink(missing_ok=True)


@dataclass
class Walked:
    """A regular file a ``walk_files`` reached: its path relative to the walk's root (bytes
    that are not UTF-8 as surrogate escapes; ``""`` when the root is the file), its fstat and
    the open file, read-only, valid until the walk moves on."""

    rel: str
    info: os.stat_result
    file: BinaryIO


def walk_files(root: Path, limits: Limits, left_out: list[tuple[str, str]],
               skip_top: frozenset[str] = frozenset()) -> Iterator[Walked]:
    """Every regular file below ``root`` (or ``root`` itself when it is a file), sorted, each
    opened as ``read_file`` opens one; a link (never followed), special file, sparse file or
    unreadable entry is appended to ``left_out`` as (relative path, reason) and skipped, and
    reaching ``limits`` (entries, depth, seconds) ends the walk with a note there. Top-level
    entries named in ``skip_top`` are not read."""
    root = Path(root)
    reader = TreeReader(replace(limits, max_bytes=2**62, max_file_bytes=None))
    try:
        parent = open_folder(root.parent)
    except Refused as err:
        left_out.append((".", str(err)))
        return
    try:
        try:
            info = os.stat(root.name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            return
        yield from _walk_entry(reader, parent, root.name, "", info, left_out, skip_top, -1)
    except Refused as err:  # the walk's own limits: what was read so far stands
        left_out.append((".", str(err)))
    finally:
        os.close(parent)


def _walk_entry(reader: TreeReader, dirfd: int, name: str, rel: str, info: os.stat_result,
                left_out: list[tuple[str, str]], skip_top: frozenset[str],
                depth: int) -> Iterator[Walked]:
    where = rel or "."
    if stat.S_ISLNK(info.st_mode):
        left_out.append((shown(where), "a symbolic link (not followed)"))
        return
    try:
        fd, opened = reader.open_entry(dirfd, name, where, info.st_mode)
    except Refused as err:
        left_out.append((shown(where), str(err)))
        return
    if stat.S_ISREG(opened.st_mode):
        with os.fdopen(fd, "rb") as fh:
            yield Walked(rel, opened, fh)
        return
    try:
        for child, child_info in reader.listing(fd, where, depth + 1):
            if depth < 0 and child in skip_top:
                continue
            yield from _walk_entry(reader, fd, child, f"{rel}/{child}" if rel else child,
                                   child_info, left_out, skip_top, depth + 1)
    finally:
        os.close(fd)
