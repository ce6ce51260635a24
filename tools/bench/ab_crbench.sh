#!/usr/bin/env bash
# Any crbench row of several builds of crnet, interleaved so that the
# machine's noise falls on all of them alike (docs/PERFORMANCE.md, "Cost of
# requests").
#
#   tools/bench/ab_crbench.sh REPS P "CRBENCH ARGS" NAME=BUILD_DIR[@VAR=VALUE...]...
#
# Each BUILD_DIR is a meson build with src/crlaunch and tools/crbench; the
# VAR=VALUE after it go to that variant's ranks (crlaunch -x), so one build
# can be compared with itself under other settings:
#   ab_crbench.sh 5 4 "-c allreduce -b 8 -e 8" shm=build tcp=build@CRNET_TRANSPORT=tcp
# Per
# repetition every build runs `crbench CRBENCH ARGS` once, under crlaunch
# with $AB_CRLAUNCH_ARGS if set (e.g. "-x CRNET_SPIN_US=0"). Prints, per size,
# the median over repetitions of crbench's time and busbw per build, and
# the median of the per-repetition ratios of each build's time to the
# first build's.
set -euo pipefail
reps=$1
p=$2
args=$3
shift 3
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for rep in $(seq 1 "$reps"); do
  for spec in "$@"; do
    name=${spec%%=*}
    dir=${spec#*=}
    xs=()
    IFS=@ read -r -a parts <<<"$dir"
    dir=${parts[0]}
    for kv in "${parts[@]:1}"; do xs+=(-x "$kv"); done
    # shellcheck disable=SC2086
    "$dir/src/crlaunch" -n "$p" ${AB_CRLAUNCH_ARGS:-} "${xs[@]}" "$dir/tools/crbench" $args 2>/dev/null |
      awk -v b="$name" -v rep="$rep" '$1 ~ /^[0-9]+$/ {print b, rep, $1, $7, $9}' >>"$out"
  done
done
python3 - "$out" "${@%%=*}" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
names = [n.split("=")[0] for n in sys.argv[2:]]
t, bw = {}, {}
for b, rep, size, us, busbw in rows:
    t.setdefault((size, b), {})[rep] = float(us)
    bw.setdefault((size, b), {})[rep] = float(busbw)
for size in sorted({r[2] for r in rows}, key=int):
    base = t[(size, names[0])]
    line = [f"{size:>9} B"]
    for b in names:
        v = t[(size, b)]
        ratio = st.median(v[r] / base[r] for r in v if r in base)
        line.append(f"{b} {st.median(v.values()):.2f} us "
                    f"{st.median(bw[(size, b)].values()):.3f} GB/s (time x{ratio:.3f})")
    print("  ".join(line))
PY
