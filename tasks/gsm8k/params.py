"""The GSM8K task's own options (``task.params`` in conf/task/*.yaml), checked on construction.

Example (conf/task/gsm8k.yaml)::

    params:
      source: {kind: jsonl, path: gsm8k}        # <data_root>/gsm8k/{train,test}.jsonl
      test_size: 500
      validation_size: 200
      shots: 0

A procedural variant::

    params:
      source: {kind: reasoning_gym, dataset: chain_sum, kwargs: {min_terms: 2, max_terms: 4}}
      train_size: 2000
      test_size: 300
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from omegaconf import OmegaConf

from a2rl.config.types import ConfigError

SOURCE_KINDS = ("hf", "jsonl", "reasoning_gym")

DEFAULT_INSTRUCTION = (
    "Solve the following math problem step by step. "
    "At the end, write the final answer as a number on its own line in the form: #### <number>"
)


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def _check_keys(cls: type, given: dict[str, Any], where: str) -> None:
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(given) - known)
    _require(not unknown,
             f"{where}: unknown key(s) {unknown}; expected some of {sorted(known)}")


@dataclass
class SourceParams:
    """Where the items come from.

    kind ``hf``: ``datasets.load_dataset(hf_id, hf_config)`` splits ``train`` and ``test``.
    kind ``jsonl``: ``<data_root>/<path>/{train,test}.jsonl`` with GSM8K fields (question, answer
    ending in ``#### N``).
    kind ``reasoning_gym``: ``reasoning_gym.create_dataset(dataset, seed=..., size=..., **kwargs)``;
    procedural, so every split is drawn from its own seed.
    """

    kind: str = "jsonl"
    hf_id: str = "openai/gsm8k"
    hf_config: str = "main"
    path: str = "gsm8k"
    dataset: str = "chain_sum"
    kwargs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _require(self.kind in SOURCE_KINDS,
                 f"task.params.source.kind={self.kind!r}; expected one of {SOURCE_KINDS}")
        _require(bool(self.hf_id) or self.kind != "hf", "task.params.source.hf_id is empty")
        _require(bool(self.path) or self.kind != "jsonl", "task.params.source.path is empty")
        _require(bool(self.dataset) or self.kind != "reasoning_gym",
                 "task.params.source.dataset is empty")
        _require(isinstance(self.kwargs, dict),
                 f"task.params.source.kwargs={self.kwargs!r}; expected a mapping")

    @property
    def procedural(self) -> bool:
        """Items are generated from a seed (no fixed pool; every size must be given)."""
        return self.kind == "reasoning_gym"

    @classmethod
    def from_dict(cls, raw: dict[str, Any] | str) -> SourceParams:
        if isinstance(raw, str):  # shorthand: `source: jsonl`
            raw = {"kind": raw}
        _require(isinstance(raw, dict),
                 f"task.params.source={raw!r}; expected a mapping or one of {SOURCE_KINDS}")
        _check_keys(cls, raw, "task.params.source")
        raw = dict(raw)
        raw["kwargs"] = dict(raw.get("kwargs") or {})
        return cls(**raw)


@dataclass
class GSM8KParams:
    """Sizes, seeds and prompting of the GSM8K-style task.

    Sizes: ``None`` means every item the source has (fixed-pool sources only). ``validation_size``
    0 means no validation split. For hf/jsonl sources the test split comes from the source's test
    split and validation from its train split (held out of the agent's train.jsonl).

    Seeds: procedural sources build item i from ``seed + i``, so the defaults keep the three
    seeds a million apart; on top of that every split is de-duplicated against the others (see
    ``task.GSM8KTask.prepare``). For fixed pools the seeds pick and order the subsample.

    Prompting: the user turn is ``instruction``, then ``shots`` worked examples from the train
    data, then the question; ``system_prompt`` goes in the chat template's system turn (None:
    the model's default). ``max_new_tokens`` overrides ``inference.max_new_tokens`` when set.
    """

    source: SourceParams = field(default_factory=SourceParams)
    train_size: int | None = None
    test_size: int | None = None
    validation_size: int = 0
    train_seed: int = 1_000_000
    test_seed: int = 0
    validation_seed: int = 2_000_000
    shots: int = 0
    instruction: str = DEFAULT_INSTRUCTION
    system_prompt: str | None = None
    max_new_tokens: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.source, SourceParams):
            self.source = SourceParams.from_dict(self.source)
        for name in ("train_size", "test_size"):
            value = getattr(self, name)
            _require(value is None or (isinstance(value, int) and value >= 1),
                     f"task.params.{name}={value!r}; expected an integer >= 1 or null (all)")
            _require(value is not None or not self.source.procedural,
                     f"task.params.{name} is null but source.kind=reasoning_gym generates "
                     f"items without end; give a number")
        _require(isinstance(self.validation_size, int) and self.validation_size >= 0,
                 f"task.params.validation_size={self.validation_size!r}; expected an integer "
                 f">= 0 (0 = no validation split)")
        for name in ("train_seed", "test_seed", "validation_seed"):
            _require(isinstance(getattr(self, name), int),
                     f"task.params.{name}={getattr(self, name)!r}; expected an integer")
        _require(isinstance(self.shots, int) and 0 <= self.shots <= 16,
                 f"task.params.shots={self.shots!r}; expected an integer in 0..16")
        _require(isinstance(self.instruction, str),
                 f"task.params.instruction={self.instruction!r}; expected a string")
        _require(self.max_new_tokens is None or self.max_new_tokens >= 1,
                 f"task.params.max_new_tokens={self.max_new_tokens!r}; expected >= 1 or null")

    @classmethod
    def from_dict(cls, raw: dict[str, Any] | None) -> GSM8KParams:
        """Build from ``TaskConfig.params``; unknown keys are an error that names them."""
        if OmegaConf.is_config(raw):
            raw = OmegaConf.to_container(raw, resolve=True)
        raw = dict(raw or {})
        _check_keys(cls, raw, "task.params")
        return cls(**raw)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
