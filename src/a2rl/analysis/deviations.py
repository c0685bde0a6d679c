"""Where each task's deviations row is: the leaderboards link a task id to its section of
docs/deviations.md (how the task differs from its benchmark's standard and from the paper's
reference code, and by how much).

The document is the one source: each section (a ``## `` heading) names its task ids on a line
``Task ids: `a`, `b` ...``, and the section's anchor is its heading's GitHub slug. Nothing here
names a task, so a plugin's task without a row is simply shown without a link, and a task gains
one when its row is written.

The reports are static files under ``results/<grid>/``, opened from disk or from a checkout
(GitHub renders leaderboard.md), so a link is a relative path from the page's folder to the
checkout's docs/deviations.md: it resolves wherever the checkout is, with no server and no URL
to keep. Without the document (an installed package without its checkout) there are no links.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import quote

DOC = Path(__file__).resolve().parents[3] / "docs" / "deviations.md"
_HEADING = re.compile(r"^## +(.+?)\s*$")
_TASK_IDS = re.compile(r"^Task ids?:(.*)$")
_TICKED = re.compile(r"`([^`\s]+)`")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but ``-`` and ``_`` dropped,
    spaces as ``-`` (``Across tasks`` -> ``across-tasks``)."""
    kept = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return kept.replace(" ", "-")


def anchors(doc: Path = DOC) -> dict[str, str]:
    """``{task id: anchor}`` from the document's ``Task ids:`` lines; empty without it."""
    try:
        text = doc.read_text(encoding="utf-8")
    except OSError:
        return {}
    found: dict[str, str] = {}
    section = None
    for line in text.splitlines():
        if heading := _HEADING.match(line):
            section = slug(heading.group(1))
        elif section and (ids := _TASK_IDS.match(line)):
            for task in _TICKED.findall(ids.group(1)):
                found.setdefault(task, section)
    return found


def task_links(tasks: list[str] | set[str], page_dir: Path, doc: Path = DOC) -> dict[str, str]:
    """``{task id: href}`` from a page in ``page_dir`` to each task's row, for the tasks that
    have one (relative, URL-quoted)."""
    table = anchors(doc)
    if not table:
        return {}
    rel = os.path.relpath(doc.resolve(), Path(page_dir).resolve())
    target = quote(Path(rel).as_posix())
    return {t: f"{target}#{table[t]}" for t in tasks if t in table}
