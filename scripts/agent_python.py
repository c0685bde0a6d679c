"""Build the agents' Python environment, resources/agent-python/ (docs/sandbox.md).

    python scripts/agent_python.py            # build it, or say it is up to date
    python scripts/agent_python.py --vllm     # with vLLM as well (GPU machines)
    python scripts/agent_python.py --force    # rebuild
    python scripts/agent_python.py --print-requirements   # what scripts/lock.sh locks

A virtual environment of this interpreter's installation with the training stack at the
versions pyproject.toml pins (a2rl.isolation.agent_python.AGENT_PACKAGES, and the optional
groups ENV_EXTRAS: the real ALFWorld engine) and nothing of the harness's: no a2rl, no task
package, no task data. Everything but torch comes from requirements/agents.lock (every
dependency pinned, with hashes); torch is installed by name first, as scripts/setup.sh does, so
a GPU machine's CUDA build is kept. pip's cache makes a rebuild cheap (Fast Downward's wheel
included).
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

from a2rl.common.interpreter import base_interpreter
from a2rl.isolation.agent_python import (
    MARKER,
    agent_python_dir,
    extra_requirements,
    locks_digest,
    pinned_requirements,
)

REPO = Path(__file__).resolve().parent.parent
REQUIREMENTS = REPO / "requirements"
LOCK = REQUIREMENTS / "agents.lock"
BOOTSTRAP = REQUIREMENTS / "bootstrap.lock"  # pip and wheel, as in scripts/setup.sh


def requirements(vllm: bool) -> list[str]:
    pyproject = REPO / "pyproject.toml"
    wanted = pinned_requirements(pyproject) + extra_requirements(pyproject)
    if vllm:  # the harness's own vLLM (a CUDA build installed by hand) when it has one
        wanted.append(vllm_requirement())
    return wanted


def vllm_requirement() -> str:
    try:
        return f"vllm=={importlib.metadata.version('vllm')}"
    except importlib.metadata.PackageNotFoundError:
        return "vllm"


def built_with(venv: Path) -> dict | None:
    """What the environment was built from (its marker), or None when it is not complete."""
    marker = venv / MARKER
    return json.loads(marker.read_text()) if marker.is_file() else None


def build(venv: Path, wanted: list[str]) -> None:
    """A fresh venv at ``venv``: torch by name, then ``lock`` exactly (hashes checked, no
    resolution), then vLLM when ``wanted`` names it; the marker last, so a broken build shows."""
    if venv.exists():
        shutil.rmtree(venv)
    subprocess.run([base_interpreter(), "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    subprocess.run(pip + ["--require-hashes", "-r", str(BOOTSTRAP)], check=True)
    # torch alone first, as scripts/setup.sh does: its CPU wheel before anything pulls CUDA's
    subprocess.run(pip + [r for r in wanted if r.startswith("torch")], check=True)
    subprocess.run(pip + ["--require-hashes", "--no-deps", "-r", str(LOCK)], check=True)
    vllm = [r for r in wanted if r.startswith("vllm")]
    if vllm:  # a GPU machine's own stack, not locked (it follows the machine's CUDA)
        subprocess.run(pip + vllm, check=True)
    marker = {"requirements": wanted, "lock_sha256": locks_digest(REQUIREMENTS)}
    (venv / MARKER).write_text(json.dumps(marker, indent=1) + "\n")


def disk_bytes(path: Path) -> int:
    return sum(p.lstat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resources", type=Path, default=REPO / "resources")
    parser.add_argument("--vllm", action="store_true", help="install vLLM too (GPU machines)")
    parser.add_argument("--force", action="store_true", help="rebuild even if up to date")
    parser.add_argument("--print-requirements", action="store_true",
                        help="print the requirements scripts/lock.sh locks, and stop")
    args = parser.parse_args(argv)
    if args.print_requirements:
        print("\n".join(requirements(vllm=False)))
        return 0
    venv = agent_python_dir(args.resources.resolve())
    wanted = requirements(args.vllm)
    if not args.force and built_with(venv) == {"requirements": wanted,
                                               "lock_sha256": locks_digest(REQUIREMENTS)}:
        print(f"agent python: {venv} is up to date")
        return 0
    started = time.monotonic()
    build(venv, wanted)
    print(f"agent python: built {venv} in {time.monotonic() - started:.0f} s "
          f"({disk_bytes(venv) / 1e9:.2f} GB): {' '.join(wanted)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
