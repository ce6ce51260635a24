#!/bin/bash
# Before and after the clock-paced loop turns and the asymmetric fences
# (session 40): "before" is the same OSU build run against the libraries of
# the commit before (070797c, built in /tmp/base/build-rel: git worktree add
# /tmp/base 070797c; meson setup build-rel --buildtype=release), swapped in
# with LD_LIBRARY_PATH (the binaries' RUNPATH gives way to it); "nofence" is
# this build with CRNET_SHM_MEMBARRIER=0. Open MPI beside them, interleaved,
# medians over the rounds. p = 4 and 8 share the 2 cores (membarrier is off
# there by default, so no nofence variant).
cd "$(dirname "$0")/../../.."
BASE=before:LD_LIBRARY_PATH=/tmp/base/build-rel/src/mpi:/tmp/base/build-rel/src
echo "=== osu P=2"
tools/osu/compare_variants.sh build-rel 2 5 "$BASE" after:CRNET_SHM_MEMBARRIER=auto \
  nofence:CRNET_SHM_MEMBARRIER=0 -- \
  "osu_allreduce -m 8:1024 -i 2000 -x 200" "osu_bcast -m 8:1024 -i 2000 -x 200" \
  "osu_barrier -i 2000 -x 200" "osu_alltoall -m 8:1024 -i 2000 -x 200"
for P in 4 8; do
  echo "=== osu P=$P"
  tools/osu/compare_variants.sh build-rel $P 3 "$BASE" after:CRNET_SHM_MEMBARRIER=auto -- \
    "osu_allreduce -m 8:1024 -i 500 -x 50" "osu_bcast -m 8:1024 -i 500 -x 50" \
    "osu_barrier -i 500 -x 50"
done
echo "=== osu latency P=2"
tools/osu/compare_variants.sh build-rel 2 5 "$BASE" after:CRNET_SHM_MEMBARRIER=auto \
  nofence:CRNET_SHM_MEMBARRIER=0 -- "osu_latency -i 10000 -x 1000"
echo done
