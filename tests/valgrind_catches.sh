#!/usr/bin/env bash
# The valgrind suite's control: vg_canary, a rank with a read past a heap
# block and a leak, run through crlaunch under the suite's valgrind flags,
# must fail for those faults: exit status 97 (the flags' --error-exitcode,
# passed on by crlaunch) and valgrind's own report of both. A plain
# should_fail would also pass on valgrind missing, a timeout or a crash.
#
#   tests/valgrind_catches.sh CRLAUNCH VALGRIND CANARY [VALGRIND FLAGS...]
set -uo pipefail
. "$(dirname "$0")/checks.sh"
crlaunch=$1
valgrind=$2
canary=$3
shift 3
out=$("$crlaunch" -n 2 --timeout 120 "$valgrind" "$@" "$canary" 2>&1)
status=$?
expect "exit status of the job (valgrind's --error-exitcode)" "$status" 97
for report in "Invalid read of size 1" "definitely lost"; do
  if grep -Eq "^==[0-9]+== .*$report" <<<"$out"; then
    ok "valgrind reports: $report"
  else
    fail "valgrind reports: $report; output was: $(tail -5 <<<"$out")"
  fi
done
echo "$checks checks, $fails failed"
exit $((fails > 0))
