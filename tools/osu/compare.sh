#!/usr/bin/env bash
# The same OSU 5.3 sources built twice, with crnet-mpicc and with Open MPI's
# mpicc, and run side by side: crnet-mpi under crlaunch, Open MPI under
# mpirun, both over TCP (crnet with CRNET_TRANSPORT=tcp, Open MPI with
# --mca btl tcp,self) or, with BTL=default, both on their defaults (shared
# memory between the ranks of the host). Rounds alternate
# (crnet, Open MPI, crnet, ...) so that the machine's noise falls on both;
# the table gives per size the median over rounds of each one's figure
# and the ratio crnet / Open MPI (latency: below 1 crnet faster; the
# bandwidth benchmarks: above 1).
#
#   tools/osu/compare.sh BUILD P ROUNDS "BENCH [ARGS...]"...
#   BTL=default tools/osu/compare.sh build 4 3 "osu_allreduce -m 8:16777216"
#
# Needs openmpi-bin and libopenmpi-dev. At P above the cores, both run
# oversubscribed (Open MPI with --oversubscribe, which makes it yield).
set -euo pipefail
HERE=$(cd "$(dirname "$0")/../.." && pwd)
OSU=${OSU_DIR:-$HERE/../shared/outside/osu-micro-benchmarks-5.3}
[ $# -ge 4 ] || {
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 2
}
BUILD=$(cd "$1" && pwd)
P=$2
ROUNDS=$3
shift 3
BTL=${BTL:-tcp}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$HERE/tools/osu/osu.sh" build "$BUILD" "$tmp/crnet" >/dev/null
mkdir -p "$tmp/ompi"
for spec in "$@"; do
  name=${spec%% *}
  dir=collective helper=osu_coll.c
  [ -f "$OSU/mpi/pt2pt/$name.c" ] && dir=pt2pt helper=osu_pt2pt.c
  [ -x "$tmp/ompi/$name" ] ||
    mpicc.openmpi -O2 -I"$OSU/mpi/$dir" -o "$tmp/ompi/$name" \
      "$OSU/mpi/$dir/$name.c" "$OSU/mpi/$dir/$helper" -lm -lpthread
done
MPIRUN=(mpirun.openmpi --allow-run-as-root --oversubscribe -np "$P")
CRLAUNCH=("$BUILD/src/crlaunch" -np "$P" --timeout 600)
if [ "$BTL" = tcp ]; then
  MPIRUN+=(--mca btl tcp,self --mca btl_tcp_if_include lo)
  CRLAUNCH+=(-x CRNET_TRANSPORT=tcp)
fi

# Rows "lib bench size value" from one run's table.
rows() {
  awk -v lib="$1" -v b="$2" '$1 ~ /^[0-9]+$/ && NF >= 2 {print lib, b, $1, $2}'
}
for r in $(seq "$ROUNDS"); do
  for spec in "$@"; do
    name=${spec%% *}
    args=${spec#"$name"}
    # shellcheck disable=SC2086 # the benchmark's arguments are words
    "${CRLAUNCH[@]}" "$tmp/crnet/$name" $args |
      rows crnet "$name" >>"$tmp/rows"
    # shellcheck disable=SC2086
    "${MPIRUN[@]}" "$tmp/ompi/$name" $args 2>/dev/null |
      rows ompi "$name" >>"$tmp/rows"
  done
done
python3 - "$tmp/rows" "$P" "$ROUNDS" "$BTL" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
p, rounds, btl = sys.argv[2], sys.argv[3], sys.argv[4]
by = {}
for lib, bench, size, v in rows:
    by.setdefault((bench, int(size)), {}).setdefault(lib, []).append(float(v))
print(f"# p = {p}, {rounds} interleaved rounds, both on {btl}; medians "
      "over rounds, [lowest-highest round]")
print(f"# {'benchmark':<20} {'size':>9} {'crnet':>20} {'Open MPI':>20} {'crnet/OMPI':>10}")
for (bench, size) in sorted(by):
    d = by[(bench, size)]
    if 'crnet' not in d or 'ompi' not in d:
        continue
    c, o = st.median(d['crnet']), st.median(d['ompi'])
    cs = f"{c:.2f} [{min(d['crnet']):.2f}-{max(d['crnet']):.2f}]"
    os_ = f"{o:.2f} [{min(d['ompi']):.2f}-{max(d['ompi']):.2f}]"
    print(f"  {bench:<20} {size:>9} {cs:>20} {os_:>20} {c / o if o else 0:>10.2f}")
PY
