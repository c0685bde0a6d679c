"""Pipes to and from the processes of a code check, moved without ever blocking: each process
gets its job on stdin while its output and verdict pipes are read (``a2rl.isolation.codeexec``).
"""

from __future__ import annotations

import json
import os
import selectors
import time
from typing import IO


def job_bytes(job: dict) -> bytes:
    """A process's job as its stdin carries it (JSON; lone surrogates of program text kept)."""
    return json.dumps(job).encode("utf-8", "surrogatepass")


class Streams:
    """Feeds each process its job on stdin and reads the named pipes, keeping at most a limit
    of bytes of each (the rest is read and dropped, so no writer ever blocks on us)."""

    def __init__(self, writes: list[tuple[IO[bytes], bytes]],
                 reads: dict[str, tuple[IO[bytes] | int, int]]):
        self.writes = {pipe.fileno(): (pipe, memoryview(data)) for pipe, data in writes}
        self.names = {(src if isinstance(src, int) else src.fileno()): name
                      for name, (src, _) in reads.items()}
        self.limits = {name: limit for name, (_, limit) in reads.items()}
        self.data = {name: bytearray() for name in reads}
        self.truncated = {name: False for name in reads}
        for fd in [*self.writes, *self.names]:
            os.set_blocking(fd, False)

    def text(self, name: str) -> str:
        return self.data[name].decode("utf-8", "replace")

    def pump(self, until: str | None, deadline: float) -> bool:
        """Move bytes until the pipe ``until`` closes (None: every pipe) or ``deadline``
        passes; True when it closed in time."""
        sel = selectors.DefaultSelector()
        try:
            for fd in self.writes:
                sel.register(fd, selectors.EVENT_WRITE)
            for fd in self.names:
                sel.register(fd, selectors.EVENT_READ)
            while self.names and (until is None or until in self.names.values()):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                for key, _ in sel.select(timeout=left):
                    if key.fd in self.writes:
                        self._write(key.fd, sel)
                    else:
                        self._read(key.fd, sel)
            return True
        finally:
            sel.close()

    def _write(self, fd: int, sel: selectors.BaseSelector) -> None:
        pipe, data = self.writes[fd]
        try:
            data = data[os.write(fd, data[:65536]):]
        except BlockingIOError:
            return
        except BrokenPipeError:
            data = data[:0]
        self.writes[fd] = (pipe, data)
        if not data:
            sel.unregister(fd)
            del self.writes[fd]
            pipe.close()

    def _read(self, fd: int, sel: selectors.BaseSelector) -> None:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return
        name = self.names[fd]
        if not chunk:
            sel.unregister(fd)
            del self.names[fd]
            return
        keep = max(0, self.limits[name] - len(self.data[name]))
        self.data[name] += chunk[:keep]
        self.truncated[name] = self.truncated[name] or len(chunk) > keep
