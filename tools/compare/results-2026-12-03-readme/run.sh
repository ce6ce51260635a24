#!/bin/bash
# The README's shared-memory rows: crnet-mpi on its defaults against Open
# MPI on its defaults (shared memory on one host), the same OSU 5.3
# sources, 3 interleaved rounds, medians, p = 2 (a core each).
# osu_bw's ratio is a bandwidth ratio (above 1: crnet faster).
cd "$(dirname "$0")/../../.."
tools/osu/compare_variants.sh build-rel 2 3 crnet:CRNET_SHM_MEMBARRIER=auto -- \
  "osu_allreduce -m 8:4194304 -i 100 -x 10" "osu_reduce_scatter -m 8:4194304 -i 100 -x 10" \
  "osu_alltoall -m 8:4194304 -i 100 -x 10" "osu_allgather -m 8:4194304 -i 100 -x 10" \
  "osu_bcast -m 8:4194304 -i 100 -x 10" "osu_latency -i 1000 -x 100" "osu_bw -i 100 -x 10"
echo done
