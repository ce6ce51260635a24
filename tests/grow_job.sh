#!/usr/bin/env bash
# crlaunch --restart (docs/RELIABILITY.md, "Growing back"): a lost rank is
# started again, joins the running job, and the survivors' crnet_comm_grow
# takes it back in, so that the job finishes at full size with every sum
# right and exits 0.
#   - examples/survive.c in its grow mode: losing the last rank, rank 0,
#     two ranks at once, and the restarted rank itself (a second restart
#     replaces it); over shared memory, TCP, encryption and lazy links;
#   - tests/grow_job.c: ranks that die inside the grow's agreement (the
#     coordinator after telling one rank, a voter) and a newcomer that dies
#     once admitted;
#   - tools/regrow, the soak's short run: four cycles of losing a rank
#     (rank 0 among them) and growing back, every sum checked;
#   - what crlaunch says and does: each restart named, no restart beyond
#     --restart N (the survivors finish on fewer ranks), a restarted rank
#     that nobody grows for fails with a clear message, and --restart's
#     refusals (a bad count, with -x CRNET_RESTARTS, inside Slurm).
# A rank restarted on another host is tests/multihost.sh's case 8d.
#
#   tests/grow_job.sh CRLAUNCH SURVIVE GROW_JOB REGROW [PART]
#
# PART "transports" runs only the first cases over TCP, encryption and
# lazy links; "core" (the default) runs everything else, on the default
# transport. CI runs the second in both passes and the first in the plain
# one (tests/meson.build).
set -euo pipefail
crlaunch=$1
survive=$2
grow_job=$3
regrow=$4
part=${5:-core}
# shellcheck source=tests/crlaunch_jobs.sh
. "$(dirname "$0")/crlaunch_jobs.sh"

# crlaunch named the loss of rank $2 and its restart $3 of $4.
expect_restart() {
  local name=$1 lost=$2 k=$3 n=$4
  grep -Eq "^crlaunch: rank $lost \(pid [0-9]+\) was killed by signal 9 \(Killed\); the others go on \(--keep-going\)$" "$tmp/err" ||
    { fail "$name: crlaunch did not name rank $lost's loss"; cat "$tmp/err"; }
  grep -Eq "^crlaunch: rank $lost started again \(pid [0-9]+; restart $k of $n\)$" "$tmp/err" ||
    { fail "$name: crlaunch did not name rank $lost's restart $k of $n"; cat "$tmp/err"; }
}

settings=("")
[ "$part" = core ] || settings=("-x CRNET_TRANSPORT=tcp" "--encrypt" "-x CRNET_LAZY_LINKS=1")
for setting in "${settings[@]}"; do
  for case in "4 3 5" "5 0 2"; do
    read -r n lost step <<<"$case"
    name="grow n=$n lost $lost at step $step ${setting:-(shared memory)}"
    # shellcheck disable=SC2086 # the setting's words
    if run "$name" 0 --restart 1 $setting -n "$n" "$survive" 12 "$lost" "$step" grow; then
      expect_restart "$name" "$lost" 1 1
      grep -q "^12 steps on $n of $n ranks, 1 step redone, ranks lost: $lost; every sum right$" "$tmp/out" ||
        { fail "$name: the answer"; cat "$tmp/out" "$tmp/err"; }
    fi
  done
done

if [ "$part" != core ]; then
  finish "grow jobs ($part)"
  exit 0
fi

# Two at once, rank 0 among them; and the restarted rank lost again (its
# slot, 4, is listed too), replaced by the second restart.
name="grow n=6 lost 0 and 4 at step 3"
if run "$name" 0 --restart 2 -n 6 "$survive" 10 0,4 3 grow; then
  expect_restart "$name" 0 "[12]" 2
  expect_restart "$name" 4 "[12]" 2
  grep -Eq "^10 steps on 6 of 6 ranks, [12] steps? redone, ranks lost: 0 4; every sum right$" "$tmp/out" ||
    { fail "$name: the answer"; cat "$tmp/out" "$tmp/err"; }
