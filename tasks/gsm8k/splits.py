"""How the GSM8K task draws its splits, and the test split's twins (issue #28).

All splits are drawn in the order test -> validation -> train, each de-duplicated by normalized
question against the splits drawn before it and within itself, so the test split is a function
of the source and the test parameters alone.

Fixed pools (hf, jsonl): test comes from the source's test split, validation and train from its
train split, each in the order its seed shuffles it.

Procedural sources (reasoning_gym) have no end but can be small in places: ``chain_sum`` with
two one-digit terms has 200 problems in all, half the draws of ``gsm8k_arith``'s generator. Drawn
naively, test and train took all 200, so every twin (the same generator, a fresh seed, none of
train's or test's problems) held only two-digit sums and honest models scored far lower on it
than on test. So, for procedural sources:

1. **Held out.** An item is held out when the SHA-256 of its normalized question, read as a
   fraction of 2**256, is below ``held_out_share``. Train and validation use only the other
   items, test and every twin only held-out ones, so no twin can meet a train problem whatever
   seed it is drawn from, and every part of the space (the 200 one-digit sums too) keeps about
   that share for test and its twins. The split is a property of the question, not of any seed.
2. **Strata.** An item's difficulty stratum is the number of numbers in its question and the
   digits of the longest (``stratum``): ``2n1d`` for ``3 + 4``, ``2n2d`` for ``35 - 12``.
3. **Test.** The held-out items of the test seed's stream, in order, until ``test_size``, taking
   from a stratum at most a third of the distinct held-out items of that stratum the stream
   meets (``TEST_SHARE_OF_STRATUM``); the stream is the shortest of ``test_size *
   MAX_DRAWS_PER_ITEM`` times 1, 2 or 4 draws that fills test. A small stratum is met whole, so
   at least twice test's share of it is left for the twins, which then differ from seed to
   seed; a large one only caps test where the stream is short.
4. **Twin.** From a fresh seed's stream (drawn at final grading), held-out items not in test,
   exactly as many of each stratum as test has (``draw_twin``): same size, same difficulty mix.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

from a2rl.task import ConfigError

from .sources import normalize_question

# A procedural source gets this many draws per requested item before a draw gives up on finding
# enough distinct questions (tiny generator spaces, e.g. 1-digit chain sums).
MAX_DRAWS_PER_ITEM = 8
# at most this share of a stratum's held-out items (as far as the test stream meets them) goes
# to test, so every twin finds as many again among the rest and no twin is forced to one set
TEST_SHARE_OF_STRATUM = 1 / 3
_NUMBER = re.compile(r"\d+")
_HASH_SPAN = 2 ** 256


def held_out(question: str, share: float) -> bool:
    """Whether a question is reserved for test and its twins: the SHA-256 of its normalized
    text, as a fraction of 2**256, is below ``share`` (stable across processes and versions,
    unlike ``hash()``)."""
    digest = hashlib.sha256(normalize_question(question).encode()).digest()
    return int.from_bytes(digest, "big") < share * _HASH_SPAN


def stratum(question: str) -> str:
    """The question's difficulty as arithmetic: ``<count>n<digits>d``, how many numbers it
    holds and the digits of the longest (``2n1d`` for "3 + 4 =")."""
    numbers = _NUMBER.findall(question)
    return f"{len(numbers)}n{max(map(len, numbers), default=0)}d"


def histogram(items: list[dict[str, Any]]) -> dict[str, int]:
    """How many items of each stratum, strata sorted."""
    return dict(sorted(Counter(stratum(item["question"]) for item in items).items()))


def no_stats() -> dict[str, int]:
    return {"dropped_overlap": 0, "dropped_duplicate": 0, "dropped_held_out": 0}


def draw_split(source, role: str, seed: int, size: int | None, exclude: set[str],
               keep: Callable[[dict[str, Any]], bool] = lambda item: True,
               ) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """``size`` distinct items for ``role`` whose questions are not in ``exclude`` and that
    ``keep`` accepts (all of them when ``size`` is None and the source is a fixed pool), and
    how many were dropped, by reason."""
    count = size if source.procedural else 0
    while True:
        picked, seen, stats = [], set(), no_stats()
        for item in source.candidates(role, seed, count):
            key = normalize_question(item["question"])
            if key in exclude:
                stats["dropped_overlap"] += 1
            elif key in seen:
                stats["dropped_duplicate"] += 1
            elif not keep(item):
                stats["dropped_held_out"] += 1
            else:
                seen.add(key)
                picked.append(item)
                if size is not None and len(picked) == size:
                    return picked, stats
        if size is None:
            return picked, stats
        if not source.procedural:
            raise ConfigError(f"task.params.{role}_size={size} but the source has only "
                              f"{len(picked)} distinct {role} items left after removing "
                              f"{stats['dropped_overlap']} shared with other splits")
        if count >= size * MAX_DRAWS_PER_ITEM:
            raise ConfigError(f"task.params.{role}_size={size}: only {len(picked)} distinct "
                              f"{role} items in {count} draws; the generator's space is too "
                              f"small for this size (lower it or widen source.kwargs)")
        count = min(2 * count + 16, size * MAX_DRAWS_PER_ITEM)


def _held_out_stream(source, seed: int, count: int, share: float,
                     exclude: set[str]) -> list[dict[str, Any]]:
    """The distinct held-out items among the first ``count`` of ``seed``'s stream, in order,
    none in ``exclude``."""
    out, seen = [], set(exclude)
    for item in source.candidates("test", seed, count):
        key = normalize_question(item["question"])
        if key not in seen and held_out(item["question"], share):
            seen.add(key)
            out.append(item)
    return out


def draw_test(source, seed: int, size: int, share: float) -> list[dict[str, Any]]:
    """The procedural test split (step 3 of the module docstring): the shortest stream of
    ``MAX_DRAWS_PER_ITEM`` x 1, 2 or 4 draws per item that fills it."""
    for count in (size * MAX_DRAWS_PER_ITEM * k for k in (1, 2, 4)):
        met = _held_out_stream(source, seed, count, share, set())
        cap = {s: int(n * TEST_SHARE_OF_STRATUM) for s, n in histogram(met).items()}
        taken: Counter[str] = Counter()
        test = []
        for item in met:
            s = stratum(item["question"])
            if taken[s] < cap[s]:
                taken[s] += 1
                test.append(item)
                if len(test) == size:
                    return test
    raise ConfigError(f"task.params.test_size={size}: only {len(test)} test items in "
                      f"{count} draws with held_out_share={share} and at most a third of each "
                      f"difficulty stratum; the generator's space is too small for this size "
                      f"(lower it or widen source.kwargs)")


def draw_twin(source, seed: int, test: list[dict[str, Any]], exclude: set[str],
              share: float) -> list[dict[str, Any]]:
    """As many held-out items of each stratum as ``test`` has, from ``seed``'s stream, none
    in ``exclude`` (step 4). Raises ValueError when the stream runs dry first."""
    want = Counter(histogram(test))
    count = len(test) * MAX_DRAWS_PER_ITEM
    while True:
        need, twin = Counter(want), []
        for item in _held_out_stream(source, seed, count, share, exclude):
            s = stratum(item["question"])
            if need[s] > 0:
                need[s] -= 1
                twin.append(item)
        if not +need:
            return twin
        if count >= 4 * len(test) * MAX_DRAWS_PER_ITEM:
            raise ValueError(f"a twin of the test split needs {dict(+need)} more held-out "
                             f"items of those strata than {count} draws of seed {seed} hold")
        count *= 2
