#!/usr/bin/env bash
# Counters, crlaunch --stats and CRNET_TRACE through real ranks.
#
#   tests/observe.sh CRLAUNCH STATS_CHECK HELLO TRACE_MERGE LAUNCHER_INIT
#
# stats_check (tests/progs) checks the counters of every rank against a known
# workload and across ranks; here crlaunch --stats must print the table of
# what the ranks reported at destroy, every rank's trace must be one JSON
# array whose events match the workload (calls per collective, rounds inside
# their calls, the bytes rank i sent to j equal to what j received from i),
# and bad settings must fail init clearly.
set -u
crlaunch=$1
stats_check=$2
hello=$3
trace_merge=$4
launcher_init=$5
tmp=$(mktemp -d /tmp/crnet-observe.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
ok() { echo "ok: $*"; }

# ---- 1. counters, the table and the traces of 4 ranks ----------------------
timeout -k 5 60 "$crlaunch" -n 4 --timeout 50 --stats \
  -x CRNET_TRACE="$tmp/trace.json" "$stats_check" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -ne 0 ] || [ "$(grep -c 'counters ok' "$tmp/out")" -ne 4 ]; then
  fail "stats_check exited $rc: $(cat "$tmp/out" "$tmp/err")"
else
  ok "every rank's counters match the workload and each other"
fi
# After the reset, each rank made 2 allreduce and nothing else.
if grep -q "^crlaunch: collectives of 4 ranks (CRNET_STATS; 4 reported)" "$tmp/err" &&
  grep -Eq "^  allreduce +2 " "$tmp/err" &&
  [ "$(grep -Ec '^  (allreduce|bcast|alltoall|barrier|allgather|reduce_scatter|scan|reduce) ' "$tmp/err")" -eq 1 ] &&
  [ "$(grep -Ec '^  [0-3] ' "$tmp/err")" -eq 4 ]; then
  ok "crlaunch --stats: $(grep -E '^  allreduce' "$tmp/err" | tr -s ' ')"
else
  fail "crlaunch --stats table: $(cat "$tmp/err")"
fi
if python3 - "$tmp" 4 <<'PY'; then
import json, sys
tmp, p = sys.argv[1], int(sys.argv[2])
want = {"allreduce": 7, "bcast": 3, "alltoall": 2, "barrier": 1, "allgather": 1}
sent = {}  # (i, j) -> bytes i sent to j, from i's rounds
recv = {}  # (i, j) -> bytes j received from i, from j's rounds
for r in range(p):
    ev = json.load(open(f"{tmp}/trace.{r}.json"))
    calls = [e for e in ev if e.get("cat") == "collective"]
    rounds = [e for e in ev if e.get("cat") == "round"]
    got = {}
    for e in calls:
        got[e["name"].split(" #")[0]] = got.get(e["name"].split(" #")[0], 0) + 1
        assert e["pid"] == r and e["ph"] == "X" and e["dur"] >= 0, e
        assert e["args"]["result"] == "ok", e
    assert got == want, f"rank {r}: calls {got}, want {want}"
    assert sum(e["args"]["rounds"] for e in calls) == len(rounds), \
        f"rank {r}: {len(rounds)} round events, calls say otherwise"
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in calls)
    for e in rounds:
        a = e["args"]
        assert any(s - 1 <= e["ts"] and e["ts"] + e["dur"] <= t + 1
                   for s, t in spans), f"rank {r}: round outside a call: {e}"
        if a["to"] >= 0:
            sent[(r, a["to"])] = sent.get((r, a["to"]), 0) + a["bytes_sent"]
        if a["from"] >= 0:
            recv[(a["from"], r)] = recv.get((a["from"], r), 0) + a["bytes_received"]
    names = [e for e in ev if e.get("ph") == "M" and e["name"] == "process_name"]
    assert names and names[0]["args"]["name"].startswith(f"rank {r} of {p}"), names
assert sent == recv, f"bytes sent {sent} != received {recv}"
print(f"traces: {p} files, {sum(sent.values())} bytes over {len(sent)} pairs agree")
PY
  ok "every rank's trace is one JSON array matching the workload"
else
  fail "traces: see above"
fi

