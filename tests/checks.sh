# The check helpers of the shell tests, sourced by them:
#
#   . "$(dirname "$0")/checks.sh"
#
# ok NAME, fail NAME, expect NAME GOT WANT: each prints "ok N - NAME" or
# "FAIL N - NAME: ..." and counts it in $checks and $fails, so the script
# can end with: echo "$checks checks, $fails failed"; [ "$fails" -eq 0 ].
fails=0
checks=0

ok() { checks=$((checks + 1)); echo "ok $checks - $1"; }
fail() {
  checks=$((checks + 1))
  fails=$((fails + 1))
  echo "FAIL $checks - $1"
}
# expect NAME GOT WANT
expect() {
  if [ "$2" = "$3" ]; then ok "$1"; else fail "$1: got '$2', want '$3'"; fi
}
