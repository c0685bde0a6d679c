"""Build the tiny random Qwen2 test model (ChatML tokenizer trained locally) into DEST.

    python scripts/build_tiny_model.py resources/models/tiny [--seed 0]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from a2rl.models.provision import build_tiny_model


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dest", type=Path, help="folder to write the HF model to (replaced)")
    parser.add_argument("--seed", type=int, default=0, help="same seed, same bytes")
    args = parser.parse_args(argv)
    print(build_tiny_model(args.dest, seed=args.seed))


if __name__ == "__main__":
    main()