# tools/trace_merge.py: one timeline of every rank; a file cut short (a rank
# that died) is read up to its last whole event.
head -c 3000 "$tmp/trace.3.json" >"$tmp/cut.json"
if python3 "$trace_merge" "$tmp/all.json" "$tmp"/trace.[012].json "$tmp/cut.json" >"$tmp/out" 2>&1 &&
  python3 - "$tmp" <<'PY'; then
import json, sys
ev = json.load(open(sys.argv[1] + "/all.json"))
pids = {e["pid"] for e in ev if "pid" in e}
assert pids == {0, 1, 2, 3}, pids
PY
  ok "trace_merge: $(cat "$tmp/out")"
else
  fail "trace_merge: $(cat "$tmp/out")"
fi

# A failing job: rank 2 exits right after init with _exit (no destroy, no
# stdio flush), the others fail in their allreduce. The survivors' traces
# hold the failed call with its error; rank 2's, written at open, names it.
# (A survivor that a loaded machine keeps from its call for the second
# crlaunch grants after a failure is stopped before it has a call to
# show: at least one of the three must have its own, and every call shown
# must be a survivor's failed one. Two of three were asked for once, and
# a machine busy with a compiler beside the sanitizer pass left one.)
mkdir "$tmp/fail"
timeout -k 5 60 "$crlaunch" -n 4 --timeout 50 -x CRNET_TRACE="$tmp/fail/t.json" \
  "$launcher_init" die 2 5 >/dev/null 2>&1
if python3 "$trace_merge" "$tmp/fail/all.json" "$tmp"/fail/t.*.json >"$tmp/out" 2>&1 &&
  python3 - "$tmp/fail/all.json" <<'PY'; then
import json, sys
ev = json.load(open(sys.argv[1]))
calls = [e for e in ev if e.get("cat") == "collective"]
failed = {e["pid"] for e in calls if e["args"]["result"] == "CRNET_EPEER"}
assert len(calls) == len(failed) and failed <= {0, 1, 3} and len(failed) >= 1, \
    f"calls {[(e['pid'], e['args']['result']) for e in calls]}"
named = {e["pid"] for e in ev if e.get("name") == "process_name"}
assert named == {0, 1, 2, 3}, named
PY
  ok "a failing job's traces: the survivors' failed calls, the lost rank named"
else
  fail "a failing job's traces: $(cat "$tmp/out")"
fi

# ---- 2. without crlaunch: one line per collective on stderr -----------------
CRNET_STATS=1 "$hello" >"$tmp/out" 2>"$tmp/err"
if grep -Eq '^crnet\[0\]: stats 0 allreduce [0-9]+ 0 ' "$tmp/err"; then
  ok "CRNET_STATS=1 alone: $(head -1 "$tmp/err")"
else
  fail "CRNET_STATS=1 without crlaunch: $(cat "$tmp/err")"
fi

# ---- 3. bad settings fail init, saying which -------------------------------
CRNET_TRACE=/nonexistent-dir/t.json "$hello" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -ne 0 ] && grep -q "CRNET_TRACE: cannot write /nonexistent-dir/t.0.json" "$tmp/err"; then
  ok "an unwritable CRNET_TRACE fails init: $(grep -o 'CRNET_TRACE: .*' "$tmp/err" | head -1)"
else
  fail "unwritable CRNET_TRACE: exit $rc: $(cat "$tmp/err")"
fi
CRNET_STATS=yes "$hello" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -ne 0 ] && grep -q "CRNET_STATS='yes' is not 0 or 1" "$tmp/err"; then
  ok "CRNET_STATS=yes fails init"
else
  fail "CRNET_STATS=yes: exit $rc: $(cat "$tmp/err")"
fi
if "$crlaunch" -n 2 --stats -x CRNET_STATS=1 true >"$tmp/out" 2>"$tmp/err"; then
  fail "--stats with -x CRNET_STATS was accepted"
elif grep -q "give --stats or -x CRNET_STATS, not both" "$tmp/err"; then
  ok "--stats and -x CRNET_STATS together are refused"
else
  fail "--stats with -x CRNET_STATS: $(cat "$tmp/err")"
fi

[ $failures -eq 0 ] || exit 1
