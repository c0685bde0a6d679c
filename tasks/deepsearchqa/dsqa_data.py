"""The real DeepSearchQA questions (google/deepsearchqa, Apache-2.0) and the paper's split.

Offline the questions come from a file under ``paths.data`` (``DsqaData.path``, by default
the official ``deepsearchqa/DSQA-full.csv`` as published, else the JSON conversion
``deepsearchqa/DSQA-full.json``: a JSON list, or jsonl, of ``{example_id, problem,
problem_category, answer, answer_type}``; `a2rl data fetch deepsearchqa` installs either);
with ``hf_id`` set, from the Hugging Face dataset. A CSV without an ``example_id`` column
numbers its rows from 0, as the JSON conversion does. The split: the rows in ``example_id``
order are shuffled with ``random.Random(shuffle_seed)`` (42); the first ``train_size`` (100)
usable rows are the agent's, the next ``test_size`` (200) are sealed. Rows with an empty answer
(4 of 900) cannot be graded: they are skipped where they fall and counted.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import random
from pathlib import Path
from typing import Any

from a2rl.task import ConfigError

from .params import DsqaData

ANSWER_TYPES = ("Single Answer", "Set Answer")
FIELDS = ("example_id", "problem", "answer", "answer_type")
# where the questions are when task.params.dsqa.path is null, first found first
DEFAULT_FILES = ("deepsearchqa/DSQA-full.csv", "deepsearchqa/DSQA-full.json")


def dsqa_file(params: DsqaData, data_root: Path) -> Path:
    """The questions' file: ``params.path`` (absolute or under ``data_root``), else the first
    of DEFAULT_FILES there (the official CSV when neither is)."""
    if params.path:
        return Path(params.path) if Path(params.path).is_absolute() \
            else Path(data_root) / params.path
    found = [Path(data_root) / f for f in DEFAULT_FILES if (Path(data_root) / f).is_file()]
    return found[0] if found else Path(data_root) / DEFAULT_FILES[0]


def read_rows(path: Path) -> tuple[list[Any], str]:
    """The raw rows of a questions file (CSV by its suffix, else JSON or jsonl), and the
    file's sha256."""
    data = path.read_bytes()
    text = data.decode("utf-8-sig")
    if path.suffix.lower() == ".csv":
        rows = list(csv.DictReader(io.StringIO(text, newline="")))
        for i, row in enumerate(rows):
            if not row.get("example_id"):
                row["example_id"] = str(i)
    elif text.lstrip().startswith("["):
        rows = json.loads(text)
    else:
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    return rows, hashlib.sha256(data).hexdigest()


def load_dsqa(params: DsqaData, data_root: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The raw rows (checked) and a description of where they came from."""
    if params.hf_id:
        import datasets

        raw = [dict(r) for r in datasets.load_dataset(params.hf_id, split=params.hf_split)]
        source = {"kind": "hf", "hf_id": params.hf_id, "split": params.hf_split}
    else:
        path = dsqa_file(params, data_root)
        if not path.is_file():
            raise FileNotFoundError(
                f"DeepSearchQA questions not found at {path} (task.params.dsqa.path, relative "
                f"to paths.data={data_root}); run `a2rl data fetch deepsearchqa` or set "
                f"task.params.dsqa.hf_id=google/deepsearchqa (needs the Hub)")
        raw, digest = read_rows(path)
        source = {"kind": "file", "path": str(path), "sha256": digest}
    rows = [_checked(row, i) for i, row in enumerate(raw)]
    ids = [r["example_id"] for r in rows]
    if len(set(ids)) != len(ids):
        raise ValueError("DeepSearchQA rows repeat an example_id")
    source["rows"] = len(rows)
    return rows, source


def _checked(row: Any, index: int) -> dict[str, Any]:
    if not isinstance(row, dict) or any(f not in row for f in FIELDS):
        raise ValueError(f"DeepSearchQA row {index}: expected the fields {FIELDS}, got "
                         f"{sorted(row) if isinstance(row, dict) else type(row).__name__}")
    if row["answer_type"] not in ANSWER_TYPES:
        raise ValueError(f"DeepSearchQA row {index} (example_id {row['example_id']}): "
                         f"answer_type {row['answer_type']!r}; expected one of {ANSWER_TYPES}")
    return {"example_id": str(row["example_id"]), "problem": str(row["problem"]).strip(),
            "answer": str(row["answer"] or "").strip(), "answer_type": row["answer_type"],
            "category": str(row.get("problem_category") or "Other")}


def split_dsqa(rows: list[dict[str, Any]], params: DsqaData
               ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """(train, test, excluded): the shuffled usable rows as task items, and what was left out
    (rows with an empty answer: how many, their ids)."""
    ordered = sorted(rows, key=lambda r: int(r["example_id"]) if r["example_id"].isdigit()
                     else r["example_id"])
    random.Random(params.shuffle_seed).shuffle(ordered)
    usable = [r for r in ordered if r["answer"]]
    empty = sorted((r["example_id"] for r in ordered if not r["answer"]), key=str)
    need = params.train_size + params.test_size
    if len(usable) < need:
        raise ConfigError(f"task.params.dsqa: train_size + test_size = {need} but only "
                          f"{len(usable)} questions have an answer")
    items = [_item(r) for r in usable[:need]]
    return items[:params.train_size], items[params.train_size:], \
        {"count": len(empty), "example_ids": empty}


def _item(row: dict[str, Any]) -> dict[str, Any]:
    return {"id": f"dsqa-{row['example_id']}", "example_id": row["example_id"],
            "question": row["problem"], "answer": row["answer"],
            "answer_type": row["answer_type"], "category": row["category"]}
