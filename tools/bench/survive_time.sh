#!/usr/bin/env bash
# What surviving a lost rank costs, through crlaunch --keep-going
# (docs/RELIABILITY.md, "Surviving lost ranks"): per kill, one job of P
# ranks (tools/survive_time) in which rank P-2 kills itself at a moment
# chosen by the kill's number. Prints the time from the kill to every
# survivor's first allreduce on the shrunk comm (median of the jobs' slowest
# survivors, and the maximum), the shrink's own time, and an agreement
# against an 8-byte allreduce with nobody lost (medians over the jobs).
#
#   tools/bench/survive_time.sh BUILD KILLS P [crlaunch options...]
set -euo pipefail
build=$(realpath "$1")
kills=$2
p=$3
shift 3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for k in $(seq 1 "$kills"); do
  timeout 120 "$build/src/crlaunch" --keep-going "$@" -n "$p" \
    "$build/tools/survive_time" $((p - 2)) "$k" "$tmp/killed" 2>/dev/null |
    awk -v k="$k" '{print k, $0}' >>"$tmp/rows" || true
done
python3 - "$tmp/rows" "$p" "$kills" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
p, kills = int(sys.argv[2]), int(sys.argv[3])
surv = [r for r in rows if r[1] == "survived"]
agree = [r for r in rows if r[1] == "agree"]
jobs = {}
for r in surv:
    jobs.setdefault(r[0], []).append(float(r[2]))
whole = [k for k, v in jobs.items() if len(v) == p - 1]
slowest = sorted(max(jobs[k]) for k in whole)
print(f"p = {p}: {kills} kills, {len(whole)} jobs where all {p - 1} survivors "
      f"finished ({p} ranks share this machine's cores)")
if slowest:
    print(f"kill -> every survivor's first allreduce on the shrunk comm: "
          f"median {st.median(slowest) * 1000:.1f} ms, "
          f"max {slowest[-1] * 1000:.1f} ms")
    shrink = [float(r[3]) for r in surv]
    print(f"shrink (one rank lost): median {st.median(shrink) * 1e6:.0f} us")
if agree:
    a = st.median(float(r[2]) for r in agree)
    ar = st.median(float(r[3]) for r in agree)
    print(f"agree, nobody lost: {a * 1e6:.1f} us against an 8-byte allreduce's "
          f"{ar * 1e6:.1f} us: x{a / ar:.2f}")
    if slowest:
        print(f"shrink / 8-byte allreduce: x{st.median(shrink) / ar:.1f}")
PY
