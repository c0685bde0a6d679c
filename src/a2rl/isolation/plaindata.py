"""Plain data across a process boundary, types kept: the only way values cross between a
HumanEval candidate and its tests (``a2rl.isolation.codeexec``).

Plain data is None, bool, int, float, complex, str, bytes, and list, tuple, set, frozenset and
dict of plain data. ``encode`` turns a value into JSON text and refuses anything else (and
subclasses: an ``int`` whose ``__eq__`` lies is not an int); ``decode`` turns text back into
the same value and refuses any text ``encode`` would not write, so whatever a hostile sender
writes, the receiver gets plain data built by this module or an error. Scalars are JSON scalars
(Python's json keeps int and float apart and writes nan and infinities as NaN/Infinity);
everything else is a one-key object naming its type: ``{"tuple": [...]}``,
``{"dict": [[k, v], ...]}``, ``{"complex": [re, im]}``, ``{"bytes": "<hex>"}``.

``write_frame`` / ``read_frame`` carry one text over a pipe (an 8-byte length, then the
bytes), with an optional deadline and a size limit on what is read.

This file must stay standard-library only and self-contained: the sandboxed processes of
``a2rl.isolation.codeexec`` run its source text as it is.
"""

import json
import os
import select
import time

MAX_DEPTH = 100  # nesting levels; deeper values are refused (no data in a unit test is deeper)
_SCALARS = (type(None), bool, int, float, str)
_SEQUENCES = {list: "list", tuple: "tuple", set: "set", frozenset: "frozenset"}
_BUILD = {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}


class NotPlainData(ValueError):
    """A value (or a text) that is not plain data."""


def _to_json(value, depth):
    if depth > MAX_DEPTH:
        raise NotPlainData(f"nested deeper than {MAX_DEPTH} levels")
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind in _SEQUENCES:
        return {_SEQUENCES[kind]: [_to_json(v, depth + 1) for v in value]}
    if kind is dict:
        return {"dict": [[_to_json(k, depth + 1), _to_json(v, depth + 1)]
                         for k, v in value.items()]}
    if kind is complex:
        return {"complex": [value.real, value.imag]}
    if kind is bytes:
        return {"bytes": value.hex()}
    raise NotPlainData(f"not plain data: {kind.__name__}")


def encode(value):
    """JSON text of a plain-data value; NotPlainData for anything else."""
    try:
        return json.dumps(_to_json(value, 0), ensure_ascii=True)
    except (ValueError, RecursionError) as err:  # e.g. an int past the str conversion limit
        if isinstance(err, NotPlainData):
            raise
        raise NotPlainData(f"cannot encode: {err}") from None


def _from_json(node, depth):
    if depth > MAX_DEPTH:
        raise NotPlainData(f"nested deeper than {MAX_DEPTH} levels")
    if type(node) in _SCALARS:
        return node
    if type(node) is not dict or len(node) != 1:
        raise NotPlainData("malformed plain-data text")
    (tag, body), = node.items()
    if tag in _BUILD and type(body) is list:
        return _BUILD[tag](_from_json(v, depth + 1) for v in body)
    if tag == "dict" and type(body) is list and all(type(p) is list and len(p) == 2
                                                    for p in body):
        return {_from_json(k, depth + 1): _from_json(v, depth + 1) for k, v in body}
    if tag == "complex" and type(body) is list and len(body) == 2 \
            and all(type(x) is float for x in body):
        return complex(body[0], body[1])
    if tag == "bytes" and type(body) is str:
        return bytes.fromhex(body)
    raise NotPlainData(f"malformed plain-data text (tag {tag!r})")


def decode(text):
    """The value ``encode`` wrote as ``text``; NotPlainData for any other text."""
    try:
        return _from_json(json.loads(text), 0)
    except NotPlainData:
        raise
    except (ValueError, TypeError, RecursionError) as err:  # bad JSON, unhashable keys
        raise NotPlainData(f"malformed plain-data text: {type(err).__name__}") from None


# ---- frames over pipes --------------------------------------------------------------------------

HEADER_BYTES = 8


def _wait(fd, for_write, deadline):
    """Block until ``fd`` is ready; TimeoutError once ``deadline`` (time.monotonic) passes."""
    if deadline is None:
        return
    left = deadline - time.monotonic()
    ready = select.select([], [fd], [], max(0.0, left)) if for_write else \
        select.select([fd], [], [], max(0.0, left))
    if not any(ready):
        raise TimeoutError("no answer in time")


def write_frame(fd, text, deadline=None):
    """Send ``text`` as one frame. With a deadline, ``fd`` must be non-blocking."""
    data = memoryview(len(text).to_bytes(HEADER_BYTES, "big") + text.encode("ascii"))
    while data:
        _wait(fd, True, deadline)
        try:
            data = data[os.write(fd, data):]
        except BlockingIOError:
            continue


def _read_exactly(fd, size, deadline):
    chunks, left = [], size
    while left:
        _wait(fd, False, deadline)
        try:
            chunk = os.read(fd, min(left, 1 << 20))
        except BlockingIOError:
            continue
        if not chunk:
            return None if left == size else b"".join(chunks)
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_frame(fd, limit, deadline=None):
    """The next frame's text; None when the writer closed the pipe before a frame began.
    NotPlainData for a frame longer than ``limit`` bytes, cut short, or not ASCII."""
    header = _read_exactly(fd, HEADER_BYTES, deadline)
    if header is None:
        return None
    size = int.from_bytes(header, "big") if len(header) == HEADER_BYTES else -1
    if not 0 <= size <= limit:
        raise NotPlainData(f"a frame of {size} bytes (the limit is {limit})")
    body = _read_exactly(fd, size, deadline) if size else b""
    if body is None or len(body) != size:
        raise NotPlainData("a frame cut short")
    try:
        return body.decode("ascii")
    except UnicodeDecodeError:
        raise NotPlainData("a frame that is not ASCII") from None
