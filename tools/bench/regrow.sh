#!/usr/bin/env bash
# Losing ranks and growing back (docs/RELIABILITY.md, "Growing back"): one
# job of P ranks under crlaunch --restart CYCLES (tools/regrow), in which a
# rank kills itself in every cycle (a different comm position each time,
# rank 0 among them) and the survivors grow the comm back to P with the
# restarted process. Prints the time from each kill to the first allreduce
# on the whole comm again (median and maximum over the cycles), the job's
# own time, and whether every sum was right. With many cycles it is the
# soak: minutes of losing and regrowing.
#
#   tools/bench/regrow.sh BUILD CYCLES P [crlaunch options...]
set -euo pipefail
build=$(realpath "$1")
cycles=$2
p=$3
shift 3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s.%N)
rc=0
timeout $((60 + cycles * 10)) "$build/src/crlaunch" --restart "$cycles" "$@" -n "$p" \
  "$build/tools/regrow" "$cycles" "$tmp" >"$tmp/out" 2>"$tmp/err" || rc=$?
end=$(date +%s.%N)
python3 - "$tmp/out" "$p" "$cycles" "$rc" "$start" "$end" <<'PY'
import statistics as st, sys
out, p, cycles, rc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
lines = [l.split() for l in open(out)]
times = sorted(float(l[2]) for l in lines if l[0] == "regrown")
done = [l for l in lines if l[0] == "done"]
print(f"p = {p}: {cycles} kills and restarts, {len(times)} regrown "
      f"({p} ranks share this machine's cores); crlaunch exited {rc} after "
      f"{float(sys.argv[6]) - float(sys.argv[5]):.1f} s")
if times:
    print(f"kill -> first allreduce on the whole comm again: median "
          f"{st.median(times) * 1000:.0f} ms, max {times[-1] * 1000:.0f} ms")
print("sums:", done[0][3] if done else "no result")
PY
if [ "$rc" -ne 0 ]; then
  tail -n 20 "$tmp/err"
  exit 1
fi
