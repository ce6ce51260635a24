#!/usr/bin/env bash
# Jobs started by the launchers people already use: a one-node Slurm
# brought up here (munged, slurmctld and slurmd on a configuration of 16
# over-subscribed CPUs, on ports and in a directory of this test's own,
# stopped on every way out) with srun --mpi=pmix (PMIx) and crlaunch inside
# salloc and sbatch (through srun), and Open MPI's mpirun (PMIx).
# docs/STARTING.md describes what is checked.
#
#   tests/launchers.sh HELLO_ALLREDUCE IDLE_WAIT PMIX(yes|no) CRLAUNCH BUILD
#
# BUILD is the build tree: its crnet-mpicc builds MPI programs from outside
# (examples/mpi/samplesort.c, and OSU's osu_allreduce from OSU_DIR, else
# ../shared/outside/osu-micro-benchmarks-5.3) that then run under mpirun
# and srun --mpi=pmix as MPI programs do.
#
# Needs root (slurmd), Slurm (Debian: slurm-wlm, munge), Open MPI's mpirun
# (openmpi-bin) and a crnet built with PMIx; without them it skips naming
# what is missing (exit 77), or fails under CRNET_TEST_STRICT=1.
set -u

hello=$(realpath "$1")
idle_wait=$(realpath "$2")
pmix_built=$3
crlaunch=$(realpath "$4")
build=$(realpath "$5")
src=$(realpath "$(dirname "$0")/..")
osu=${OSU_DIR:-$src/../shared/outside/osu-micro-benchmarks-5.3}
# shellcheck source=../tools/slurm_local.sh
. "$src/tools/slurm_local.sh"

skip() {
  if [ "${CRNET_TEST_STRICT:-}" = 1 ]; then
    echo "FAIL: launchers cannot run: $* (CRNET_TEST_STRICT=1: it must run here)"
    exit 1
  fi
  echo "SKIP launchers: $*"
  exit 77
}

[ "$pmix_built" = yes ] || skip "this crnet was built without PMIx (libpmix-dev)"
[ "$(id -u)" -eq 0 ] || skip "slurmd needs root"
for p in munged slurmctld slurmd srun salloc sbatch mpirun; do
  command -v "$p" >/dev/null || skip "$p not found (Debian: slurm-wlm, munge, openmpi-bin)"
done

# Under AddressSanitizer: libpmix keeps a few bytes from PMIx_Init to the
# end of the process, which LeakSanitizer would call ours.
# And OSU keeps arrays of its own to the end (tools/osu/lsan.supp).
tmp=$(mktemp -d /tmp/crnet-launchers.XXXXXX)
chmod 755 "$tmp"
cat "$src/tests/lsan-pmix.supp" "$src/tools/osu/lsan.supp" >"$tmp/lsan.supp"
export LSAN_OPTIONS="suppressions=$tmp/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
failures=0
pids=()
stop_all() {
  slurm_local_down "$tmp"
  kill -9 "${pids[@]}" 2>/dev/null
  rm -rf "$tmp"
}
trap stop_all EXIT
trap 'exit 1' INT TERM

ok() { echo "ok ($SECONDS s): $*"; }
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# ---- Slurm on this host ----------------------------------------------------
slurm_local_up "$tmp" || { echo "FAIL: a one-node Slurm did not start"; exit 1; }
echo "up after $SECONDS s"

# ---- srun --mpi=pmix -----------------------------------------------------------
if timeout 120 srun --mpi=pmix -n 4 "$hello" >"$tmp/out" 2>"$tmp/err" &&
  grep -q "allreduce over 4 ranks: sum of rank+1 = 10 (expected 10).* 0 wrong" "$tmp/out"; then
  ok "srun --mpi=pmix -n 4: $(cat "$tmp/out")"
else
  fail "srun --mpi=pmix -n 4: $(tail -n 5 "$tmp/out" "$tmp/err")"
fi

# A rank killed under srun: the others fail with the usual message. Rank 0
# sleeps before idle_wait's second barrier, where the others wait: it is
# the one killed, so that nobody sleeps through the loss.
IDLE_WAIT_READY=1 timeout 120 srun --mpi=pmix -n 3 "$idle_wait" 60000 \
  >"$tmp/out" 2>"$tmp/err" &
srun_pid=$!
pids+=("$srun_pid")
for _ in $(seq 600); do
  [ "$(grep -c 'ready' "$tmp/out")" -ge 3 ] && break
  sleep 0.1
done
victim=
for pid in $(pgrep -x idle_wait); do
  tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx SLURM_PROCID=0 &&
    victim=$pid
done
if [ -z "$victim" ]; then
  fail "srun kill: rank 0 never became ready: $(tail -n 5 "$tmp/out" "$tmp/err")"
