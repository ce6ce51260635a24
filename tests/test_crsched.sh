#!/bin/sh
# crsched, the schedule viewer and cost model, end to end: the paper's
# p = 22 example (text and JSON), round counts per collective, the cost
# model against Träff's formulas, auto's pick and crossover points under
# given constants (--auto, --crossover), and usage errors.
#
#   tests/test_crsched.sh path/to/crsched
#
# Every check prints "ok" or "FAIL" with what it saw; the script exits 1 if
# any check failed.
set -u

CRSCHED=${1:?usage: test_crsched.sh path/to/crsched}

. "$(dirname "$0")/checks.sh"

# --- the paper's example: p = 22, rank 21 ------------------------------

out=$("$CRSCHED" --coll reduce_scatter --schedule circulant -p 22 --rank 21)
expect "p=22 exit status" "$?" 0
expect "p=22 text: skips" \
  "$(printf '%s\n' "$out" | sed -n 's/^round [0-9]*  s.=[0-9]* s=\([0-9]*\).*/\1/p' | tr '\n' ' ')" \
  "11 6 3 2 1 "
expect "p=22 text: receives from" \
  "$(printf '%s\n' "$out" | awk '$1 == "recv" && $2 == "from" {printf "%s ", $3}')" \
  "10 15 18 19 20 "
expect "p=22 text: sends to" \
  "$(printf '%s\n' "$out" | awk '$1 == "send" && $2 == "to" {printf "%s ", $3}')" \
  "10 5 2 1 0 "
expect "p=22 text: round 0 sends blocks 10-20" \
  "$(printf '%s\n' "$out" | grep -c 'R\[11\.\.21\] = blocks 10-20')" 1

# JSON: the same facts, parsed.
json=$("$CRSCHED" --coll reduce_scatter --schedule circulant -p 22 --rank 21 \
  --json)
