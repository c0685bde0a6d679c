"""An HF model folder: the files that make one up, whether one is complete, its content hash,
and writing one in a single rename. Shared by base-model provisioning (``a2rl.models.provision``)
and submission checks (``a2rl.models.submission``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

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


def content_hash(folder: Path) -> str:
    """sha256 over (relative posix path, bytes) of every regular file, in sorted path order.

    Symlinks are refused: a hash must describe bytes that are really in the folder.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise NotADirectoryError(f"content_hash: {folder} is not a directory")
    files = []
    for path in walk(folder):
        if path.is_symlink():
            raise ValueError(f"content_hash: {path} is a symlink; expected regular files only")
        if path.is_file():
            files.append(path)
        elif not path.is_dir():
            raise ValueError(f"content_hash: {path} is not a regular file")
    digest = hashlib.sha256()
    for path in sorted(files, key=lambda p: p.relative_to(folder).as_posix()):
        rel = os.fsencode(path.relative_to(folder).as_posix())  # names need not be UTF-8
        digest.update(len(rel).to_bytes(8, "big") + rel)
        digest.update(path.stat().st_size.to_bytes(8, "big"))
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


def walk(folder: Path) -> Iterator[Path]:
    """Every entry below ``folder`` without following symlinked directories."""
    for entry in folder.iterdir():
        yield entry
        if entry.is_dir() and not entry.is_symlink():
            yield from walk(entry)


def weight_files(folder: Path) -> list[Path]:
    """The full-model weights file (or shard index) in ``folder``; [] when there is none."""
    for name, index in ((SAFETENSORS_WEIGHTS, SAFETENSORS_INDEX), (PYTORCH_WEIGHTS, PYTORCH_INDEX)):
        if (folder / name).is_file():
            return [folder / name]
        if (folder / index).is_file():
            return [folder / index]
    return []


def is_complete_model(folder: Path) -> bool:
    """config.json, weights and a tokenizer: a folder transformers can load as it is."""
    folder = Path(folder)
    return ((folder / "config.json").is_file() and bool(weight_files(folder))
            and has_tokenizer(folder))


def has_tokenizer(folder: Path) -> bool:
    return (folder / "tokenizer.json").is_file() or (folder / "tokenizer_config.json").is_file()


@contextlib.contextmanager
def atomic_dir(dest: Path) -> Iterator[Path]:
    """Yield ``dest.tmp`` to write into; on success it replaces ``dest`` in one rename."""
    dest = Path(dest)
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        yield tmp
        for path in walk(tmp):
            path.chmod(0o755 if path.is_dir() else 0o644)
        if dest.exists():
            shutil.rmtree(dest)
        tmp.rename(dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def is_tied_key(model, key: str) -> bool:
    """``key`` is the output head of a model that ties it to the input embedding: a checkpoint
    need not hold it."""
    return bool(getattr(model.config, "tie_word_embeddings", False)) and key.endswith(
        "lm_head.weight")
