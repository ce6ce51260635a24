#!/bin/sh
# Tuning end to end: crbench --calibrate writes a tuning file that the
# library's strict parser accepts and the next job reads; calibrating at
# another p merges into it; every rank of a job uses rank 0's constants,
# even when the other ranks' files say otherwise, so all pick the same
# schedules and the calls succeed; a malformed or missing named file fails
# crnet_comm_init with a message naming the file (and the line).
#
#   tests/test_tuning.sh crlaunch crbench crsched allreduce_time
#
# No assertion here is about speed. The calibrations that test the file
# (where it goes, what it keeps, that it parses) and the fit take their
# rows' times from the model under known constants
# (CRBENCH_CALIBRATE_MODEL, tools/crbench_calibrate.c), which the fit must
# give back: on a loaded machine the measured times are mostly the time
# slices other processes took, and a fit of them may rightly refuse to
# write (a negative beta). One calibration on the clock checks that it
# either writes positive constants or says the times were too noisy and
# writes nothing. Every check prints "ok" or "FAIL" with what it saw;
# the script exits 1 if any check failed. Every job is bounded by
# crlaunch's --timeout. About 10 s on a 2-core machine.
set -u

CRLAUNCH=${1:?usage: test_tuning.sh crlaunch crbench crsched allreduce_time}
CRBENCH=${2:?usage: test_tuning.sh crlaunch crbench crsched allreduce_time}
CRSCHED=${3:?usage: test_tuning.sh crlaunch crbench crsched allreduce_time}
ALLREDUCE_TIME=${4:?usage: test_tuning.sh crlaunch crbench crsched allreduce_time}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
# Nothing from the environment of whoever runs the tests.
unset CRNET_TUNING_FILE CRNET_ALLREDUCE_SCHEDULE
export XDG_CONFIG_HOME="$tmp/xdg"

. "$(dirname "$0")/checks.sh"
# contains NAME FILE TEXT: FILE has a line with TEXT in it.
contains() {
  if grep -qF -- "$3" "$2"; then ok "$1"; else
    fail "$1: no '$3' in: $(head -c 600 "$2")"
  fi
}

# job P ARGS...: crlaunch -n P ARGS; stdout in $tmp/out, stderr in
# $tmp/err, exit status in $rc.
job() {
  p=$1
  shift
  "$CRLAUNCH" -n "$p" --timeout 120 "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
}

# --- calibrate at p = 3, then at p = 2 into the same file -------------------
# On TCP (alpha, beta, gamma, ring_round); on one host the links would be
# shared memory, which writes shm_alpha and shm_beta (below).

# The constants every row's time is made of: alpha, beta, gamma, ring_round.
given="CRBENCH_CALIBRATE_MODEL=2.5e-5,4e-10,3e-11,0.75"
t="$tmp/tuning"
job 3 -x CRNET_TRANSPORT=tcp -x "$given" "$CRBENCH" --calibrate \
  --tuning-out "$t" -n 5 -w 1
expect "calibrate p=3: exit status" "$rc" 0
[ "$rc" = 0 ] || cat "$tmp/err"
contains "calibrate p=3: prints alpha" "$tmp/out" "alpha = "
contains "calibrate p=3: says where it wrote" "$tmp/out" "written to $t"
# The library's own parser (through crsched) accepts the file.
"$CRSCHED" --auto -p 3 -m 4096 --tuning "$t" >"$tmp/auto" 2>&1
expect "the calibrated file parses" "$?" 0
contains "crsched names the file" "$tmp/auto" "($t)"
python3 - "$t" >"$tmp/py" 2>&1 <<'EOF'
import re, sys
vals = {}
for line in open(sys.argv[1]):
    line = line.split("#")[0].strip()
    if line:
        k, v = [x.strip() for x in line.split("=")]
        vals[k] = float(v)
base = {"alpha", "beta", "gamma", "ring_round"}
want = base | {k + ".3" for k in base}
if set(vals) != want:
    print("keys", sorted(vals))
elif any(abs(vals[k] / v - 1) > 1e-3 for k, v in
         (("alpha", 2.5e-5), ("beta", 4e-10), ("gamma", 3e-11),
          ("ring_round", 0.75), ("alpha.3", 2.5e-5))):
    print("values", vals)
