#!/usr/bin/env bash
# Small-allreduce latency of several builds of crnet, interleaved so that
# the machine's noise falls on all of them alike (docs/PERFORMANCE.md,
# "Cost of the frame header and the counters").
#
#   tools/bench/ab_small_allreduce.sh REPS P NAME=BUILD_DIR...
#
# Each BUILD_DIR is a meson build (release) with src/crlaunch and
# tools/crbench. Per repetition every build runs crbench once: allreduce of
# 8 and 64 bytes, ring, 5000 timed calls after 500 warm-up ones. Prints the
# median over repetitions of crbench's median per build and size, and the
# median of the per-repetition ratios of each build to the first.
set -euo pipefail
reps=$1
p=$2
shift 2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for rep in $(seq 1 "$reps"); do
  for spec in "$@"; do
    name=${spec%%=*}
    dir=${spec#*=}
    "$dir/src/crlaunch" -n "$p" "$dir/tools/crbench" -b 8 -e 64 -f 8 -n 5000 -w 500 -s ring 2>/dev/null |
      awk -v b="$name" -v rep="$rep" '$1 ~ /^[0-9]+$/ {print b, rep, $1, $7}' >>"$out"
  done
done
python3 - "$out" "${@%%=*}" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
names = [n.split("=")[0] for n in sys.argv[2:]]
t = {}
for b, rep, size, us in rows:
    t.setdefault((size, b), {})[rep] = float(us)
for size in sorted({r[2] for r in rows}, key=int):
    base = t[(size, names[0])]
    line = [f"{size:>4} B"]
    for b in names:
        v = t[(size, b)]
        ratio = st.median(v[r] / base[r] for r in v if r in base)
        line.append(f"{b} {st.median(v.values()):.2f} us (x{ratio:.3f})")
    print("  ".join(line))
PY
