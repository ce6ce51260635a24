#!/bin/sh
# crsched --cost --sweep, the closed-form model over p = 2..10^6: the
# formulas against every rank's built schedule (--verify: rounds, bytes and
# peers, every p to 256 for every schedule, to 4096 for the circulant
# allreduce and to 2048 for its reduce-scatter), the sweep's p grid, its times against the
# constants given (flags or a tuning file), its rounds and peers against the
# schedules' known counts, Träff's formula at p = 22, and --dat's shape.
#
#   tests/test_crsched_sweep.sh path/to/crsched
set -u

CRSCHED=${1:?usage: test_crsched_sweep.sh path/to/crsched}
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT
# the constants a job would use must not come from this machine's file
CRNET_TUNING_FILE=
export CRNET_TUNING_FILE

. "$(dirname "$0")/checks.sh"

# --- the formulas against the builders -------------------------------------
# verify ARGS...: the summary line's "N disagree", exit status
verify() {
  out=$("$CRSCHED" --cost --sweep --verify "$@")
  rc=$?
  printf '%s\n' "$out" | grep MISMATCH | head -5
  printf '%s\n' "$out" | tail -1 | sed -n 's/.*: \([0-9]*\) disagree$/\1 disagree/p'
  echo "exit $rc"
}
expect "--verify --pmax 256 (every schedule)" \
  "$(verify --pmax 256 | tr '\n' ' ')" "0 disagree exit 0 "
# p = 2..16: 9 collectives, 2 to 7 schedules each, 15 p
n=$("$CRSCHED" --cost --sweep --verify --pmax 16 | sed -n 's/^\([0-9]*\) .*/\1/p')
if [ "${n:-0}" -gt 300 ]; then ok "--verify: $n rows checked to p = 16"
else fail "--verify: only '$n' rows checked to p = 16"; fi
expect "--verify circulant allreduce, every p to 4096" \
  "$(verify --pmax 4096 --coll allreduce --schedule circulant | tr '\n' ' ')" \
  "0 disagree exit 0 "
expect "--verify circulant reduce_scatter, every p to 2048" \
  "$(verify --pmax 2048 --coll reduce_scatter --schedule circulant | tr '\n' ' ')" \
  "0 disagree exit 0 "

# --- the sweep ------------------------------------------------------------
"$CRSCHED" --cost --sweep -m 88,1048576 --alpha 1e-6 --beta 1e-9 \
  --gamma 2e-10 --json > "$TMP/sweep.json"
expect "sweep --json: exit status" "$?" 0
"$CRSCHED" --cost --sweep -m 88,1048576 --alpha 1e-6 --beta 1e-9 \
  --gamma 2e-10 --coll allreduce --dat > "$TMP/sweep.dat"
expect "sweep --dat: exit status" "$?" 0
# --pmax 22: the grid ends at --pmax, so p = 22 is in it
"$CRSCHED" --cost --sweep -m 88 --pmax 22 --alpha 1e-6 --beta 1e-9 \
  --gamma 2e-10 --json > "$TMP/sweep22.json"
"$CRSCHED" --cost -p 22 -m 88 --alpha 1e-6 --beta 1e-9 --gamma 2e-10 \
  --coll allreduce --schedule circulant --json > "$TMP/cost22.json"
printf 'alpha = 0.001\nbeta = 1e-12\ngamma = 1e-12\nring_round = 0.5\n' \
  > "$TMP/tuning"
"$CRSCHED" --cost --sweep -m 4 --coll allreduce --tuning "$TMP/tuning" \
  --json > "$TMP/tuned.json"
expect "sweep --tuning: exit status" "$?" 0

python3 - "$TMP" > "$TMP/results" 2>&1 <<'PY'
import json, math, sys
d = sys.argv[1]
rows = [json.loads(l) for l in open(d + '/sweep.json')]
failed = []
def check(name, cond, detail=''):
    print(('ok - ' if cond else 'FAIL - ') + name +
          ('' if cond else ': ' + str(detail)))

ps = sorted(set(r['p'] for r in rows))
want = {2, 10, 100, 1000, 10000, 100000, 1000000}
for k in range(1, 20):
    for q in (2**k - 1, 2**k, 2**k + 1):
        if 2 <= q <= 10**6:
            want.add(q)
check('p grid: 2..10^6 with every 2^k, 2^k+-1 and the decades',
      want <= set(ps) and ps[0] == 2 and ps[-1] == 10**6,
      sorted(want - set(ps)))
check('p grid: 8 log-spaced points per decade at least',
      len(ps) >= 8 * 6 + 3 * 19 - 20, len(ps))
check('both sizes at every p',
      all({r['m'] for r in rows if r['p'] == q} == {88, 1048576} for q in ps))

a, b, g = 1e-6, 1e-9, 2e-10
bad = [r for r in rows
       if abs(r['time'] - (r['rounds'] * a + r['moved'] * b +
                           r['reduced'] * g)) > 1e-9 * max(r['time'], 1e-9)]
check('time = rounds*alpha + moved*beta + reduced*gamma on every row',
      not bad, bad[:2])

def L(p): return math.ceil(math.log2(p))
def lg(p): return int(math.floor(math.log2(p)))
def pick(coll, sched, m=88):
    return {r['p']: r for r in rows
            if r['coll'] == coll and r['schedule'] == sched and r['m'] == m}
