#!/usr/bin/env bash
# The same OSU 5.3 sources built with crnet-mpicc and with Open MPI's mpicc,
# run on one host (both on their defaults: shared memory between the
# ranks), with crnet in several variants of its environment, all
# interleaved round by round (variant 1, variant 2, ..., Open MPI, variant
# 1, ...), so that the machine's noise falls on every one. The table gives
# per size the median over rounds of each one's figure, and each variant's
# ratio to Open MPI (latency: below 1 crnet faster).
#
#   tools/osu/compare_variants.sh BUILD P ROUNDS "NAME[:VAR=VALUE,...]"... \
#       -- "BENCH [ARGS...]"...
#   tools/osu/compare_variants.sh build-rel 2 5 board:CRNET_SHM_BOARD_BYTES=4096 \
#       frames:CRNET_SHM_BOARD_BYTES=0 -- "osu_allreduce -m 8:1024"
#
# Needs openmpi-bin and libopenmpi-dev. At P above the cores, both run
# oversubscribed (Open MPI with --oversubscribe, which makes it yield).
# With MPICH=1 (needs mpich and libmpich-dev), MPICH's build of the same
# sources runs too, on its default transport (shared memory on one host),
# interleaved with the others, and each variant's ratio to it is printed
# after those to Open MPI.
set -euo pipefail
HERE=$(cd "$(dirname "$0")/../.." && pwd)
OSU=${OSU_DIR:-$HERE/../shared/outside/osu-micro-benchmarks-5.3}
usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 2
}
[ $# -ge 5 ] || usage
BUILD=$(cd "$1" && pwd)
P=$2
ROUNDS=$3
shift 3
variants=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
  variants+=("$1")
  shift
done
[ $# -ge 2 ] && [ ${#variants[@]} -ge 1 ] || usage
shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$HERE/tools/osu/osu.sh" build "$BUILD" "$tmp/crnet" >/dev/null
peers=(ompi)
[ "${MPICH:-0}" = 1 ] && peers+=(mpich)
for peer in "${peers[@]}"; do
  mkdir -p "$tmp/$peer"
  cc=mpicc.openmpi
  [ "$peer" = mpich ] && cc=mpicc.mpich
  for spec in "$@"; do
    name=${spec%% *}
    dir=collective helper=osu_coll.c
    [ -f "$OSU/mpi/pt2pt/$name.c" ] && dir=pt2pt helper=osu_pt2pt.c
    [ -x "$tmp/$peer/$name" ] ||
      $cc -O2 -I"$OSU/mpi/$dir" -o "$tmp/$peer/$name" \
        "$OSU/mpi/$dir/$name.c" "$OSU/mpi/$dir/$helper" -lm -lpthread
  done
done

# Rows "lib bench size value" from one run's table (osu_barrier's has no
# size column: size 0).
rows() {
  awk -v lib="$1" -v b="$2" '
    $1 ~ /^[0-9]+$/ && NF >= 2 {print lib, b, $1, $2}
    $1 ~ /^[0-9.]+$/ && NF == 1 {print lib, b, 0, $1}'
}
for r in $(seq "$ROUNDS"); do
  for spec in "$@"; do
    name=${spec%% *}
    args=${spec#"$name"}
    for v in "${variants[@]}"; do
      label=${v%%:*}
      envs=()
      if [ "$v" != "$label" ]; then
        IFS=, read -r -a pairs <<<"${v#*:}"
        for kv in "${pairs[@]}"; do envs+=(-x "$kv"); done
      fi
      # shellcheck disable=SC2086 # the benchmark's arguments are words
      "$BUILD/src/crlaunch" -np "$P" --timeout 600 "${envs[@]}" \
        "$tmp/crnet/$name" $args | rows "$label" "$name" >>"$tmp/rows"
    done
    # shellcheck disable=SC2086
    mpirun.openmpi --allow-run-as-root --oversubscribe -np "$P" \
      "$tmp/ompi/$name" $args 2>/dev/null | rows ompi "$name" >>"$tmp/rows"
    if [ "${MPICH:-0}" = 1 ]; then
      # shellcheck disable=SC2086
      mpirun.mpich -np "$P" "$tmp/mpich/$name" $args 2>/dev/null |
        rows mpich "$name" >>"$tmp/rows"
    fi
  done
done
labels=$(printf '%s\n' "${variants[@]}" | sed 's/:.*//' | paste -sd, -)
python3 - "$tmp/rows" "$P" "$ROUNDS" "$labels" "${peers[*]}" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
p, rounds, labels = sys.argv[2], sys.argv[3], sys.argv[4].split(',')
peers = sys.argv[5].split()
by = {}
for lib, bench, size, v in rows:
    by.setdefault((bench, int(size)), {}).setdefault(lib, []).append(float(v))
print(f"# p = {p}, {rounds} interleaved rounds, one host, every library on "
      "its defaults; medians over rounds, [lowest-highest round]; ratio = "
      "variant / " + " and variant / ".join(
          {'ompi': 'Open MPI', 'mpich': 'MPICH'}[q] for q in peers))
head = f"# {'benchmark':<16} {'size':>8}"
for lab in labels + peers:
    head += f" {lab:>20}"
for q in peers:
    for lab in labels:
        head += f" {lab + '/' + q:>12}"
print(head)
for (bench, size) in sorted(by):
    d = by[(bench, size)]
    if any(l not in d for l in labels + peers):
        continue
    line = f"  {bench:<16} {size:>8}"
    for lab in labels + peers:
        m = st.median(d[lab])
        line += f" {f'{m:.2f} [{min(d[lab]):.2f}-{max(d[lab]):.2f}]':>20}"
    for q in peers:
        o = st.median(d[q])
        for lab in labels:
            line += f" {st.median(d[lab]) / o if o else 0:>12.2f}"
    print(line)
PY
