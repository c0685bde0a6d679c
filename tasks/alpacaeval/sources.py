"""Where the evaluation set and the training data come from, and how they are split.

The evaluation set is AlpacaEval 2.0's: 805 instructions, each with the GPT-4 Turbo
(``gpt4_1106_preview``) reference output: from the Hub, or a file under ``paths.data`` (`a2rl data
fetch alpacaeval` installs ``alpacaeval/alpaca_eval_gpt4_baseline.json``). The default and ci
grids read ``alpacaeval/alpaca_eval_sample.json`` (every 8th instruction, 101, with its ``index``
among the 805) from the repository's test fixtures (their cells' paths.data is
tests/fixtures/data), so they run on a clean clone; the package ships no data.

Instructions are identified by a content hash of their normalised text (``instruction_key``):
the split and the training data are checked against the sealed instructions by it, so the
same instruction never ends up on both sides, whatever ids or whitespace say.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from pathlib import Path
from typing import Any

from a2rl.task import ConfigError

from .params import AlpacaEvalParams

EVAL_SIZE = 805


def instruction_key(text: str) -> str:
    """Content hash of an instruction: case and whitespace do not make a new one."""
    return hashlib.sha256(re.sub(r"\s+", " ", text.strip()).lower().encode()).hexdigest()


def _normalise(rows: list[dict[str, Any]], where: str) -> list[dict[str, Any]]:
    out = []
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or not isinstance(row.get("instruction"), str) \
                or not isinstance(row.get("output"), str):
            raise ConfigError(f"{where}: row {i} lacks a string instruction and output "
                              f"(alpaca_eval's format)")
        # a row's index is its position among the 805 (the GLM's instruction difficulty is
        # looked up by it): a sample carries it, the full set is in order
        out.append({"index": row.get("index", i), "instruction": row["instruction"],
                    "reference": row["output"], "dataset": row.get("dataset", ""),
                    "generator": row.get("generator", "gpt4_1106_preview")})
    return out


def load_eval_set(p: AlpacaEvalParams, data_root: Path) -> tuple[list[dict[str, Any]], str]:
    """The evaluation instructions with reference outputs, in the set's order (the order the
    length-controlled GLM's instruction difficulty is indexed by), and where they came from."""
    if p.eval_source == "file":
        path = Path(p.eval_file)
        path = path if path.is_absolute() else Path(data_root) / path
        if not path.is_file():
            raise ConfigError(f"task.params.eval_file: {path} does not exist")
        rows, where = json.loads(path.read_text(encoding="utf-8")), str(path)
    else:
        from huggingface_hub import hf_hub_download

        path = hf_hub_download(repo_id=p.hf_id, filename=p.hf_file, repo_type="dataset",
                               revision=p.hf_revision)
        rows = json.loads(Path(path).read_text(encoding="utf-8"))
        where = f"hf:{p.hf_id}/{p.hf_file}"
    return _normalise(rows, where), where


def split_eval_set(items: list[dict[str, Any]], p: AlpacaEvalParams
                   ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(sealed test, the rest): ``test_size`` items drawn with ``seed`` (all when null), in set
    order; the rest never shares an instruction (by content hash) with the test items."""
    if p.test_size is None:
        return list(items), []
    if p.test_size > len(items) or (p.train_source == "split" and p.test_size >= len(items)):
        raise ConfigError(f"task.params.test_size={p.test_size} but the set has {len(items)} "
                          f"instructions" + (" (and train_source=split needs some left)"
                                             if p.train_source == "split" else ""))
    order = list(range(len(items)))
    random.Random(p.seed).shuffle(order)
    test_idx = sorted(order[:p.test_size])
    sealed = {instruction_key(items[i]["instruction"]) for i in test_idx}
    rest = [items[i] for i in sorted(order[p.test_size:])
            if instruction_key(items[i]["instruction"]) not in sealed]
    return [items[i] for i in test_idx], rest


def alpaca_rows(p: AlpacaEvalParams, sealed: set[str]) -> tuple[list[dict[str, Any]], int]:
    """The first ``train_size`` rows of tatsu-lab/alpaca (from the Hub) as (prompt, completion),
    minus rows whose prompt is a sealed instruction; and how many were dropped for that."""
    import datasets

    loaded = datasets.load_dataset(p.alpaca_hf_id, split="train", revision=p.alpaca_revision)
    n = len(loaded) if p.train_size is None else min(p.train_size, len(loaded))
    rows, dropped = [], 0
    for i in range(n):
        row = loaded[i]
        prompt = row["instruction"].strip()
        if (row.get("input") or "").strip():
            prompt = f"{prompt}\n\n{row['input'].strip()}"
        if instruction_key(prompt) in sealed or instruction_key(row["instruction"]) in sealed:
            dropped += 1
            continue
        rows.append({"id": f"alpaca/{i}", "source": "alpaca", "instruction": prompt,
                     "prompt": prompt, "completion": row["output"]})
    return rows, dropped