ar = pick('allreduce', 'circulant')
check('circulant allreduce: 2 ceil(log2 p) rounds, at most that many peers',
      all(r['rounds'] == 2 * L(p) and L(p) <= r['peers'] <= 2 * L(p)
          for p, r in ar.items()),
      [(p, r['rounds'], r['peers']) for p, r in ar.items()
       if r['rounds'] != 2 * L(p) or r['peers'] > 2 * L(p)][:3])
check('circulant at p = 10^6: 40 rounds, 39 peers (skip p/2 is one peer)',
      (ar[10**6]['rounds'], ar[10**6]['peers']) == (40, 39),
      ar[10**6])
ring = pick('allreduce', 'ring')
check('ring: 2(p-1) rounds, 2 peers (1 at p = 2)',
      all(r['rounds'] == 2 * (p - 1) and r['peers'] == (2 if p > 2 else 1)
          for p, r in ring.items()))
pw = pick('alltoall', 'pairwise')
check('pairwise all-to-all: p-1 rounds and peers',
      all(r['rounds'] == p - 1 and r['peers'] == p - 1
          for p, r in pw.items()))
hc = pick('allreduce', 'hypercube')
check('hypercube allreduce: floor(log2 p) peers, one more for the fold',
      all(r['peers'] == lg(p) + (p & (p - 1) != 0) for p, r in hc.items()))
star = pick('allreduce', 'star')
check('star only at p = n!: 2, 6, 24, 120, 720, 5040, 40320, 362880',
      sorted(star) == [2, 6, 24, 120, 720, 5040, 40320, 362880]
      if all(q in ps for q in (6, 24, 120, 720, 5040, 40320, 362880))
      else sorted(star) == sorted(q for q in ps if q in
                                  (2, 6, 24, 120, 720, 5040, 40320, 362880)),
      sorted(star))
rows22 = [json.loads(l) for l in open(d + '/sweep22.json')]
check('--pmax 22: the grid ends at 22',
      max(r['p'] for r in rows22) == 22 and 22 not in ps)
rows22 = [r for r in rows22 if r['p'] == 22]
rs = [r for r in rows22 if r['coll'] == 'reduce_scatter' and
      r['schedule'] == 'circulant'][0]
ar22 = [r for r in rows22 if r['coll'] == 'allreduce' and
        r['schedule'] == 'circulant'][0]
check("Traff at p = 22, m = 88: 5 rounds, 84 B moved and reduced",
      (rs['rounds'], rs['moved'], rs['reduced']) == (5, 84, 84), rs)
c22 = [json.loads(l) for l in open(d + '/cost22.json')][0]
check('p = 22: the sweep agrees with --cost (the builders)',
      ar22['rounds'] == c22['rounds'] and
      abs(ar22['time'] - c22['time']) < 1e-15, (ar22, c22))

dat = [l.split() for l in open(d + '/sweep.dat') if not l.startswith('#')]
arows = [r for r in rows if r['coll'] == 'allreduce']
check('--dat --coll allreduce: the allreduce rows of --json, 9 fields each',
      len(dat) == len(arows) and all(len(f) == 9 for f in dat),
      (len(dat), len(arows)))
check('--dat: the same numbers as --json',
      all(f[0] == str(r['p']) and f[2] == r['schedule'] and
          float(f[4]) == r['rounds'] and int(f[5]) == r['peers'] and
          float(f[8]) == r['time'] for f, r in zip(dat, arows)))

tuned = {r['schedule']: r for r in
         (json.loads(l) for l in open(d + '/tuned.json')) if r['p'] == 1000}
def tuned_time(r, rho):
    return r['rounds'] * rho * 1e-3 + (r['moved'] + r['reduced']) * 1e-12
check('--tuning: ring rounds cost ring_round * alpha (p = 1000)',
      abs(tuned['ring']['time'] - tuned_time(tuned['ring'], 0.5)) < 1e-12
      and abs(tuned['ring']['time'] - 0.999) < 1e-6, tuned.get('ring'))
check('--tuning: circulant rounds cost alpha (p = 1000)',
      abs(tuned['circulant']['time'] - tuned_time(tuned['circulant'], 1))
      < 1e-12 and abs(tuned['circulant']['time'] - 0.02) < 1e-6,
      tuned.get('circulant'))
PY
while IFS= read -r line; do
  case $line in
    "ok - "*) ok "${line#ok - }" ;;
    "FAIL - "*) fail "${line#FAIL - }" ;;
    *) fail "python: $line" ;;
  esac
done < "$TMP/results"
expect "python3 ran all 17 checks" "$(grep -c '^ok - \|^FAIL - ' "$TMP/results")" 17

# --- usage --------------------------------------------------------------
"$CRSCHED" --sweep -m 8 2> /dev/null
expect "--sweep without --cost: usage error" "$?" 2
"$CRSCHED" --cost --sweep --verify -m 8 2> /dev/null
expect "--verify with -m: usage error" "$?" 2
"$CRSCHED" --cost -p 8 -m 8,16 2> /dev/null
expect "-m list without --sweep: usage error" "$?" 2
"$CRSCHED" --cost --sweep 2> /dev/null
expect "--sweep without -m: usage error" "$?" 2
"$CRSCHED" --cost -p 8 -m 8 --dat 2> /dev/null
expect "--dat without --sweep: usage error" "$?" 2

echo "$checks checks, $fails failed"
[ "$fails" -eq 0 ]
