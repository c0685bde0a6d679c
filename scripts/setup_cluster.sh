#!/usr/bin/env bash
# Installs what the `cluster` tests and a single-node Slurm on this machine need (Debian/Ubuntu,
# root or sudo): Slurm's controller, node daemon and client commands, and munge (its
# authentication). No accounting database: profiles/slurm's status checks work with squeue
# (scripts/slurm_up.sh keeps finished jobs visible to it). The executor plugins themselves are
# Python packages, pinned in pyproject.toml's `cluster` extra, which scripts/setup.sh installs.
# Safe to run again. Then: eval "$(bash scripts/slurm_up.sh)".
set -euo pipefail
MISSING=""
command -v slurmctld >/dev/null 2>&1 || MISSING="$MISSING slurmctld"
command -v slurmd >/dev/null 2>&1 || MISSING="$MISSING slurmd"
command -v sbatch >/dev/null 2>&1 || MISSING="$MISSING slurm-client"
command -v munged >/dev/null 2>&1 || MISSING="$MISSING munge"
if [ -n "$MISSING" ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $MISSING
fi
cd "$(dirname "$0")/.."
PY=.venv/bin/python  # the project environment scripts/setup.sh made
# found, not imported: importing it runs `scontrol show config`, which waits ~9 s for a controller
# that is not started yet
"$PY" -c "import importlib.util as u, sys; sys.exit(not u.find_spec('snakemake_executor_plugin_slurm'))" || {
  echo "setup_cluster: snakemake-executor-plugin-slurm is missing; run scripts/setup.sh" >&2
  exit 1
}
