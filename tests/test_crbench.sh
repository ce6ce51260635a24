#!/bin/sh
# crbench, the collective benchmark, end to end through crlaunch: every
# collective under every schedule that can do it, at p = 3 and 4, with
# --check over sizes 8..64K; the rows, sizes, counts, roots and bandwidth
# arithmetic in its JSON (parsed by python3); a wrong element seen as one;
# the text table; the link-limit probe at p = 3 and the efficiency
# beside rows of 1 MiB; --overlap's rows at p = 2 (their form and
# arithmetic, never their figures, which are the machine's); and usage
# errors.
#
#   tests/test_crbench.sh path/to/crlaunch path/to/crbench
#
# Which schedule does which collective is this script's own table, written
# from docs/SCHEDULES.md's table, never asked of the library, so that a
# library (or a crbench) that drops or invents a schedule fails here.
#
# Every check prints "ok" or "FAIL" with what it saw; the script exits 1 if
# any check failed. Runtime on a 2-core machine: about 15 s, 25 s under
# ASan+UBSan (see docs/PERFORMANCE.md).
set -u

CRLAUNCH=${1:?usage: test_crbench.sh path/to/crlaunch path/to/crbench}
CRBENCH=${2:?usage: test_crbench.sh path/to/crlaunch path/to/crbench}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

. "$(dirname "$0")/checks.sh"

# bench P ARGS...: runs crbench on P ranks; stdout in $tmp/out, stderr in
# $tmp/err, exit status in $rc. Each job is bounded by crlaunch's timeout.
bench() {
  p=$1
  shift
  "$CRLAUNCH" -n "$p" --timeout 60 "$CRBENCH" "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
}

# verify COLL P TYPE SIZES...: checks the JSON rows in $tmp/out (see the
# python below); prints "ok" or what is wrong.
verify() {
  python3 "$tmp/verify.py" "$@" <"$tmp/out"
}
cat >"$tmp/verify.py" <<'EOF'
import json, os, sys

coll, p, dtype = sys.argv[1], int(sys.argv[2]), sys.argv[3]
sizes = [int(s) for s in sys.argv[4:]]
tsize = {"int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "float16": 2,
         "bfloat16": 2, "int32": 4, "uint32": 4, "float": 4, "int64": 8,
         "uint64": 8, "double": 8}[dtype]
circ = ["auto", "circulant", "circulant-doubling", "circulant-linear",
        "circulant-sqrt"]
