"""The real DeepSearchQA questions (google/deepsearchqa, Apache-2.0) and the paper's split.

Offline the questions come from a copy under ``paths.data`` (``DsqaData.path``: a JSON list,
or jsonl, of ``{example_id, problem, problem_category, answer, answer_type}``); with
``hf_id`` set, from the Hugging Face dataset. The split: the rows in ``example_id`` order are
shuffled with ``random.Random(shuffle_seed)`` (42); the first ``train_size`` (100) usable rows
are the agent's, the next ``test_size`` (200) are sealed. Rows with an empty answer (4 of 900)
cannot be graded: they are skipped where they fall and counted.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any

from a2rl.config.types import ConfigError

from .params import DsqaData

ANSWER_TYPES = ("Single Answer", "Set Answer")
FIELDS = ("example_id", "problem", "answer", "answer_type")


def load_dsqa(params: DsqaData, data_root: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The raw rows (checked) and a description of where they came from."""
    if params.hf_id:
        import datasets

        raw = [dict(r) for r in datasets.load_dataset(params.hf_id, split=params.hf_split)]
        source = {"kind": "hf", "hf_id": params.hf_id, "split": params.hf_split}
    else:
        path = Path(params.path) if Path(params.path).is_absolute() \
            else Path(data_root) / params.path
        if not path.is_file():
            raise FileNotFoundError(
                f"DeepSearchQA questions not found at {path} (task.params.dsqa.path, relative "
                f"to paths.data={data_root}); copy DSQA-full.json there or set "
                f"task.params.dsqa.hf_id=google/deepsearchqa (needs the Hub)")
        text = path.read_text(encoding="utf-8")
        raw = json.loads(text) if text.lstrip().startswith("[") else \
            [json.loads(line) for line in text.splitlines() if line.strip()]
        source = {"kind": "file", "path": str(path),
                  "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()}
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
