#!/usr/bin/env bash
# A real two-node Slurm cluster on 127.0.0.1 for tests: Debian's slurm-wlm (22.05) + munge.
#   infra/slurm/test-cluster.sh start DIR   # writes DIR/slurm.conf, starts munged, slurmctld, slurmd n1 and n2
#   infra/slurm/test-cluster.sh stop DIR
# Needs root (munge key, daemons). Nodes n1/n2 share this host; their names do not resolve,
# so jobs pass --host-map n1=127.0.0.1 to cloudddp-launch.
set -euo pipefail
action=${1:?start|stop}
dir=$(realpath -m "${2:?state folder}")
export SLURM_CONF="$dir/slurm.conf"

start_munge() {
  if pgrep -x munged >/dev/null; then return; fi
  mkdir -p /etc/munge /run/munge /var/lib/munge /var/log/munge
  [ -s /etc/munge/munge.key ] || mungekey --create --keyfile=/etc/munge/munge.key
  chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge
  chmod 0700 /etc/munge
  chmod 0400 /etc/munge/munge.key
  runuser -u munge -- munged
  touch "$dir/started-munged"
}

case "$action" in
start)
  mkdir -p "$dir"/{state,spool,log,run}
  host=$(hostname -s)
  cat >"$SLURM_CONF" <<CONF
ClusterName=cloudddp-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=16817
SlurmUser=root
AuthType=auth/munge
CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
SrunPortRange=60001-60100
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
NodeName=n1 NodeHostname=$host NodeAddr=127.0.0.1 Port=17001 CPUs=1
NodeName=n2 NodeHostname=$host NodeAddr=127.0.0.1 Port=17002 CPUs=1
PartitionName=debug Nodes=n[1-2] Default=YES MaxTime=INFINITE State=UP
CONF
  start_munge
  slurmctld -f "$SLURM_CONF" -i
  slurmd -f "$SLURM_CONF" -N n1
  slurmd -f "$SLURM_CONF" -N n2
  for _ in $(seq 1 60); do
    if [ "$(sinfo -h -o '%t' 2>/dev/null | sort -u)" = "idle" ]; then
      echo "slurm test cluster up: SLURM_CONF=$SLURM_CONF"
      exit 0
    fi
    sleep 0.5
  done
  echo "slurm test cluster did not come up; logs in $dir/log" >&2
  sinfo >&2 || true
  exit 1
  ;;
stop)
  scontrol shutdown >/dev/null 2>&1 || true
  pids=$(cat "$dir"/run/*.pid 2>/dev/null || true)
  for pid in $pids; do kill "$pid" 2>/dev/null || true; done
  for _ in $(seq 1 40); do  # slurmctld saves its state first: give it up to 10 s, then insist
    alive=""
    for pid in $pids; do kill -0 "$pid" 2>/dev/null && alive="$alive $pid"; done
    [ -z "$alive" ] && break
    sleep 0.25
  done
  for pid in ${alive:-}; do kill -9 "$pid" 2>/dev/null || true; done
  if [ -f "$dir/started-munged" ]; then pkill -x munged || true; rm -f "$dir/started-munged"; fi
  ;;
*)
  echo "usage: $0 start|stop DIR" >&2
  exit 2
  ;;
esac