pow2 = p & (p - 1) == 0
want_scheds = {
    "allreduce": circ + ["ring", "hypercube", "rabenseifner", "star",
                         "allgather-reduce", "two-level", "swing",
                         "knomial"],
    "reduce_scatter": circ + ["ring", "rabenseifner", "two-level"],
    "allgather": circ + ["ring", "hypercube", "star", "two-level"],
    "alltoall": ["auto", "ring"] + (["hypercube"] if pow2 else [])
                + ["pairwise", "bruck"],
    "bcast": circ + ["ring", "hypercube", "two-level", "knomial"],
    "reduce": circ + ["ring", "rabenseifner", "two-level", "knomial"],
    "scan": ["auto", "circulant", "ring", "hypercube"],
    "exscan": ["auto", "circulant", "ring", "hypercube"],
    "barrier": circ + ["knomial"],
    "gather": ["auto", "binomial", "linear"],
    "scatter": ["auto", "binomial", "linear"],
    "allgatherv": circ + ["ring", "hypercube", "star", "two-level"],
    "alltoallv": ["auto", "ring", "pairwise"],
}[coll]
# (size, count) per requested size, as nccl-tests count them.
def shape(s):
    if coll == "barrier":
        return (0, 0)
    if coll in ("reduce_scatter", "allgather", "alltoall", "gather",
                "scatter", "allgatherv", "alltoallv"):
        c = s // tsize // p
        return (c * p * tsize, c)
    return (s // tsize * tsize, s // tsize)
want_shapes = [(0, 0)] if coll == "barrier" else [shape(s) for s in sizes]
factor = {"allreduce": 2 * (p - 1) / p, "reduce_scatter": (p - 1) / p,
          "allgather": (p - 1) / p, "alltoall": (p - 1) / p,
          "gather": (p - 1) / p, "scatter": (p - 1) / p,
          "allgatherv": (p - 1) / p, "alltoallv": (p - 1) / p}.get(coll, 1.0)
rooted = coll in ("bcast", "reduce", "gather", "scatter")

rows = [json.loads(line) for line in sys.stdin if line.strip()]
problems = []
keys = {"coll", "size", "count", "type", "op", "schedule", "ran", "root",
        "p", "time_us", "algbw_gbps", "busbw_gbps", "wrong", "iters",
        "link_gbps", "efficiency", "links"}
for r in rows:
    if set(r) != keys:
        problems.append("keys %s" % sorted(set(r) ^ keys))
        break
    # rank 0's links: one host, so shared memory once the switch is done
    # (the first rows may still be on TCP)
    if r["links"] not in ("shm", "tcp"):
        problems.append("%s %s B: links %s" % (r["schedule"], r["size"],
                                               r["links"]))
    if r["wrong"] != 0:
        problems.append("%s %s B: %s wrong" % (r["schedule"], r["size"],
                                                r["wrong"]))
    # what ran: the schedule asked for, or for auto one of the others, or
    # the shared-memory board (small calls on one host, when on)
    if r["schedule"] == "auto":
        board = os.environ.get("CRNET_SHM_BOARD_BYTES", "4096") not in ("", "0")
        if r["ran"] == "auto" or (r["ran"] not in want_scheds and
                                  not (board and r["ran"] == "board")):
            problems.append("auto %s B ran %s" % (r["size"], r["ran"]))
    elif r["ran"] != r["schedule"]:
        problems.append("%s %s B ran %s" % (r["schedule"], r["size"],
                                            r["ran"]))
    if r["coll"] != coll or r["p"] != p or r["iters"] != 2:
        problems.append("row %s" % r)
    # below 1 MiB there is no probe and no efficiency
    if r["link_gbps"] is not None or r["efficiency"] is not None:
        problems.append("%s %s B: link %s, efficiency %s" % (
            r["schedule"], r["size"], r["link_gbps"], r["efficiency"]))
    if r["root"] != (p - 1 if rooted else -1):
        problems.append("%s root %s" % (r["schedule"], r["root"]))
    if not r["time_us"] > 0:
        problems.append("%s %s B: time %s" % (r["schedule"], r["size"],
                                              r["time_us"]))
    # algbw = size / time (GB/s = bytes per us / 1e3), busbw = algbw x
    # factor, both within the 9 significant digits printed.
    algbw = r["size"] / r["time_us"] / 1e3
    if abs(r["algbw_gbps"] - algbw) > 1e-7 * algbw + 1e-15:
        problems.append("algbw %s, want %s" % (r["algbw_gbps"], algbw))
    busbw = r["algbw_gbps"] * factor
    if abs(r["busbw_gbps"] - busbw) > 1e-7 * busbw + 1e-15:
        problems.append("%s %s B: busbw %s != algbw %s x %s" % (
            r["schedule"], r["size"], r["busbw_gbps"], r["algbw_gbps"],
            factor))
got_scheds = []
for r in rows:
    if r["schedule"] not in got_scheds:
        got_scheds.append(r["schedule"])
if got_scheds != want_scheds:
    problems.append("schedules %s, want %s" % (got_scheds, want_scheds))
for s in want_scheds:
    got = [(r["size"], r["count"]) for r in rows if r["schedule"] == s]
    if got != want_shapes:
        problems.append("%s: (size, count) %s, want %s" % (s, got,
                                                           want_shapes))
print("ok" if not problems else "; ".join(problems[:5]))
EOF

SIZES="8 32 128 512 2048 8192 32768" # -b 8 -e 64K -f 4

# --- every collective x every schedule, checked ---------------------------

for p in 3 4; do
  for coll in allreduce reduce_scatter allgather alltoall bcast reduce scan \
    exscan barrier gather scatter allgatherv alltoallv; do
    bench "$p" -c "$coll" -s all -b 8 -e 64K -f 4 -r $((p - 1)) -n 2 -w 1 \
      --check --json
    expect "p=$p $coll exit status" "$rc" 0
    expect "p=$p $coll rows" "$(verify "$coll" "$p" float $SIZES)" ok
    if [ "$coll" = alltoall ] && [ "$p" = 3 ]; then
      expect "p=3 alltoall: a note for hypercube" \
        "$(grep -c 'leaving out hypercube: CRNET_EUNSUPPORTED' "$tmp/err")" 1
    elif [ -s "$tmp/err" ]; then
      fail "p=$p $coll: stderr: $(head -3 "$tmp/err")"
    fi
  done
done

# Other datatypes and operators (the check pattern per type and op).
for case in "allreduce bfloat16 max" "reduce_scatter int8 bxor" \
  "scan uint16 prod" "exscan float16 land" "reduce int64 band" \
  "allreduce double lor" "alltoall int16 sum"; do
  set -- $case
  bench 3 -c "$1" -s all -b 8 -e 64K -f 4 -d "$2" -o "$3" -r 2 -n 2 -w 1 \
    --check --json
  expect "p=3 $1 $2 $3 exit status" "$rc" 0
  expect "p=3 $1 $2 $3 rows" "$(verify "$1" 3 "$2" $SIZES)" ok
done

# --- a wrong element counts, and fails the run ----------------------------

bench 3 -c allreduce -s circulant -b 64 -e 64 --check --json
expect "clean run exits 0" "$rc" 0
"$CRLAUNCH" -n 3 --timeout 60 -x CRBENCH_CORRUPT=1 "$CRBENCH" -c allreduce \
  -s circulant -b 64 -e 64 --check --json >"$tmp/out" 2>"$tmp/err"
rc=$?
expect "one flipped byte on rank 1: exit status" "$rc" 1
expect "one flipped byte on rank 1: #wrong" \
  "$(python3 -c 'import json,sys; print([json.loads(l)["wrong"] for l in sys.stdin])' <"$tmp/out")" \
  "[1]"

# --- the text table and unchecked rows ------------------------------------

bench 2 -c reduce -s ring,circulant -b 8 -e 32 -f 2 -n 3 -w 0 -d double
expect "text exit status" "$rc" 0
expect "text header" \
  "$(grep -c '^#  *size  *count  *type  *redop  *schedule  *root  *time  *algbw  *busbw  *#wrong  *links$' "$tmp/out")" 1
# rank 0's links: one host, so shared memory once the switch is done, which
# takes the first calls (the first rows may still say tcp)
expect "text rows: rank 0's links end on shared memory" \
  "$(grep -v '^#' "$tmp/out" | tail -n 1 | awk '{print $11}')" "shm"
expect "text rows: size count type op schedule root #wrong" \
  "$(grep -v '^#' "$tmp/out" | awk '{printf "%s %s %s %s %s %s %s|", $1, $2, $3, $4, $5, $6, $10}')" \
  "8 1 double sum ring 0 N/A|8 1 double sum circulant 0 N/A|16 2 double sum ring 0 N/A|16 2 double sum circulant 0 N/A|32 4 double sum ring 0 N/A|32 4 double sum circulant 0 N/A|"
bench 2 -c bcast -b 8 -e 8 -n 1 -w 0 --json
expect "unchecked JSON: wrong is null, op none" \
  "$(python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["wrong"], r["op"], r["schedule"])' <"$tmp/out")" \
  "None none auto"
# auto names what it ran, a schedule that can do bcast (crsched's list),
# or the shared-memory board where it is on
picks='circulant|circulant-doubling|circulant-linear|circulant-sqrt|ring|hypercube'
[ "${CRNET_SHM_BOARD_BYTES:-4096}" = 0 ] || picks="$picks|board"
bench 2 -c bcast -b 8 -e 8 -n 1 -w 0
expect "text: auto names its pick" \
  "$(grep -v '^#' "$tmp/out" | awk '{print $5}' |
     grep -cE "^auto:($picks)\$")" 1

