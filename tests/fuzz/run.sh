#!/usr/bin/env bash
# Runs every libFuzzer harness of tests/fuzz for a bounded time.
#
#   tests/fuzz/run.sh [SECONDS] [TARGET...]
#   tests/fuzz/run.sh --build-only
#
# SECONDS per harness (default $CRNET_FUZZ_SECONDS, else 60); TARGETs
# default to all of them. The harnesses run side by side, as many at a time
# as there are CPUs (CRNET_FUZZ_JOBS sets another number): each still gets
# SECONDS of a core of its own. --build-only builds them and stops (CI
# builds while other work runs). Installs nothing: needs clang with its libFuzzer
# runtime (Debian: clang and libclang-rt-14-dev). Builds build-fuzz with
# -Dfuzz=true (clang, libFuzzer, AddressSanitizer, UndefinedBehaviorSanitizer),
# writes the generated seeds (make_corpus) and fuzzes each harness on a
# scratch copy of its corpus, so the source tree is never modified. Exits
# non-zero, with a line naming the harness and the crashing input, if any
# harness finds a crash, a leak, a timeout or an out-of-memory.
#
# CRNET_FUZZ_BUILD (default build-fuzz) and CRNET_FUZZ_WORK (default a
# fresh temporary directory, kept only when something was found) move the
# build and the scratch corpora.
set -uo pipefail

cd "$(dirname "$0")/../.."
build_only=false
if [ "${1:-}" = --build-only ]; then
  build_only=true
  shift
fi
seconds=${1:-${CRNET_FUZZ_SECONDS:-60}}
shift $(($# > 0 ? 1 : 0))
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(frame handshake link rendezvous)
build=${CRNET_FUZZ_BUILD:-build-fuzz}

if ! command -v clang >/dev/null; then
  echo "fuzz: clang not found (Debian: apt-get install clang libclang-rt-14-dev)" >&2
  exit 1
fi
if [ ! -f "$build/build.ninja" ]; then
  # -Dwerror=false: clang warns where gcc does not; gcc's build is the one
  # held to -Werror.
  setup_log=$(mktemp)
  CC=clang meson setup "$build" -Dfuzz=true -Db_lundef=false -Dwerror=false \
    >"$setup_log" 2>&1 || {
    cat "$setup_log" >&2
    rm -f "$setup_log"
    echo "fuzz: cannot set up $build" >&2
    exit 1
  }
  rm -f "$setup_log"
fi
ninja -C "$build" tests/fuzz/make_corpus "${targets[@]/#/tests/fuzz/fuzz_}" \
  >"$build/fuzz-build.log" 2>&1 || {
  tail -n 40 "$build/fuzz-build.log" >&2
  echo "fuzz: build failed" >&2
  exit 1
}
$build_only && exit 0

work=${CRNET_FUZZ_WORK:-$(mktemp -d /tmp/crnet-fuzz.XXXXXX)}
mkdir -p "$work"
"$build/tests/fuzz/make_corpus" "$work/seeds" || exit 1

# Fuzzes harness $1 for $seconds; says how it went on stdout (or, on a
# find, on stderr) and exits non-zero on a find.
fuzz_one() {
  local t=$1 corpus log start rc stats found failed=0
  corpus=$work/corpus-$t
  mkdir -p "$corpus" "$work/artifacts-$t"
  # Checked-in seeds, regression inputs and generated seeds, together.
  for d in tests/fuzz/corpus/$t tests/fuzz/regress/$t "$work/seeds/$t"; do
    [ -d "$d" ] && find "$d" -maxdepth 1 -type f ! -name '.*' -exec cp -t "$corpus" {} +
  done
  log=$work/$t.log
  start=$(date +%s)
  # -close_fd_mask=2: the library's log lines (a dropped connection, ...)
  # would flood the log; libFuzzer and the sanitizers still report.
  "$build/tests/fuzz/fuzz_$t" "$corpus" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=2048 -close_fd_mask=2 -print_final_stats=1 \
    -artifact_prefix="$work/artifacts-$t/" >"$log" 2>&1
  rc=$?
  stats=$(grep -E '^#[0-9]+.*(DONE|pulse|NEW|REDUCE)' "$log" | tail -n 1 |
    sed -E 's/.*(cov: [0-9]+).*(corp: [^ ]+).*(exec\/s: [0-9]+).*/\1 \2 \3/')
  found=$(find "$work/artifacts-$t" -type f | head -n 1)
  if [ $rc -ne 0 ] || [ -n "$found" ]; then
    failed=1
    grep -E 'ERROR|SUMMARY' "$log" | head -n 5 >&2
    # The harness's own reason went to the stderr that -close_fd_mask
    # closed: replaying the input once shows it.
    [ -n "$found" ] && "$build/tests/fuzz/fuzz_$t" "$found" 2>&1 |
      grep -E '^fuzz: |runtime error|ERROR: (AddressSanitizer|LeakSanitizer)' | head -n 3 >&2
    echo "fuzz: FAILED $t after $(($(date +%s) - start)) s: ${found:-no input saved} (log $log)" >&2
  else
    echo "fuzz: $t ok, $(($(date +%s) - start)) s, $stats"
  fi
  return $failed
}

at_once=${CRNET_FUZZ_JOBS:-$(nproc)}
for t in "${targets[@]}"; do
  while [ "$(jobs -pr | wc -l)" -ge "$at_once" ]; do
    wait -n
  done
  # Each harness's lines go to a file of its own, shown in order below,
  # and its exit status to another.
  (
    fuzz_one "$t"
    echo $? >"$work/$t.status"
  ) >"$work/$t.said" 2>&1 &
done
wait
status=0
for t in "${targets[@]}"; do
  cat "$work/$t.said"
  [ "$(cat "$work/$t.status" 2>/dev/null)" = 0 ] || status=1
done
if [ $status -eq 0 ] && [ -z "${CRNET_FUZZ_WORK:-}" ]; then
  rm -rf "$work"
fi
exit $status
