#!/bin/bash
# crnet-mpi (the boards on, the default) against Open MPI and MPICH, each on
# its default transport (shared memory on one host), the same OSU 5.3
# sources, 3 interleaved rounds, medians. At p = 4 and 8 the ranks share
# the 2 cores; MPICH polls without yielding there.
cd "$(dirname "$0")/../../.."
for P in 2 4 8; do
  echo "=== osu P=$P"
  MPICH=1 tools/osu/compare_variants.sh build-rel $P 3 crnet:CRNET_SHM_BOARD_BYTES=4096 -- \
    "osu_allreduce -m 8:1024 -i 500 -x 50" "osu_bcast -m 8:1024 -i 500 -x 50" \
    "osu_allgather -m 8:1024 -i 500 -x 50" "osu_alltoall -m 8:1024 -i 500 -x 50" \
    "osu_barrier -i 500 -x 50"
done
echo "=== osu latency P=2"
MPICH=1 tools/osu/compare_variants.sh build-rel 2 3 crnet:CRNET_SHM_BOARD_BYTES=4096 -- "osu_latency -i 5000 -x 500"
echo done
