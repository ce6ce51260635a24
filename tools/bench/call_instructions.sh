#!/usr/bin/env bash
# Instructions a small allreduce costs, counted by callgrind, which gives
# the same count whatever else the machine does (docs/PERFORMANCE.md,
# "Cost of requests").
#
#   tools/bench/call_instructions.sh REPS NAME=BUILD_DIR...
#
# Each BUILD_DIR is a meson build with src/crlaunch and tools/crbench. Per
# build: crbench at p = 2, one 8-byte allreduce (auto schedule) timed REPS
# times after no warm-up, CRNET_SPIN_US=0 so that no polling loop adds
# instructions that depend on timing; rank 0 runs under
# valgrind --tool=callgrind. Prints the whole process's instructions and
# their quotient by REPS (each repetition is crbench's barrier and one
# allreduce; init and destroy are in the total too).
set -euo pipefail
reps=$1
shift
for spec in "$@"; do
  name=${spec%%=*}
  dir=${spec#*=}
  out=$(mktemp)
  "$dir/src/crlaunch" -n 2 -x CRNET_SPIN_US=0 -x CG_OUT="$out" sh -c '
    if [ "$CRNET_RANK" = 0 ]; then
      exec valgrind --tool=callgrind --callgrind-out-file="$CG_OUT" "$@"
    fi
    exec "$@"' sh "$dir/tools/crbench" -b 8 -e 8 -n "$reps" -w 0 \
    --no-link-limit >/dev/null 2>&1
  total=$(callgrind_annotate "$out" 2>/dev/null |
    awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
  rm -f "$out"
  awk -v n="$name" -v t="$total" -v r="$reps" \
    'BEGIN {printf "%s: %.1f M instructions, %.2f k per repetition\n", n, t / 1e6, t / r / 1e3}'
done