else:
    print("ok")
EOF
expect "calibrate p=3: keys, and the fit gives back the model's constants" \
  "$(cat "$tmp/py")" ok

job 2 -x CRNET_TRANSPORT=tcp -x "$given" "$CRBENCH" --calibrate \
  --tuning-out "$t" -n 5 -w 1 --json
expect "calibrate p=2: exit status" "$rc" 0
expect "calibrate p=2: JSON" "$(python3 -c '
import json, sys
r = json.load(sys.stdin)
print(r["probe"], r["p"], r["links"], r["alpha"] > 0 and r["beta"] > 0 and r["ring_round"] > 0, len(r["rows"]) > 5)
' <"$tmp/out")" "calibrate 2 tcp True True"
expect "calibrate p=2 keeps p=3's figures and adds its own" \
  "$(grep -c '^alpha\.[23] = \|^beta\.[23] = \|^gamma\.[23] = ' "$t")" 6
"$CRSCHED" --auto -p 16 -m 4096 --tuning "$t" >/dev/null 2>&1
expect "the merged file parses" "$?" 0

# On shared memory the fit's alpha and beta become shm_alpha and shm_beta,
# and TCP's lines stay as they were.
cp "$t" "$tmp/tcp_only"
job 2 -x "$given" "$CRBENCH" --calibrate --tuning-out "$t" -n 5 -w 1
expect "calibrate on shared memory: exit status" "$rc" 0
contains "calibrate on shared memory: says so" "$tmp/out" "links: shared memory"
expect "calibrate on shared memory: shm_alpha, shm_beta and their .2 lines" \
  "$(grep -c '^shm_alpha = \|^shm_beta = \|^shm_alpha\.2 = \|^shm_beta\.2 = ' "$t")" 4
expect "calibrate on shared memory: TCP's lines kept as they were" \
  "$(grep '^alpha\|^beta\|^gamma\|^ring_round' "$t" | sort)" \
  "$(grep '^alpha\|^beta\|^gamma\|^ring_round' "$tmp/tcp_only" | sort)"
"$CRSCHED" --auto -p 2 -m 4096 --tuning "$t" >/dev/null 2>&1
expect "the file with shared-memory lines parses" "$?" 0
cp "$tmp/tcp_only" "$t"

# A line crbench cannot keep stops it, and the file stays as it was.
cp "$t" "$tmp/before"
printf 'alpha.4 = 1e-5 extra words\n' >>"$t"
cp "$t" "$tmp/broken"
job 2 -x "$given" "$CRBENCH" --calibrate --tuning-out "$t" -n 2 -w 0
expect "an unmergeable line: exit status" "$rc" 1
contains "an unmergeable line: named" "$tmp/err" "$t line "
expect "an unmergeable line: file untouched" "$(cmp -s "$t" "$tmp/broken"; echo $?)" 0
cp "$tmp/before" "$t"

# Without --tuning-out, calibrate writes where the library looks.
job 2 -x CRNET_TRANSPORT=tcp -x "$given" "$CRBENCH" --calibrate -n 2 -w 0
expect "calibrate to the default place: exit status" "$rc" 0
expect "calibrate to the default place: the file" \
  "$(grep -c '^alpha.2 = ' "$XDG_CONFIG_HOME/crnet/tuning")" 1

# On the clock: positive constants written, or, on a machine too busy for
# the model, the refusal said and nothing written; never a file from a
# refused fit, nor an exit status that disagrees with the file.
job 2 -x CRNET_TRANSPORT=tcp "$CRBENCH" --calibrate --tuning-out "$tmp/clock" \
  -n 5 -w 1
if [ "$rc" = 0 ]; then
  expect "calibrate on the clock: positive constants written" "$(python3 - \
    "$tmp/clock" <<'EOF'
import sys
vals = dict((k.strip(), float(v)) for k, v in
            (l.split("#")[0].split("=") for l in open(sys.argv[1])
             if l.split("#")[0].strip()))
print(all(vals[k] > 0 for k in ("alpha", "beta", "ring_round")) and
      vals["gamma"] >= 0)
