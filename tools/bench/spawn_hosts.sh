#!/usr/bin/env bash
# How long crlaunch takes to start a job across hosts, against one SSH round
# trip: the test bed of tests/testbed.sh with H hosts (network namespaces on
# this machine, sshd in each), P ranks spread evenly, a program that inits
# crnet, allreduces once and exits.
#
#   tools/bench/spawn_hosts.sh [H [P [RUNS]]]     default 8 hosts, 64 ranks, 5 runs
#
# Prints the median of RUNS of `ssh HOST true`, of the whole job, and of the
# same job started on this host without SSH; a launch
# that opened the sessions one after the other would take at least H times
# the first. Needs root; run from the source tree after a build.
set -u
cd "$(dirname "$0")/../.."
hosts=${1:-8}
ranks=${2:-64}
runs=${3:-5}
. tests/testbed.sh
trap testbed_down EXIT
testbed_up "$hosts" || { echo "spawn_hosts: test bed: $tb_why"; exit 1; }

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
timed() { # command... -> seconds
  local t0
  t0=$(date +%s.%N)
  "$@" >/dev/null 2>&1 || echo "spawn_hosts: failed: $*" >&2
  awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f\n", b - a }'
}

list=""
per=$(((ranks + hosts - 1) / hosts))
for i in $(seq "$hosts"); do list="$list${list:+,}10.79.0.$((i + 1)):$per"; done
ssh_s=$(for _ in $(seq "$runs"); do timed "$tb/ssh" 10.79.0.2 true; done | median)
job_s=$(for _ in $(seq "$runs"); do
  timed build/src/crlaunch --timeout 120 --ssh "$tb/ssh" -n "$ranks" --hosts "$list" \
    build/examples/hello_allreduce
done | median)
true_s=$(for _ in $(seq "$runs"); do
  timed build/src/crlaunch --timeout 120 --ssh "$tb/ssh" -n "$ranks" --hosts "$list" true
done | median)
local_s=$(for _ in $(seq "$runs"); do
  timed build/src/crlaunch --timeout 120 -n "$ranks" build/examples/hello_allreduce
done | median)
echo "hosts=$hosts ranks=$ranks runs=$runs"
echo "the same job on this host only: ${local_s} s"
echo "ssh HOST true, median:          ${ssh_s} s"
echo "crlaunch of $ranks x true:        ${true_s} s  = $(awk -v a="$true_s" -v b="$ssh_s" 'BEGIN { printf "%.1f", a / b }') x one ssh round trip"
echo "crlaunch job (spawn+init+exit): ${job_s} s  = $(awk -v a="$job_s" -v b="$ssh_s" 'BEGIN { printf "%.1f", a / b }') x one ssh round trip (sessions one after the other: >= $hosts x)"