# --- the link limit and efficiency ------------------------------------------

# The probe streams 64 MiB a rank three times, most of this script's time
# under ASan: alone once, at p = 3 (JSON: each rank to its successor round
# a ring of three), and inside the sweeps below at p = 2, whose text
# header is the same print as --link-limit's text (crbench_link_print).
p=3
bench "$p" --link-limit --json
expect "p=$p --link-limit: exit status" "$rc" 0
expect "p=$p --link-limit: positive figures" "$(python3 -c '
import json, sys
r = json.load(sys.stdin)
p = int(sys.argv[1])
good = (r["probe"] == "link-limit" and r["p"] == p and r["reps"] == 3
        and r["bytes_per_rank"] == 64 << 20 and r["aggregate_gbps"] > 0
        and abs(r["per_rank_gbps"] * p - r["aggregate_gbps"])
            <= 1e-6 * r["aggregate_gbps"]
        and r["rtt_idle_us"] > 0 and r["rtt_loaded_us"] > 0
        and r["rtt_loaded_max_us"] >= r["rtt_loaded_us"])
print("ok" if good else r)' "$p" <"$tmp/out")" ok
# A sweep that reaches 1 MiB probes first; rows of 1 MiB and more get an
# efficiency = busbw / link_gbps, smaller rows null.
bench 2 -c allreduce -s circulant -b 512K -e 1M -n 2 -w 1 --json
expect "efficiency: exit status" "$rc" 0
expect "efficiency: null below 1 MiB, busbw / link at 1 MiB" "$(python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
small, big = rows
good = (small["efficiency"] is None and small["link_gbps"] is None
        and big["link_gbps"] > 0 and big["efficiency"] > 0
        and abs(big["efficiency"] - big["busbw_gbps"] / big["link_gbps"])
            <= 1e-6 * big["efficiency"])
