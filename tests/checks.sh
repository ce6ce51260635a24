# The checks of the shell tests, sourced by each: every check prints
# "ok N - what" or "FAIL N - what" with what it saw, and counts into
# $checks and $fails, from which the script makes its exit status.
#
#   . "$(dirname "$0")/checks.sh"

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
