#!/usr/bin/env bash
# crnet's set-up, used by the README's quick start and by CI.
#
#   tools/quickstart.sh demo   install what is missing, build, run a 4-rank job
#   tools/quickstart.sh test   install what is missing, build, run every test
#                              suite (memcheck's `valgrind` suite among them),
#                              build a release build (-O3, not run),
#                              then run the tests again under AddressSanitizer and
#                              UndefinedBehaviorSanitizer, the multi-threaded
#                              ones under ThreadSanitizer, then each fuzz
#                              harness for a bounded time (tests/fuzz/run.sh,
#                              CRNET_FUZZ_SECONDS each, default 30)
#
# Works on a fresh Debian 12 as root, or as a user with sudo.
set -euo pipefail

cd "$(dirname "$0")/.."
mode=${1:-demo}

# openssh-server, openssh-client, iproute2 and procps: the multi-host test
# (tests/multihost.sh) runs sshd in network namespaces. clang and
# libclang-rt-14-dev (its libFuzzer and sanitizer runtimes, only recommended
# by clang): the fuzz harnesses (tests/fuzz/run.sh). valgrind: the suite
# `valgrind` of the plain pass (tests/meson.build). man-db: the test
# `install` renders the installed man pages.
packages=(build-essential meson ninja-build pkg-config libuv1-dev libsodium-dev check python3
  openssh-server openssh-client iproute2 procps clang libclang-rt-14-dev valgrind man-db)
# python3-dev: the headers the Python module (src/python) is built with,
# for /usr/bin/python3; python3-numpy: its tests (suite `python`) and
# examples/python.
packages+=(python3-dev python3-numpy)
# python3-torch, libtorch-dev, pybind11-dev: the torch.distributed backend
# (src/torch) and its tests (suite `torch`), for /usr/bin/python3;
# python3-yaml (which python3-torch needs too): the test kubernetes-job.
packages+=(python3-torch libtorch-dev pybind11-dev python3-yaml)
# libpmix-dev: jobs started by a PMIx server (srun --mpi=pmix, mpirun);
# slurm-wlm, munge and openmpi-bin: the test `launchers`, which brings up
# a one-node Slurm and runs jobs under srun and Open MPI's mpirun.
packages+=(libpmix-dev slurm-wlm munge openmpi-bin)

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

