#!/usr/bin/env bash
# A real multi-node Slurm cluster on 127.0.0.1 for tests: Debian's slurm-wlm (22.05) + munge.
#   infra/slurm/test-cluster.sh start DIR [NODES]   # DIR/slurm.conf; munged, slurmctld, slurmd n1..nNODES
#   infra/slurm/test-cluster.sh stop DIR
# NODES (default 2, or $SLURM_TEST_NODES) node names n1..nN share this host, one CPU each, in two partitions:
# debug (the default) and second. Ports come from the environment so a second cluster can run beside this one:
#   SLURM_TEST_CTLD_PORT (16817), SLURM_TEST_SLURMD_PORT_BASE (17000: node i listens on BASE+i),
#   SLURM_TEST_SRUN_PORTS (60001-60100). SLURM_TEST_CRED_EXPIRE (20): seconds a requeued job waits, less 1.
# Needs root (munge key, daemons). Node names do not resolve, so jobs pass --host-map n1=127.0.0.1
# to cloudddp-launch. tests/helpers/slurm_cluster.py serializes use of this script across processes (flock).
set -euo pipefail
action=${1:?start|stop}
dir=$(realpath -m "${2:?state folder}")
nodes=${3:-${SLURM_TEST_NODES:-2}}
ctld_port=${SLURM_TEST_CTLD_PORT:-16817}
slurmd_base=${SLURM_TEST_SLURMD_PORT_BASE:-17000}
srun_ports=${SLURM_TEST_SRUN_PORTS:-60001-60100}
export SLURM_CONF="$dir/slurm.conf"

start_munge() {
  # One munged per host serves every cluster. Ask it for a credential rather than pgrep: a dead
  # munged lingers as a zombie where PID 1 does not reap, and pgrep still lists it.
  if munge -n >/dev/null 2>&1; then return; fi
  mkdir -p /etc/munge /run/munge /var/lib/munge /var/log/munge
  [ -s /etc/munge/munge.key ] || mungekey --create --keyfile=/etc/munge/munge.key
  chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge
  chmod 0700 /etc/munge
  chmod 0400 /etc/munge/munge.key
  runuser -u munge -- munged
  touch "$dir/started-munged"
  for _ in $(seq 1 20); do munge -n >/dev/null 2>&1 && return; sleep 0.25; done
  echo "munged did not start; see /var/log/munge/munged.log" >&2
  exit 1
}

case "$action" in
start)
  case "$nodes" in ''|*[!0-9]*|0) echo "NODES must be a positive integer, got '$nodes'" >&2; exit 2 ;; esac
  mkdir -p "$dir"/{state,spool,log,run}
  host=$(hostname -s)
  {
    cat <<CONF
ClusterName=cloudddp-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmUser=root
AuthType=auth/munge
CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
SrunPortRange=$srun_ports
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/log/jobcomp.txt
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
MailProg=/bin/true
ReturnToService=2
# A requeued job waits cred_expire + 1 s before it starts again (slurm.conf(5) AuthInfo; default 120 s):
# 20 keeps the requeue test short; step credentials are used within a second of being made here.
AuthInfo=cred_expire=${SLURM_TEST_CRED_EXPIRE:-20}
CONF
    for i in $(seq 1 "$nodes"); do
      echo "NodeName=n$i NodeHostname=$host NodeAddr=127.0.0.1 Port=$((slurmd_base + i)) CPUs=1"
    done
    echo "PartitionName=debug Nodes=n[1-$nodes] Default=YES MaxTime=INFINITE State=UP"
    # A second partition over the same nodes: failover's test sets one of the two DOWN (scontrol update).
    echo "PartitionName=second Nodes=n[1-$nodes] MaxTime=INFINITE State=UP"
  } >"$SLURM_CONF"
  start_munge
  slurmctld -f "$SLURM_CONF" -i
  for i in $(seq 1 "$nodes"); do slurmd -f "$SLURM_CONF" -N "n$i"; done
  for _ in $(seq 1 60); do
    if [ "$(sinfo -h -o '%t' 2>/dev/null | sort -u)" = "idle" ]; then
      echo "slurm test cluster up ($nodes nodes): SLURM_CONF=$SLURM_CONF"
      exit 0
    fi
    sleep 0.5
  done
  echo "slurm test cluster did not come up; logs in $dir/log" >&2
  sinfo >&2 || true
  exit 1
  ;;
stop)
  # Cancel what still runs first (a test that timed out mid-job): slurmd ends its steps, so no slurmstepd,
  # srun or launcher outlives the cluster. Give the jobs up to 15 s to end before the daemons go.
  if scontrol ping >/dev/null 2>&1; then
    scancel --quiet --user="$(id -un)" 2>/dev/null || true
    for _ in $(seq 1 60); do
      [ -z "$(squeue --noheader --format=%i 2>/dev/null)" ] && break
      sleep 0.25
    done
  fi
  scontrol shutdown >/dev/null 2>&1 || true
  pids=$(cat "$dir"/run/slurm*.pid 2>/dev/null || true)
  for pid in $pids; do kill "$pid" 2>/dev/null || true; done
  for _ in $(seq 1 40); do  # slurmctld saves its state first: give it up to 10 s, then insist
    alive=""
    for pid in $pids; do kill -0 "$pid" 2>/dev/null && alive="$alive $pid"; done
    [ -z "$alive" ] && break
    sleep 0.25
  done
  for pid in ${alive:-}; do kill -9 "$pid" 2>/dev/null || true; done
  # Stop munged only if this cluster started it, and only that process (its default pid file).
  if [ -f "$dir/started-munged" ]; then
    if [ -s /run/munge/munged.pid ]; then kill "$(cat /run/munge/munged.pid)" 2>/dev/null || true; fi
    rm -f "$dir/started-munged"
  fi
  ;;
*)
  echo "usage: $0 start|stop DIR [NODES]" >&2
  exit 2
  ;;
esac
