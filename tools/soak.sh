#!/bin/sh
# The long soak: random collectives at p ranks for a number of minutes,
# every result checked (tests/progs/soak.c).
#
#   tools/soak.sh P MINUTES [soak options: --seed S --max-bytes B
#                            --in-flight K --trace]
#
# BUILD (default: build next to this script's directory) is the meson build
# directory. Rank 0 prints the seed first and one line of counts at the end;
# the exit status is 0 only if every result was right. A failure names the
# seed, the step and the call: rerun with the same P and --seed to replay it.
set -eu
if [ $# -lt 2 ]; then
  echo "usage: $0 P MINUTES [--seed S] [--max-bytes B] [--in-flight K] [--trace]" >&2
  exit 2
fi
p=$1
minutes=$2
shift 2
here=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$here/build}
if [ ! -x "$build/src/crlaunch" ] || [ ! -x "$build/tests/progs/soak" ]; then
  echo "$0: no crlaunch or soak in $build (meson setup build && ninja -C build)" >&2
  exit 2
fi
# crlaunch's own timeout: the run, plus room for the last steps and the
# slowest large collective at this p.
limit=$(awk -v m="$minutes" 'BEGIN { printf "%d", m * 60 + 300 }')
exec "$build/src/crlaunch" -n "$p" --timeout "$limit" \
  "$build/tests/progs/soak" --minutes "$minutes" "$@"