install_missing() {
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "quickstart: installing ${missing[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

build() { # dir [meson options...]
  local dir=$1
  shift
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" "$@" >/dev/null
  fi
  ninja -C "$dir" >/dev/null
}

build_targets() { # dir "targets" [meson options...]
  local dir=$1 targets=$2
  shift 2
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" "$@" >/dev/null
  fi
  # shellcheck disable=SC2086
  ninja -C "$dir" $targets >/dev/null
}

# A release build (-O3) must compile under -Werror too: the optimiser
# follows values further and warns where -O2 is silent (a string that may
# be cut short). The library, crlaunch and the tools, as users build them;
# not the tests (another minute of CI for code no user compiles). Not run.
release_build() {
  if [ ! -f build-release/build.ninja ]; then
    meson setup build-release --buildtype=release -Dtests=disabled >/dev/null ||
      return 1
  fi
  if ! ninja -C build-release >build-release/ninja.log 2>&1; then
    grep -E -A3 'error|warning' build-release/ninja.log | head -60
    return 1
  fi
}

# gcc's ThreadSanitizer, so that -Werror holds; only what the suite
# `threads` needs.
build_tsan() {
  build_targets build-tsan "tests/test_requests tests/test_comms tests/test_p2p tests/test_survive tests/progs/soak tests/progs/mpi_threads tests/progs/board_check src/crlaunch" \
    -Db_sanitize=thread -Db_lundef=false
}

# Prints the plain closing line from meson's test log(s), after every skip
# by name with its reason, and fails if any test failed or none ran. A skip
# is a test that exited 77 (meson's "skipped") or a line "SKIP <case>:
# <reason>" in a test's output (tests/skip.h): a case that could not run
# inside a test that passed.
summarise() {
  python3 - "$@" <<'PY'
import json, os, sys
passed = failed = skipped = 0
skips = []
durations = []
for path in sys.argv[1:]:
    build = os.path.basename(os.path.dirname(os.path.dirname(path)))
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            durations.append((r.get("duration") or 0, r.get("name"), build))
            res = r.get("result")
            said = [out[5:].strip() for out in
                    ((r.get("stdout") or "") + "\n" +
                     (r.get("stderr") or "")).splitlines()
                    if out.startswith("SKIP ")]
            if res == "SKIP" and not said:
                said = ["(the test gave no reason)"]
            for why in dict.fromkeys(said):
                skips.append(f"{r.get('name')} [{build}]: {why}")
            if res in ("OK", "EXPECTEDFAIL"):
                passed += 1
            elif res == "SKIP":
                skipped += 1
            else:
                failed += 1
                print(f"FAILED: {r.get('name')} ({res})")
                # The reason, here at the end where a short tail of the
                # log still shows it: Check's failure lines, sanitizer
                # reports' first lines, a rank's last words.
                # Then the last lines of its stderr, where scripts say
                # why they gave up.
                shown = []
                for out in ((r.get("stdout") or "") + "\n" +
                            (r.get("stderr") or "")).splitlines():
                    if len(shown) < 12 and any(k in out for k in (
                            ":F:", ":E:", "Sanitizer", "SUMMARY:",
                            "exited", "FAIL", "error")):
                        shown.append(out)
                for out in (r.get("stderr") or "").splitlines()[-3:]:
                    if out.strip() and out not in shown:
                        shown.append(out)
                for out in shown:
                    print("    " + out[:300])
for why in skips:
    print("SKIPPED: " + why[:300])
# Where the time went: the slowest tests of all passes, for whoever
# must keep CI inside its budget.
durations.sort(reverse=True)
print("slowest: " + ", ".join(f"{n} [{b}] {d:.0f} s" for d, n, b in durations[:12]))
print(f"{passed} passed, {failed} failed, {skipped} skipped, "
      f"{len(skips)} skips named above")
sys.exit(0 if failed == 0 and passed > 0 else 1)
PY
}

# Prints how long the step just ended took, and the time so far: CI has a
# budget (30 minutes on two cores), and this says which step spends it.
started=$SECONDS
step_started=$SECONDS
step_done() { # what
  echo "quickstart: $1 took $((SECONDS - step_started)) s ($((SECONDS - started)) s so far)"
  step_started=$SECONDS
}

case "$mode" in
demo)
  install_missing
  build build
  ./build/src/crlaunch -n 4 ./build/examples/hello_allreduce
  ;;