expect "p=22 json exit status" "$?" 0
got=$(printf '%s\n' "$json" | python3 -c '
import json, sys
rounds = [json.loads(line) for line in sys.stdin]
print(" ".join(str(r["skip"]) for r in rounds), "|",
      " ".join(str(r["recv_from"]) for r in rounds), "|",
      " ".join(str(r["round"]) for r in rounds), "|",
      rounds[0]["send_block_ids"] == list(range(10, 21)), "|",
      sum(r["bytes"]["sent"] for r in rounds),
      sum(r["bytes"]["recv"] for r in rounds),
      sum(r["bytes"]["reduced"] for r in rounds))
')
expect "p=22 json: skips | from | rounds | blocks | bytes" "$got" \
  "11 6 3 2 1 | 10 15 18 19 20 | 0 1 2 3 4 | True | 84 84 84"

# --- JSON shape and round counts ----------------------------------------

# check_json COLL SCHEDULE P WANT_ROUNDS [more crsched args]
check_json() {
  coll=$1 sched=$2 p=$3 want=$4
  shift 4
  got=$("$CRSCHED" --coll "$coll" --schedule "$sched" -p "$p" \
    --rank $((p - 1)) --json "$@" | python3 -c '
import json, sys
need = ("round", "send_to", "recv_from", "send_blocks", "recv_blocks",
        "bytes", "steps")
n = 0
for line in sys.stdin:
    r = json.loads(line)
    missing = [k for k in need if k not in r]
    if missing:
        print("line", n, "lacks", missing)
        sys.exit(0)
    if r["round"] != n:
        print("line", n, "is round", r["round"])
        sys.exit(0)
    n += 1
print(n)
')
  expect "$coll $sched p=$p $*: json lines = rounds" "$got" "$want"
}

# ceil(log2 p) for reduce-scatter (Träff, Theorem 1), twice that for
# allreduce (Theorem 2).
check_json reduce_scatter circulant 5 3
check_json reduce_scatter circulant 8 3
check_json reduce_scatter circulant 22 5
check_json reduce_scatter circulant 100 7
check_json reduce_scatter circulant 100 7 --in-place
check_json reduce_scatter circulant 7 3 --counts 0,5,1,0,9,2,3
check_json allreduce circulant 22 10
check_json allreduce circulant-linear 22 42
check_json allgather circulant 22 5
check_json barrier circulant 22 5
# ring: one local copy, then 2(p-1) rounds.
check_json allreduce ring 22 43

expect "allreduce p=22 text shows 10 rounds" \
  "$("$CRSCHED" --coll allreduce --schedule circulant -p 22 | head -1)" \
  "allreduce, schedule circulant, p = 22, rank 0: 10 rounds"

# --- the cost model ------------------------------------------------------

# cost COLL SCHEDULE P M ALPHA BETA GAMMA: prints "time rank_sum rounds".
cost() {
  "$CRSCHED" --cost --coll "$1" --schedule "$2" -p "$3" -m "$4" \
    --alpha "$5" --beta "$6" --gamma "$7" --json | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin]
assert len(rows) == 1, rows
r = rows[0]
print("%g %g %d" % (r["time"], r["rank_sum"], r["rounds"]))
'
}

# Reduce-scatter, p = 22, m = 22·4 bytes: ceil(log2 22)·α +
# (p-1)/p·m·(β+γ) = 5α + 84(β+γ).
expect "cost rs p=22 alpha=1" "$(cost reduce_scatter circulant 22 88 1 0 0)" \
  "5 5 5"
expect "cost rs p=22 beta=1" "$(cost reduce_scatter circulant 22 88 0 1 0)" \
  "84 84 5"
expect "cost rs p=22 gamma=0.5" \
  "$(cost reduce_scatter circulant 22 88 0 0 0.5)" "42 42 5"
expect "cost rs p=22 all" "$(cost reduce_scatter circulant 22 88 1 1 1)" \
  "173 173 5"
# Allreduce: 2·ceil(log2 p)·α + 2(p-1)/p·m·β + (p-1)/p·m·γ.
expect "cost allreduce p=22" "$(cost allreduce circulant 22 88 1 1 1)" \
  "262 262 10"
expect "cost allreduce p=22 in seconds" \
  "$(cost allreduce circulant 22 88 1e-6 1e-9 0)" "1.0168e-05 1.0168e-05 10"
# Uneven blocks (m = 100 elements over p = 22: 12 blocks of 5, 10 of 4):
# every rank sends all blocks but its own, so the busiest sends
# (100-4)·4 = 384 bytes; no round moves more than its s'-s blocks of 5:
# at most 21·5·4 = 420.
got=$(cost reduce_scatter circulant 22 400 0 1 0 | cut -d' ' -f1)
if [ "$got" -ge 384 ] 2>/dev/null && [ "$got" -le 420 ]; then
  ok "cost rs uneven blocks within bounds ($got)"
else
  fail "cost rs uneven blocks: got '$got', want 384..420"
fi
expect "cost rs uneven blocks, bytes sent by the busiest rank" \
  "$("$CRSCHED" --cost --coll reduce_scatter --schedule circulant -p 22 \
    -m 400 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["bytes_sent"])')" \
  384
# Ring allreduce: 2(p-1)·α + 2(p-1)/p·m·β + (p-1)/p·m·γ, at p = 8, m = 8·4.
expect "cost ring p=8" "$(cost allreduce ring 8 32 1 1 1)" "98 98 14"
# Allreduce at p = 100: 2·ceil(log2 100) = 14 rounds.
expect "cost allreduce circulant p=100 rounds" \
  "$(cost allreduce circulant 100 400 1 0 0)" "14 14 14"

# Recursive doubling allreduce, p = 8: log2 p·(α + mβ + mγ), m = 32 bytes.
expect "cost hypercube allreduce p=8" \
  "$(cost allreduce hypercube 8 32 1 1 1)" "195 195 3"
# Rabenseifner allreduce, p = 8: 2·log2 p·α + 2(p-1)/p·m·β + (p-1)/p·m·γ.
expect "cost rabenseifner allreduce p=8" \
  "$(cost allreduce rabenseifner 8 32 1 1 1)" "90 90 6"
# Prefix sums: ceil(log2 p) rounds for any p, both families.
expect "cost circulant scan p=22" "$(cost scan circulant 22 88 1 0 0)" "5 5 5"
expect "cost hypercube exscan p=22" "$(cost exscan hypercube 22 88 1 0 0)" \
  "5 5 5"
# All-to-all, p = 8, 8 bytes per peer (-m is the whole send buffer):
# bruck ceil(log2 p) rounds of p/2 blocks; pairwise p-1 rounds of one
# block; ring (α + β·m·p/2)(p-1).
expect "cost bruck alltoall p=8" "$(cost alltoall bruck 8 64 1 1 0)" \
  "99 99 3"
expect "cost pairwise alltoall p=8" "$(cost alltoall pairwise 8 64 1 1 0)" \
  "63 63 7"
expect "cost ring alltoall p=8" "$(cost alltoall ring 8 64 1 1 0)" \
  "231 231 7"

# Star, p = 4! = 24: n(n-1)/2 = 6 rounds, the whole vector each round
# (the paper's Table 2); p = 3! = 6: 3 rounds; allgather p = 6: the
# blocks others own, (p-1)/p·m.
expect "cost star allreduce p=24" "$(cost allreduce star 24 96 1 1 1)" \
  "1158 1158 6"
expect "cost star allreduce p=6" "$(cost allreduce star 6 24 1 0 0)" "3 3 3"
expect "cost star allgather p=6" "$(cost allgather star 6 24 0 1 0)" \
  "20 20 3"

# Allreduce by allgather, p = 22, 22 bytes each: ceil(log2 p) rounds, every
# other rank's vector received and reduced: 5α + 21·22(β+γ).
expect "cost allgather-reduce p=22" \
  "$(cost allreduce allgather-reduce 22 88 1 1 1)" "3701 3701 5"

# Every schedule that can do the call at p = 22 appears (hypercube
# all-to-all needs a power of two).
rows=$("$CRSCHED" --cost -p 22 -m 88 --alpha 1 --json)
expect "cost: rows per collective" \
  "$(printf '%s\n' "$rows" | python3 -c '
import json, sys, collections
c = collections.Counter(json.loads(l)["coll"] for l in sys.stdin)
print(" ".join("%s=%d" % kv for kv in sorted(c.items())))
')" "allgather=7 allreduce=11 alltoall=3 alltoallv=2 barrier=5 bcast=7 exscan=3 gather=2 reduce=7 reduce_scatter=6 scan=3 scatter=2"
expect "cost: allreduce schedules" \
  "$(printf '%s\n' "$rows" | python3 -c '
import json, sys
print(" ".join(sorted(r["schedule"] for r in map(json.loads, sys.stdin)
                      if r["coll"] == "allreduce")))
')" "allgather-reduce circulant circulant-doubling circulant-linear circulant-sqrt hypercube knomial rabenseifner ring star swing"
text=$("$CRSCHED" --cost -p 22 -m 88 --alpha 1 --coll reduce_scatter)
expect "cost text: circulant row" \
  "$(printf '%s\n' "$text" | awk '$1 == "reduce_scatter" && $2 == "circulant" {print $3, $7}')" \
  "5 5"
expect "cost text: sorted by time" \
  "$(printf '%s\n' "$text" | awk '$1 == "reduce_scatter" {print $2}' | tr '\n' ' ')" \
  "circulant circulant-doubling circulant-sqrt rabenseifner circulant-linear ring "
# Sampling symmetric ranks must agree with building every rank.
expect "cost: --all agrees with sampling" \
  "$(cost allreduce circulant 13 52 1 1 1)" \
  "$("$CRSCHED" --cost --coll allreduce --schedule circulant -p 13 -m 52 \
    --alpha 1 --beta 1 --gamma 1 --all --json |
    python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); print("%g %g %d" % (r["time"], r["rank_sum"], r["rounds"]))')"

