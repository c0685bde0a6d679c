"""Scripted policies that bound the task from both sides, measured on the offline world
(``experiments/deepsearchqa_policies/policies.py``, and in ``prepared.json``):

* the **oracle** (``a2rl.task.envs.ExpertPolicy``): the environment's expert, which issues the
  plan's queries, opens the plan's pages and answers with the gold set;
* **closed-book** (``ClosedBookPolicy``): answers at once, without searching, with names of the
  kind the question asks for (it knows every name in the world, not the facts);
* **search-only** (``SearchOnlyPolicy``): searches with the question's words and answers with
  the names of that kind shown in the result titles and snippets, never opening a page.

The task rewards real tool use when closed-book < search-only < oracle.
"""

from __future__ import annotations

import random
import re
from typing import Any

from a2rl.task import Choice, EpisodeView

_RESULT = re.compile(r"^\[\d+\] ", re.MULTILINE)


def names_by_kind(docs: list[dict[str, Any]]) -> dict[str, list[str]]:
    """The world's entity names by kind, from its pages (``kind`` person, city, ...)."""
    out: dict[str, list[str]] = {}
    for doc in docs:
        if doc["kind"] not in ("list", "category"):
            out.setdefault(doc["kind"], []).append(doc["title"])
    return {kind: sorted(names) for kind, names in out.items()}


def _answer_size(row: dict[str, Any]) -> int:
    return 1 if row["answer_type"] == "Single Answer" else 2


class ClosedBookPolicy:
    """Answers at the first step with names of the asked kind drawn at random (one for a single
    answer, two for a set), reproducibly per (seed, question)."""

    def __init__(self, questions: dict[str, dict[str, Any]], names: dict[str, list[str]],
                 seed: int = 0):
        self.questions, self.names, self.seed = questions, names, seed

    def choose(self, views: list[EpisodeView]) -> list[Choice]:
        out = []
        for v in views:
            row = self.questions[v.game]
            rng = random.Random(f"closed|{self.seed}|{v.game}")
            pool = self.names[row["answer_kind"]]
            guess = rng.sample(pool, min(_answer_size(row), len(pool)))
            out.append(Choice(f"answer[{', '.join(guess)}]", "", "closed_book"))
        return out


class SearchOnlyPolicy:
    """Searches once with the question, then answers with the names of the asked kind that the
    result list shows (the first for a single answer, all of them for a set)."""

    def __init__(self, questions: dict[str, dict[str, Any]], names: dict[str, list[str]]):
        self.questions = questions
        self.patterns = {kind: [(n, re.compile(rf"(?<!\w){re.escape(n)}(?!\w)")) for n in ns]
                         for kind, ns in names.items()}

    def choose(self, views: list[EpisodeView]) -> list[Choice]:
        out = []
        for v in views:
            row = self.questions[v.game]
            if v.step == 0:
                out.append(Choice(f"search[{row['question']}]", "", "search_only"))
                continue
            shown = v.observation
            found = sorted((m.start(), name) for name, pattern in
                           self.patterns[row["answer_kind"]] for m in [pattern.search(shown)]
                           if m)
            names = [name for _, name in found]
            if row["answer_type"] == "Single Answer":
                names = names[:1]
            out.append(Choice(f"answer[{', '.join(names)}]", "", "search_only"))
        return out