test)
  # Process PID and its descendants back to the default priority.
  renice_tree() {
    local child
    renice -n 0 -p "$1" >/dev/null 2>&1 || return 0
    for child in $(pgrep -P "$1"); do
      renice_tree "$child"
    done
  }
  install_missing
  step_done "installing packages"
  build build
  step_done "the build"
  # The other builds (release, sanitizers, ThreadSanitizer, fuzzing) run
  # at the lowest priority beside the plain pass, on the CPU time its jobs
  # leave idle (many wait for timers or for each other): the tests must
  # pass on a busy machine anyway. Each step below builds again, which is
  # nothing when this got there first and shows the errors when it failed.
  (
    renice -n 19 -p "$BASHPID" >/dev/null
    release_build || true
    build build-sanitize -Db_sanitize=address,undefined -Db_lundef=false || true
    # The OSU benchmarks the sanitizer pass runs (osu-p2, osu-p4), built
    # against that build's crnet-mpi here rather than by its first test;
    # nothing of the plain pass reads this directory. tools/osu/osu.sh
    # builds again only what is older than the libraries.
    tools/osu/osu.sh build build-sanitize build-sanitize/tests/osu || true
    build_tsan || true
    tests/fuzz/run.sh --build-only || true
  ) >build/background-builds.log 2>&1 &
  background_builds=$!
  status=0
  # As root, everything the tests that prove encryption on the wire, keys
  # out of core files, IPv6 and the multi-host test bed need is here (a
  # raw socket, ::1, network namespaces, sshd): those tests must run or
  # fail, never skip (tests/skip.h).
  if [ "$(id -u)" -eq 0 ]; then
    export CRNET_TEST_STRICT=1
  fi
  # The unit suite is arithmetic and simulation, no job of ranks: it runs
  # two at a time (both cores). The other suites run two at a time too,
  # but meson runs every test marked is_parallel: false alone (tests/
  # meson.build: every job whose ranks must share the cores, and whatever
  # waits for timers or measures time); what pairs up is the rest, the
  # single-process valgrind tests, the MPI jobs of a few seconds and the
  # shared-memory link tests. Two logs, both summarised below.
  meson test -C build --print-errorlogs --num-processes 2 --suite unit \
    --logbase unit || status=1
  step_done "the unit suite"
  meson test -C build --print-errorlogs --num-processes 2 --no-suite unit ||
    status=1
  step_done "the other suites"
  # The plain pass is over: what is left of those builds gets the machine
  # (at the lowest priority beside other work, a user's busy machine, it
  # would crawl). Raising a priority needs root; otherwise they go on as
  # they are.
  renice_tree "$background_builds"
  wait $background_builds || true
  step_done "waiting for the builds beside the plain pass"
  release_status=0
  release_build || release_status=1
  step_done "the release build"
  build build-sanitize -Db_sanitize=address,undefined -Db_lundef=false
  step_done "the sanitizer build"
  # The simulator suites run p up to 1000 in the plain pass; under the
  # sanitizers only the p that take every branch the builders take on p
  # (CRNET_SIM_QUICK; docs/TESTING.md, tests/sim_harness.h), which keeps
  # the builders' code under the sanitizers at a fraction of the time. Jobs of 13 ranks and
  # more (suite `large`) run in the plain pass only, and so does the test
  # `install`, which tests/meson.build leaves out of sanitizer builds; the
  # multi-host cases that mostly wait for timers too (CRNET_MULTIHOST_QUICK);
  # the TCP twins of the request, sub-comm and message tests (suite
  # tcp-twin: tests/meson.build says where TCP still runs under ASan); the
  # p of the conformance, soak, Python and torch sweeps whose code paths
  # the other p of the sweep reach too (suite `sweep`, tests/meson.build).
  # Every step is slower here: meson's timeouts, Check's case timeouts
  # (CK_TIMEOUT_MULTIPLIER) and the limits inside the tests
  # (CRNET_TEST_TIME_SCALE, tests/time_scale.h) all take the same factor,
  # so that each case's timeout stays inside its test's and a hang is
  # named by its case.
  export CRNET_TEST_TIME_SCALE=3 CK_TIMEOUT_MULTIPLIER=3
  export CRNET_SIM_QUICK=1 CRNET_MULTIHOST_QUICK=1 \
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
  meson test -C build-sanitize --print-errorlogs --num-processes 2 --timeout-multiplier 3 \
    --suite unit --logbase unit || status=1
  step_done "the unit suite under the sanitizers"
  meson test -C build-sanitize --print-errorlogs --num-processes 2 --timeout-multiplier 3 \
    --no-suite large --no-suite sweep --no-suite unit --no-suite tcp-twin || status=1
  step_done "the other suites under the sanitizers"
  unset CRNET_SIM_QUICK CRNET_MULTIHOST_QUICK ASAN_OPTIONS UBSAN_OPTIONS
  # The time factor of the sanitizer pass (3) holds for ThreadSanitizer too.
  # ThreadSanitizer over the tests whose ranks run several threads (suite
  # `threads`: requests started, tested and waited for from several
  # threads, and the progress thread). A report makes the rank exit 66,
  # which fails its test.
  build_tsan
  step_done "the ThreadSanitizer build"
  TSAN_OPTIONS=halt_on_error=0 meson test -C build-tsan --no-rebuild \
    --print-errorlogs --num-processes 1 --timeout-multiplier 3 \
    --suite threads --logbase threads || status=1
  step_done "the threads suite under ThreadSanitizer"
  unset CRNET_TEST_TIME_SCALE CK_TIMEOUT_MULTIPLIER
  # Every fuzz harness for a bounded time (30 s each by default, two at a
  # time: about a minute); a crash names the harness and the input it
  # saved.
  fuzz_status=0
  tests/fuzz/run.sh "${CRNET_FUZZ_SECONDS:-30}" || fuzz_status=1
  step_done "fuzzing"
  if [ $fuzz_status -ne 0 ]; then
    echo "FAILED: fuzzing (tests/fuzz/run.sh)"
    status=1
  fi
  if [ $release_status -ne 0 ]; then
    echo "FAILED: release build (meson setup --buildtype=release build-release)"
    status=1
  fi
  summarise build/meson-logs/unit.json build/meson-logs/testlog.json \
    build-sanitize/meson-logs/unit.json build-sanitize/meson-logs/testlog.json \
    build-tsan/meson-logs/threads.json || status=1
  exit $status
  ;;
*)
  echo "usage: $0 demo|test" >&2
  exit 2
  ;;
esac
