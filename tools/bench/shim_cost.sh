#!/usr/bin/env bash
# crnet-mpi's cost over crnet's own calls (docs/MPI.md): shim_cost built
# on crnet.h and on mpi.h, run in interleaved rounds at P ranks; per size
# the median over rounds of each one's per-call time (looped, see
# shim_cost.c), and the median of the rounds' differences and ratios.
#
#   tools/bench/shim_cost.sh [BUILD [P [ROUNDS [CALLS]]]]
set -euo pipefail
BUILD=${1:-build}
P=${2:-2}
ROUNDS=${3:-5}
CALLS=${4:-20000}
rows=$(mktemp)
trap 'rm -f "$rows"' EXIT
for r in $(seq "$ROUNDS"); do
  for v in crnet mpi; do
    "$BUILD/src/crlaunch" -n "$P" "$BUILD/tools/shim_cost_$v" "$CALLS" |
      sed "s/^/$v $r /" >>"$rows"
  done
done
python3 - "$rows" "$P" "$ROUNDS" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
t = {}
for v, r, size, us in rows:
    t.setdefault(int(size), {}).setdefault(v, {})[r] = float(us)
print(f"# p = {sys.argv[2]}, {sys.argv[3]} interleaved rounds; per call, "
      "looped; medians over rounds")
print("#   size   crnet us     mpi us   mpi-crnet us   mpi/crnet")
for size in sorted(t):
    c, m = t[size]["crnet"], t[size]["mpi"]
    rs = sorted(set(c) & set(m))
    d = st.median(m[r] - c[r] for r in rs)
    q = st.median(m[r] / c[r] for r in rs)
    print(f"  {size:6d} {st.median(c.values()):10.3f} {st.median(m.values()):10.3f}"
          f" {d:14.3f} {q:11.3f}")
PY
