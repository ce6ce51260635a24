#!/usr/bin/env bash
# Instructions a small allreduce (or, with --p2p, a small ping-pong) costs,
# counted by callgrind, which gives the same count whatever else the
# machine does (docs/PERFORMANCE.md, "Cost of requests"; docs/RELIABILITY.md
# for --p2p).
#
#   tools/bench/call_instructions.sh [--p2p] REPS NAME=BUILD_DIR...
#
# Each BUILD_DIR is a meson build with src/crlaunch and tools/crbench. Per
# build: crbench at p = 2, one 8-byte allreduce (auto schedule) timed REPS
# times after no warm-up (--p2p: crbench --p2p latency, REPS 8-byte round
# trips), CRNET_SPIN_US=0 so that no polling loop adds instructions that
# depend on timing; rank 0 runs under valgrind --tool=callgrind. Prints the
# whole process's instructions and their quotient by REPS (each repetition
# is crbench's barrier and one allreduce, or one round trip; init and
# destroy are in the total too: --p2p also runs REPS/10 and prints the
# difference per repetition, which leaves them out).
set -euo pipefail
p2p=0
if [ "${1:-}" = --p2p ]; then
  p2p=1
  shift
fi
reps=$1
shift

# instructions BUILD_DIR REPS: rank 0's total.
instructions() {
  local dir=$1 n=$2 out mode
  out=$(mktemp)
  if [ $p2p -eq 1 ]; then mode=(--p2p latency); else mode=(--no-link-limit); fi
  "$dir/src/crlaunch" -n 2 -x CRNET_SPIN_US=0 -x CG_OUT="$out" sh -c '
    if [ "$CRNET_RANK" = 0 ]; then
      exec valgrind --tool=callgrind --callgrind-out-file="$CG_OUT" "$@"
    fi
    exec "$@"' sh "$dir/tools/crbench" "${mode[@]}" -b 8 -e 8 -n "$n" -w 0 \
    >/dev/null 2>&1
  callgrind_annotate "$out" 2>/dev/null |
    awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'
  rm -f "$out"
}

for spec in "$@"; do
  name=${spec%%=*}
  dir=${spec#*=}
  total=$(instructions "$dir" "$reps")
  awk -v n="$name" -v t="$total" -v r="$reps" \
    'BEGIN {printf "%s: %.1f M instructions, %.2f k per repetition\n", n, t / 1e6, t / r / 1e3}'
  if [ $p2p -eq 1 ]; then
    few=$(instructions "$dir" $((reps / 10)))
    awk -v n="$name" -v t="$total" -v f="$few" -v r="$reps" \
      'BEGIN {printf "%s: %.0f instructions per round trip (init and destroy left out)\n", n, (t - f) / (r - r / 10)}'
  fi
done
