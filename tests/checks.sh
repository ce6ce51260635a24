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

# python3, found once: where python3 on PATH is a version manager's shim
# (pyenv's is a bash script that runs `pyenv exec`), every start costs half
# a second or more before Python itself starts, and the shell tests start
# python3 dozens of times (most of test_crsched.sh's time). The interpreter
# the shim picks, by its own path, for every call after this one.
PYTHON3=$(python3 -c 'import sys; print(sys.executable)' 2> /dev/null)
if [ -n "$PYTHON3" ] && [ -x "$PYTHON3" ]; then
  python3() { "$PYTHON3" "$@"; }
fi
