#!/usr/bin/env bash
# Small collectives on the shared-memory boards through real ranks
# (tests/progs/board_check.c has the modes): they are used where they
# should be, give every result right, and fail as calls fail elsewhere.
#   board_job.sh CRLAUNCH BOARD_CHECK
set -u
crlaunch=$1
check=$2
. "$(dirname "$0")/crlaunch_jobs.sh"
# Every job here says 4096 (the default) itself, unless it tests another
# value.
export CRNET_SHM_BOARD_BYTES=4096

expect_out() {
  local name=$1 pattern=$2
  grep -q -- "$pattern" "$tmp/out" ||
    fail "$name: no '$pattern' in what rank 0 printed: $(head -c 300 "$tmp/out")"
}

# Every collective of the boards, on the world comm, a dup and split
# halves; p = 3 and 5 share the two cores.
for p in 2 3 5; do
  run "use p=$p" 0 -n "$p" "$check" use && expect_out "use p=$p" "use: ok"
done
# A nonblocking call between two board calls, ranks at different paces.
run "interleave p=4" 0 -n 4 "$check" interleave &&
  expect_out interleave "interleave: ok"
# Rooted calls in a row, which wait for some peers only.
run "rooted p=4" 0 -n 4 "$check" rooted && expect_out rooted "rooted: ok"
# Threads on comms of their own, their calls in different orders on the
# ranks; with and without the progress thread.
for pt in 0 1; do
  run "threads pt=$pt" 0 -n 3 -x CRNET_PROGRESS_THREAD=$pt "$check" threads &&
    expect_out "threads pt=$pt" "threads: ok"
done
# Blocking and nonblocking calls of one collective match, on the board too.
run "nonblock" 0 -n 3 "$check" nonblock && expect_out nonblock "nonblock: ok"
# Calls that do not match fail everywhere, naming both calls (found on the
# board, or in the frames a rank read before it judged a peer's post).
for mode in named count bigger roots; do
  run "$mode" 0 -n 3 "$check" "$mode" &&
    expect_out "$mode" "$mode: ok (mismatched calls: rank [0-9]* called .* but rank [0-9]* called "
done
# A rank gone before a board call.
run "die" 0 -n 3 "$check" die && expect_out die "die: ok (lost rank 2"
for mode in die-nb die-dup; do
  run "$mode" 0 -n 3 "$check" "$mode" && expect_out "$mode" "$mode: ok (lost rank 2"
done
# Every wait asleep (no spin) with asymmetric fences forced: the
# announcements of all of a loop's links gathered before one membarrier,
# some 70000 of them a run, results checked (a lost wake-up itself is
# too rare to meet here: test_shm's fenced stream tests are the proof).
for mode in rooted interleave; do
  run "$mode membarrier" 0 -n 4 -x CRNET_SHM_MEMBARRIER=1 -x CRNET_SPIN_US=0 \
    "$check" "$mode" && expect_out "$mode membarrier" "$mode: ok"
done
# Waiting long: asleep, not spinning.
run "sleep" 0 -n 3 "$check" sleep && expect_out sleep "sleep: ok"
# Boards by default (CRNET_SHM_BOARD_BYTES unset: 4096). No boards: over
# TCP, and where rank 0 alone says 0 (its value is the job's); boards where
# only another rank says 0.
run "tcp" 0 -n 3 -x CRNET_TRANSPORT=tcp "$check" use off &&
  expect_out tcp "use: ok"
run "default" 0 -n 3 env -u CRNET_SHM_BOARD_BYTES "$check" interleave on &&
  expect_out "default" "interleave: ok"
for r in 0 1; do
  want=off
  [ "$r" = 0 ] || want=on
  run "rank $r says 0" 0 -n 3 sh -c \
    'if [ "$CRNET_RANK" = "$0" ]; then export CRNET_SHM_BOARD_BYTES=0; fi; exec "$@"' \
    "$r" "$check" interleave "$want" &&
    expect_out "rank $r says 0" "interleave: ok"
done
# The segments are memfds: nothing in /dev/shm.
if ls /dev/shm 2>/dev/null | grep -q crnet; then
  fail "crnet files left in /dev/shm: $(ls /dev/shm | grep crnet | head -3)"
fi
finish board-job