print("ok" if good else rows)' <"$tmp/out")" ok
bench 2 -c allreduce -s circulant -b 512K -e 1M -n 2 -w 1
expect "efficiency text: the header has the limit and an eff column" \
  "$(grep -c '^# link limit: p = 2\|^#  *size .*#wrong  *eff  *links$' "$tmp/out")" 2
if grep -q '^#   aggregate [0-9.]* GB/s, per rank [0-9.]* GB/s' "$tmp/out"; then
  ok "--link-limit text: the limit line"
else
  fail "--link-limit text: the limit line: $(cat "$tmp/out" "$tmp/err")"
fi
expect "efficiency text: rows end in - (512 KiB) and a number (1 MiB)" \
  "$(grep -v '^#' "$tmp/out" | awk '{print NF, ($11 == "-" || $11 + 0 > 0)}' | tr '\n' ' ')" \
  "12 1 12 1 "
bench 2 -c allreduce -b 1M -n 1 -w 0 --no-link-limit --json
expect "--no-link-limit: no efficiency" \
  "$(python3 -c 'import json,sys; print(json.load(sys.stdin)["efficiency"])' <"$tmp/out")" \
  None

# --- overlap ----------------------------------------------------------------

# The JSON rows: one per (size, work), every key, positive times, and an
# overlap that is a number and is the formula of the three times printed.
# Nothing here asserts a figure: how much overlaps is the machine's.
overlap_rows() {
  python3 -c '
import json, math, os, sys
coll, p, root, sizes, works = (sys.argv[1], int(sys.argv[2]),
                               int(sys.argv[3]), sys.argv[4].split(","),
                               sys.argv[5].split(","))
env = os.environ.get("CRNET_PROGRESS_THREAD") or None
setting = {None: "default", "0": "off", "1": "on"}.get(env, env)
source = "CRNET_PROGRESS_THREAD" if env else None
keys = {"mode", "coll", "size", "count", "type", "op", "schedule", "root",
        "p", "work", "t_comm_us", "t_work_us", "t_over_us", "overlap",
        "progress_thread", "progress_thread_from", "iters", "warmup"}
rows = [json.loads(l) for l in sys.stdin if l.strip()]
want = [(int(s), w) for s in sizes for w in works]
problems = []
if [(r.get("size"), r.get("work")) for r in rows] != want:
    problems.append("(size, work) %s, want %s" % (
        [(r.get("size"), r.get("work")) for r in rows], want))
for r in rows:
    if set(r) != keys:
        problems.append("keys %s" % sorted(set(r) ^ keys))
        break
    if (r["mode"], r["coll"], r["p"], r["root"], r["type"], r["schedule"],
            r["iters"], r["warmup"]) != ("overlap", coll, p, root, "float",
                                         "auto", 2, 1):
        problems.append("row %s" % r)
    if (r["progress_thread"], r["progress_thread_from"]) != (setting, source):
        problems.append("progress thread %s from %s, want %s from %s" % (
            r["progress_thread"], r["progress_thread_from"], setting, source))
    ts = [r["t_comm_us"], r["t_work_us"], r["t_over_us"]]
    if not all(isinstance(t, (int, float)) and t > 0 for t in ts):
        problems.append("%s %s: times %s" % (r["size"], r["work"], ts))
        continue
    ov = r["overlap"]
    if isinstance(ov, bool) or not isinstance(ov, (int, float)) \
            or not math.isfinite(ov):
        problems.append("%s %s: overlap %r" % (r["size"], r["work"], ov))
        continue
    lo, hi = min(ts[:2]), max(ts[:2])
    want_ov = 1 - (ts[2] - hi) / lo
    if abs(ov - want_ov) > 1e-6 * max(1, ts[2] / lo, hi / lo):
        problems.append("%s %s: overlap %s, the times give %s" % (
            r["size"], r["work"], ov, want_ov))
print("ok" if not problems else "; ".join(problems[:5]))
' "$@" <"$tmp/out"
}
bench 2 --overlap -b 64K -e 256K -n 2 -w 1 --json
expect "--overlap: exit status" "$rc" 0
expect "--overlap: rows" \
  "$(overlap_rows allreduce 2 -1 65536,262144 sleep,cpu)" ok
