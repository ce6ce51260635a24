#!/usr/bin/env bash
# How long the survivors of a killed rank take to fail, through crlaunch,
# for several builds of crnet interleaved so that the machine's noise falls
# on all of them alike (docs/RELIABILITY.md, "Dead peers").
#
#   tools/bench/dead_peer_time.sh KILLS P NAME=BUILD_DIR...
#
# Each BUILD_DIR is a meson build with src/crlaunch and
# tools/dead_peer_time. Per kill every build runs one job of P ranks in
# which rank P-3 kills itself at a moment chosen by the kill's number.
# Prints, per build, the survivors' returns, their median and maximum time
# from the kill, and how many said how the lost rank ended.
set -euo pipefail
kills=$1
p=$2
shift 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for k in $(seq 1 "$kills"); do
  for spec in "$@"; do
    name=${spec%%=*}
    dir=${spec#*=}
    timeout 60 "$dir/src/crlaunch" -n "$p" "$dir/tools/dead_peer_time" \
      $((p - 3)) "$k" "$tmp/killed" 2>/dev/null |
      awk -v b="$name" '$1 == "failed" {print b, $2, /killed by signal/ ? 1 : 0}' \
        >>"$tmp/rows" || true
  done
done
python3 - "$tmp/rows" "${@%%=*}" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
for name in [n.split("=")[0] for n in sys.argv[2:]]:
    t = sorted(float(r[1]) for r in rows if r[0] == name)
    told = sum(int(r[2]) for r in rows if r[0] == name)
    if not t:
        print(f"{name}: no returns")
        continue
    print(f"{name}: {len(t)} returns, median {st.median(t) * 1000:.1f} ms, "
          f"max {t[-1] * 1000:.1f} ms, {told} said it was killed")
PY