# p = 1: nothing to communicate, every time 0 (and no sampled rank 1).
expect "cost p=1" "$(cost allreduce circulant 1 4 1 1 1)" "0 0 0"

# --- auto's pick and its crossover points ---------------------------------

# No tuning file from whoever runs the tests: constants on the command
# line, or an empty CRNET_TUNING_FILE (the built-in defaults).
export CRNET_TUNING_FILE=

# --auto: every collective; the pick is the cheapest candidate.
got=$("$CRSCHED" --auto -p 8 -m 1048576 --json | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin]
bad = [r["coll"] for r in rows
       if r["auto"] not in r["candidates"]
       or r["time"] != min(r["candidates"].values())
       or r["candidates"][r["auto"]] != r["time"]]
print(len(rows), bad)')
expect "--auto p=8: 12 collectives, each pick the cheapest" "$got" "12 []"
# Rounds dear: the fewest rounds; bytes dear: the least volume.
pick() { # pick P M COLL ARGS...
  p=$1 m=$2 coll=$3
  shift 3
  "$CRSCHED" --auto -p "$p" -m "$m" --coll "$coll" --json "$@" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["auto"])'
}
expect "--auto rounds dear: allreduce p=8" \
  "$(pick 8 65536 allreduce --alpha 1e-3 --beta 1e-12 --gamma 0)" hypercube
expect "--auto bytes dear: allreduce p=8" \
  "$(pick 8 65536 allreduce --alpha 1e-9 --beta 1e-6 --gamma 1e-7)" circulant
