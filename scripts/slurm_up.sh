#!/usr/bin/env bash
# Starts a single-node Slurm cluster on localhost (munged, slurmctld, slurmd) for the `cluster`
# tests and for trying profiles/slurm on one machine. Needs root and scripts/setup_cluster.sh.
# Safe to run again: a cluster that answers is left as it is.
#
#   eval "$(bash scripts/slurm_up.sh)"     # starts it and exports SLURM_CONF
#   bash scripts/slurm_down.sh             # stops it
#
# Everything lives under $A2RL_SLURM_DIR (default /tmp/a2rl-slurm): slurm.conf, state, logs and
# jobcomp.log, one line per finished job (the record the tests read: no accounting database is
# needed, because profiles/slurm asks the executor plugin for squeue status checks, which see
# finished jobs for MinJobAge seconds).
set -euo pipefail
DIR=${A2RL_SLURM_DIR:-/tmp/a2rl-slurm}
CONF="$DIR/slurm.conf"
export SLURM_CONF="$CONF"
say() { echo "$*" >&2; }

for tool in munged slurmctld slurmd sinfo; do
  command -v "$tool" >/dev/null || { say "slurm_up: $tool is missing; run scripts/setup_cluster.sh"; exit 1; }
done
[ "$(id -u)" -eq 0 ] || { say "slurm_up: needs root (slurmd starts jobs as their user)"; exit 1; }

if [ -f "$CONF" ] && timeout 5 sinfo -h >/dev/null 2>&1; then
  say "slurm_up: already running ($CONF)"
  echo "export SLURM_CONF=$CONF"
  exit 0
fi

mkdir -p "$DIR/state" "$DIR/spool" /run/munge
chown munge:munge /run/munge 2>/dev/null || true
# the node offers what this machine has: every CPU, and memory less 1 GiB for the system
# (nproc without the OpenMP variables, which it would obey: the tests run with OMP_NUM_THREADS=1)
CPUS=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
MEM_MB=$(awk '/MemTotal/ {printf "%d", $2 / 1024 - 1024}' /proc/meminfo)
cat > "$CONF" <<CONF
# written by scripts/slurm_up.sh: one node (this machine) in one partition
ClusterName=a2rl
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# no cgroups (containers rarely delegate them): processes are tracked through /proc
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
# one line per finished job: the tests' record of which jobs ran and how they ended
JobCompType=jobcomp/filetxt
JobCompLoc=$DIR/jobcomp.log
# finished jobs stay visible to squeue for an hour (the executor plugin's status checks)
MinJobAge=3600
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
MpiDefault=none
KillWait=10
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM_MB State=UNKNOWN
PartitionName=a2rl Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF

# Slurm's default config path links to this one: the executor plugin's job step drops
# SLURM_CONF before its nested srun, which then reads /etc/slurm/slurm.conf. A config there
# that is not ours is left alone, and this script refuses to run beside it.
ETC=/etc/slurm/slurm.conf
if [ -e "$ETC" ] && [ "$(readlink "$ETC" || true)" != "$CONF" ]; then
  say "slurm_up: $ETC exists and is not this script's; on a machine with Slurm, use that Slurm"
  exit 1
fi
mkdir -p /etc/slurm && ln -sfn "$CONF" "$ETC"

# munged: started here unless one runs already (slurm_down.sh stops only what this started)
if ! pgrep -x munged >/dev/null; then munged --force && touch "$DIR/munged.ours"; fi
# -i: start afresh (ignore saved jobs) when no controller answers
slurmctld -i -f "$CONF"
# jobs inherit slurmd's niceness (PropagatePrioProcess=0, the default): on a shared machine the
# test cluster's jobs yield to everything else, like any test's work
nice -n "${A2RL_SLURM_NICE:-19}" slurmd -N localhost -f "$CONF"

for _ in $(seq 60); do
  if state=$(sinfo -h -n localhost -o %T 2>/dev/null) && [ "$state" = idle ]; then
    say "slurm_up: node localhost idle ($CPUS CPUs, $MEM_MB MB) in partition a2rl ($CONF)"
    echo "export SLURM_CONF=$CONF"
    exit 0
  fi
  sleep 0.5
done
say "slurm_up: the node did not become idle; logs in $DIR"
tail -n 20 "$DIR/slurmctld.log" "$DIR/slurmd.log" >&2 || true
exit 1
