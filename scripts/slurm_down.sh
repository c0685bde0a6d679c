#!/usr/bin/env bash
# Stops the single-node cluster that scripts/slurm_up.sh started (by the pid files it left), and
# munged if slurm_up.sh started it. Running jobs are ended with their slurmd. Safe to run again.
# The state folder ($A2RL_SLURM_DIR, default /tmp/a2rl-slurm) stays for its logs; --purge
# removes it.
set -euo pipefail
DIR=${A2RL_SLURM_DIR:-/tmp/a2rl-slurm}

stop() {  # stop NAME PIDFILE: SIGTERM, then wait up to 10 s for the process to go
  local name=$1 pidfile=$2 pid
  [ -f "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && { echo "slurm_down: $name ($pid) still running" >&2; return 1; }
    echo "slurm_down: stopped $name ($pid)" >&2
  fi
  rm -f "$pidfile"
}

stop slurmd "$DIR/slurmd.pid"
stop slurmctld "$DIR/slurmctld.pid"
if [ -f "$DIR/munged.ours" ]; then
  stop munged /run/munge/munged.pid
  rm -f "$DIR/munged.ours"
fi
if [ "${1:-}" = "--purge" ]; then
  # the link slurm_up.sh made at Slurm's default config path, and the state folder
  [ "$(readlink /etc/slurm/slurm.conf || true)" = "$DIR/slurm.conf" ] && rm -f /etc/slurm/slurm.conf
  rm -rf "$DIR"
fi
