"""a2rl.models: hashing (hf_folder), the tiny model and SmolLM2 conversion (provision) and
submission checks (submission)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from a2rl.models.hf_folder import content_hash
from a2rl.models.provision import build_tiny_model, convert_smollm2, prepare_base_model
from a2rl.models.submission import InvalidSubmission, materialize_submission

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")


def _copy(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    return dest


def _load(folder: Path):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()


def _logits(model, ids=(1, 10, 20, 30, 40)):
    with torch.inference_mode():
        return model(torch.tensor([list(ids)])).logits


# ----------------------------------------------------------------------------- content_hash


def test_content_hash_stable_and_sensitive(tmp_path, tiny_model):
    folder = _copy(tiny_model, tmp_path / "m")
    h = content_hash(folder)
    assert h == content_hash(folder) == content_hash(tiny_model)
    assert len(h) == 64

    cfg = folder / "config.json"
    data = bytearray(cfg.read_bytes())
    data[-2] ^= 1
    cfg.write_bytes(bytes(data))
    assert content_hash(folder) != h
    data[-2] ^= 1
    cfg.write_bytes(bytes(data))
    assert content_hash(folder) == h

    (folder / "config.json").rename(folder / "config2.json")
    assert content_hash(folder) != h


def test_content_hash_covers_subfolders_and_refuses_symlinks(tmp_path):
    a = tmp_path / "a"
    (a / "sub").mkdir(parents=True)
    (a / "sub" / "x.txt").write_text("x")
    h = content_hash(a)
    (a / "sub" / "x.txt").rename(a / "x.txt")
    assert content_hash(a) != h
    os.symlink(a / "x.txt", a / "link.txt")
    with pytest.raises(ValueError, match="symlink"):
        content_hash(a)


# ----------------------------------------------------------------------------- tiny model


def test_tiny_model_is_deterministic_and_fast(tmp_path, tiny_model):
    start = time.perf_counter()
    again = build_tiny_model(tmp_path / "again", seed=0)
    assert time.perf_counter() - start < 10
    assert content_hash(again) == content_hash(tiny_model)
    other = build_tiny_model(tmp_path / "other", seed=1)
    assert content_hash(other) != content_hash(tiny_model)
    assert not (tmp_path / "again.tmp").exists()


def test_tiny_model_shape_and_tokenizer(tiny_model):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model)
    model = _load(tiny_model)
    assert model.config.model_type == "qwen2"
    assert 900 <= len(tok) <= 1000 == model.config.vocab_size
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    assert tok.chat_template
    assert {"model.safetensors", "config.json", "generation_config.json",
            "tokenizer.json"} <= {p.name for p in tiny_model.iterdir()}
    text = "Tom has 12 apples. def f(x): return x + 1"
    assert tok.decode(tok(text).input_ids) == text


def test_prepare_base_model_tiny_and_path(tmp_path, tiny_model):
    from a2rl.config.types import ModelConfig

    tiny = prepare_base_model(ModelConfig(name="tiny", source="tiny"), tmp_path / "tiny")
    assert content_hash(tiny) == content_hash(tiny_model)
    copied = prepare_base_model(ModelConfig(name="local", source="path", path=str(tiny_model)),
                                tmp_path / "local")
    assert copied == tmp_path / "local" and content_hash(copied) == content_hash(tiny_model)
    (tmp_path / "junk").mkdir()
    with pytest.raises(FileNotFoundError, match="not an HF model folder"):
        prepare_base_model(ModelConfig(name="junk", source="path", path=str(tmp_path / "junk")),
                           tmp_path / "junk_out")


# ----------------------------------------------------------------------------- accepted


def test_accepts_full_model(tmp_path, tiny_model):
    src = _copy(tiny_model, tmp_path / "sub")
    assert materialize_submission(src, tiny_model, tmp_path / "out") == src
    assert not (tmp_path / "out").exists()


def test_accepts_model_without_tokenizer(tmp_path, tiny_model):
    src = _copy(tiny_model, tmp_path / "sub")
    for name in TOKENIZER_FILES:
        (src / name).unlink()
    out = materialize_submission(src, tiny_model, tmp_path / "out")
    assert out == tmp_path / "out"
    for name in TOKENIZER_FILES:
        assert (out / name).read_bytes() == (tiny_model / name).read_bytes()
    assert torch.equal(_logits(_load(out)), _logits(_load(tiny_model)))


def test_accepts_sharded_and_bin_weights(tmp_path, tiny_model):
    model = _load(tiny_model)
    sharded = tmp_path / "sharded"
    model.save_pretrained(sharded, max_shard_size="200KB")
    assert (sharded / "model.safetensors.index.json").is_file()
    assert materialize_submission(sharded, tiny_model, tmp_path / "out1") == tmp_path / "out1"

    legacy = tmp_path / "legacy"
    legacy.mkdir()
    shutil.copy(tiny_model / "config.json", legacy / "config.json")
    torch.save(model.state_dict(), legacy / "pytorch_model.bin")
    out = materialize_submission(legacy, tiny_model, tmp_path / "out2")
    assert torch.equal(_logits(_load(out)), _logits(model))


def test_accepts_lora_adapter_and_merges_it(tmp_path, tiny_model):
    from peft import LoraConfig, get_peft_model

    base = _load(tiny_model)
    peft_model = get_peft_model(_load(tiny_model), LoraConfig(
        r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"))
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    src = tmp_path / "adapter"
    peft_model.save_pretrained(src)
    assert (src / "adapter_model.safetensors").is_file()

    out = materialize_submission(src, tiny_model, tmp_path / "out")
    assert out == tmp_path / "out"
    assert (out / "model.safetensors").is_file() and (out / "tokenizer.json").is_file()
    merged = _load(out)
    q = "model.layers.0.self_attn.q_proj.weight"
    assert not torch.equal(merged.state_dict()[q], base.state_dict()[q])
    k = "model.layers.0.self_attn.k_proj.weight"
    assert torch.equal(merged.state_dict()[k], base.state_dict()[k])
    expected = _logits(peft_model.eval())
    assert torch.allclose(_logits(merged), expected, atol=1e-4)
    assert not torch.allclose(_logits(merged), _logits(base), atol=1e-3)


# ----------------------------------------------------------------------------- rejected


def _reject(src: Path, base: Path, *fragments: str) -> str:
    with pytest.raises(InvalidSubmission) as info:
        materialize_submission(src, base, src.parent / "out")
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, message
    return message


def test_rejects_missing_and_non_directory(tmp_path, tiny_model):
    _reject(tmp_path / "nothing", tiny_model, "does not exist")
    (tmp_path / "file").write_text("hello")
    _reject(tmp_path / "file", tiny_model, "not a directory")


def test_rejects_empty_folder(tmp_path, tiny_model):
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    _reject(tmp_path / "empty", tiny_model, "empty folder")


def test_rejects_folder_that_is_not_a_model(tmp_path, tiny_model):
    src = tmp_path / "sub"
    src.mkdir()
    (src / "notes.txt").write_text("my model is great")
    _reject(src, tiny_model, "not a model", "config.json", "adapter_config.json", "notes.txt")


def test_rejects_symlink(tmp_path, tiny_model):
    src = _copy(tiny_model, tmp_path / "sub")
    (src / "model.safetensors").unlink()
    os.symlink(tiny_model / "model.safetensors", src / "model.safetensors")
    _reject(src, tiny_model, "symlink", "model.safetensors")


def test_rejects_config_that_is_not_json(tmp_path, tiny_model):
    src = _copy(tiny_model, tmp_path / "sub")
    (src / "config.json").write_text("{not json")
    _reject(src, tiny_model, "config.json is not valid JSON")
    (src / "config.json").write_bytes(b"\xff\xfe\x00garbage")
    _reject(src, tiny_model, "config.json is not valid JSON")


@pytest.mark.parametrize("model_type, fragment", [("no_such_arch", "no_such_arch"),
                                                  ("vit", "not a causal language model")])
def test_rejects_unsupported_architecture(tmp_path, tiny_model, model_type, fragment):
    src = _copy(tiny_model, tmp_path / "sub")
    cfg = json.loads((src / "config.json").read_text())
    cfg["model_type"] = model_type
    cfg["architectures"] = ["SomethingElse"]
    (src / "config.json").write_text(json.dumps(cfg))
    _reject(src, tiny_model, "unsupported architecture", fragment)


@pytest.mark.parametrize("key, value", [("hidden_size", "wide"), ("num_attention_heads", 0)])
def test_rejects_invalid_config_values(tmp_path, tiny_model, key, value):
    src = _copy(tiny_model, tmp_path / "sub")
    cfg = json.loads((src / "config.json").read_text())
    cfg[key] = value
    (src / "config.json").write_text(json.dumps(cfg))
    _reject(src, tiny_model, "config.json")


def test_rejects_sharded_index_naming_missing_shard(tmp_path, tiny_model):
    src = tmp_path / "sub"
    _load(tiny_model).save_pretrained(src, max_shard_size="200KB")
    shard = max(src.glob("model-*.safetensors"))
    shard.unlink()
    _reject(src, tiny_model, "model.safetensors.index.json", shard.name, "not in the submission")


def test_rejects_missing_weights(tmp_path, tiny_model):
    src = _copy(tiny_model, tmp_path / "sub")
    (src / "model.safetensors").unlink()
    _reject(src, tiny_model, "no weights file", "model.safetensors")


@pytest.mark.parametrize("damage", ["truncate", "garbage", "header", "header_size"])
def test_rejects_corrupt_weights(tmp_path, tiny_model, damage):
    src = _copy(tiny_model, tmp_path / "sub")
    weights = src / "model.safetensors"
    data = weights.read_bytes()
    if damage == "truncate":
        weights.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        weights.write_bytes(os.urandom(4096))
    elif damage == "header":
        weights.write_bytes(data[:8] + b"!!!!" + data[12:])
    else:
        weights.write_bytes((len(data) * 2).to_bytes(8, "little") + data[8:])
    _reject(src, tiny_model, "corrupt weights in model.safetensors")


def test_rejects_corrupt_bin_weights(tmp_path, tiny_model):
    src = _copy(tiny_model, tmp_path / "sub")
    (src / "model.safetensors").unlink()
    (src / "pytorch_model.bin").write_bytes(b"not a pickle at all")
    _reject(src, tiny_model, "corrupt weights in pytorch_model.bin")


def test_rejects_weights_that_do_not_match_config(tmp_path, tiny_model):
    src = _copy(tiny_model, tmp_path / "sub")
    cfg = json.loads((src / "config.json").read_text())
    cfg["intermediate_size"] = 256
    (src / "config.json").write_text(json.dumps(cfg))
    _reject(src, tiny_model, "weight shapes do not match config.json", "mlp")


def test_rejects_missing_tensors(tmp_path, tiny_model):
    src = _copy(tiny_model, tmp_path / "sub")
    state = load_file(src / "model.safetensors")
    del state["model.layers.1.mlp.up_proj.weight"]
    save_file(state, src / "model.safetensors", metadata={"format": "pt"})
    _reject(src, tiny_model, "missing", "model.layers.1.mlp.up_proj.weight")


def test_rejects_config_describing_a_huge_model(tmp_path, tiny_model):
    src = _copy(tiny_model, tmp_path / "sub")
    cfg = json.loads((src / "config.json").read_text())
    cfg["num_hidden_layers"] = 400
    cfg["layer_types"] = ["full_attention"] * 400
    (src / "config.json").write_text(json.dumps(cfg))
    _reject(src, tiny_model, "do not match config.json", "parameters")


def test_rejects_other_vocabulary(tmp_path, tiny_model):
    other = build_tiny_model(tmp_path / "other", seed=1)
    src = _copy(tiny_model, tmp_path / "sub")
    for name in TOKENIZER_FILES:
        shutil.copy(other / name, src / name)
    _reject(src, tiny_model, "wrong vocabulary", "tokenizer")


def test_rejects_embedding_smaller_than_vocabulary(tmp_path, tiny_model):
    model = _load(tiny_model)
    model.resize_token_embeddings(900)
    src = tmp_path / "sub"
    model.save_pretrained(src)
    _reject(src, tiny_model, "wrong vocabulary", "900 rows", "1000 tokens")


def test_rejects_adapter_for_another_model(tmp_path, tiny_model):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.from_pretrained(tiny_model)
    cfg.hidden_size, cfg.intermediate_size = 32, 64
    wider = AutoModelForCausalLM.from_config(cfg)
    src = tmp_path / "adapter"
    get_peft_model(wider, LoraConfig(r=4, target_modules=["q_proj"])).save_pretrained(src)
    _reject(src, tiny_model, "adapter does not fit the base model")


def test_rejects_adapter_targeting_missing_modules(tmp_path, tiny_model):
    from peft import LoraConfig, get_peft_model

    src = tmp_path / "adapter"
    lora = LoraConfig(r=4, target_modules=["q_proj"])
    get_peft_model(_load(tiny_model), lora).save_pretrained(src)
    cfg = json.loads((src / "adapter_config.json").read_text())
    cfg["target_modules"] = ["c_attn"]
    (src / "adapter_config.json").write_text(json.dumps(cfg))
    _reject(src, tiny_model, "adapter does not fit the base model", "c_attn")


def test_rejects_broken_adapters(tmp_path, tiny_model):
    from peft import LoraConfig, get_peft_model

    src = tmp_path / "adapter"
    lora = LoraConfig(r=4, target_modules=["q_proj"])
    get_peft_model(_load(tiny_model), lora).save_pretrained(src)
    weights = (src / "adapter_model.safetensors").read_bytes()
    (src / "adapter_model.safetensors").write_bytes(weights[:100])
    _reject(src, tiny_model, "corrupt weights in adapter_model.safetensors")
    (src / "adapter_model.safetensors").unlink()
    _reject(src, tiny_model, "no weights file", "adapter_model.safetensors")
    (src / "adapter_config.json").write_text("[1, 2")
    _reject(src, tiny_model, "adapter_config.json is not valid JSON")
    (src / "adapter_config.json").write_text(json.dumps({"peft_type": "NOT_A_METHOD"}))
    _reject(src, tiny_model, "invalid adapter_config.json", "NOT_A_METHOD")


# ----------------------------------------------------------------------------- SmolLM2


@pytest.mark.heavy
def test_convert_smollm2_answers(tmp_path):
    from a2rl.config.types import InferenceConfig
    from a2rl.task.inference import format_chat, load_generator

    start = time.perf_counter()
    dest = convert_smollm2(tmp_path / "smollm2")
    seconds = time.perf_counter() - start
    assert (dest / "model.safetensors").is_file() and (dest / "tokenizer.json").is_file()
    again = time.perf_counter()
    assert convert_smollm2(dest) == dest  # already complete: skipped
    assert time.perf_counter() - again < 1
    gen = load_generator(dest, InferenceConfig(backend="hf", max_new_tokens=32))
    answer = gen.generate([format_chat(gen.tokenizer, "What is 2+2?")])[0]
    print(f"convert_smollm2: {seconds:.1f}s; 2+2 -> {answer!r}")
    assert answer.strip()
    # the converted model is itself a valid submission against itself
    assert materialize_submission(dest, dest, tmp_path / "out") == dest


HUB_DOWNLOAD = """
import sys
from pathlib import Path
from a2rl.config.task import ModelConfig
from a2rl.models.provision import prepare_base_model
revision = sys.argv[2] or None
cfg = ModelConfig(name="hub", source="hf", hf_id="org/tiny", revision=revision)
prepare_base_model(cfg, Path(sys.argv[1]))
"""


def test_a_hub_model_is_downloaded_at_its_configured_revision(tmp_path, tiny_model):
    """``source: hf`` with a ``revision`` loads that commit, not the branch's newest: a Hub cache
    in huggingface_hub's own layout (two commits, refs/main at the newer), read offline by the
    real loading code in a fresh process."""
    repo = tmp_path / "hub" / "models--org--tiny"
    pinned, newer = "1" * 40, "2" * 40
    build_tiny_model(repo / "snapshots" / pinned, seed=0)
    build_tiny_model(repo / "snapshots" / newer, seed=1)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(newer)
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"}
    weights = {}
    for name, revision in (("pinned", pinned), ("newest", "")):
        dest = tmp_path / name
        subprocess.run([sys.executable, "-c", HUB_DOWNLOAD, str(dest), revision], env=env,
                       check=True, capture_output=True)
        weights[name] = load_file(dest / "model.safetensors")
    snapshot = {rev: load_file(repo / "snapshots" / rev / "model.safetensors")
                for rev in (pinned, newer)}
    name = sorted(snapshot[pinned])[0]
    assert torch.equal(weights["pinned"][name], snapshot[pinned][name])
    assert torch.equal(weights["newest"][name], snapshot[newer][name])
    assert not torch.equal(snapshot[pinned][name], snapshot[newer][name])
