#!/usr/bin/env bash
# Two-level against flat crnet and against Open MPI across hosts: the test
# bed of tests/testbed.sh (H network namespaces on this machine, an sshd in
# each), N ranks per host, shared memory inside each host and TCP between
# them, every TCP connection capped at MBIT megabits per second by
# libflowcap (tools/bench/flowcap.c), as clouds cap each flow.
#
#   tools/bench/twolevel_hosts.sh [H [N [MBIT [ROUNDS [SIZES [COLL]]]]]]
#
# Defaults: 2 hosts x 2 ranks, 1000 Mbit, 3 rounds, sizes "8 65536
# 16777216" (bytes of float, operator sum), COLL allreduce (or
# reduce_scatter, allgather, bcast, reduce; crbench's and mpi_bench's
# sizes: the whole vector). Per round, one after
# the other: crnet's crbench with -s two-level, circulant (the flat
# schedule auto took before), rabenseifner, and auto (what a job gets),
# then Open MPI's mpi_bench (tools/compare/mpi_bench.c, built here with
# mpicc.openmpi) under mpirun over the same hosts (btl tcp between the
# namespaces, its shared memory inside; the same cap preloaded;
# mpi_yield_when_idle 1, since the "hosts" share this machine's cores and
# Open MPI, seeing two slots per host, would busy-poll: 8 ms for an 8-byte
# allreduce at 2 x 2 ranks instead of 34-43 us). Each row
# is crbench's or mpi_bench's median per call; the table gives, per size,
# the median over rounds and the spread (min-max), and the ratio of each
# variant's median to two-level's.
#
# Needs root (namespaces), sshd and Open MPI; run from the source tree after
# a build. All ranks share this machine's cores: with H·N ranks on 2 cores
# the figures show the schedules' traffic, not a cluster's speed.
set -u
cd "$(dirname "$0")/../.."
hosts=${1:-2}
per=${2:-2}
mbit=${3:-1000}
rounds=${4:-3}
sizes=${5:-"8 65536 16777216"}
coll=${6:-allreduce}
p=$((hosts * per))
. tests/testbed.sh
tmp=$(mktemp -d /tmp/crnet-twolevel.XXXXXX)
trap 'testbed_down; rm -rf "$tmp"' EXIT
testbed_up "$hosts" || { echo "twolevel_hosts: test bed: $tb_why"; exit 1; }
command -v mpicc.openmpi >/dev/null ||
  { echo "twolevel_hosts: needs Open MPI (apt-get install openmpi-bin libopenmpi-dev)"; exit 1; }
mpicc.openmpi -O2 -o "$tmp/mpi_bench" tools/compare/mpi_bench.c -lm ||
  { echo "twolevel_hosts: mpi_bench did not build"; exit 1; }
list=""
for i in $(seq "$hosts"); do list="$list${list:+,}10.79.0.$((i + 1)):$per"; done
cap=$(realpath build/tools/libflowcap.so)

crnet_row() { # schedule size -> one JSON row
  timeout -k 5 300 build/src/crlaunch --timeout 280 --ssh "$tb/ssh" --hosts "$list" \
    -x LD_PRELOAD="$cap" -x FLOWCAP_MBIT="$mbit" \
    build/tools/crbench -c "$coll" -s "$1" -b "$2" -e "$2" -n 20 -w 3 --no-link-limit \
    --json 2>>"$tmp/err" | grep '"coll"' | tail -1
}
ompi_row() { # size -> one JSON row
  timeout -k 5 300 mpirun.openmpi --allow-run-as-root --oversubscribe \
    --mca mpi_yield_when_idle 1 \
    --host "$list" --mca plm_rsh_agent "$tb/ssh" \
    --mca btl tcp,vader,self --mca btl_tcp_if_include 10.79.0.0/24 \
    --mca oob_tcp_if_include 10.79.0.0/24 \
    -x LD_PRELOAD="$cap" -x FLOWCAP_MBIT="$mbit" \
    "$tmp/mpi_bench" -c "$coll" -b "$1" -e "$1" -n 20 -w 3 -l openmpi \
    --json 2>>"$tmp/err" | grep '"coll"' | tail -1
}

# The flat schedules to compare: circulant everywhere, and rabenseifner
# where it exists (recursive halving; not for allgather and bcast).
case $coll in
allgather | bcast) variants="two-level circulant auto openmpi" ;;
*) variants="two-level circulant rabenseifner auto openmpi" ;;
esac
for r in $(seq "$rounds"); do
  for s in $sizes; do
    for v in $variants; do
      if [ "$v" = openmpi ]; then row=$(ompi_row "$s"); else row=$(crnet_row "$v" "$s"); fi
      [ -n "$row" ] || { echo "twolevel_hosts: no row for $v at $s B (round $r):"; tail -5 "$tmp/err"; exit 1; }
      echo "$r $v $s $row" >>"$tmp/rows"
    done
  done
done

echo "$coll, $hosts hosts x $per ranks (p = $p) on the namespace test bed, TCP flows capped at $mbit Mbit/s, shared memory inside hosts; $rounds rounds; $(date -u +%Y-%m-%d) $(git rev-parse --short HEAD)"
python3 - "$tmp/rows" "$variants" <<'PY'
import json, statistics, sys
rows = {}
ran = {}
for line in open(sys.argv[1]):
    r, v, s, js = line.split(" ", 3)
    d = json.loads(js)
    rows.setdefault((v, int(s)), []).append(d["time_us"])
    if "ran" in d:
        ran.setdefault((v, int(s)), set()).add(d["ran"])
variants = sys.argv[2].split()
sizes = sorted({s for (_, s) in rows})
print(f"{'size B':>10} {'variant':<13} {'ran':<14} {'median us':>11} {'min-max us':>21} {'/ two-level':>11}")
for s in sizes:
    base = statistics.median(rows[("two-level", s)])
    for v in variants:
        t = rows[(v, s)]
        med = statistics.median(t)
        who = ",".join(sorted(ran.get((v, s), {"-"})))
        print(f"{s:>10} {v:<13} {who:<14} {med:>11.1f} {min(t):>10.1f}-{max(t):<10.1f} {med / base:>11.2f}")
PY
