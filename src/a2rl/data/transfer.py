"""Downloading one file so that a half-written one is never taken for the real thing: bytes go
to ``<name>.part`` in the destination's folder, an interrupted transfer resumes with an HTTP
Range request (a server that ignores it sends the whole file, and the part starts over), the
finished part is checked (size, sha256) and only then renamed onto the destination. A part
that fails its check is deleted."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import time
from pathlib import Path

import httpx

from .manifest import DataError

log = logging.getLogger(__name__)

CHUNK = 1 << 20
# a Google Drive file id in the forms WebShop's setup.sh uses (drive.google.com/uc?id=ID)
DRIVE_ID = re.compile(r"^https://drive\.google\.com/uc\?(?:.*&)?id=([\w-]+)")
# Drive's download host; confirm=t skips the "cannot scan this file for viruses" page it puts
# before files over ~100 MB (what gdown answers that page with). gdown is not a dependency: it
# would enter both locks for this one URL shape.
DRIVE_DOWNLOAD = "https://drive.usercontent.google.com/download?id={id}&export=download&confirm=t"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def direct_url(url: str) -> str:
    """The URL that serves the bytes (a Drive share link becomes Drive's download URL)."""
    match = DRIVE_ID.match(url)
    return DRIVE_DOWNLOAD.format(id=match[1]) if match else url


def part_of(dest: Path) -> Path:
    return dest.with_name(dest.name + ".part")


def download(url: str, dest: Path, sha256: str | None, size: int | None,
             attempts: int = 4, timeout_s: float = 60.0) -> str:
    """Fetch ``url`` to ``dest`` (replaced only once checked); returns its sha256. A dropped
    connection resumes from what the part holds, up to ``attempts`` tries; a part that does
    not match ``sha256``/``size`` is deleted and a DataError says so."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = part_of(dest)
    source, drive = direct_url(url), DRIVE_ID.match(url) is not None
    for attempt in range(1, attempts + 1):
        try:
            _transfer(source, part, timeout_s, drive)
            break
        except (httpx.TransportError, _Incomplete) as err:
            if attempt == attempts:
                raise DataError(f"{url}: download interrupted {attempts} times ({err}); "
                                f"{part.stat().st_size if part.exists() else 0} bytes kept in "
                                f"{part}, run the fetch again to resume") from err
            log.warning("%s: %s; resuming (attempt %d of %d)", url, err, attempt + 1, attempts)
            time.sleep(min(2.0 ** attempt, 10.0) / 10)
    return verify_and_place(part, dest, sha256, size, url)


class _Incomplete(Exception):
    """The server closed the response before Content-Length bytes came."""


def _transfer(url: str, part: Path, timeout_s: float, drive: bool = False) -> None:
    have = part.stat().st_size if part.exists() else 0
    # identity: the bytes as stored (their checksum), never a compressed transfer of them
    headers = {"Accept-Encoding": "identity", **({"Range": f"bytes={have}-"} if have else {})}
    with httpx.Client(follow_redirects=True, timeout=timeout_s) as client, \
            client.stream("GET", url, headers=headers) as response:
        if response.status_code == 416 and have:  # the part already holds the whole file
            return
        if response.status_code >= 400:
            raise DataError(f"{url}: HTTP {response.status_code} {response.reason_phrase}")
        if drive and response.headers.get("content-type", "").startswith("text/html"):
            # Drive answers a quota, permission or scan problem with a page, status 200
            raise DataError(f"{url}: Google Drive sent a web page, not the file (download "
                            "quota exceeded or the file is no longer shared); try later or "
                            "use --from with a copy")
        resumed = response.status_code == 206 and _starts_at(response, have)
        if have and not resumed:
            log.info("%s: the server sent the whole file; starting over", url)
        expected = response.headers.get("content-length")
        got = 0
        with open(part, "ab" if resumed else "wb") as fh:
            # as the bytes arrive (no chunk size: a buffered chunk would be lost with the
            # connection, and the resume would start before it)
            for chunk in response.iter_raw():
                fh.write(chunk)
                got += len(chunk)
            fh.flush()
            os.fsync(fh.fileno())
        if expected is not None and got < int(expected):
            raise _Incomplete(f"{got} of {expected} bytes")


def _starts_at(response: httpx.Response, offset: int) -> bool:
    return response.headers.get("content-range", "").startswith(f"bytes {offset}-")


def verify_and_place(part: Path, dest: Path, sha256: str | None, size: int | None,
                     origin: str) -> str:
    """Check ``part`` against ``size`` and ``sha256`` and rename it onto ``dest``; a mismatch
    deletes the part and raises. Returns its sha256."""
    actual_size = part.stat().st_size
    digest = sha256_of(part)
    problem = None
    if size is not None and actual_size != size:
        problem = f"{actual_size} bytes, expected {size}"
    elif sha256 and digest != sha256:
        problem = f"sha256 {digest}, expected {sha256}"
    if problem:
        part.unlink()
        raise DataError(f"{origin}: {problem} (the manifest's checksum); nothing installed"
                        + (", the download was deleted" if origin.startswith("http") else ""))
    os.replace(part, dest)
    return digest
