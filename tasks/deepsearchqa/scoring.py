"""DeepSearchQA's outcome metrics, and the deterministic set matcher of the offline world.

A grade says, for each expected answer item, whether the response contains it, and lists the
response's excessive items (answers not expected). Both graders produce one: the LLM judge of
the real questions (``judge.py``, the official protocol) and ``match_answer`` here. From it
follow, as in the DeepSearchQA reference code:

* ``fully_correct``: every expected item found and nothing excessive (the item's score);
* ``correct_with_extraneous``: every expected item found, plus excessive ones;
* ``fully_incorrect``: no expected item found;
* ``partially_correct``: the rest (some but not all found);
* precision = found / (found + excessive), recall = found / expected, and their F1.

An empty response is never correct: it finds nothing. A verdict that checks no expected item
(the judge's empty correctness details) finds nothing either; the official metric would count
it fully correct when it lists nothing excessive (see tasks/deepsearchqa/README.md).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

OUTCOMES = ("fully_correct", "correct_with_extraneous", "partially_correct", "fully_incorrect")
# what separates the items of a listed answer
_SPLIT = re.compile(r"\s*(?:[,;\n/&]|\band\b|\bor\b)\s*", re.IGNORECASE)


@dataclass
class Grade:
    # expected item -> whether the response contains it; empty when a judge checked no item,
    # which finds nothing (not fully correct, as the official metric would have it)
    found: dict[str, bool]
    excessive: list[str] = field(default_factory=list)

    @property
    def n_found(self) -> int:
        return sum(self.found.values())

    @property
    def outcome(self) -> str:
        expected, found = len(self.found), self.n_found
        if expected and found == expected:
            return "correct_with_extraneous" if self.excessive else "fully_correct"
        return "fully_incorrect" if found == 0 else "partially_correct"

    @property
    def precision(self) -> float:
        claimed = self.n_found + len(self.excessive)
        return self.n_found / claimed if claimed else 0.0

    @property
    def recall(self) -> float:
        return self.n_found / len(self.found) if self.found else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    @property
    def correct(self) -> bool:
        return self.outcome == "fully_correct"

    def score(self, headline: str) -> float:
        """The item's score under ``headline`` (``fully_correct``: 1 or 0; ``f1``: its F1)."""
        return self.f1 if headline == "f1" else float(self.correct)

    def to_dict(self) -> dict[str, Any]:
        return {"found": self.found, "excessive": self.excessive, "outcome": self.outcome,
                "precision": self.precision, "recall": self.recall, "f1": self.f1}


def normalise(text: str) -> str:
    """Lower case, accents and punctuation dropped, a leading article dropped, single spaces."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c)).lower()
    text = re.sub(r"[^\w\s]", " ", text)
    words = text.split()
    if words and words[0] in ("the", "a", "an"):
        words = words[1:]
    return " ".join(words)


def is_blank(response: str) -> bool:
    """No answer at all (whitespace only): never correct, never sent to a judge. Decided on
    the raw text, before ``normalise`` drops articles: "A" can be the expected answer."""
    return not (response or "").strip()


def split_items(answer: str) -> list[str]:
    """The items of a listed answer ("A, B and C" -> A, B, C), normalised, empties dropped."""
    return [n for n in (normalise(part) for part in _SPLIT.split(answer or "")) if n]


def _contains(item: str, name: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", item) is not None


def match_answer(expected: list[str], answer: str) -> Grade:
    """Grade ``answer`` against ``expected`` names: an expected name is found when it occurs
    as whole words inside one of the answer's items ("it is Tarsk" finds Tarsk); an item that
    holds no expected name is excessive. Names are unique in the world and none contains
    another, so containment cannot confuse two entities."""
    items = split_items(answer)
    names = {name: normalise(name) for name in expected}
    found = {name: any(_contains(item, norm) for item in items) for name, norm in names.items()}
    excessive = [item for item in items
                 if not any(_contains(item, norm) for norm in names.values())]
    return Grade(found, excessive)


def summarise(grades: list[Grade], groups: list[str] | None = None) -> dict[str, float]:
    """The breakdown of a list of grades: the share of each outcome (0-100), the share that
    checked no expected item (``unchecked_pct``: where a2rl and the official metric part), mean
    precision, recall and F1 (0-100), and fully-correct rates per group (``correct_<group>``)."""
    n = len(grades)
    if not n:
        return {}
    out = {f"{o}_pct": 100.0 * sum(g.outcome == o for g in grades) / n for o in OUTCOMES}
    out["unchecked_pct"] = 100.0 * sum(not g.found for g in grades) / n
    out["precision"] = 100.0 * sum(g.precision for g in grades) / n
    out["recall"] = 100.0 * sum(g.recall for g in grades) / n
    out["f1"] = 100.0 * sum(g.f1 for g in grades) / n
    for group in sorted(set(groups or [])):
        mine = [g for g, name in zip(grades, groups or [], strict=True) if name == group]
        out[f"correct_{group}"] = 100.0 * sum(g.correct for g in mine) / len(mine)
        out[f"n_{group}"] = float(len(mine))
    return out
