#!/bin/bash
# Rooted board calls that wait only for the posts they need (bcast's root
# for none), against frames and Open MPI's shared memory: the same OSU 5.3
# sources, 3 interleaved rounds, medians. At p = 4 and 8 the ranks share
# the 2 cores.
cd "$(dirname "$0")/../../.."
for P in 2 4 8; do
  echo "=== osu P=$P"
  tools/osu/compare_variants.sh build-rel $P 3 board:CRNET_SHM_BOARD_BYTES=4096 frames:CRNET_SHM_BOARD_BYTES=0 -- \
    "osu_bcast -m 8:4096 -i 1000 -x 100" "osu_reduce -m 8:4096 -i 1000 -x 100" \
    "osu_allreduce -m 8:4096 -i 1000 -x 100" "osu_barrier -i 1000 -x 100"
done
echo done
