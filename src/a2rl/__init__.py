"""Agent² RL-Bench: benchmark LLM agents that engineer post-training of another model."""

__version__ = "0.1.0"

import importlib


def lazy_face(package: str, face: dict[str, str]):
    """A package's ``__getattr__`` that imports the module defining a face name (``face``: name
    -> module of ``package``) on first use: for the packages every ``a2rl`` command imports
    (a2rl.pipeline, a2rl.grading), whose modules most commands never need."""

    def __getattr__(name: str):
        if name not in face:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{face[name]}"), name)

    return __getattr__
