#!/bin/bash
# gather, scatter, allgatherv and alltoallv: crnet (crbench, auto) against
# Open MPI over TCP (the OSU micro-benchmarks' osu_gather, osu_scatter,
# osu_allgatherv, osu_alltoallv, built from ../shared/outside with Open
# MPI's mpicc, run with --mca btl tcp,self), on this machine, interleaved
# rounds (crnet, MPI, crnet, ...). Sizes are the whole vector (crbench's
# convention: gather's result, scatter's input, allgatherv's result,
# alltoallv's send buffer); OSU is given the per-rank block (size / p).
# Prints, per (collective, p, size), the median over rounds of crbench's
# time (the median over iterations of the slowest rank) and of OSU's
# average latency, and the ratio crnet / Open MPI (below 1: crnet faster).
#
#   [COLLS="..."] [SIZES="..."] tools/bench/vector_vs_mpi.sh [BUILD] [ROUNDS] [P...]
#
# COLLS (default: gather scatter allgatherv alltoallv) and SIZES (bytes,
# default: 1024 16777216) narrow or widen the sweep.
set -eu
BUILD=${1:-build}
ROUNDS=${2:-3}
shift 2 || true
PS=${*:-4 8}
HERE=$(cd "$(dirname "$0")/../.." && pwd)
OSU=$HERE/../shared/outside/osu-micro-benchmarks-5.3/mpi/collective
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
COLLS=${COLLS:-gather scatter allgatherv alltoallv}
for b in $COLLS; do
  mpicc.openmpi -O2 -I"$OSU" -o "$tmp/osu_$b" "$OSU/osu_$b.c" \
    "$OSU/osu_coll.c" -lm
done
MPIRUN=(mpirun.openmpi --allow-run-as-root --oversubscribe
  --mca btl tcp,self --mca btl_tcp_if_include lo)
SIZES=${SIZES:-1024 16777216}

for r in $(seq "$ROUNDS"); do
  for p in $PS; do
    for coll in $COLLS; do
      for s in $SIZES; do
        block=$((s / p))
        iters=$([ "$s" -le 65536 ] && echo 200 || echo 10)
        "$BUILD/src/crlaunch" -n "$p" --timeout 300 "$BUILD/tools/crbench" \
          -c "$coll" -b "$s" -e "$s" -n "$iters" -w 2 |
          awk -v c="$coll" -v p="$p" -v s="$s" \
            '!/^#/ && NF > 6 { print "crnet", c, p, s, $7 }' >>"$tmp/rows"
        "${MPIRUN[@]}" -np "$p" "$tmp/osu_$coll" -m "$block:$block" \
          -i "$iters" -x 2 |
          awk -v c="$coll" -v p="$p" -v s="$s" \
            '!/^#/ && NF >= 2 { print "mpi", c, p, s, $2 }' >>"$tmp/rows"
      done
    done
  done
done

python3 - "$tmp/rows" "$ROUNDS" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) == 5:
        rows.setdefault((f[0], f[1], int(f[2]), int(f[3])), []).append(float(f[4]))
print("# medians of %s interleaved rounds, us; ratio = crnet / Open MPI (tcp)" % sys.argv[2])
print("%-11s %3s %10s %12s %12s %7s" % ("collective", "p", "bytes", "crnet", "ompi", "ratio"))
for key in sorted({k[1:] for k in rows}):
    a, b = rows.get(("crnet",) + key), rows.get(("mpi",) + key)
    if a and b:
        ma, mb = statistics.median(a), statistics.median(b)
        print("%-11s %3d %10d %12.1f %12.1f %7.2f" % (key + (ma, mb, ma / mb)))
EOF
