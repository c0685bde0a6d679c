"""The AlpacaEval task's options (``task.params`` in conf/task/alpacaeval.yaml), checked on
construction.

The paper's setting (the default): the 805 instructions are all sealed, the agent trains on
the first 2,000 rows of tatsu-lab/alpaca, GPT-4 Turbo judges through the recording proxy::

    params:
      eval_source: hf              # tatsu-lab/alpaca_eval, alpaca_eval_gpt4_baseline
      train_source: alpaca
      train_size: 2000
      judge: {kind: api, driver: gpt_4_turbo, max_usd: 20}

The offline variant (not AlpacaEval 2.0): a seeded split of the 805 under paths.data (`a2rl
data fetch alpacaeval`; the default and ci grids read the 101-instruction sample in
tests/fixtures/data, their cells' paths.data), the rest as training data with the GPT-4 Turbo
outputs as targets, the grader's own SmolLM2 as the judge, alpaca_eval's length-only GLM::

    params:
      eval_source: file
      eval_file: alpacaeval/alpaca_eval_gpt4_baseline.json
      train_source: split
      test_size: 50
      judge: {kind: local}
      lc_glm: length_controlled_minimal
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from omegaconf import OmegaConf

from a2rl.task import ConfigError, ModelConfig, check_keys, require

from .metric import GLMS

EVAL_SOURCES = ("file", "hf")
TRAIN_SOURCES = ("split", "alpaca")
JUDGE_KINDS = ("local", "openai", "api")
ANSWERS = ("logprobs", "text")


@dataclass
class JudgeParams:
    """Which judge, and how it is asked.

    ``kind``: ``local`` (a HF model in the grader: ``model``, default SmolLM2-135M-Instruct,
    prepared like a base model), ``openai`` (an OpenAI-compatible endpoint: ``base_url``,
    ``model``, key in ``$api_key_env``) or ``api`` (``driver``: a conf/driver/ name, called
    through a recording proxy; prices from the driver config).
    ``answer``: ``logprobs`` (the weighted judge: P(m) / (P(m) + P(M))) or ``text`` (a ranking
    judge's sampled identifier, for models without logprobs; ``max_tokens`` must then leave
    room for their reasoning).
    ``both_orders``: ask with the reference first and with the model first and average
    (position bias); false asks reference-first only. Neither is AlpacaEval 2.0's protocol,
    which asks one order per instruction, drawn at random with the instruction as seed
    (docs/deviations.md#alpacaeval).
    ``max_usd``: judge spending limit per run (null: none); when reached, grading stops and the
    submission is recorded as ``judge_failed``. ``retries``/``backoff_s``/``timeout_s``: for
    HTTP judges.
    """

    kind: str = "local"
    model: dict[str, Any] = field(default_factory=lambda: {
        "name": "smollm2-135m-instruct", "source": "smollm2_gguf"})
    base_url: str | None = None
    api_key_env: str | None = None
    driver: str | None = None
    answer: str = "logprobs"
    max_tokens: int = 1
    top_logprobs: int = 5
    both_orders: bool = True
    batch_size: int = 4
    max_input_tokens: int | None = None
    precision: str = "fp32"
    max_usd: float | None = None
    retries: int = 4
    backoff_s: float = 2.0
    timeout_s: float = 60.0
    concurrency: int = 4
    price_in_per_mtok: float = 0.0
    price_out_per_mtok: float = 0.0

    def __post_init__(self) -> None:
        require(self.kind in JUDGE_KINDS,
                 f"task.params.judge.kind={self.kind!r}; expected one of {JUDGE_KINDS}")
        require(self.answer in ANSWERS,
                 f"task.params.judge.answer={self.answer!r}; expected one of {ANSWERS}")
        require(self.kind != "openai" or bool(self.base_url and isinstance(self.model, str)),
                 "task.params.judge.kind=openai needs base_url and model (the served name)")
        require(self.kind != "api" or bool(self.driver),
                 "task.params.judge.kind=api needs driver (a conf/driver/ name)")
        require(self.kind != "local" or self.answer == "logprobs",
                 "task.params.judge: the local judge reads logits (answer: logprobs)")
        if self.kind == "local":
            try:
                self.model_config()
            except (TypeError, ValueError) as err:
                raise ConfigError(f"task.params.judge.model: {err}") from err
        require(self.max_usd is None or self.max_usd > 0,
                 f"task.params.judge.max_usd={self.max_usd!r}; expected > 0 or null")
        require(self.retries >= 0 and self.backoff_s >= 0 and self.timeout_s > 0,
                 "task.params.judge: retries and backoff_s must be >= 0, timeout_s > 0")
        require(self.max_tokens >= 1 and self.batch_size >= 1 and self.concurrency >= 1,
                 "task.params.judge: max_tokens, batch_size and concurrency must be >= 1")

    def model_config(self) -> ModelConfig:
        return ModelConfig(**dict(self.model))


@dataclass
class AlpacaEvalParams:
    """Data, generation, judge and metric of the AlpacaEval task.

    Evaluation set (``eval_source``): ``file`` (``eval_file``, relative to paths.data: an
    alpaca_eval-format JSON list with instruction and output, e.g. the 805 `a2rl data fetch
    alpacaeval` installs, or the 101-instruction sample in tests/fixtures/data) or ``hf``
    (``hf_id``/``hf_file`` from the Hub). ``test_size`` instructions (null: all 805) drawn with
    ``seed`` are sealed.

    Training data (``train_source``): ``split`` (the other instructions, reference outputs as
    targets; needs test_size < 805) or ``alpaca`` (the first ``train_size`` rows of
    ``alpaca_hf_id``, minus any whose instruction is sealed).

    Generation: one user turn (the instruction; ``system_prompt`` in the system turn), the
    model's chat template, greedy, ``max_new_tokens`` (paper: 512).

    Metric: ``lc_glm`` (see ``metric``); ``hub_files`` maps the Hub files the GLM fetches
    (df_gamed.csv, instruction_difficulty.csv) to local copies, relative to paths.data.
    """

    eval_source: str = "hf"
    eval_file: str | None = None
    hf_id: str = "tatsu-lab/alpaca_eval"
    hf_file: str = "alpaca_eval_gpt4_baseline.json"
    hf_revision: str | None = None  # the Hub commit of hf_id (null: the newest)
    test_size: int | None = None
    seed: int = 0
    train_source: str = "alpaca"
    train_size: int | None = 2000
    alpaca_hf_id: str = "tatsu-lab/alpaca"
    alpaca_revision: str | None = None  # the Hub commit of alpaca_hf_id (null: the newest)
    system_prompt: str | None = None
    max_new_tokens: int = 512
    judge: JudgeParams = field(default_factory=JudgeParams)
    lc_glm: str = "length_controlled_v1"
    hub_files: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.judge, JudgeParams):
            raw = dict(self.judge or {})
            check_keys(JudgeParams, raw, "task.params.judge")
            self.judge = JudgeParams(**raw)
        require(self.eval_source in EVAL_SOURCES,
                 f"task.params.eval_source={self.eval_source!r}; expected one of {EVAL_SOURCES}")
        require(self.eval_source != "file" or bool(self.eval_file),
                 "task.params.eval_source=file needs eval_file")
        require(self.train_source in TRAIN_SOURCES,
                 f"task.params.train_source={self.train_source!r}; expected one of "
                 f"{TRAIN_SOURCES}")
        require(self.test_size is None or self.test_size >= 1,
                 f"task.params.test_size={self.test_size!r}; expected >= 1 or null (all)")
        require(self.train_source != "split" or self.test_size is not None,
                 "task.params.train_source=split needs a test_size below the set's size")
        require(self.train_size is None or self.train_size >= 1,
                 f"task.params.train_size={self.train_size!r}; expected >= 1 or null (all)")
        require(self.max_new_tokens >= 1,
                 f"task.params.max_new_tokens={self.max_new_tokens!r}; expected >= 1")
        require(self.lc_glm in GLMS,
                 f"task.params.lc_glm={self.lc_glm!r}; expected one of {GLMS}")

    @classmethod
    def from_dict(cls, raw: dict[str, Any] | None) -> AlpacaEvalParams:
        """Build from ``TaskConfig.params``; unknown keys are an error that names them."""
        if OmegaConf.is_config(raw):
            raw = OmegaConf.to_container(raw, resolve=True)
        raw = dict(raw or {})
        check_keys(cls, raw, "task.params")
        return cls(**raw)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
