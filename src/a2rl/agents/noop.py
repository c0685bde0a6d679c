"""Reference agent ``noop``: submits the base model unchanged, once (an honest zero)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path


def main() -> int:
    workspace = Path(os.environ["A2RL_WORKSPACE"])
    target = workspace / "output" / "base"
    if not target.exists():
        shutil.copytree(workspace / "base_model", target)
    return subprocess.call(["a2rl", "submit", str(target)])


if __name__ == "__main__":
    sys.exit(main())
