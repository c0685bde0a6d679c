"""Build the agents' Python environment, resources/agent-python/ (docs/sandbox.md).

    python scripts/agent_python.py            # build it, or say it is up to date
    python scripts/agent_python.py --vllm     # with vLLM as well (GPU machines)
    python scripts/agent_python.py --force    # rebuild

A virtual environment of this interpreter's installation with the training stack at the
versions pyproject.toml pins (a2rl.isolation.agent_python.AGENT_PACKAGES, and the optional
groups ENV_EXTRAS: the real ALFWorld engine) and nothing of the harness's: no a2rl, no task
package, no task data. pip's cache makes a rebuild cheap (Fast Downward's wheel included).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from a2rl.isolation.agent_python import (
    MARKER,
    agent_python_dir,
    extra_requirements,
    pinned_requirements,
)

REPO = Path(__file__).resolve().parent.parent


def requirements(vllm: bool) -> list[str]:
    pyproject = REPO / "pyproject.toml"
    wanted = pinned_requirements(pyproject) + extra_requirements(pyproject)
    if vllm:  # the harness's own vLLM (a CUDA build installed by hand) when it has one
        try:
            wanted.append(f"vllm=={importlib.metadata.version('vllm')}")
        except importlib.metadata.PackageNotFoundError:
            wanted.append("vllm")
    return wanted


def built_with(venv: Path) -> list[str] | None:
    marker = venv / MARKER
    return json.loads(marker.read_text())["requirements"] if marker.is_file() else None


def build(venv: Path, wanted: list[str]) -> None:
    """A fresh venv at ``venv`` with ``wanted``; the marker last, so a broken build shows."""
    if venv.exists():
        shutil.rmtree(venv)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    # torch alone first, as scripts/setup.sh does: its CPU wheel before anything pulls CUDA's
    torch = [r for r in wanted if r.startswith("torch")]
    subprocess.run(pip + torch, check=True)
    subprocess.run(pip + wanted, check=True)
    (venv / MARKER).write_text(json.dumps({"requirements": wanted}, indent=1) + "\n")


def disk_bytes(path: Path) -> int:
    return sum(p.lstat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resources", type=Path, default=REPO / "resources")
    parser.add_argument("--vllm", action="store_true", help="install vLLM too (GPU machines)")
    parser.add_argument("--force", action="store_true", help="rebuild even if up to date")
    args = parser.parse_args(argv)
    venv = agent_python_dir(args.resources.resolve())
    wanted = requirements(args.vllm)
    if not args.force and built_with(venv) == wanted:
        print(f"agent python: {venv} is up to date")
        return 0
    started = time.monotonic()
    build(venv, wanted)
    print(f"agent python: built {venv} in {time.monotonic() - started:.0f} s "
          f"({disk_bytes(venv) / 1e9:.2f} GB): {' '.join(wanted)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
