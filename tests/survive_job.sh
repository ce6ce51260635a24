#!/usr/bin/env bash
# crlaunch --keep-going with examples/survive.c (docs/RELIABILITY.md,
# "Surviving lost ranks"): a rank kills itself with SIGKILL in the middle of
# the computation, crlaunch names it and lets the others go on, the
# survivors shrink and finish with every sum right, and the job exits 0;
# over shared memory, TCP, encryption and lazy links, losing rank 0 (which
# served nothing here: crlaunch serves the rendezvous) or another. Then the
# exit statuses of --keep-going, its refusal beside -x CRNET_ON_FAILURE,
# and the program's word when the job was started without it. (That a loss
# ends a job by default is test_reliability's.)
#
# The same for examples/mpi/ulfm_survive.c, an MPI program written for
# ULFM (mpi-ext.h), whose failures must come in ULFM's error classes.
#
#   tests/survive_job.sh CRLAUNCH SURVIVE ULFM_SURVIVE
set -euo pipefail
crlaunch=$1
survive=$2
ulfm=$3
# shellcheck source=tests/crlaunch_jobs.sh
. "$(dirname "$0")/crlaunch_jobs.sh"

# The loss, named once by crlaunch, and the survivors' answer.
expect_survived() {
  local name=$1 n=$2 lost=$3
  grep -Eq "^crlaunch: rank $lost \(pid [0-9]+\) was killed by signal 9 \(Killed\); the others go on \(--keep-going\)$" "$tmp/err" ||
    { fail "$name: crlaunch did not name rank $lost's loss"; cat "$tmp/err"; }
  grep -q "on $((n - 1)) of $n ranks, 1 step redone, ranks lost: $lost; every sum right" "$tmp/out" ||
    { fail "$name: the survivors' answer"; cat "$tmp/out" "$tmp/err"; }
  ! grep -q "stopped" "$tmp/err" || fail "$name: crlaunch stopped ranks"
}

for setting in "" "-x CRNET_TRANSPORT=tcp" "--encrypt" "-x CRNET_LAZY_LINKS=1"; do
  for case in "5 2 3" "4 0 1" "6 5 10"; do
    read -r n lost step <<<"$case"
    name="n=$n lost $lost at step $step ${setting:-(shared memory)}"
    # shellcheck disable=SC2086 # the setting's words
    if run "$name" 0 --keep-going $setting -n "$n" "$survive" 10 "$lost" "$step"; then
      expect_survived "$name" "$n" "$lost"
    fi
  done
done

for case in "5 2 4" "4 0 1"; do
  read -r n lost step <<<"$case"
  name="ULFM n=$n lost $lost at step $step"
  if run "$name" 0 --keep-going -n "$n" "$ulfm" 10 "$lost" "$step"; then
    grep -q "^10 steps on $((n - 1)) of $n ranks, 1 redone; every sum right$" "$tmp/out" ||
      { fail "$name: the survivors' answer"; cat "$tmp/out" "$tmp/err"; }
  fi
done

# Two ranks at once, rank 0 among them: one shrink, or two when the
# survivors saw one loss before the other.
for setting in "" "-x CRNET_TRANSPORT=tcp"; do
  name="n=6 lost 0 and 4 at step 3 ${setting:-(shared memory)}"
  # shellcheck disable=SC2086 # the setting's words
  if run "$name" 0 --keep-going $setting -n 6 "$survive" 10 0,4 3; then
    [ "$(grep -Ec '^crlaunch: rank (0|4) \(pid [0-9]+\) was killed by signal 9' "$tmp/err")" = 2 ] ||
      { fail "$name: crlaunch did not name both losses"; cat "$tmp/err"; }
    grep -Eq "on 4 of 6 ranks, [12] steps? redone, ranks lost: 0 4; every sum right" "$tmp/out" ||
      { fail "$name: the survivors' answer"; cat "$tmp/out" "$tmp/err"; }
  fi
done

# Without --keep-going the program is told, before anything is lost.
if run "default" 2 -n 3 "$survive" 10 -1; then
  grep -q "needs CRNET_ON_FAILURE=continue (crlaunch --keep-going)" "$tmp/err" ||
    fail "default: $(cat "$tmp/err")"
fi

# The exit status under --keep-going: the first non-zero status of a rank;
# 0 when the survivors exit 0; 128 + the signal when every rank was lost.
prog='case $CRNET_RANK in 1) exit 3;; 2) kill -9 $$;; esac; exit 0'
run "status of a failed survivor" 3 --keep-going -n 3 sh -c "$prog" || true
grep -q "rank 1 (pid [0-9]*) exited with status 3; the others go on" "$tmp/err" ||
  fail "a rank's status: $(cat "$tmp/err")"
run "all lost" 137 --keep-going -n 2 sh -c 'kill -9 $$' || true
run "both settings" 2 --keep-going -x CRNET_ON_FAILURE=stop -n 2 true || true
grep -q "give --keep-going or -x CRNET_ON_FAILURE, not both" "$tmp/err" ||
  fail "both settings: $(cat "$tmp/err")"

finish "survive jobs"