EOF
)" True
elif [ "$rc" = 1 ] && grep -q "too noisy for the model" "$tmp/err" &&
  [ ! -e "$tmp/clock" ]; then
  ok "calibrate on the clock: too noisy here, said so and wrote nothing"
else
  fail "calibrate on the clock: exit $rc, file $(ls "$tmp/clock" 2>&1), stderr: $(head -c 600 "$tmp/err")"
fi

# --- the next job reads it ----------------------------------------------------

job 3 -x CRNET_TUNING_FILE="$t" -x CRNET_DEBUG=1 "$CRBENCH" -c allreduce \
  -b 8 -e 256K -f 8 -n 2 -w 1 --check --json
expect "a job with the calibrated file: exit status" "$rc" 0
expect "every rank reads the file's alpha" \
  "$(grep -c "tuning: alpha $(sed -n 's/^alpha\.3 = //p' "$t" | python3 -c 'import sys; print("%g" % float(sys.stdin.read()))') s" "$tmp/err")" 3
contains "rank 0 names the file" "$tmp/err" "crnet[0]: tuning: "
contains "rank 0 names the file" "$tmp/err" "($t)"

# --- every rank uses rank 0's constants ---------------------------------------

# A: rounds are dear, B: bytes are dear. At p = 4 and 64 KiB, A sends
# allreduce to hypercube (2 rounds) and all-to-all to bruck (2 rounds), B
# sends them to circulant and pairwise (least volume). The jobs run on one
# host, over shared memory: the files say the same of those links.
printf 'alpha = 1e-2\nbeta = 1e-12\ngamma = 1e-13\nshm_alpha = 1e-2\nshm_beta = 1e-12\n' >"$tmp/A"
printf 'alpha = 1e-9\nbeta = 1e-6\ngamma = 1e-7\nshm_alpha = 1e-9\nshm_beta = 1e-6\n' >"$tmp/B"
pick() { # pick FILE COLL BYTES
  "$CRSCHED" --auto -p 4 -m "$3" --coll "$2" --tuning "$1" --json |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["auto"])'
}
expect "A's allreduce at 64K" "$(pick "$tmp/A" allreduce 65536)" hypercube
expect "B's allreduce at 64K" "$(pick "$tmp/B" allreduce 65536)" circulant
expect "A's alltoall at 64K" "$(pick "$tmp/A" alltoall 65536)" bruck
expect "B's alltoall at 64K" "$(pick "$tmp/B" alltoall 65536)" pairwise

# rank 0 reads A, the others B
cat >"$tmp/split.sh" <<EOF
#!/bin/sh
if [ "\$CRNET_RANK" = 0 ]; then CRNET_TUNING_FILE="$tmp/A"
else CRNET_TUNING_FILE="$tmp/B"; fi
export CRNET_TUNING_FILE
exec "\$@"
EOF
chmod +x "$tmp/split.sh"
for coll in allreduce alltoall reduce_scatter allgather; do
  job 4 -x CRNET_DEBUG=1 "$tmp/split.sh" "$CRBENCH" -c "$coll" -b 4K -e 256K \
    -f 4 -n 2 -w 1 --check --json
  expect "rank 0 on A, the others on B: $coll exit status" "$rc" 0
  expect "rank 0 on A, the others on B: $coll rows" \
    "$(python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
print(len(rows), all(r["wrong"] == 0 for r in rows))' <"$tmp/out")" "4 True"
done
expect "every rank has A's alpha" \
  "$(grep -c 'tuning: alpha 0.01 s, beta 1e-12 s/B' "$tmp/err")" 4
expect "ranks 1 to 3 say the constants are rank 0's" \
  "$(grep -c 'crnet\[[123]\]: tuning: .*(rank 0)$' "$tmp/err")" 3
# The control: ranks that do choose different schedules for one call fail
# it (the schedule is part of the call signature), so the runs above would
# have failed had the ranks used their own files.
cat >"$tmp/diverge.sh" <<EOF
#!/bin/sh
if [ "\$CRNET_RANK" = 0 ]; then exec "$ALLREDUCE_TIME" allgather-reduce 65536 2
else exec "$ALLREDUCE_TIME" circulant 65536 2; fi
EOF
chmod +x "$tmp/diverge.sh"
job 3 "$tmp/diverge.sh"
if [ "$rc" != 0 ] && grep -q "mismatched calls" "$tmp/err"; then
  ok "control: different schedules on different ranks fail the call"
