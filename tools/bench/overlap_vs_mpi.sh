#!/usr/bin/env bash
# Overlap of a nonblocking allreduce with work that makes no library call
# (docs/PERFORMANCE.md, "Overlap"): crnet with its progress thread on and
# off, and Open MPI's MPI_Iallreduce, measured the same way in the same run,
# interleaved round by round so that the machine's noise falls on all alike.
#
#   tools/bench/overlap_vs_mpi.sh ROUNDS "P..." CRNET_BUILD MPI_BENCH [ITERS]
#
# CRNET_BUILD is a meson build with src/crlaunch and tools/crbench;
# MPI_BENCH is tools/compare/mpi_bench.c built with Open MPI's mpicc
# (`mpicc.openmpi -std=c11 -O2 tools/compare/mpi_bench.c -o mpi_bench`), run
# over TCP on loopback as crnet is. Sizes 1 to 64 MiB of floats, sum; work
# that sleeps (the core left free) and CPU-bound work. Prints per (p, size,
# work, implementation) the median over rounds of each round's overlap and
# of its three times.
set -euo pipefail
rounds=$1
ps=$2
build=$3
mpi=$4
iters=${5:-15}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for round in $(seq 1 "$rounds"); do
  for p in $ps; do
    for t in 1 0; do
      "$build/src/crlaunch" -n "$p" --timeout 600 -x CRNET_PROGRESS_THREAD=$t \
        "$build/tools/crbench" --overlap -b 1M -e 64M -f 4 -n "$iters" --json 2>/dev/null |
        sed "s/^/crnet-thread-$t $p /" >>"$out"
    done
    mpirun.openmpi --allow-run-as-root --oversubscribe --mca pml ob1 \
      --mca btl tcp,self --mca btl_tcp_if_include lo -np "$p" \
      "$mpi" -b 1M -e 64M -f 4 --overlap --work both -n "$iters" --json \
      -l openmpi 2>/dev/null | grep '^{' | sed "s/^/openmpi-tcp $p /" >>"$out"
  done
done
python3 - "$out" <<'PY'
import json, statistics as st, sys
rows = {}
for line in open(sys.argv[1]):
    impl, p, js = line.split(" ", 2)
    r = json.loads(js)
    if r.get("mode") != "overlap" or r.get("overlap") is None:
        continue
    key = (int(p), r["size"], r["work"], impl)
    rows.setdefault(key, []).append(r)
print("| p | size | work | implementation | t_comm (ms) | t_work (ms) | t_over (ms) | overlap (median) | range |")
print("|---|---|---|---|---|---|---|---|---|")
for key in sorted(rows):
    p, size, work, impl = key
    v = rows[key]
    ov = [x["overlap"] for x in v]
    med = lambda k: st.median(x[k] for x in v) / 1000
    print(f"| {p} | {size >> 20} MiB | {work} | {impl} | {med('t_comm_us'):.2f} | "
          f"{med('t_work_us'):.2f} | {med('t_over_us'):.2f} | {st.median(ov):.2f} | "
          f"{min(ov):.2f} .. {max(ov):.2f} |")
PY