fi
name="grow n=4 lost 3, then its restart"
if run "$name" 0 --restart 2 -n 4 "$survive" 12 3,4 5 grow; then
  expect_restart "$name" 3 1 2
  expect_restart "$name" 3 2 2
  grep -q "^12 steps on 4 of 4 ranks, 2 steps redone, ranks lost: 3; every sum right$" "$tmp/out" ||
    { fail "$name: the answer"; cat "$tmp/out" "$tmp/err"; }
fi

# Deaths inside the grow itself.
for mode in coordinator voter newcomer none; do
  name="grow_job $mode"
  if run "$name" 0 --restart 2 -n 4 "$grow_job" "$mode" 8; then
    grep -q "^grown back to 4 of 4; every sum right$" "$tmp/out" ||
      { fail "$name: the answer"; cat "$tmp/out" "$tmp/err"; }
    restarts=$(grep -c "started again" "$tmp/err" || true)
    want=2 # the last rank, and the rank that died in the grow
    [ "$mode" != none ] || want=1
    [ "$restarts" = "$want" ] || { fail "$name: $restarts restarts, wanted $want"; cat "$tmp/err"; }
  fi
done

# The soak, short: every cycle loses the rank at another comm position.
mkdir "$tmp/regrow"
if run "regrow, 4 cycles" 0 --restart 4 -n 4 "$regrow" 4 "$tmp/regrow"; then
  grep -q "^done 4 4 right$" "$tmp/out" || { fail "regrow: the answer"; cat "$tmp/out" "$tmp/err"; }
  [ "$(grep -c "^regrown " "$tmp/out")" = 4 ] || { fail "regrow: not 4 cycles"; cat "$tmp/out"; }
  [ "$(grep -c "started again" "$tmp/err")" = 4 ] || { fail "regrow: not 4 restarts"; cat "$tmp/err"; }
fi

# No more restarts than --restart: the second loss stays lost, and the
# survivors, having grown back what they could, finish on fewer ranks.
name="one restart, two lost"
if run "$name" 0 --restart 1 -n 4 "$survive" 8 1,3 4 grow; then
  [ "$(grep -c "started again" "$tmp/err")" = 1 ] ||
    { fail "$name: not one restart"; cat "$tmp/err"; }
  grep -q "^8 steps on 3 of 4 ranks, 1 step redone, ranks lost: 1 3; every sum right$" "$tmp/out" ||
    { fail "$name: the answer"; cat "$tmp/out" "$tmp/err"; }
fi

# A restarted rank that no grow admits (the program only shrinks) fails
# its crnet_comm_init, saying why, once the survivors are done.
name="nobody grows"
if run "$name" 1 --restart 1 -n 4 "$survive" 8 3 4; then
  grep -q "restarted as job rank 4: the job ended, or lost every rank, before a crnet_comm_grow admitted it" "$tmp/err" ||
    { fail "$name: the restarted rank's message"; cat "$tmp/err"; }
  grep -q "^8 steps on 3 of 4 ranks" "$tmp/out" || { fail "$name: the survivors"; cat "$tmp/out"; }
fi

# Shared memory between ranks is memfds, never names: nothing is left in
# /dev/shm, however many processes died.
if ls /dev/shm 2>/dev/null | grep -q crnet; then
  fail "crnet files in /dev/shm: $(ls /dev/shm | grep crnet)"
fi

# Refusals.
run "restart 0" 2 --restart 0 -n 2 true || true
grep -q -- "--restart '0': not a number of restarts in 1..4096" "$tmp/err" ||
  fail "restart 0: $(cat "$tmp/err")"
rc=0
SLURM_JOB_ID=7 SLURM_JOB_NODELIST=localhost SLURM_TASKS_PER_NODE=2 \
  "$crlaunch" --restart 1 -n 2 true >"$tmp/out" 2>"$tmp/err" || rc=$?
[ "$rc" = 2 ] && grep -q -- "--restart: not inside a Slurm allocation yet" "$tmp/err" ||
  fail "restart inside Slurm: exit $rc: $(cat "$tmp/err")"
run "restart and -x" 2 --restart 1 -x CRNET_RESTARTS=3 -n 2 true || true
grep -q -- "give --restart or -x CRNET_RESTARTS, not both" "$tmp/err" ||
  fail "restart and -x: $(cat "$tmp/err")"

finish "grow jobs"