else
  kill -9 "$victim"
  wait "$srun_pid"
  rc=$?
  if [ $rc -ne 0 ] && [ "$(grep -c "lost rank 0" "$tmp/err")" -ge 2 ]; then
    ok "srun kill: rank 0 killed, srun exited $rc, ranks 1 and 2 said: $(grep -m1 'lost rank 0' "$tmp/err")"
  else
    fail "srun kill: srun exited $rc: $(tail -n 5 "$tmp/out" "$tmp/err")"
  fi
fi

# A rank that dies before it joins a PMIx start: the others wait at PMIx's
# fence no longer than the init timeout (3 s here) and say so.
start=$SECONDS
CRNET_INIT_TIMEOUT=3 timeout 120 srun --mpi=pmix -n 3 sh -c \
  'if [ "$SLURM_PROCID" = 1 ]; then exit 5; fi; exec "$0"' "$hello" \
  >"$tmp/out" 2>"$tmp/err"
rc=$?
said=$(grep -c "crnet_comm_init: timed out: PMIx's fence.*a rank never came" "$tmp/err")
if [ $rc -ne 0 ] && [ "$said" -eq 2 ]; then
  ok "srun, rank 1 gone before init: srun exited $rc after $((SECONDS - start)) s, ranks 0 and 2 said: $(grep -m1 'fence' "$tmp/err")"
else
  fail "srun, rank 1 gone before init: exit $rc, $said ranks said so: $(tail -n 5 "$tmp/out" "$tmp/err")"
fi

# Without PMIx and without crnet's variables: every rank fails and says
# the ways to start.
timeout 60 srun --mpi=none -n 2 "$hello" >"$tmp/out" 2>"$tmp/err"
rc=$?
said=$(grep -c "srun --mpi=pmix" "$tmp/err")
if [ $rc -ne 0 ] && [ "$said" -ge 2 ]; then
  ok "srun --mpi=none -n 2 fails on both ranks: $(grep -m1 'srun --mpi=pmix' "$tmp/err")"
else
  fail "srun --mpi=none -n 2: exit $rc, $said ranks said how to start: $(tail -n 5 "$tmp/err")"
fi

# ---- crlaunch inside an allocation ------------------------------------------
# Without -n: one rank per task of the allocation, each node's ranks in a
# job step of srun's (SLURM_STEP_ID is set in the ranks), tagged output.
timeout 120 salloc -n 3 "$crlaunch" --tag-output sh -c \
  'echo "step=${SLURM_STEP_ID:-none} rank=$CRNET_RANK of $CRNET_SIZE"' \
  >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 0 ] && [ "$(grep -c '^\[[0-2]\] step=[0-9][0-9]* rank=[0-2] of 3$' "$tmp/out")" -eq 3 ] &&
  [ "$(grep -o 'rank=[0-2]' "$tmp/out" | sort -u | wc -l)" -eq 3 ]; then
  ok "salloc -n 3 crlaunch: $(sort "$tmp/out" | tr '\n' ' ')"
else
  fail "salloc -n 3 crlaunch: exit $rc: $(tail -n 5 "$tmp/out" "$tmp/err")"
fi

if timeout 120 salloc -n 4 "$crlaunch" "$hello" >"$tmp/out" 2>"$tmp/err" &&
  grep -q "allreduce over 4 ranks: sum of rank+1 = 10 (expected 10).* 0 wrong" "$tmp/out"; then
  ok "salloc -n 4 crlaunch hello_allreduce: $(cat "$tmp/out")"
else
  fail "salloc -n 4 crlaunch hello_allreduce: $(tail -n 5 "$tmp/out" "$tmp/err")"
fi

# -n asks for fewer; more than the allocation has is refused at once.
if timeout 120 salloc -n 4 "$crlaunch" -n 2 "$hello" >"$tmp/out" 2>"$tmp/err" &&
  grep -q "allreduce over 2 ranks: sum of rank+1 = 3 (expected 3).* 0 wrong" "$tmp/out"; then
  ok "salloc -n 4 crlaunch -n 2: $(cat "$tmp/out")"
else
  fail "salloc -n 4 crlaunch -n 2: $(tail -n 5 "$tmp/out" "$tmp/err")"
fi
timeout 120 salloc -n 2 "$crlaunch" -n 3 "$hello" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 2 ] && grep -q "crlaunch: -n 3: Slurm job [0-9]* has 2 tasks" "$tmp/err"; then
  ok "salloc -n 2 crlaunch -n 3 refused: $(grep -m1 'Slurm job' "$tmp/err")"
else
  fail "salloc -n 2 crlaunch -n 3: exit $rc: $(tail -n 5 "$tmp/out" "$tmp/err")"
fi

# A rank that fails: crlaunch names it, stops the others and exits with its
# status, as without Slurm.
timeout 120 salloc -n 3 "$crlaunch" sh -c \
  'if [ "$CRNET_RANK" = 1 ]; then exit 3; fi; exec sleep 60' \
  >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 3 ] && grep -q "^crlaunch: rank 1 (pid [0-9]* on host .*) exited with status 3" "$tmp/err" &&
  grep -q "^crlaunch: stopped 2 other ranks" "$tmp/err"; then
  ok "salloc crlaunch, rank 1 exits 3: crlaunch exited 3 after $SECONDS s: $(grep -m1 '^crlaunch: rank 1' "$tmp/err")"
