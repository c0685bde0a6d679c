#!/usr/bin/env bash
# Sets a2rl up in this checkout: the system packages it needs (apt), then a project environment
# .venv/ made from any Python >= 3.11 on the machine (the distribution's, pyenv's, conda's) and
# filled from the lockfiles in requirements/ (scripts/lock.sh makes them), the agents' own
# environment (resources/agent-python/) and the agents' CLIs (resources/tools/). It never
# installs into a system Python. Safe to run again: seconds when nothing changed.
#
#   bash scripts/setup.sh                  # then .venv/bin/snakemake, .venv/bin/a2rl, ...
#   PYTHON=/path/to/python3.12 bash scripts/setup.sh
#
# Every prerequisite is checked before anything slow; a missing one stops the set-up with one
# line saying what to install. GPU users: install your CUDA build of torch 2.13.0 (and vllm)
# into .venv/ first (.venv/bin/pip install torch==2.13.0); set-up keeps it.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv
STAMP="$VENV/a2rl-setup.sha256"
MIN_PYTHON=3.11

say() { echo "setup.sh: $*" >&2; }
stop() { say "$*"; exit 2; }

python_version() { "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null; }
new_enough() { [ "$(printf '%s\n%s\n' "$MIN_PYTHON" "$1" | sort -V | head -1)" = "$MIN_PYTHON" ]; }

# the Python to build .venv from: $PYTHON, else the first >= 3.11 of python3 and python3.X
find_python() {
  if [ -n "${PYTHON:-}" ]; then
    local v; v=$(python_version "$PYTHON") || stop "PYTHON=$PYTHON does not run; point it at \
a Python >= $MIN_PYTHON"
    new_enough "$v" || stop "PYTHON=$PYTHON is Python $v; a2rl needs >= $MIN_PYTHON: install \
one (Debian/Ubuntu: sudo apt-get install python3.11-venv; or pyenv install 3.11) and point \
PYTHON at it"
    echo "$PYTHON"; return
  fi
  local seen="" cand v
  for cand in python3 python3.14 python3.13 python3.12 python3.11; do
    command -v "$cand" >/dev/null 2>&1 || continue
    v=$(python_version "$cand") || continue
    if new_enough "$v"; then command -v "$cand"; return; fi
    seen="$seen $cand=$v"
  done
  stop "a2rl needs Python >= $MIN_PYTHON; found${seen:- none}. Install one (Debian/Ubuntu: \
sudo apt-get install python3.11-venv; or pyenv install 3.11), or set PYTHON=/path/to/python3.11"
}

# --------------------------------------------------------------- checks, before anything slow
PY=$(find_python)
touch .setup-write-check 2>/dev/null && rm -f .setup-write-check \
  || stop "this checkout ($PWD) is not writable by $(id -un): set-up writes .venv/ and \
resources/ here. Clone it where you can write (git clone ... ~/a2rl), or run as its owner"

# bubblewrap: the agent sandbox; setpriv (util-linux): a root harness runs each agent as an
# unprivileged uid of its own (docs/sandbox.md); git: code revisions of each run; chromium +
# chromium-driver: the report's screenshots and its browser tests; node + npm: the npm agent
# CLIs; cmake + g++: fast-downward-textworld (the real ALFWorld games) builds from source
MISSING=""
need() { command -v "$1" >/dev/null 2>&1 || MISSING="$MISSING $2"; }
need bwrap bubblewrap
need setpriv util-linux
need git git
need chromium chromium
need chromedriver chromium-driver
need npm "nodejs npm"
need cmake cmake
need g++ g++
# a Python of the distribution makes venvs only with its -venv package (Debian's python3-venv)
"$PY" -c 'import ensurepip, venv' 2>/dev/null || MISSING="$MISSING python3-venv"
if [ -n "$MISSING" ]; then
  if [ "$(id -u)" -eq 0 ]; then SUDO=""
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo"
  else stop "missing:$MISSING. Install them (sudo apt-get install -y$MISSING), then run this again"
  fi
  say "installing:$MISSING"
  $SUDO apt-get update -qq
  # shellcheck disable=SC2086
  $SUDO apt-get install -y -qq $MISSING
fi
# bwrap needs user namespaces when not root (Ubuntu 24.04 restricts them through AppArmor)
if [ "$(id -u)" -ne 0 ] && ! bwrap --unshare-user --ro-bind / / true 2>/dev/null; then
  stop "bubblewrap cannot create a user namespace for $(id -un): allow them \
(sudo sysctl -w kernel.unprivileged_userns_clone=1, and on Ubuntu 24.04 \
sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0), or run the harness as root"
fi

# ------------------------------------------------------------------------- the project's .venv
if ! "$VENV/bin/python" -c 1 2>/dev/null; then
  say "creating $VENV from $PY (Python $(python_version "$PY"))"
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
fi
VPY="$VENV/bin/python"
# as an activated venv: sdists whose builds call `python` (fast-downward-textworld's) find its own
export PATH="$PWD/$VENV/bin:$PATH"
# what decides the environment's contents: a change to any of these reinstalls
wanted=$(cat requirements/*.lock pyproject.toml | sha256sum | cut -d' ' -f1)
if [ "$(cat "$STAMP" 2>/dev/null)" != "$wanted" ]; then
  rm -f "$STAMP"
  # a current pip (a distribution's venv starts with its own, older one) and wheel: each sdist
  # is built as a wheel and cached, so the agents' environment reuses this one's builds
  "$VPY" -m pip install -q --require-hashes -r requirements/bootstrap.lock
  # torch by name first: the CPU wheel here, a GPU machine's CUDA build kept (scripts/lock.sh)
  "$VPY" -m pip install -q torch==2.13.0
  # everything else exactly as locked: hashes checked, nothing resolved
  "$VPY" -m pip install -q --require-hashes --no-deps -r requirements/harness.lock
  "$VPY" -m pip install -q --require-hashes --no-deps -r requirements/harness-nodeps.lock
  "$VPY" -m pip install -q --no-deps --no-build-isolation -e .
  echo "$wanted" > "$STAMP"
fi

# the agents' own Python environment, resources/agent-python/ (docs/sandbox.md): the training
# stack at the harness's versions and nothing of the harness's (its task packages hold sealed
# data); with vLLM on a GPU machine. Rebuilt only when its lock changes.
VLLM=""
command -v nvidia-smi >/dev/null 2>&1 && VLLM="--vllm"
# shellcheck disable=SC2086
"$VPY" scripts/agent_python.py $VLLM
# the LLM agents' CLIs, pinned, into resources/tools/ (skipped when already there)
"$VPY" scripts/install_agents.py claude_code codex gemini_cli opencode mini_swe_agent
# openhands needs Python 3.12 ($A2RL_PYTHON, python3.12 on PATH or pyenv's; about 7 min): without
# one, set-up goes on and its end-to-end test skips saying what to install
"$VPY" scripts/install_agents.py openhands || say "openhands was not installed (see above); \
install Python 3.12 (e.g. pyenv install 3.12) or set A2RL_PYTHON, then run: \
$VPY scripts/install_agents.py openhands"
say "done: $VENV (Python $(python_version "$VPY")); run .venv/bin/snakemake, .venv/bin/a2rl"
