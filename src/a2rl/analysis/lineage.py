"""What became of a run's artifacts, read back after the run.

Model lineage (``artifact_lineage``, post hoc from the grader's store): each submitted artifact's
size, whether it is the base model byte for byte, whether its weights equal the base's (only
configuration or prompt files changed), and its parent: the base model or the earlier submission
whose weights are nearest to its own (relative L2 distance on a fixed sample of every tensor,
``weight_sketch``).

The agent CLI's transcript (``read_transcript``): ``transcript.jsonl`` in the run directory,
when an LLM agent's stack left one (``a2rl.llm.stacks``), read for the route and the integrity
checks. Token and cost totals of the LLM calls come from ``a2rl.llm.proxy.llm_totals``.

``export_selected`` puts the final grade's selected artifact under results/models/ so DVC can
track it (dvc.yaml's ``results/models`` output).
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import zlib
from pathlib import Path
from typing import Any, Optional

from a2rl.common.files import utc_now, write_json_atomic
from a2rl.common.records import FinalRecord, LedgerEntry
from a2rl.grading.artifacts import artifact_bytes, stored_artifact

log = logging.getLogger(__name__)

SKETCH_PER_TENSOR = 4096  # values sampled from each tensor


# --------------------------------------------------------------------------------- lineage


def artifact_kind(folder: Path) -> str:
    """``adapter`` (a PEFT adapter), ``full`` (a model with its config) or ``unknown``."""
    folder = Path(folder)
    if (folder / "adapter_config.json").is_file():
        return "adapter"
    if (folder / "config.json").is_file():
        return "full"
    return "unknown"


def weight_sketch(folder: Path) -> Optional[dict[str, Any]]:
    """A fixed sample of every tensor of the safetensors weights in ``folder`` (the same
    positions for the same tensor name and shape in any model), or None without such weights."""
    import numpy as np
    import torch
    from safetensors import safe_open

    files = sorted(Path(folder).glob("*.safetensors"))
    if not files:
        return None
    sketch: dict[str, Any] = {}
    for path in files:
        with safe_open(str(path), framework="pt") as fh:
            for name in fh.keys():
                tensor = fh.get_tensor(name).reshape(-1)
                if not (tensor.is_floating_point() and tensor.numel()):
                    continue
                n = tensor.numel()
                if n > SKETCH_PER_TENSOR:
                    rng = np.random.default_rng(zlib.crc32(f"{name}:{n}".encode()))
                    index = torch.from_numpy(rng.choice(n, SKETCH_PER_TENSOR, replace=False))
                    tensor = tensor[index]
                sketch[name.removeprefix("base_model.model.")] = (
                    n, tensor.to(torch.float64).numpy())
    return sketch


def sketch_distance(a: Optional[dict], b: Optional[dict]) -> Optional[float]:
    """Relative L2 distance ||a - b|| / ||b|| over the tensors both share (same name, same
    size); None when they share none (different architectures, adapters vs full models)."""
    if not a or not b:
        return None
    num = den = 0.0
    shared = 0
    for name, (n, values) in a.items():
        other = b.get(name)
        if other is None or other[0] != n:
            continue
        shared += 1
        num += float(((values - other[1]) ** 2).sum())
        den += float((other[1] ** 2).sum())
    if not shared or shared < 0.5 * max(len(a), len(b)):
        return None
    return math.sqrt(num / den) if den > 0 else (0.0 if num == 0 else math.inf)


def artifact_lineage(ledger: list[LedgerEntry], store: Path, base_model: Optional[Path],
                     base_hash: Optional[str]) -> list[dict[str, Any]]:
    """One record per distinct valid artifact, in order of first submission: hash, submission
    ids, bytes, kind, equals_base (same bytes as the base), weights_equal_base (same weights,
    other files changed), parent ("base", "submission-<id>" or None) and parent_distance."""
    seen: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    for entry in ledger:
        digest = entry.artifact_hash
        if not entry.valid or not digest:
            continue
        if digest in seen:
            seen[digest]["submissions"].append(entry.submission_id)
            continue
        folder = stored_artifact(store, digest)
        seen[digest] = {"artifact_hash": digest, "submissions": [entry.submission_id],
                        "model_path": entry.model_path,
                        "bytes": entry.artifact_bytes or artifact_bytes(folder),
                        "kind": artifact_kind(folder) if folder.is_dir() else "missing",
                        "equals_base": bool(entry.equals_base)
                        or (base_hash is not None and digest == base_hash),
                        "weights_equal_base": None, "parent": None, "parent_distance": None,
                        "distances": {}}
        order.append(digest)
    if not order:
        return []
    base_sketch = _safe_sketch(base_model) if base_model else None
    sketches: dict[str, Optional[dict]] = {}
    for i, digest in enumerate(order):
        record = seen[digest]
        if record["equals_base"]:
            record |= {"weights_equal_base": True, "parent": "base", "parent_distance": 0.0,
                       "distances": {"base": 0.0}}
            sketches[digest] = base_sketch
            continue
        folder = stored_artifact(store, digest)
        mine = _safe_sketch(folder) if record["kind"] == "full" else None
        sketches[digest] = mine
        candidates = {"base": sketch_distance(mine, base_sketch)}
        for earlier in order[:i]:
            label = f"submission-{seen[earlier]['submissions'][0]}"
            candidates[label] = sketch_distance(mine, sketches.get(earlier))
        known = {k: round(v, 6) for k, v in candidates.items() if v is not None}
        record["distances"] = known
        record["weights_equal_base"] = known.get("base") == 0.0 if "base" in known else None
        if record["kind"] == "adapter":
            record["parent"] = "base"
        elif known:
            parent = min(known, key=lambda k: (known[k], k != "base"))
            record["parent"], record["parent_distance"] = parent, known[parent]
    return [seen[d] for d in order]


def _safe_sketch(folder: Path) -> Optional[dict]:
    try:
        return weight_sketch(folder)
    except Exception as err:  # unreadable weights: lineage unknown, never a failed summary
        log.warning("cannot read weights of %s: %s", folder, err)
        return None


# ------------------------------------------------------------------------------ transcript


def read_transcript(path: Path) -> list[dict[str, Any]]:
    """The records of an agent CLI's transcript.jsonl (none when there is no such file, or when
    it cannot be read safely: ``a2rl.analysis.transcripts.read_lines``)."""
    from a2rl.analysis.transcripts import TranscriptError, read_lines

    try:
        return read_lines(path)
    except TranscriptError as err:
        if Path(path).exists() or Path(path).is_symlink():
            log.warning("%s", err)
        return []


# ------------------------------------------------------------------- selected model for DVC


def export_selected(final: Path, store: Path, dest: Path) -> dict[str, Any]:
    """Put the selected artifact of a run (final.json's ``artifact_hash``) in ``dest/model``
    (hard links where possible) with ``dest/selected.json`` describing it; a run without a
    valid submission gets only selected.json (its model is the base). Returns selected.json."""
    record = FinalRecord.load(final)
    digest = record.artifact_hash
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    info = {"task": record.task, "agent": record.agent, "driver": record.driver,
            "seed": record.seed, "selected_submission": record.selected_submission,
            "artifact_hash": digest, "test_score": record.test_score,
            "baseline": record.baseline, "improvement": record.improvement,
            "no_valid_submission": record.no_valid_submission, "exported": utc_now()}
    if digest:
        src = stored_artifact(store, digest)
        if not src.is_dir():
            raise FileNotFoundError(f"selected artifact {digest} is not in {store}")
        shutil.copytree(src, dest / "model", copy_function=_link_or_copy)
        info["bytes"] = artifact_bytes(dest / "model")
    write_json_atomic(dest / "selected.json", info)
    return info


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
