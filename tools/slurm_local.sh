# A one-node Slurm on this host for tests and benchmarks: munged, slurmctld
# and slurmd on a configuration of 16 over-subscribed CPUs, with a munge
# socket, ports and a directory of their own, so that they touch no Slurm
# or munge the machine may already run. Needs root (slurmd), Debian's
# slurm-wlm and munge. Sourced:
#
#   . tools/slurm_local.sh
#   slurm_local_up DIR    # starts it in DIR and exports SLURM_CONF; or
#                         # prints why not and returns 1
#   slurm_local_down DIR  # stops it (also after a partial start)

# A loopback port that nothing listens on now.
slurm_local_free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

slurm_local_down() {
  local dir=$1 f
  for f in "$dir"/slurmd.pid "$dir"/slurmctld.pid "$dir"/munged.pid; do
    [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null
  done
  sleep 0.2
  for f in "$dir"/slurmd.pid "$dir"/slurmctld.pid "$dir"/munged.pid; do
    [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null
  done
  return 0
}

slurm_local_up() {
  local dir=$1 host _
  if [ -z "$dir" ] || [ ! -d "$dir" ]; then
    echo "slurm_local_up: '$dir' is not a directory"
    return 1
  fi
  host=$(hostname)
  dd if=/dev/urandom of="$dir/munge.key" bs=1024 count=1 2>/dev/null
  chmod 600 "$dir/munge.key"
  munged --force --socket="$dir/munge.socket" --key-file="$dir/munge.key" \
    --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" \
    --seed-file="$dir/munged.seed" 2>"$dir/munged.err" ||
    { cat "$dir/munged.err"; echo "munged did not start"; return 1; }
  mkdir -p "$dir/spool" "$dir/state"
  cat >"$dir/slurm.conf" <<CONF
ClusterName=crnet-test
SlurmctldHost=$host
SlurmctldPort=$(slurm_local_free_port)
SlurmdPort=$(slurm_local_free_port)
AuthType=auth/munge
AuthInfo=socket=$dir/munge.socket
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmdSpoolDir=$dir/spool
StateSaveLocation=$dir/state
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
SlurmUser=root
SlurmdUser=root
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
NodeName=$host CPUs=16 State=UNKNOWN
PartitionName=crnet Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
CONF
  export SLURM_CONF=$dir/slurm.conf
  slurmctld -i -f "$SLURM_CONF" 2>"$dir/slurmctld.err" ||
    { cat "$dir/slurmctld.err"; echo "slurmctld did not start"; return 1; }
  # PMIx's munge security component speaks only to munge's default
  # socket; this munged listens on its own, so the component would retry
  # the default one for 2.3 s on every srun --mpi=pmix. Its steps
  # authenticate their local clients by the kernel's peer credentials
  # instead (PMIx's "native"), as PMIx does where munge is absent.
  PMIX_MCA_psec=native slurmd -f "$SLURM_CONF" 2>"$dir/slurmd.err" ||
    { cat "$dir/slurmd.err"; echo "slurmd did not start"; return 1; }
  # Up when the node takes jobs: at most 30 s.
  for _ in $(seq 300); do
    sinfo -h -o %t 2>/dev/null | grep -q idle && break
    sleep 0.1
  done
  if ! sinfo -h -o %t 2>/dev/null | grep -q idle; then
    tail -n 5 "$dir/slurmctld.log" "$dir/slurmd.log"
    echo "the Slurm node never became idle"
    return 1
  fi
  echo "Slurm: one node ($host), 16 CPUs over-subscribed, munge and ports of its own"
}
