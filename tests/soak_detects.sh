#!/usr/bin/env bash
# soak's failure path: a job where rank 1 corrupts one element of each
# result it checks (SOAK_CORRUPT=1) must fail, and fail for that reason:
# exit status 1 and soak's own report of the wrong element. (A plain
# should_fail would also pass on a usage error or a crash.)
#
#   tests/soak_detects.sh CRLAUNCH SOAK [SOAK ARGS...]
set -uo pipefail
. "$(dirname "$0")/checks.sh"
crlaunch=$1
soak=$2
shift 2
out=$("$crlaunch" -n 3 --timeout 60 -x SOAK_CORRUPT=1 "$soak" "$@" 2>&1)
status=$?
expect "exit status of the corrupted job" "$status" 1
if grep -q "soak: FAIL rank 1: .*result: first wrong element" <<<"$out"; then
  ok "soak names rank 1's wrong element"
else
  fail "soak names rank 1's wrong element: output was: $(tail -5 <<<"$out")"
fi
echo "$checks checks, $fails failed"
exit $((fails > 0))
