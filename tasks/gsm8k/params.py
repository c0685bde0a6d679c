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

from a2rl.task import check_keys, from_mapping, require

SOURCE_KINDS = ("hf", "jsonl", "reasoning_gym")
PROTOCOLS = ("a2rl", "lm_eval_cot")

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

    kind: str = "jsonl"
    """One of SOURCE_KINDS: hf, jsonl, reasoning_gym."""
    hf_id: str = "openai/gsm8k"
    """Hub dataset id (kind hf)."""
    hf_config: str = "main"
    """Hub dataset config (kind hf)."""
    hf_revision: str | None = None
    """Hub commit of the dataset (kind hf); null: the main branch's newest."""
    path: str = "gsm8k"
    """Folder under the data root with train.jsonl and test.jsonl (kind jsonl)."""
    dataset: str = "chain_sum"
    """reasoning_gym dataset name (kind reasoning_gym)."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra arguments of reasoning_gym.create_dataset (kind reasoning_gym)."""

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

    Held out (procedural sources only): ``held_out_share`` of the generator's problems, chosen
    by a hash of the question, are test's and its twins' alone; test takes at most a third of
    each difficulty stratum of them, so every twin can match its mix (``splits``).

    Prompting (``protocol: a2rl``): the user turn is ``instruction``, then ``shots`` worked
    examples from the train data, then the question; ``protocol: lm_eval_cot`` is instead
    lm-evaluation-harness's ``gsm8k_cot`` prompt (8 fixed exemplars, ``Q: ...\nA:``), with no
    instruction and no train shots, and the breakdown adds its strict and flexible matches.
    ``system_prompt`` goes in the chat template's system turn (None: the model's default).
    ``max_new_tokens`` overrides ``inference.max_new_tokens`` when set.
    """

    source: SourceParams = field(default_factory=SourceParams)
    """Where the items come from (a mapping, or just its kind: `source: jsonl`)."""
    train_size: int | None = None
    """Items in the agent's train.jsonl; null: all the source has (fixed pools)."""
    test_size: int | None = None
    """Items in the sealed test split; null: all the source's test items."""
    validation_size: int = 0
    """Items in the validation split, held out of train.jsonl; 0: none."""
    train_seed: int = 1_000_000
    """Seed of the train split."""
    test_seed: int = 0
    """Seed of the test split."""
    validation_seed: int = 2_000_000
    """Seed of the validation split."""
    held_out_share: float = 0.5
    """Procedural sources: the share of the generator's problems (by a hash of the question) kept
    for test and its twins, never train's or validation's (tasks/gsm8k/splits.py)."""
    shots: int = 0
    """Worked train examples in each prompt, 0..16."""
    protocol: str = "a2rl"
    """The prompt, one of PROTOCOLS: a2rl (instruction, shots, question) or lm_eval_cot
    (lm-evaluation-harness gsm8k_cot's fixed 8-shot chain of thought, tasks/gsm8k/lm_eval.py)."""
    instruction: str = DEFAULT_INSTRUCTION
    """The user turn's opening, before the examples and the question."""
    system_prompt: str | None = None
    """The chat template's system turn; null: the model's default."""
    max_new_tokens: int | None = None
    """Overrides inference.max_new_tokens when set."""

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
        require(isinstance(self.held_out_share, (int, float))
                and 0 < self.held_out_share < 1,
                f"task.params.held_out_share={self.held_out_share!r}; expected a number "
                f"strictly between 0 and 1")
        for name in ("train_seed", "test_seed", "validation_seed"):
            require(isinstance(getattr(self, name), int),
                    f"task.params.{name}={getattr(self, name)!r}; expected an integer")
        require(isinstance(self.shots, int) and 0 <= self.shots <= 16,
                f"task.params.shots={self.shots!r}; expected an integer in 0..16")
        require(self.protocol in PROTOCOLS,
                f"task.params.protocol={self.protocol!r}; expected one of {PROTOCOLS}")
        require(self.protocol == "a2rl" or self.shots == 0,
                f"task.params.shots={self.shots} with protocol={self.protocol}: that protocol "
                f"brings its own worked examples; set shots: 0")
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