expect "--auto rounds dear: alltoall p=16" \
  "$(pick 16 1048576 alltoall --alpha 1e-3 --beta 1e-12 --gamma 0)" bruck
expect "--auto bytes dear: alltoall p=16" \
  "$(pick 16 1048576 alltoall --alpha 1e-9 --beta 1e-6 --gamma 0)" pairwise
expect "--auto non-commutative reduce_scatter p=5" \
  "$(pick 5 4096 reduce_scatter --non-commutative)" circulant-linear
expect "--auto non-commutative reduce_scatter p=8" \
  "$(pick 8 4096 reduce_scatter --non-commutative)" rabenseifner
# The constants come from a tuning file as well.
tun=$(mktemp) || exit 1
printf 'alpha = 1e-3\nbeta = 1e-12\ngamma = 0\n' >"$tun"
expect "--auto --tuning FILE" "$(pick 8 65536 allreduce --tuning "$tun")" \
  hypercube
expect "--auto, CRNET_TUNING_FILE" \
  "$(CRNET_TUNING_FILE=$tun pick 8 65536 allreduce)" hypercube
expect "--auto: --beta replaces the file's" \
  "$(pick 8 65536 allreduce --tuning "$tun" --beta 1e-6)" circulant
printf 'alpha = 1e-3\nbeta = slow\n' >"$tun"
err=$("$CRSCHED" --auto -p 8 -m 64 --tuning "$tun" 2>&1 >/dev/null)
expect "--auto: a malformed file: exit status" "$?" 1
expect "--auto: a malformed file: why" "$err" \
  "crsched: tuning file '$tun' line 2: beta = 'slow' is not a number"
rm -f "$tun"

# --crossover: at p = 8, hypercube costs 3(α + mβ + mγ), circulant 6α +
# 1.75mβ + 0.875mγ: with α = 4e-5, β = 1e-9, γ = 1.5e-10 they are equal at
# m = 76494.4 bytes, so circulant from 76496 (whole 4-byte elements). Bruck
# against pairwise at p = 16: 4α + 2mβ = 15α + (15/16)mβ at m = 414117.6,
# so pairwise from 414144 (whole elements per peer: multiples of 64).
got=$("$CRSCHED" --crossover -p 8 --alpha 4e-5 --beta 1e-9 --gamma 1.5e-10 \
  --coll allreduce --json | python3 -c '
import json, sys; print(json.load(sys.stdin)["ranges"])')
expect "--crossover allreduce p=8" "$got" \
  "[[0, 'hypercube'], [76496, 'circulant']]"
got=$("$CRSCHED" --crossover -p 16 --alpha 4e-5 --beta 1e-9 --gamma 1.5e-10 \
  --coll alltoall --json | python3 -c '
import json, sys; print(json.load(sys.stdin)["ranges"])')
expect "--crossover alltoall p=16" "$got" "[[0, 'bruck'], [414144, 'pairwise']]"
expect "--crossover text" \
  "$("$CRSCHED" --crossover -p 8 --alpha 4e-5 --beta 1e-9 --gamma 1.5e-10 |
    grep '^allreduce')" \
  "allreduce       hypercube from 0 B, circulant from 76496 B"

# --- usage -------------------------------------------------------------

"$CRSCHED" --help >/dev/null
expect "--help exits 0" "$?" 0
# usage_error NAME ARGS...: exit 2 and something on stderr.
usage_error() {
  name=$1
  shift
  err=$("$CRSCHED" "$@" 2>&1 >/dev/null)
  rc=$?
  if [ "$rc" -eq 2 ] && [ -n "$err" ]; then
    ok "$name exits 2"
  else
    fail "$name: exit $rc, stderr '$err'"
  fi
}
usage_error "no arguments"
usage_error "unknown option" --frobnicate
usage_error "bad p" --coll allreduce -p 0
usage_error "rank out of range" --coll allreduce -p 4 --rank 4
usage_error "unknown collective" --coll alltoallw -p 4
usage_error "unknown schedule" --coll allreduce --schedule hypercube2 -p 4
usage_error "schedule cannot do it" --coll reduce_scatter --schedule pairwise -p 4
usage_error "hypercube all-to-all needs a power of two" --coll alltoall \
  --schedule hypercube -p 6
usage_error "counts of the wrong length" --coll reduce_scatter -p 4 --counts 1,2
usage_error "cost without -m" --cost -p 4
usage_error "negative alpha" --cost -p 4 -m 16 --alpha -1
usage_error "--auto without -m" --auto -p 4
usage_error "--auto and --cost" --auto --cost -p 4 -m 16
usage_error "--auto with --schedule" --auto -p 4 -m 16 --schedule ring
usage_error "--tuning without --auto" --cost -p 4 -m 16 --tuning /dev/null
usage_error "--crossover -m not whole elements" --crossover -p 4 -m 17
usage_error "--hosts malformed" --coll allreduce --hosts 2x
usage_error "--hosts with a zero" --coll allreduce --hosts 3+0+1
usage_error "--hosts against -p" --coll allreduce -p 5 --hosts 2x4
usage_error "--shm-alpha without --cost" --coll allreduce --hosts 2x4 \
  --shm-alpha 1e-6

# --hosts: the two-level schedules and what each level runs.
expect "two-level view names its levels" \
  "$("$CRSCHED" --coll allreduce --schedule two-level --hosts 3+5+1 --rank 8 \
    --count 30 | sed -n 3p)" \
  "levels: host 2 of 3 (1 rank; this rank is its rank 0): rounds 0-3 reduce-scatter inside the host (circulant); rounds 4-23 allreduce across hosts (ring), lanes 0-4 of 5 in slots of 4 rounds; rounds 24-26 allgather inside the host (circulant)"
# Two hosts of 8, ranks host by host: rabenseifner crosses hosts with its
# smallest pieces and prices as two-level does (listed first, it wins); 3 +
# 5 ranks puts a crossing in its first, largest round: two-level.
expect "--auto with two hosts of 8 picks rabenseifner at 16 MiB" \
  "$("$CRSCHED" --auto --hosts 2x8 -m 16777216 --coll allreduce \
    --tuning /dev/null | awk '$1 == "allreduce" { print $2 }')" "rabenseifner"
expect "--auto with hosts of 3 and 5 picks two-level at 16 MiB" \
  "$("$CRSCHED" --auto --hosts 3+5 -m 16777216 --coll allreduce \
    --tuning /dev/null | awk '$1 == "allreduce" { print $2 }')" "two-level"
expect "--auto on one host never prices two-level" \
  "$("$CRSCHED" --auto -p 16 -m 16777216 --coll allreduce --tuning /dev/null |
    grep -c two-level)" "0"