else
  fail "salloc crlaunch, rank 1 exits 3: exit $rc: $(tail -n 8 "$tmp/out" "$tmp/err")"
fi

# A batch job: the script runs in the allocation, crlaunch inside it.
printf '#!/bin/sh\nexec "%s" "%s"\n' "$crlaunch" "$hello" >"$tmp/batch.sh"
# (sbatch --wait polls every few seconds; squeue, asked every 0.1 s, says
# sooner when the job has left the queue.)
batch=$(timeout 60 sbatch --parsable -n 3 -o "$tmp/batch.out" "$tmp/batch.sh" 2>"$tmp/err")
rc=$?
for _ in $(seq 1200); do
  [ -n "$batch" ] && [ -z "$(squeue -h -j "$batch" 2>/dev/null)" ] && break
  sleep 0.1
done
state=$(scontrol show job "$batch" 2>/dev/null | grep -o 'JobState=[A-Z]*')
if [ $rc -eq 0 ] && [ "$state" = JobState=COMPLETED ] &&
  grep -q "allreduce over 3 ranks: sum of rank+1 = 6 (expected 6).* 0 wrong" "$tmp/batch.out"; then
  ok "sbatch -n 3 with crlaunch: $(cat "$tmp/batch.out")"
else
  fail "sbatch -n 3 with crlaunch: sbatch exit $rc, $state: $(tail -n 5 "$tmp/out" "$tmp/err" "$tmp/batch.out")"
fi

# ---- Open MPI's mpirun --------------------------------------------------------
if timeout 120 mpirun --allow-run-as-root --oversubscribe -np 3 "$hello" \
  >"$tmp/out" 2>"$tmp/err" &&
  grep -q "allreduce over 3 ranks: sum of rank+1 = 6 (expected 6).* 0 wrong" "$tmp/out"; then
  ok "mpirun -np 3: $(cat "$tmp/out")"
else
  fail "mpirun -np 3: $(tail -n 5 "$tmp/out" "$tmp/err")"
fi

# ---- MPI programs built with crnet-mpicc, under mpirun and srun -----------
mpicc=$build/src/mpi/crnet-mpicc-uninstalled
if "$mpicc" -O2 -o "$tmp/samplesort" "$src/examples/mpi/samplesort.c" >"$tmp/cc.log" 2>&1; then
  for launch in "mpirun --allow-run-as-root --oversubscribe -np 3" "srun --mpi=pmix -n 3"; do
    # shellcheck disable=SC2086 # the launcher's words
    if timeout 120 $launch "$tmp/samplesort" >"$tmp/out" 2>"$tmp/err" &&
      grep -q "keys on 3 ranks sorted in .* every check held" "$tmp/out"; then
      ok "${launch%% *} samplesort (crnet-mpicc): $(tail -n 1 "$tmp/out")"
    else
      fail "$launch samplesort: $(tail -n 5 "$tmp/out" "$tmp/err")"
    fi
  done
else
  fail "crnet-mpicc could not build examples/mpi/samplesort.c: $(tail -n 5 "$tmp/cc.log")"
fi
if [ ! -f "$osu/mpi/collective/osu_allreduce.c" ]; then
  if [ "${CRNET_TEST_STRICT:-}" = 1 ]; then
    fail "no OSU sources at $osu (set OSU_DIR; CRNET_TEST_STRICT=1: they must be here)"
  else
    echo "SKIP (part): OSU under mpirun and srun: no OSU sources at $osu (set OSU_DIR)"
  fi
elif "$mpicc" -O2 -I"$osu/mpi/collective" -o "$tmp/osu_allreduce" \
  "$osu/mpi/collective/osu_allreduce.c" "$osu/mpi/collective/osu_coll.c" -lm \
  >"$tmp/cc.log" 2>&1; then
  for launch in "mpirun --allow-run-as-root --oversubscribe -np 2" "srun --mpi=pmix -n 2"; do
    # shellcheck disable=SC2086
    if timeout 120 $launch "$tmp/osu_allreduce" -m 8:65536 -i 20 -x 5 \
      >"$tmp/out" 2>"$tmp/err" &&
      grep -Eq '^65536 +[0-9.]+ *$' "$tmp/out"; then
      ok "${launch%% *} osu_allreduce (crnet-mpicc), 64 KiB: $(grep -E '^65536 ' "$tmp/out" | tr -s ' ') us"
    else
      fail "$launch osu_allreduce: $(tail -n 5 "$tmp/out" "$tmp/err")"
    fi
  done
else
  fail "crnet-mpicc could not build OSU's osu_allreduce: $(tail -n 5 "$tmp/cc.log")"
fi

if [ $failures -ne 0 ]; then
  echo "$failures launcher check(s) failed"
  exit 1
fi
echo "all launcher checks passed"
