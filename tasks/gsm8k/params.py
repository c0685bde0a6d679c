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

from dataclasses import asdict, dataclass, field
from typing import Any

from a2rl.config.checks import check_keys, from_mapping, require

SOURCE_KINDS = ("hf", "jsonl", "reasoning_gym")

DEFAULT_INSTRUCTION = (
    "Solve the following math problem step by step. "
    "At the end, write the final answer as a number on its own line in the form: #### <number>"
)


@dataclass
class SourceParams:
    """Where the items come from.

    kind ``hf``: ``datasets.load_dataset(hf_id, hf_config)`` splits ``train`` and ``test``.
    kind ``jsonl``: ``<data_root>/<path>/{train,test}.jsonl`` with GSM8K fields (question, answer
    ending in ``#### N``).
    kind ``reasoning_gym``: ``reasoning_gym.create_dataset(dataset, seed=..., size=..., **kwargs)``;
    procedural, so every split is drawn from its own seed.
    """

    kind: str = field(default="jsonl", metadata={"help": f"One of {SOURCE_KINDS}."})
    hf_id: str = field(default="openai/gsm8k", metadata={"help": "Hub dataset id (kind hf)."})
    hf_config: str = field(default="main", metadata={"help": "Hub dataset config (kind hf)."})
    hf_revision: str | None = field(default=None, metadata={
        "help": "Hub commit of the dataset (kind hf); null: the main branch's newest."})
    path: str = field(default="gsm8k", metadata={
        "help": "Folder under the data root with train.jsonl and test.jsonl (kind jsonl)."})
    dataset: str = field(default="chain_sum", metadata={
        "help": "reasoning_gym dataset name (kind reasoning_gym)."})
    kwargs: dict[str, Any] = field(default_factory=dict, metadata={
        "help": "Extra arguments of reasoning_gym.create_dataset (kind reasoning_gym)."})

    def __post_init__(self) -> None:
        require(self.kind in SOURCE_KINDS,
                f"task.params.source.kind={self.kind!r}; expected one of {SOURCE_KINDS}")
        require(bool(self.hf_id) or self.kind != "hf", "task.params.source.hf_id is empty")
        require(bool(self.path) or self.kind != "jsonl", "task.params.source.path is empty")
        require(bool(self.dataset) or self.kind != "reasoning_gym",
                "task.params.source.dataset is empty")
        require(isinstance(self.kwargs, dict),
                f"task.params.source.kwargs={self.kwargs!r}; expected a mapping")

    @property
    def procedural(self) -> bool:
        """Items are generated from a seed (no fixed pool; every size must be given)."""
        return self.kind == "reasoning_gym"

    @classmethod
    def from_dict(cls, raw: dict[str, Any] | str) -> SourceParams:
        if isinstance(raw, str):  # shorthand: `source: jsonl`
            raw = {"kind": raw}
        require(isinstance(raw, dict),
                f"task.params.source={raw!r}; expected a mapping or one of {SOURCE_KINDS}")
        check_keys(cls, raw, "task.params.source")
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

    source: SourceParams = field(default_factory=SourceParams, metadata={
        "help": "Where the items come from (a mapping, or just its kind: `source: jsonl`)."})
    train_size: int | None = field(default=None, metadata={
        "help": "Items in the agent's train.jsonl; null: all the source has (fixed pools)."})
    test_size: int | None = field(default=None, metadata={
        "help": "Items in the sealed test split; null: all the source's test items."})
    validation_size: int = field(default=0, metadata={
        "help": "Items in the validation split, held out of train.jsonl; 0: none."})
    train_seed: int = field(default=1_000_000, metadata={"help": "Seed of the train split."})
    test_seed: int = field(default=0, metadata={"help": "Seed of the test split."})
    validation_seed: int = field(default=2_000_000, metadata={
        "help": "Seed of the validation split."})
    shots: int = field(default=0, metadata={
        "help": "Worked train examples in each prompt, 0..16."})
    instruction: str = field(default=DEFAULT_INSTRUCTION, metadata={
        "help": "The user turn's opening, before the examples and the question."})
    system_prompt: str | None = field(default=None, metadata={
        "help": "The chat template's system turn; null: the model's default."})
    max_new_tokens: int | None = field(default=None, metadata={
        "help": "Overrides inference.max_new_tokens when set."})

    def __post_init__(self) -> None:
        if not isinstance(self.source, SourceParams):
            self.source = SourceParams.from_dict(self.source)
        for name in ("train_size", "test_size"):
            value = getattr(self, name)
            require(value is None or (isinstance(value, int) and value >= 1),
                    f"task.params.{name}={value!r}; expected an integer >= 1 or null (all)")
            require(value is not None or not self.source.procedural,
                    f"task.params.{name} is null but source.kind=reasoning_gym generates "
                    f"items without end; give a number")
        require(isinstance(self.validation_size, int) and self.validation_size >= 0,
                f"task.params.validation_size={self.validation_size!r}; expected an integer "
                f">= 0 (0 = no validation split)")
        for name in ("train_seed", "test_seed", "validation_seed"):
            require(isinstance(getattr(self, name), int),
                    f"task.params.{name}={getattr(self, name)!r}; expected an integer")
        require(isinstance(self.shots, int) and 0 <= self.shots <= 16,
                f"task.params.shots={self.shots!r}; expected an integer in 0..16")
        require(isinstance(self.instruction, str),
                f"task.params.instruction={self.instruction!r}; expected a string")
        require(self.max_new_tokens is None or self.max_new_tokens >= 1,
                f"task.params.max_new_tokens={self.max_new_tokens!r}; expected >= 1 or null")

    @classmethod
    def from_dict(cls, raw: dict[str, Any] | None) -> GSM8KParams:
        """Build from ``TaskConfig.params``; unknown keys are an error that names them."""
        return from_mapping(cls, raw, "task.params")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
