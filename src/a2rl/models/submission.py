"""Submitted artifacts: ``materialize_submission(src, base_model, dest)`` checks that ``src`` is
a full HF causal-LM folder or a PEFT adapter for ``base_model`` and writes a loadable full model
to ``dest``; anything else raises ``InvalidSubmission`` with a specific message.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from a2rl.models.hf_folder import (
    ADAPTER_CONFIG,
    ADAPTER_WEIGHTS,
    PYTORCH_WEIGHTS,
    SAFETENSORS_INDEX,
    SAFETENSORS_WEIGHTS,
    TOKENIZER_FILES,
    atomic_dir,
    has_tokenizer,
    is_complete_model,
    is_tied_key,
    walk,
    weight_files,
)


class InvalidSubmission(ValueError):
    """A submitted artifact is not a usable model; the message says why."""



def materialize_submission(src: Path, base_model: Path, dest: Path) -> Path:
    """The folder to evaluate for submission ``src``: ``src`` itself when it is already a
    complete HF causal-LM folder, else ``dest`` (a model without tokenizer gets the base's; an
    adapter is merged into the base). Bad input raises InvalidSubmission, never anything else.
    """
    src, base_model, dest = Path(src), Path(base_model), Path(dest)
    if not is_complete_model(base_model):  # the harness's fault, not the submission's
        raise FileNotFoundError(f"base model {base_model} is not a complete HF model folder")
    try:
        return _materialize(src, base_model, dest)
    except InvalidSubmission:
        raise
    except Exception as err:  # a case the checks above did not foresee: still the submission's
        raise InvalidSubmission(
            f"cannot use submission {src.name}: {type(err).__name__}: {_clip_error(err)}") from err


def _materialize(src: Path, base_model: Path, dest: Path) -> Path:
    _check_folder(src)
    full_weights = weight_files(src)
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
    entries = list(walk(src))
    links = [p for p in entries if p.is_symlink()]
    if links:
        raise InvalidSubmission(
            f"symlinks are not allowed in a submission: {links[0].relative_to(src).as_posix()}")
    if not any(p.is_file() for p in entries):
        raise InvalidSubmission(f"empty folder: {src.name} contains no files")
    _check_sizes(src)


# What the libraries parse whole, capped before any of it is read (issue #28: a 26 MB
# config.json took the grader to 4.1 GB); real files are a few kB (configs) to ~10 MB (a
# tokenizer.json), and the caps leave ample room above them.
MAX_CONFIG_BYTES = 2**20
MAX_TOKENIZER_FILE_BYTES = 64 * 2**20
CONFIG_FILES = ("config.json", "generation_config.json", ADAPTER_CONFIG, SAFETENSORS_INDEX)
# more hidden layers than any released causal LM has by far (a 643-byte config with 20,000
# layers once cost 1.3 GB and 37 s before its shapes could be compared)
MAX_LAYERS = 512
LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")


def _check_sizes(src: Path) -> None:
    for name, cap in [(n, MAX_CONFIG_BYTES) for n in CONFIG_FILES] + \
            [(n, MAX_TOKENIZER_FILE_BYTES) for n in TOKENIZER_FILES]:
        path = src / name
        if path.is_file() and path.stat().st_size > cap:
            raise InvalidSubmission(f"{name} is {path.stat().st_size:,} bytes; the limit is "
                                    f"{cap:,}")


def _check_layers(raw: dict[str, Any]) -> None:
    """No config's layer count past MAX_LAYERS, its own or a nested text config's."""
    for config in [raw] + [v for v in raw.values() if isinstance(v, dict)]:
        for key in LAYER_KEYS:
            value = config.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool) \
                    and value > MAX_LAYERS:
                raise InvalidSubmission(f"config.json: {key}={value:g}; the limit is "
                                        f"{MAX_LAYERS} layers")


def _listing(folder: Path, limit: int = 8) -> str:
    names = sorted(p.relative_to(folder).as_posix() for p in walk(folder) if p.is_file())
    more = f", ... ({len(names) - limit} more)" if len(names) > limit else ""
    return "[" + ", ".join(names[:limit]) + more + "]"


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InvalidSubmission(f"{path.name} is not valid JSON: {err}") from err
    if not isinstance(data, dict):
        raise InvalidSubmission(
            f"{path.name} is not valid JSON object: found {type(data).__name__}")
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
    _check_layers(raw)
    described = f"model_type={raw.get('model_type')!r}, architectures={raw.get('architectures')}"
    known = isinstance(raw.get("model_type"), str) and raw["model_type"] in CONFIG_MAPPING
    try:
        config = AutoConfig.from_pretrained(src, trust_remote_code=False)
    except Exception as err:
        what = "invalid config.json" if known else "unsupported architecture in config.json"
        raise InvalidSubmission(
            f"{what} ({described}): {type(err).__name__}: {_clip_error(err)}") from err
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
            f"({type(err).__name__}: {_clip_error(err)})") from err
    expected = {k: tuple(v.shape) for k, v in skeleton.state_dict().items()}
    n_expected = sum(v.numel() for v in skeleton.parameters())
    n_found = sum(_numel(s) for s in shapes.values())
    del skeleton
    bad = [(k, expected[k], shapes[k]) for k in expected
           if k in shapes and expected[k] != shapes[k]]
    if bad:
        raise InvalidSubmission(_shape_message(bad))
    if n_found * 2 < n_expected:
        raise InvalidSubmission(
            f"weight shapes do not match config.json: it describes {n_expected:,} parameters but "
            f"the weight files hold {n_found:,} values")
    model = _load_full_model(src)
    _check_vocab(src, base_model, model)
    del model
    if has_tokenizer(src):
        return src
    with atomic_dir(dest) as tmp:
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
        text = _clip_error(err)
        if "size mismatch" in text or "shape" in text.lower():
            raise InvalidSubmission(f"weight shapes do not match config.json: {text}") from err
        raise InvalidSubmission(
            f"cannot load model from {src.name}: {type(err).__name__}: {text}") from err
    mismatched = info.get("mismatched_keys") or []
    if mismatched:
        bad = [(m[0], m[2] if len(m) > 2 else "?", m[1] if len(m) > 1 else "?")
               if isinstance(m, (tuple, list)) else (str(m), "?", "?") for m in mismatched]
        raise InvalidSubmission(_shape_message(bad))
    missing = [k for k in info.get("missing_keys") or [] if not is_tied_key(model, k)]
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
    if has_tokenizer(src):
        try:
            with _quiet_transformers():
                tok = AutoTokenizer.from_pretrained(src, trust_remote_code=False)
            vocab = tok.get_vocab()
        except Exception as err:
            raise InvalidSubmission(
                f"tokenizer in {src.name} cannot be loaded: {type(err).__name__}: "
                f"{_clip_error(err)}") from err
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
            f"{type(err).__name__}: {_clip_error(err)}") from err
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
            f"{base.config.architectures}): {type(err).__name__}: {_clip_error(err)}") from err
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
            f"{_clip_error(err)}") from err
    _check_vocab(src, base_model, merged)
    with atomic_dir(dest) as tmp:
        merged.save_pretrained(tmp)
        _copy_tokenizer(base_model, tmp)
    return dest


def _clip_error(err: BaseException, limit: int = 300) -> str:
    """An error's message on one line, cut at ``limit`` characters (library errors can quote a
    whole config or state dict)."""
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
