# Sourced by the tests that run jobs through crlaunch and judge what it
# and the ranks print (survive_job.sh, grow_job.sh). Expects $crlaunch;
# sets $tmp (removed at exit) and $failures.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# run NAME EXPECTED_STATUS crlaunch-arguments...: the job's output in
# $tmp/out and $tmp/err.
run() {
  local name=$1 want=$2 rc=0
  shift 2
  timeout 120 "$crlaunch" --timeout 90 "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
  if [ "$rc" != "$want" ]; then
    fail "$name: exit status $rc, wanted $want"
    sed 's/^/  | /' "$tmp/out" "$tmp/err" | tail -n 15
    return 1
  fi
}

# Exits 1 naming the count if anything failed, else says `what` passed.
finish() {
  if [ "$failures" -ne 0 ]; then
    echo "$failures failure(s)"
    exit 1
  fi
  echo "$1: all passed"
}
