#!/usr/bin/env bash
# Point-to-point latency or bandwidth (crbench --p2p) of several builds of
# crnet, interleaved so that the machine's noise falls on all of them alike
# (docs/PERFORMANCE.md, "The executor and the wait").
#
#   tools/bench/ab_p2p.sh REPS latency|bw "CRBENCH ARGS" NAME=BUILD_DIR...
#
# Each BUILD_DIR is a meson build with src/crlaunch and tools/crbench. Per
# repetition every build runs `crbench --p2p MODE CRBENCH ARGS` at p = 2,
# under crlaunch with $AB_CRLAUNCH_ARGS if set (e.g. "-x CRNET_SPIN_US=0").
# Prints, per size, the median over repetitions per build (us or MB/s).
set -euo pipefail
reps=$1
mode=$2
args=$3
shift 3
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for _ in $(seq 1 "$reps"); do
  for spec in "$@"; do
    name=${spec%%=*}
    dir=${spec#*=}
    # shellcheck disable=SC2086
    "$dir/src/crlaunch" -n 2 ${AB_CRLAUNCH_ARGS:-} "$dir/tools/crbench" \
      --p2p "$mode" $args 2>/dev/null |
      awk -v b="$name" '$1 ~ /^[0-9]+$/ {print b, $1, $2}' >>"$out"
  done
done
python3 - "$out" "$mode" "${@%%=*}" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, size, value = line.split()
    rows.setdefault((name, int(size)), []).append(float(value))
mode, names = sys.argv[2], sys.argv[3:]
unit = "us" if mode == "latency" else "MB/s"
print("# crbench --p2p %s, medians (%s)" % (mode, unit))
print("%10s " % "bytes" + " ".join("%12s" % n for n in names))
for size in sorted({k[1] for k in rows}):
    print("%10d " % size + " ".join(
        "%12.1f" % statistics.median(rows[(n, size)]) if (n, size) in rows
        else "%12s" % "-" for n in names))
PY
