"""Materialising a submission (its configs parsed, an adapter matched and merged, the model
loaded and checked: ``a2rl.models.submission``) in a child process with a deadline and a memory
cap, so that what a submitted folder makes the libraries do cannot freeze or exhaust the grader
(issue #28, findings 7 and 8: a LoRA ``target_modules`` regex with catastrophic backtracking held
the grader's GIL past any evaluation deadline; a 26 MB config.json took the grader to 4.1 GB).

The child comes from a fork server started once per grader process with torch, transformers
and peft already imported (a fork from the grader itself would copy its serving threads' locks;
a fresh interpreter per submission would pay those imports every time). Past the deadline the
child is killed; its memory is capped with RLIMIT_DATA (heap and private mappings, what parsing
and loading allocate; the weights files it maps are not private) at what it has at the start
plus the cap. The grader gets only the result: the model folder to evaluate or the message of an
InvalidSubmission. These messages are made before the sealed split is touched.
"""

from __future__ import annotations

import contextlib
import errno
import multiprocessing
import os
import resource
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from a2rl.models.submission import InvalidSubmission, materialize_submission

GIB = 2**30
# modules the fork server imports once, so that each child starts with them
PRELOAD = ["a2rl.models.submission", "torch", "transformers", "peft"]
# what loading may take besides the model: the libraries' own allocations, a tokenizer, the
# meta-device skeleton the shapes are checked on
BASE_MEMORY_BYTES = 2 * GIB
# the model in float32 (twice a bf16 file) and, for an adapter, the base and the merged copy
WEIGHT_FACTOR = 6

_context = None
_context_lock = threading.Lock()


@dataclass(frozen=True)
class LoadLimits:
    seconds: float
    memory_bytes: int


def load_limits(base_model: Path, seconds: float) -> LoadLimits:
    """Limits that an honest submission of ``base_model``'s size stays well within."""
    weights = sum(p.stat().st_size for p in Path(base_model).iterdir()
                  if p.is_file() and p.suffix in (".safetensors", ".bin"))
    return LoadLimits(seconds, BASE_MEMORY_BYTES + WEIGHT_FACTOR * weights)


def materialize_limited(artifact: Path, base_model: Path, dest: Path,
                        limits: Optional[LoadLimits]) -> Path:
    """``materialize_submission`` in a child under ``limits`` (None: in this process, for
    callers that trust the folder). Past the deadline, out of memory or dead, the submission is
    invalid; a missing base model is still FileNotFoundError."""
    if limits is None:
        return materialize_submission(artifact, base_model, dest)
    receive, send = fork_server().Pipe(duplex=False)
    child = fork_server().Process(target=_materialize_in_child, daemon=True,
                                  args=(send, str(artifact), str(base_model), str(dest),
                                        limits.memory_bytes))
    with main_not_reimported():
        child.start()
    send.close()
    try:
        if not receive.poll(limits.seconds):
            raise InvalidSubmission(f"loading the submission took longer than "
                                    f"{limits.seconds:g} s; it was stopped")
        kind, value = receive.recv()
    except EOFError:  # it died before answering: killed by the kernel, or crashed
        child.join()
        raise InvalidSubmission(died(child.exitcode, limits)) from None
    finally:
        if child.is_alive():
            child.kill()
        child.join()
        receive.close()
    if kind == "missing_base":
        raise FileNotFoundError(value)
    if kind == "invalid":
        raise InvalidSubmission(value)
    return Path(value)


@contextlib.contextmanager
def main_not_reimported() -> Iterator[None]:
    """While a child is started, no ``__file__`` on ``__main__``: multiprocessing would have the
    child import the parent's main script again by its path, and a script that only runs where
    it was started (a Snakemake job's, which reads a global Snakemake sets) fails there. The
    child needs nothing of it: its function lives in this module."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if path is None or getattr(main, "__spec__", None) is not None:
        yield  # no script, or a module run with -m: imported by name, behind its main guard
        return
    del main.__file__
    try:
        yield
    finally:
        main.__file__ = path


def died(exitcode: Optional[int], limits: LoadLimits) -> str:
    return (f"the process loading the submission died (exit {exitcode}) within a memory cap "
            f"of {limits.memory_bytes / GIB:.1f} GiB; a model of the base model's size loads "
            "well within it")


def fork_server():
    """The multiprocessing context of this process's fork server (started on first use)."""
    global _context
    with _context_lock:
        if _context is None:
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(PRELOAD)
            _context = context
        return _context


def _materialize_in_child(send, artifact: str, base_model: str, dest: str,
                          memory_bytes: int) -> None:
    cap_private_memory(memory_bytes)
    try:
        result = ("ok", str(materialize_submission(Path(artifact), Path(base_model),
                                                   Path(dest))))
    except InvalidSubmission as err:
        result = ("invalid", over_cap(memory_bytes) if ran_out_of_memory(err) else str(err))
    except FileNotFoundError as err:
        result = ("missing_base", str(err))
    except MemoryError:
        result = ("invalid", over_cap(memory_bytes))
    send.send(result)
    send.close()


def over_cap(memory_bytes: int) -> str:
    return (f"loading the submission needed more than the memory cap of "
            f"{memory_bytes / GIB:.1f} GiB")


def ran_out_of_memory(err: BaseException) -> bool:
    """Whether ``err`` came from an allocation the cap refused. Which error that is depends on
    the allocator and the kernel: Python's MemoryError, or a library's own (safetensors maps
    its file and reports the refused mmap as RuntimeError "Cannot allocate memory (12)", which
    submission.py wraps as any other loading error)."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, MemoryError) or getattr(err, "errno", None) == errno.ENOMEM:
            return True
        if os.strerror(errno.ENOMEM) in str(err):
            return True
        err = err.__cause__ or err.__context__
    return False


def cap_private_memory(extra_bytes: int) -> None:
    """RLIMIT_DATA at this process's present private memory plus ``extra_bytes``."""
    resource.setrlimit(resource.RLIMIT_DATA, (vm_data() + extra_bytes,) * 2)


def vm_data() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmData:"):
            return int(line.split()[1]) * 1024
    return 0

