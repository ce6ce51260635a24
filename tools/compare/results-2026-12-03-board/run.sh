#!/bin/bash
cd /work/main
for P in 2 4 8; do
  echo "=== ab_crbench P=$P"
  tools/bench/ab_crbench.sh 5 $P "-c allreduce -b 8 -e 4K -f 8 -n 2000 -w 100 --no-link-limit" board=build-rel@CRNET_SHM_BOARD_BYTES=4096 frames=build-rel
done
for P in 2 4 8; do
  echo "=== osu P=$P"
  tools/osu/compare_variants.sh build-rel $P 3 board:CRNET_SHM_BOARD_BYTES=4096 frames:CRNET_SHM_BOARD_BYTES=0 -- \
    "osu_allreduce -m 8:4096 -i 1000 -x 100" "osu_bcast -m 8:4096 -i 1000 -x 100" \
    "osu_allgather -m 8:4096 -i 1000 -x 100" "osu_alltoall -m 8:4096 -i 1000 -x 100" \
    "osu_barrier -i 1000 -x 100"
done
echo "=== osu latency P=2"
tools/osu/compare_variants.sh build-rel 2 3 frames:CRNET_SHM_BOARD_BYTES=0 -- "osu_latency -i 1000 -x 100"
echo done