else
  fail "control: exit $rc, stderr: $(head -c 400 "$tmp/err")"
fi

# --- rank 0's transport decides how the links of one host are priced ----------
# C: TCP's rounds dear, shared memory's bytes dear. At p = 4 on one host a
# 1 MiB bcast is priced on shared memory (the chain: least volume), unless
# rank 0 keeps its links on TCP (CRNET_TRANSPORT=tcp): then at TCP's
# constants, the tree of the fewest rounds' α (k-nomial of radix 4: one
# level, its three messages in flight, priced 1.5 α, where the binomial
# tree of hypercube takes 2 rounds). Only rank 0's setting counts, so
# ranks whose settings differ still pick alike.
printf 'alpha = 1e-2\nbeta = 1e-12\nshm_alpha = 1e-9\nshm_beta = 1e-6\n' >"$tmp/C"
expect "C's bcast at 1M on TCP" "$(pick "$tmp/C" bcast 1048576)" knomial
expect "C's bcast at 1M on one host" \
  "$("$CRSCHED" --auto --hosts 1x4 -m 1048576 --coll bcast --tuning "$tmp/C" \
    --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["auto"])')" \
  ring
ran() { # the schedule auto ran and the wrong elements, from crbench --json
  python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
print(" ".join("%s/%d" % (r["ran"], r["wrong"]) for r in rows))' <"$tmp/out"
}
printf '#!/bin/sh\nif [ "$CRNET_RANK" = 0 ]; then export CRNET_TRANSPORT=tcp; fi\nexec "$@"\n' >"$tmp/tcp0.sh"
printf '#!/bin/sh\nif [ "$CRNET_RANK" != 0 ]; then export CRNET_TRANSPORT=tcp; fi\nexec "$@"\n' >"$tmp/tcp123.sh"
chmod +x "$tmp/tcp0.sh" "$tmp/tcp123.sh"
for how in default tcp tcp0 tcp123; do
  case $how in
  default) set -- ;;
  tcp) set -- -x CRNET_TRANSPORT=tcp ;;
  *) set -- "$tmp/$how.sh" ;;
  esac
  job 4 -x CRNET_TUNING_FILE="$tmp/C" "$@" "$CRBENCH" -c bcast -b 1M -e 1M \
    -n 2 -w 1 --check --json
  expect "transport $how: exit status" "$rc" 0
  case $how in
  tcp | tcp0) want=knomial/0 ;;
  *) want=ring/0 ;;
  esac
  expect "transport $how: auto's bcast and its result" "$(ran)" "$want"
done

# --- bad files ------------------------------------------------------------------

printf 'alpha = 1e-5\n# fine\nbeta = fast\n' >"$tmp/bad"
job 2 -x CRNET_TUNING_FILE="$tmp/bad" "$CRBENCH" -b 8 -n 1 -w 0
expect "a malformed file: exit status" "$rc" 1
contains "a malformed file: file, line and why" "$tmp/err" \
  "tuning file '$tmp/bad' line 3: beta = 'fast' is not a number"
job 2 -x CRNET_TUNING_FILE="$tmp/none" "$CRBENCH" -b 8 -n 1 -w 0
expect "a missing named file: exit status" "$rc" 1
contains "a missing named file: named" "$tmp/err" \
  "cannot open the tuning file '$tmp/none' (CRNET_TUNING_FILE)"
# Only rank 0's file is read: a malformed file elsewhere does not matter.
cat >"$tmp/badelse.sh" <<EOF
#!/bin/sh
if [ "\$CRNET_RANK" != 0 ]; then CRNET_TUNING_FILE="$tmp/bad"
export CRNET_TUNING_FILE; fi
exec "\$@"
EOF
chmod +x "$tmp/badelse.sh"
job 3 "$tmp/badelse.sh" "$CRBENCH" -b 8 -e 64 -n 1 -w 0
expect "a malformed file on ranks 1, 2 only: exit status" "$rc" 0

echo "$checks checks, $fails failed"
[ "$fails" -eq 0 ]