expect "--cost --hosts: two-level sends 2 MiB across hosts (circulant 30)" \
  "$("$CRSCHED" --cost --hosts 2x8 -m 16777216 --coll allreduce --alpha 0 \
    --beta 1 --shm-beta 0 | awk '$2 == "two-level" { print $7 }')" \
  "2.09715e+06"
expect "schedule message is crnet__select's" \
  "$("$CRSCHED" --coll reduce_scatter --schedule pairwise -p 4 2>&1)" \
  "crsched: schedule 'pairwise' cannot do reduce_scatter"

# --list: the registry, the one place that knows the schedules; the lists
# written for people (crnet(3), docs/SCHEDULES.md's table) must name every one.
list=$("$CRSCHED" --list --json)
expect "--list exit status" "$?" 0
expect "--list: names and ids unique, every row does a collective" \
  "$(printf '%s\n' "$list" | python3 -c '
import json, sys
rows = [json.loads(line) for line in sys.stdin]
names = [r["schedule"] for r in rows]
ids = [r["id"] for r in rows]
print(len(rows) > 10, len(set(names)) == len(names),
      len(set(ids)) == len(ids) and min(ids) >= 1,
      all(r["collectives"] and r["summary"] for r in rows))
')" "True True True True"
man3=$(dirname "$0")/../man/crnet.3
schedules_md=$(dirname "$0")/../docs/SCHEDULES.md
for name in $(printf '%s\n' "$list" | python3 -c '
import json, sys
print(" ".join(json.loads(line)["schedule"] for line in sys.stdin))'); do
  man_name=$(printf '%s' "$name" | sed 's/-/\\\\-/g')
  expect "crnet(3) names schedule $name" \
    "$(grep -c -- "$man_name" "$man3" | awk '{print ($1 > 0)}')" 1
  expect "docs/SCHEDULES.md's table names schedule $name" \
    "$(grep -c -- "| \`$name\`" "$schedules_md" | awk '{print ($1 > 0)}')" 1
done
usage_error "--list with another option" --list -p 4

echo "$checks checks, $fails failed"
[ "$fails" -eq 0 ]
