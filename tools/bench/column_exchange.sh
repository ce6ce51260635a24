#!/usr/bin/env bash
# A matrix column (a vector type, packed by the library) exchanged between
# two ranks, against the same bytes dense: tools/bench/column_exchange.c
# built with crnet-mpicc and with Open MPI's mpicc, run in interleaved
# rounds on their defaults (shared memory on this host), 2 ranks. Prints per
# N the median over rounds of each library's microseconds per exchange,
# column and dense, and the ratios crnet / Open MPI (docs/MPI.md).
#
#   tools/bench/column_exchange.sh [BUILD [ROUNDS [REPS]]]
#
# Needs openmpi-bin and libopenmpi-dev.
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
ROUNDS=${2:-5}
REPS=${3:-200}
HERE=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$BUILD/src/mpi/crnet-mpicc-uninstalled" -O2 -o "$tmp/crnet" \
  "$HERE/tools/bench/column_exchange.c"
mpicc.openmpi -O2 -o "$tmp/ompi" "$HERE/tools/bench/column_exchange.c"
for r in $(seq "$ROUNDS"); do
  "$BUILD/src/crlaunch" -n 2 "$tmp/crnet" "$REPS" | grep -v '^#' |
    sed "s/^/crnet /" >>"$tmp/rows"
  mpirun.openmpi --allow-run-as-root -np 2 "$tmp/ompi" "$REPS" |
    grep -v '^#' | sed "s/^/ompi /" >>"$tmp/rows"
done
python3 - "$tmp/rows" "$ROUNDS" <<'PY'
import statistics as st, sys
t = {}
for line in open(sys.argv[1]):
    lib, n, col, dense, _ = line.split()
    t.setdefault(int(n), {}).setdefault(lib, []).append((float(col), float(dense)))
print(f"# p = 2, {sys.argv[2]} interleaved rounds, medians; us per exchange")
print("#      N  crnet col  ompi col  ratio  crnet dense  ompi dense  ratio")
for n in sorted(t):
    c, o = t[n]["crnet"], t[n]["ompi"]
    cc, oc = st.median(x[0] for x in c), st.median(x[0] for x in o)
    cd, od = st.median(x[1] for x in c), st.median(x[1] for x in o)
    print(f"{n:8d} {cc:10.2f} {oc:9.2f} {cc/oc:6.2f} {cd:12.2f} {od:11.2f} {cd/od:6.2f}")
PY
