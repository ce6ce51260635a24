#!/bin/bash
# Point-to-point latency and bandwidth of crnet (crbench --p2p) against
# Open MPI over TCP (the OSU micro-benchmarks' osu_latency and osu_bw, built
# from ../shared/outside with Open MPI's mpicc, run with --mca btl
# tcp,self), 2 ranks on this machine, interleaved rounds (crnet, MPI, crnet,
# MPI, ...) so that whatever else the machine does falls on both; prints the
# median of the rounds per size and the ratio crnet / Open MPI (latency:
# below 1 is crnet faster; bandwidth: above 1 is).
#
#   tools/bench/p2p_vs_mpi.sh [BUILD] [ROUNDS]
#
# Needs openmpi-bin and libopenmpi-dev (mpicc.openmpi, mpirun.openmpi).
set -eu
BUILD=${1:-build}
ROUNDS=${2:-5}
HERE=$(cd "$(dirname "$0")/../.." && pwd)
OSU=$HERE/../shared/outside/osu-micro-benchmarks-5.3/mpi/pt2pt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for b in osu_latency osu_bw; do
  mpicc.openmpi -O2 -I"$OSU" -o "$tmp/$b" "$OSU/$b.c" "$OSU/osu_pt2pt.c"
done
MPIRUN=(mpirun.openmpi --allow-run-as-root --oversubscribe -np 2
  --mca btl tcp,self --mca btl_tcp_if_include lo)

for r in $(seq "$ROUNDS"); do
  "$BUILD/src/crlaunch" -n 2 "$BUILD/tools/crbench" --p2p latency -e 4M |
    grep -v '^#' | sed "s/^/crnet latency /" >>"$tmp/rows"
  "${MPIRUN[@]}" "$tmp/osu_latency" | grep -v '^#' |
    sed "s/^/mpi latency /" >>"$tmp/rows"
  "$BUILD/src/crlaunch" -n 2 "$BUILD/tools/crbench" --p2p bw -e 4M |
    grep -v '^#' | sed "s/^/crnet bw /" >>"$tmp/rows"
  "${MPIRUN[@]}" "$tmp/osu_bw" | grep -v '^#' | sed "s/^/mpi bw /" >>"$tmp/rows"
done

python3 - "$tmp/rows" "$ROUNDS" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) != 4:
        continue
    rows.setdefault((f[0], f[1], int(f[2])), []).append(float(f[3]))
print("# p = 2, medians of %s interleaved rounds; ratio = crnet / Open MPI (tcp)" % sys.argv[2])
for mode, unit in (("latency", "us"), ("bw", "MB/s")):
    print("%-8s %10s %12s %12s %7s" % (mode, "bytes", "crnet " + unit, "ompi " + unit, "ratio"))
    sizes = sorted({k[2] for k in rows if k[1] == mode})
    for s in sizes:
        a, b = rows.get(("crnet", mode, s)), rows.get(("mpi", mode, s))
        if not a or not b:
            continue
        ma, mb = statistics.median(a), statistics.median(b)
        print("%-8s %10d %12.2f %12.2f %7.2f" % (mode, s, ma, mb, ma / mb))
EOF
