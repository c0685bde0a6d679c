"""Item sources, all normalized to ``{"id", "question", "answer", "gold"}``.

``answer`` is a worked solution ending in ``#### N`` (GSM8K's own format); ``gold`` is N in
canonical form (see ``extract.normalize_number``).

A source answers ``candidates(role, seed, count)``: up to ``count`` items for a split role
(``train``, ``validation`` or ``test``) in a deterministic order for that seed. Fixed pools
(hf, jsonl) return their whole split shuffled by the seed (test items from the test split,
train and validation items from the train split); procedural sources (reasoning_gym) generate
``count`` items from the seed.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from a2rl.task import ConfigError, text_key

from .extract import gold_of, normalize_number
from .params import SourceParams

POOL_SPLIT = {"train": "train", "validation": "train", "test": "test"}


def normalize_question(question: str) -> str:
    """The key two questions are compared by when de-duplicating splits."""
    return text_key(question)


def _gsm8k_item(raw: dict[str, Any], item_id: str) -> dict[str, Any]:
    try:
        question, answer = raw["question"], raw["answer"]
    except KeyError as err:
        raise ConfigError(f"item {item_id}: missing field {err}; expected GSM8K fields "
                          f"'question' and 'answer' ('... #### N')") from err
    try:
        gold = gold_of(answer)
    except ValueError as err:
        raise ConfigError(f"item {item_id}: {err}") from err
    return {"id": item_id, "question": question.strip(), "answer": answer.strip(), "gold": gold}


class FilePool:
    """GSM8K-format train/test splits from local jsonl files or the HF Hub."""

    procedural = False

    def __init__(self, params: SourceParams, data_root: Path):
        self.params = params
        self.data_root = Path(data_root)
        self._splits: dict[str, list[dict[str, Any]]] = {}

    def describe(self) -> dict[str, Any]:
        if self.params.kind == "jsonl":
            return {"kind": "jsonl", "path": str(self.data_root / self.params.path)}
        return {"kind": "hf", "hf_id": self.params.hf_id, "hf_config": self.params.hf_config}

    def _load(self, split: str) -> list[dict[str, Any]]:
        if split not in self._splits:
            if self.params.kind == "jsonl":
                rows = self._read_jsonl(split)
                prefix = Path(self.params.path).name
            else:
                rows = self._read_hf(split)
                prefix = self.params.hf_id.rsplit("/", 1)[-1]
            self._splits[split] = [_gsm8k_item(row, f"{prefix}-{split}-{i}")
                                   for i, row in enumerate(rows)]
        return self._splits[split]

    def _read_jsonl(self, split: str) -> list[dict[str, Any]]:
        path = self.data_root / self.params.path / f"{split}.jsonl"
        if not path.is_file():
            raise ConfigError(f"task.params.source: {path} does not exist; expected GSM8K jsonl "
                              f"files <data_root>/{self.params.path}/{{train,test}}.jsonl "
                              f"(data_root={self.data_root})")
        with path.open() as fh:
            return [json.loads(line) for line in fh if line.strip()]

    def _read_hf(self, split: str) -> list[dict[str, Any]]:
        import datasets

        ds = datasets.load_dataset(self.params.hf_id, self.params.hf_config, split=split,
                                   revision=self.params.hf_revision)
        return [dict(row) for row in ds]

    def find(self, item_id: str, seeds: dict[str, int]) -> dict[str, Any]:
        """The item ``<prefix>-<split>-<index>`` (KeyError if there is none)."""
        _, split, index = _id_parts(item_id)
        if split not in POOL_SPLIT.values():
            raise KeyError(item_id)
        items = self._load(split)
        if index >= len(items) or items[index]["id"] != item_id:
            raise KeyError(item_id)
        return items[index]

    def candidates(self, role: str, seed: int, count: int) -> list[dict[str, Any]]:
        items = list(self._load(POOL_SPLIT[role]))
        random.Random(seed).shuffle(items)
        return items


class ReasoningGymSource:
    """Procedural items from reasoning-gym; item i of seed s is built from ``s + i``."""

    procedural = True

    def __init__(self, params: SourceParams):
        import reasoning_gym

        self.params = params
        self._create = reasoning_gym.create_dataset
        try:
            self._create(params.dataset, seed=0, size=1, **params.kwargs)
        except Exception as err:  # unknown name or bad kwargs: say which
            raise ConfigError(f"task.params.source: reasoning_gym dataset {params.dataset!r} "
                              f"with kwargs {params.kwargs!r} cannot be built: {err}") from err

    def describe(self) -> dict[str, Any]:
        return {"kind": "reasoning_gym", "dataset": self.params.dataset,
                "kwargs": dict(self.params.kwargs)}

    def find(self, item_id: str, seeds: dict[str, int]) -> dict[str, Any]:
        """The item ``<dataset>-<role>-<i>``: item i of that role's seed (KeyError if none)."""
        name, role, index = _id_parts(item_id)
        if name != self.params.dataset or role not in seeds:
            raise KeyError(item_id)
        return self.candidates(role, seeds[role], index + 1)[index]

    def candidates(self, role: str, seed: int, count: int) -> list[dict[str, Any]]:
        dataset = self._create(self.params.dataset, seed=seed, size=count, **self.params.kwargs)
        # ids name the role, not the seed: train ids are agent-visible
        return [self._normalize(raw, f"{self.params.dataset}-{role}-{i}")
                for i, raw in enumerate(dataset)]

    def _normalize(self, raw: dict[str, Any], item_id: str) -> dict[str, Any]:
        gold = normalize_number(str(raw["answer"]))
        if gold is None:
            raise ConfigError(f"reasoning_gym dataset {self.params.dataset!r} gave the "
                              f"non-numeric answer {raw['answer']!r} ({item_id}); this task "
                              f"scores numbers only")
        meta = raw.get("metadata") or {}
        cot = meta.get("answer_cot")
        if cot and "####" in cot and normalize_number(cot.rsplit("####", 1)[1]) == gold:
            answer = cot.strip()
        elif cot:
            answer = f"{cot.strip()}\n#### {gold}"
        elif meta.get("expression"):
            answer = f"{meta['expression']} = {gold}\n#### {gold}"
        else:
            answer = f"#### {gold}"
        return {"id": item_id, "question": raw["question"].strip(), "answer": answer,
                "gold": gold}


def _id_parts(item_id: str) -> tuple[str, str, int]:
    """``"gsm8k-test-12"`` -> ``("gsm8k", "test", 12)``; KeyError for other shapes."""
    parts = item_id.rsplit("-", 2)
    if len(parts) != 3 or not parts[2].isdigit():
        raise KeyError(item_id)
    return parts[0], parts[1], int(parts[2])


def make_source(params: SourceParams, data_root: Path) -> FilePool | ReasoningGymSource:
    if params.kind == "reasoning_gym":
        return ReasoningGymSource(params)
    return FilePool(params, data_root)
