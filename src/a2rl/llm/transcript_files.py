"""Taking an agent CLI's transcript out of the run's agent folder once the agent has exited
(``take_transcript``), or reading it as it grows while the agent runs (``transcript_text``, for
the live view: the folder is left as it is).

The agent folder is the agent's own (mounted read-write into the sandbox), so what is in it is
read through ``a2rl.common.beneath``: a transcript the agent swapped for a link (to the sealed
split, say) or for a FIFO is refused instead of copied or waited on, and one over
``MAX_TRANSCRIPT_BYTES`` or sparse is refused too. A refusal is logged with the file's name only
and the run then has no transcript (run.json's ``transcript`` is null).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable, Optional

from a2rl.common.beneath import Refused, copy_file, read_file
from a2rl.common.files import write_text_atomic

MAX_TRANSCRIPT_BYTES = 512 * 2**20  # a day of stream-json is far less

log = logging.getLogger(__name__)


def take_transcript(agent_dir: Path, name: str, dest: Path,
                    convert: Optional[Callable[[bytes], str]] = None) -> bool:
    """Put ``agent_dir/name`` at ``dest`` (as it is, or as ``convert`` turns its bytes into
    JSON lines) and remove it from the agent folder; False when there is none or it was
    refused (then ``dest`` is not written)."""
    try:
        if convert is None:
            copy_file(agent_dir, name, dest, MAX_TRANSCRIPT_BYTES)
        else:
            write_text_atomic(dest, convert(read_file(agent_dir, name, MAX_TRANSCRIPT_BYTES)))
    except Refused as err:
        if err.status != 404:
            log.warning("the agent's transcript was not collected: %s", err)
        return False
    except ValueError as err:  # not the format its CLI writes
        log.warning("the agent's transcript %s could not be read: %s", name, err)
        return False
    (Path(agent_dir) / name).unlink(missing_ok=True)
    return True


def transcript_text(agent_dir: Path, name: str,
                    convert: Optional[Callable[[bytes], str]] = None) -> Optional[str]:
    """``agent_dir/name`` as JSON lines (as it is, or as ``convert`` turns its bytes into
    them), read through the same checks as ``take_transcript`` and left in place; None when
    there is none yet or it was refused or could not be read (a line the CLI is writing may
    be cut: readers skip a torn line)."""
    try:
        raw = read_file(agent_dir, name, MAX_TRANSCRIPT_BYTES)
        return convert(raw) if convert else raw.decode("utf-8", errors="replace")
    except Refused as err:
        if err.status != 404:
            log.warning("the agent's transcript was not read: %s", err)
    except ValueError as err:
        log.warning("the agent's transcript %s could not be read: %s", name, err)
    return None
