#!/usr/bin/env bash
# The OSU micro-benchmarks 5.3 (BSD licence, code nobody here wrote) as
# outside clients of crnet-mpi: built unmodified with crnet-mpicc from
# ../shared/outside, run under crlaunch (docs/MPI.md).
#
#   tools/osu/osu.sh build BUILD OUT
#       builds every benchmark of OSU's collective and pt2pt directories
#       into OUT with BUILD's crnet-mpicc (the build tree's
#       src/mpi/crnet-mpicc-uninstalled); prints what built, and for what
#       did not, why (the MPI function outside the subset, or the compiler's
#       first error); OUT/built lists the names
#   tools/osu/osu.sh run BUILD OUT P NAME [ARGS...]
#       runs OUT/NAME under BUILD's crlaunch -np P
#   tools/osu/osu.sh ci BUILD OUT P
#       build, then run a subset at P ranks with short settings, checking
#       that each exits 0 and prints its table; the test suite runs this at
#       P = 2 and 4 (side by side with Open MPI: tools/osu/compare.sh)
#
# The sources are found at $OSU_DIR, else ../shared/outside/
# osu-micro-benchmarks-5.3 beside the source tree; without them the script
# says so and exits 77 (meson's "skipped").
set -euo pipefail
HERE=$(cd "$(dirname "$0")/../.." && pwd)
OSU=${OSU_DIR:-$HERE/../shared/outside/osu-micro-benchmarks-5.3}

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 2
}

[ $# -ge 3 ] || usage
mode=$1
BUILD=$(cd "$2" && pwd)
OUT=$3
shift 3
MPICC=${CRNET_MPICC:-$BUILD/src/mpi/crnet-mpicc-uninstalled}
CRLAUNCH=$BUILD/src/crlaunch

need_sources() {
  if [ ! -d "$OSU/mpi/collective" ] || [ ! -d "$OSU/mpi/pt2pt" ]; then
    # A named skip (tests/skip.h): the sources live outside the project.
    echo "SKIP osu: no OSU sources at $OSU (set OSU_DIR)"
    exit 77
  fi
}

# Why a benchmark did not build, from its log: the first MPI function the
# linker could not find (outside the subset), else the first error.
why_not() {
  local f=$1 sym
  sym=$(grep -o "undefined reference to \`MPI_[A-Za-z_]*'" "$f" | head -1 |
    sed "s/.*\`\(MPI_[A-Za-z_]*\)'/\1/" || true)
  if [ -n "$sym" ]; then
    echo "calls $sym, outside the subset"
  else
    grep -m1 "error" "$f" | sed "s|$OSU/||" || echo "see $f"
  fi
}

# Compiles one benchmark; its name into built.partial, or into not-built
# with why.
build_one() { # dir src helper
  local dir=$1 src=$2 helper=$3 name
  name=$(basename "$src" .c)
  if "$MPICC" -O2 -I"$OSU/mpi/$dir" -o "$OUT/$name" "$src" "$helper" \
    -lm -lpthread >"$OUT/$name.log" 2>&1; then
    echo "$name" >>"$OUT/built.partial"
  else
    echo "$name: $(why_not "$OUT/$name.log")" >>"$OUT/not-built"
  fi
}

build() {
  need_sources
  mkdir -p "$OUT"
  # The list is complete only once every program was tried (build_if_stale
  # trusts it): written aside, moved in at the end.
  rm -f "$OUT/built"
  : >"$OUT/built.partial"
  : >"$OUT/not-built"
  local dir src helper running=0
  # Two compilers at a time (OSU_BUILD_JOBS): one per core of CI's
  # machine. Each appends one short line, which the kernel does not
  # interleave; the lists are sorted at the end.
  for dir in collective pt2pt; do
    helper=$OSU/mpi/$dir/osu_coll.c
    [ "$dir" = pt2pt ] && helper=$OSU/mpi/$dir/osu_pt2pt.c
    for src in "$OSU"/mpi/$dir/osu_*.c; do
      [ "$src" = "$helper" ] && continue
      if [ "$running" -ge "${OSU_BUILD_JOBS:-2}" ]; then
        wait -n
        running=$((running - 1))
      fi
      build_one "$dir" "$src" "$helper" &
      running=$((running + 1))
    done
  done
  wait
  sort -o "$OUT/built.partial" "$OUT/built.partial"
  sort -o "$OUT/not-built" "$OUT/not-built"
  mv "$OUT/built.partial" "$OUT/built"
  echo "built ($(wc -l <"$OUT/built")): $(tr '\n' ' ' <"$OUT/built")"
  if [ -s "$OUT/not-built" ]; then
    echo "not built ($(wc -l <"$OUT/not-built")):"
    sed 's/^/  /' "$OUT/not-built"
  fi
}

run() {
  local p=$1 name=$2
  shift 2
  # In a sanitized build, OSU's own leaks are not crnet-mpi's (lsan.supp).
  timeout -k 5 300 "$CRLAUNCH" -np "$p" --timeout 280 \
    -x LSAN_OPTIONS="suppressions=$HERE/tools/osu/lsan.supp" \
    "$OUT/$name" "$@"
}

# One benchmark of the CI subset: exits 0 and prints a table row.
ci_one() {
  local p=$1 name=$2 out
  shift 2
  if ! grep -qx "$name" "$OUT/built"; then
    echo "osu.sh: $name did not build" >&2
    return 1
  fi
  if ! out=$(run "$p" "$name" "$@" 2>&1); then
    echo "$out" >&2
    echo "osu.sh: $name at p = $p failed" >&2
    return 1
  fi
  echo "$out"
  # A here-string, not a pipe: grep -q exits at the first row, and with
  # pipefail an echo still writing into the closed pipe (SIGPIPE) failed the
  # check of a table that was there.
  if ! grep -Eq '^ *[0-9]+(\.[0-9]+)?( +[0-9.]+)* *$' <<<"$out"; then
    echo "osu.sh: $name at p = $p printed no table" >&2
    return 1
  fi
}

# build, unless OUT holds a build newer than both libraries and the
# wrapper (any change to mpi.h relinks libcrnet-mpi): the test suite's
# osu-p2 and osu-p4 share one OUT, so the 30 programs are built once.
build_if_stale() {
  local f
  for f in "$BUILD/src/libcrnet.so" "$BUILD/src/mpi/libcrnet-mpi.so" "$MPICC"; do
    if [ ! -s "$OUT/built" ] || [ ! -e "$f" ] || [ ! "$OUT/built" -nt "$f" ]; then
      build
      return
    fi
  done
  echo "built before, after the libraries: $(tr '\n' ' ' <"$OUT/built")"
}

ci() {
  local p=$1 name failed=0
  build_if_stale
  for name in osu_allreduce osu_reduce_scatter osu_alltoall osu_allgather \
    osu_bcast osu_barrier osu_allgatherv osu_alltoallv osu_gather \
    osu_scatter osu_reduce osu_gatherv osu_scatterv osu_iallgather \
    osu_ialltoall osu_ialltoallw osu_ibcast osu_igatherv; do
    ci_one "$p" "$name" -m 1:65536 -i 20 -x 5 || failed=1
  done
  if [ "$p" = 2 ]; then
    for name in osu_latency osu_bw osu_bibw; do
      ci_one 2 "$name" -i 20 -x 5 || failed=1
    done
  fi
  return $failed
}

case $mode in
build) build ;;
run)
  [ $# -ge 2 ] || usage
  run "$@"
  ;;
ci)
  [ $# -eq 1 ] || usage
  ci "$1"
  ;;
*) usage ;;
esac
