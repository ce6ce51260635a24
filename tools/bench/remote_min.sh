#!/usr/bin/env bash
# Where one copy starts on a shared-memory link (docs/PERFORMANCE-SHM.md,
# "Where one copy starts"): builds of this checkout that differ only in
# REMOTE_MIN (src/runtime/link_shm.c), each a git worktree under a
# temporary directory, run interleaved by tools/bench/ab_crbench.sh.
#
#   tools/bench/remote_min.sh REPS P "CRBENCH ARGS" KIB...
#   tools/bench/remote_min.sh 7 2 "-c bcast -b 4K -e 1M -f 2 -n 200 -w 20 --no-link-limit" 16 64 256
#
# Prints ab_crbench's table, one build per KIB (named mKIB, the first the
# reference of the ratios). The worktrees go when it ends.
set -euo pipefail
[ $# -ge 4 ] || {
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 2
}
reps=$1 p=$2 args=$3
shift 3
HERE=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
specs=()
cleanup() {
  for kib in "$@"; do
    git -C "$HERE" worktree remove --force "$tmp/m$kib" 2>/dev/null || true
  done
  rm -rf "$tmp"
}
trap 'cleanup "$@"' EXIT
for kib in "$@"; do
  git -C "$HERE" worktree add -q --detach "$tmp/m$kib" HEAD
  sed -i "s/^#define REMOTE_MIN ((uint64_t)[0-9]* << 10)/#define REMOTE_MIN ((uint64_t)$kib << 10)/" \
    "$tmp/m$kib/src/runtime/link_shm.c"
  grep -q "REMOTE_MIN ((uint64_t)$kib << 10)" "$tmp/m$kib/src/runtime/link_shm.c"
  meson setup "$tmp/m$kib/build" "$tmp/m$kib" --buildtype=debugoptimized \
    -Dtests=disabled >/dev/null
  ninja -C "$tmp/m$kib/build" >/dev/null
  specs+=("m$kib=$tmp/m$kib/build")
done
"$HERE/tools/bench/ab_crbench.sh" "$reps" "$p" "$args" "${specs[@]}"