# (a size that took over a second says so on stderr: not an error)
expect "--overlap: nothing on stderr" "$(grep -v ' B done (' "$tmp/err")" ""
bench 2 --overlap -c bcast -r 1 -b 64K -e 256K -f 2 -n 2 -w 1 --work sleep \
  --json
expect "--overlap bcast, sleep only: exit status" "$rc" 0
expect "--overlap bcast, sleep only: rows" \
  "$(overlap_rows bcast 2 1 65536,131072,262144 sleep)" ok
# The text table: the header says p and the progress thread as the program
# saw it, from the environment (-x) or the option.
"$CRLAUNCH" -n 2 --timeout 60 -x CRNET_PROGRESS_THREAD=1 "$CRBENCH" \
  --overlap -b 64K -e 256K -n 2 -w 1 --work cpu >"$tmp/out" 2>"$tmp/err"
expect "--overlap text, CRNET_PROGRESS_THREAD=1: exit status" "$?" 0
expect "--overlap text: the header" "$(grep -c \
  -e '^# crbench --overlap: allreduce, p = 2, type float, op sum, schedule auto, iters 2, warmup 1$' \
  -e '^# progress thread: on (CRNET_PROGRESS_THREAD=1)$' \
  -e '^#  *size  *count  *type  *redop  *schedule  *t_comm  *t_work  *t_over  *overlap  *work$' \
  "$tmp/out")" 3
expect "--overlap text: rows of size count type redop schedule, numbers, work" \
  "$(grep -v '^#' "$tmp/out" | awk '{
    num = $6 > 0 && $7 > 0 && $8 > 0 && $9 ~ /^-?[0-9]+\.[0-9]+$/
    printf "%d %s %s %s %s %s %d %s|", NF, $1, $2, $3, $4, $5, num, $10 }')" \
  "10 65536 16384 float sum auto 1 cpu|10 262144 65536 float sum auto 1 cpu|"
bench 2 --overlap -c reduce_scatter -b 64K -e 64K -n 2 -w 1 --work sleep \
  --progress-thread off
expect "--overlap --progress-thread off: exit status" "$rc" 0
expect "--overlap --progress-thread off: the header says so" \
  "$(grep -c '^# progress thread: off (--progress-thread' "$tmp/out")" 1

# --- usage ------------------------------------------------------------------

"$CRBENCH" -h >"$tmp/out" 2>&1
expect "-h exits 0" "$?" 0
expect "-h prints the synopsis" "$(grep -c '^SYNOPSIS' "$tmp/out")" 1
# usage_error NAME P ARGS...: exit 2 and one line on stderr (from rank 0
# only) on every rank.
usage_error() {
  name=$1
  shift
  bench "$@"
  if [ "$rc" -eq 2 ] && [ "$(grep -c '^crbench: ' "$tmp/err")" -eq 1 ]; then
    ok "$name exits 2 with a message"
  else
    fail "$name: exit $rc, stderr '$(cat "$tmp/err")'"
  fi
}
usage_error "unknown collective" 2 -c alltoallw
usage_error "unknown option" 2 --frobnicate
usage_error "bad size" 2 -b 12Q
usage_error "-e below -b" 2 -b 1M -e 1K
usage_error "factor 1" 2 -f 1
usage_error "-f and -i" 2 -f 2 -i 8
usage_error "unknown datatype" 2 -d float128
usage_error "band on float" 2 -d float -o band
usage_error "zero iterations" 2 -n 0
usage_error "stray argument" 2 -c bcast 7
usage_error "root out of range (after init)" 2 -c bcast -r 2
usage_error "unknown schedule (after init)" 2 -s hypercube2
usage_error "schedule cannot do it (after init)" 2 -c scan -s rabenseifner
usage_error "--link-limit on one rank" 1 --link-limit
usage_error "--calibrate on one rank" 1 --calibrate
usage_error "--calibrate and --link-limit" 2 --calibrate --link-limit
usage_error "--tuning-out without --calibrate" 2 --tuning-out x
usage_error "--overlap --work bogus" 2 --overlap --work bogus
usage_error "--overlap --progress-thread bogus" 2 --overlap \
  --progress-thread sometimes
usage_error "--work without --overlap" 2 --work cpu
usage_error "--overlap with two schedules" 2 --overlap -s ring,circulant
usage_error "--overlap of a barrier" 2 --overlap -c barrier
usage_error "--overlap and --calibrate" 2 --overlap --calibrate

echo "$checks checks, $fails failed"
[ "$fails" -eq 0 ]
