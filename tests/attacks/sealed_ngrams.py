"""What of a task's sealed split could be read back from a text (issue #28, finding 1): every
run of 12 words of every text of every sealed item (a text of 4 to 11 words whole), searched for
in what the agent or the report can see."""

from __future__ import annotations

import re
from pathlib import Path

from a2rl.common.files import iter_jsonl

NGRAM = 12


def words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def sealed_runs(split: Path) -> set[tuple[str, ...]]:
    """Every 12-word run of every text of every sealed item (a shorter text whole)."""
    runs: set[tuple[str, ...]] = set()
    for item in iter_jsonl(split):
        for text in texts(item):
            found = words(text)
            if len(found) >= 4:
                runs |= {tuple(found[i:i + NGRAM])
                         for i in range(max(1, len(found) - NGRAM + 1))}
    return runs


def texts(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in texts(v)]
    if isinstance(value, list):
        return [t for v in value for t in texts(v)]
    return []


def leaked(runs: set[tuple[str, ...]], text: str) -> list[str]:
    found = words(text)
    seen = {tuple(found[i:i + n]) for n in {len(r) for r in runs}
            for i in range(len(found) - n + 1)}
    return [" ".join(r) for r in runs & seen]


def public_part(runs: set[tuple[str, ...]], texts_seen: list[str]) -> set[tuple[str, ...]]:
    """The runs that also occur in ``texts_seen`` (the agent's own data and instructions: a
    prompt template every item shares is not a leak)."""
    return {tuple(hit.split()) for text in texts_seen for hit in leaked(runs, text)}
