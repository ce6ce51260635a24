#!/usr/bin/env bash
# Small-allreduce latency of several builds of crnet, interleaved so that
# the machine's noise falls on all of them alike (docs/PERFORMANCE.md,
# "Cost of the frame header and the counters", "Cost of requests").
#
#   tools/bench/ab_small_allreduce.sh REPS P NAME=BUILD_DIR...
#
# ab_crbench.sh with crbench's allreduce of 8 and 64 bytes, ring, 5000
# timed calls after 500 warm-up ones: per size the median over repetitions
# of crbench's median per build, and the median of the per-repetition
# ratios of each build to the first. AB_CRLAUNCH_ARGS passes through.
set -euo pipefail
reps=$1
p=$2
shift 2
exec "$(dirname "$0")/ab_crbench.sh" "$reps" "$p" \
  "-b 8 -e 64 -f 8 -n 5000 -w 500 -s ring" "$@"
