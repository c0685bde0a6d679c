"""Model folders: what makes an HF model folder and its content hash (``hf_folder``), the base
models a grid starts from (``provision``) and checking and materializing what an agent submits
(``submission``). Imports only ``a2rl.common`` and ``a2rl.config``."""

# ruff: noqa: I001 (a face's imports are wrapped as a grid, sorted by hand: one name a line
# would repeat its callers' import lists line for line)
from .hf_folder import content_hash, is_complete_model
from .provision import build_tiny_model, prepare_base_model
from .submission import InvalidSubmission, materialize_submission

__all__ = [
    "InvalidSubmission", "build_tiny_model", "content_hash", "is_complete_model",
    "materialize_submission", "prepare_base_model",
]
