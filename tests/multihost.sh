#!/usr/bin/env bash
# Multi-host test: crlaunch over SSH across three "hosts" on this machine.
#
#   tests/multihost.sh CRLAUNCH COLL_CHECK IDLE_WAIT LAUNCHER_RANK ALLREDUCE_TIME
#
# Each host is a network namespace of its own (crnet-mhN), joined by a veth
# pair to a bridge in this namespace, with IPv4 and IPv6 addresses and an
# sshd (Debian's openssh-server) that accepts a throwaway key made here.
# The namespaces share the file system, as hosts sharing a home directory
# would, so the same paths work on every "host".
#
# Checks: the collective conformance program (every collective on auto)
# over IPv4, and over a mix of a local rank, IPv4 and IPv6 hosts; the environment, working directory and
# rank-tagged output of remote ranks; a host file; sessions start in
# parallel; the key on no command line and in no environment; a rank
# killed on one host fails the job everywhere, and crlaunch itself killed
# leaves nothing behind (ps in every namespace); an unreachable host fails
# clearly and soon.
#
# Needs root (namespaces) and sshd; without them it skips with one line
# (exit 77). Everything it makes is removed on every way out.
set -u

crlaunch=$(realpath "$1")
coll_check=$(realpath "$2")
idle_wait=$(realpath "$3")
launcher_rank=$(realpath "$4")
launcher_init=$(dirname "$launcher_rank")/launcher_init
allreduce_time=$(realpath "$5")
survive=$(realpath "$6")
stats_check=$(dirname "$launcher_rank")/stats_check
link_kinds=$(dirname "$launcher_rank")/link_kinds

# A named skip (tests/skip.h); under CRNET_TEST_STRICT=1 (set by
# tools/quickstart.sh as root) the test bed must come up, so it fails.
skip() {
  if [ "${CRNET_TEST_STRICT:-}" = 1 ]; then
    echo "FAIL: multihost cannot run: $* (CRNET_TEST_STRICT=1: it must run here)"
    exit 1
  fi
  echo "SKIP multihost: $*"
  exit 77
}


. "$(dirname "$0")/testbed.sh"
tmp=$(mktemp -d /tmp/crnet-multihost.XXXXXX)
failures=0
trap 'kill -9 $(jobs -p) 2>/dev/null; testbed_down; rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM

ok() { echo "ok: $*"; }
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

testbed_up 3
case $? in
0) ;;
77) skip "multi-host test $tb_why" ;;
*) echo "FAIL: multi-host test bed: $tb_why"; exit 1 ;;
esac
nss=("${tb_nss[@]}")
ns2=${nss[1]}
cp "$tb/ssh" "$tmp/ssh"
echo "test bed: three hosts 10.79.0.2-4 and fd79::2-4, sshd on each"

elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
below() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }

# Runs crlaunch (bounded) with output in $tmp/out, $tmp/err; sets $rc, $secs.
# CRNET_MULTIHOST_QUICK=1 (CI's sanitizer pass): the cases that mostly
# wait for timers (slow sessions, a silent crlaunch, an unreachable host, a
# partition) are left to the plain pass, which runs them all.
timing_cases() {
  if [ -n "${CRNET_MULTIHOST_QUICK:-}" ]; then
    echo "not run in this pass: $1 (CRNET_MULTIHOST_QUICK)"
    return 1
  fi
}

run() {
  local t0 t1
  t0=$(date +%s.%N)
  timeout -k 5 120 "$crlaunch" --ssh "$tmp/ssh" "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  t1=$(date +%s.%N)
  secs=$(elapsed "$t0" "$t1")
}

# The processes of the test programs still alive in the namespaces.
leftovers() {
  local ns pid comm out=""
  for ns in "${nss[@]}"; do
    for pid in $(ip netns pids "$ns"); do
      comm=$(cat "/proc/$pid/comm" 2>/dev/null) || continue
      case $comm in
      sshd) ;;
      *) out="$out $ns:$pid:$comm" ;;
      esac
    done
  done
  echo "$out"
}

# How many processes named $1 run on the hosts.
count_ranks() {
  for ns in "${nss[@]}"; do ip netns pids "$ns"; done |
    while read -r pid; do cat "/proc/$pid/comm" 2>/dev/null; done | grep -c "^$1\$"
}

# Waits up to $1 s for the namespaces to hold only sshd.
no_leftovers_within() {
  local left
  for _ in $(seq $(($1 * 10))); do
    left=$(leftovers)
    [ -z "$left" ] && return 0
    sleep 0.1
  done
  echo "left behind:$left"
  return 1
}

# ---- 1. conformance over IPv4, two ranks a host ---------------------------
# Every collective's sections on auto, which prices the host layout (shared
# memory inside a host, TCP between) and picks for it. The sweep of every
# schedule by name is collectives-p* on one host: a schedule's frames are
# the same whether the peer is across a bridge or the loopback, and the
# mixed layout's links are case 1b's (every schedule here was 15319 cases,
# three quarters of this test's time; auto is 2131).

run --hosts 10.79.0.2:2,10.79.0.3:2,10.79.0.4:2 --timeout 100 \
  -x COLL_CHECK_SCHEDULES=auto "$coll_check"
if [ $rc -eq 0 ] && grep -q "p=6: .* cases passed" "$tmp/out"; then
  ok "coll_check p=6 over three hosts (IPv4): $(grep 'cases passed' "$tmp/out") in ${secs}s"
else
  fail "coll_check over three hosts exited $rc: $(tail -n 5 "$tmp/out" "$tmp/err")"
fi

# ---- 1b. the mixed layout: shared memory inside each host, TCP between ---

run --hosts 10.79.0.2:2,10.79.0.3:2,10.79.0.4:2 --timeout 100 \
  -x CRNET_TRANSPORT=shm "$link_kinds"
if [ $rc -eq 0 ] && grep -q "every link as expected (rank 0: 1 on shared memory, 4 on TCP)" "$tmp/out"; then
  ok "link kinds over three hosts: $(grep 'every link' "$tmp/out")"
else
  fail "link_kinds over three hosts exited $rc: $(tail -n 5 "$tmp/out" "$tmp/err")"
fi

# ---- 1c. two-level schedules over uneven hosts (3 + 2 + 1 ranks) ----------
# Inside each host shared memory, across hosts TCP; the layout comes from
# what each rank registered, and the lanes of uneven hosts are exercised.

run --hosts 10.79.0.2:3,10.79.0.3:2,10.79.0.4:1 --timeout 100 \
  -x COLL_CHECK_SCHEDULES=two-level "$coll_check"
if [ $rc -eq 0 ] && grep -q "p=6: .* cases passed" "$tmp/out"; then
  ok "two-level over hosts of 3, 2 and 1 ranks: $(grep 'cases passed' "$tmp/out") in ${secs}s"
else
  fail "two-level over uneven hosts exited $rc: $(tail -n 5 "$tmp/out" "$tmp/err")"
fi

# ---- 1d. a mismatch and a timeout on the mixed layout -----------------------
# Rank 4 (host 3) calls the two-level allreduce, the others the circulant:
# every rank fails the call, naming the mismatch, within seconds. Then rank
# 0 sleeps in front of a barrier that the others wait in with
# CRNET_TIMEOUT=2 (seconds): they time out, over shared memory and TCP
# alike.

cat >"$tmp/diverge.sh" <<EOF
#!/bin/sh
if [ "\$CRNET_RANK" = 4 ]; then exec "$allreduce_time" two-level 65536 3
else exec "$allreduce_time" circulant 65536 3; fi
EOF
chmod +x "$tmp/diverge.sh"
run --hosts 10.79.0.2:2,10.79.0.3:2,10.79.0.4:2 --timeout 60 "$tmp/diverge.sh"
if [ $rc -ne 0 ] && below "$secs" 20 && grep -q "mismatched calls" "$tmp/err"; then
  ok "schedules that differ across hosts fail in ${secs}s: $(grep -m1 -o 'mismatched calls[^(]*' "$tmp/err")"
else
  fail "mismatch over three hosts: exit $rc in ${secs}s: $(tail -n 5 "$tmp/err")"
fi
run --hosts 10.79.0.2:2,10.79.0.3:2,10.79.0.4:2 --timeout 60 \
  -x CRNET_TIMEOUT=2 "$idle_wait" 30000
if [ $rc -ne 0 ] && below "$secs" 20 && grep -q "timed out in barrier" "$tmp/err"; then
  ok "CRNET_TIMEOUT over three hosts: the waiting ranks gave up in ${secs}s: $(grep -m1 -o 'rank [0-9]* timed out in barrier[^:]*' "$tmp/err")"
else
  fail "timeout over three hosts: exit $rc in ${secs}s: $(tail -n 5 "$tmp/err")"
fi

# ---- 2. a local rank, IPv4 and IPv6 hosts in one job (dual stack), encrypted -
# auto's sections, as in case 1; every schedule encrypted is
# collectives-encrypt-p5 on one host.

run --hosts localhost:1,10.79.0.2:1,[fd79::3]:2,fd79::4 --timeout 100 --encrypt \
  -x CRNET_DEBUG=1 -x COLL_CHECK_SCHEDULES=auto "$coll_check"
if [ $rc -eq 0 ] && grep -q "p=5: .* cases passed" "$tmp/out" &&
  grep -q "cipher AES-256-GCM\|cipher XChaCha20" "$tmp/err"; then
  ok "coll_check p=5 over this host, an IPv4 and two IPv6 hosts, --encrypt, in ${secs}s"
else
  fail "mixed IPv4/IPv6 job exited $rc: $(tail -n 5 "$tmp/out" "$tmp/err")"
fi

# ---- 3. host file, environment, directory, tagged output --------------------

printf '# test hosts\n10.79.0.2 slots=2\n\n10.79.0.3   # one slot\n' >"$tmp/hostfile"
mkdir -p "$tmp/work dir"
pushd "$tmp/work dir" >/dev/null || exit 1
run --hostfile "$tmp/hostfile" --tag-output -x FOO='a b' \
  sh -c 'echo "cwd=$(pwd) foo=$FOO host=$(hostname) size=$CRNET_SIZE"'
popd >/dev/null || exit 1
expect="[0] cwd=$tmp/work dir foo=a b host=host1 size=3
[1] cwd=$tmp/work dir foo=a b host=host1 size=3
[2] cwd=$tmp/work dir foo=a b host=host2 size=3"
if [ $rc -eq 0 ] && [ "$(sort "$tmp/out")" = "$expect" ]; then
  ok "host file: 3 ranks, tags, -x FOO, working directory and hosts as expected"
else
  fail "host file job exited $rc; got:
$(cat "$tmp/out" "$tmp/err")
expected:
$expect"
fi

# ---- 3b. a host name only ssh's configuration knows ---------------------------

printf 'Host crnet-alias-2\n  HostName 10.79.0.3\n' >"$tmp/ssh_config"
cat >"$tmp/aliasssh" <<EOF
#!/bin/sh
exec $tmp/ssh -F $tmp/ssh_config "\$@"
EOF
chmod +x "$tmp/aliasssh"
# launcher_init (init, an allreduce, destroy): a job with no timing of its
# own to check, since the case is about reaching the host (idle_wait's
# measured wait, 10 ms, was too short to measure beside other jobs).
timeout -k 5 60 "$crlaunch" --ssh "$tmp/aliasssh" --hosts crnet-alias-2:2 --tag-output \
  "$launcher_init" ok >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 0 ] && [ "$(grep -c ' ok$' "$tmp/out")" -eq 2 ]; then
  ok "host alias of the ssh configuration (looked up with ssh -G): job of 2 passed"
else
  fail "host alias crnet-alias-2: exit $rc: $(cat "$tmp/out" "$tmp/err")"
fi

# ---- 4. sessions start in parallel ------------------------------------------
if timing_cases "slow sessions"; then
# Every session takes 2 s more to open; one after the other, three would
# take 6 s.
cat >"$tmp/slowssh" <<EOF
#!/bin/sh
sleep 2
exec $tmp/ssh "\$@"
EOF
chmod +x "$tmp/slowssh"
t0=$(date +%s.%N)
timeout -k 5 60 "$crlaunch" --ssh "$tmp/slowssh" --hosts 10.79.0.2,10.79.0.3,10.79.0.4 true \
  >"$tmp/out" 2>"$tmp/err"
rc=$?
secs=$(elapsed "$t0" "$(date +%s.%N)")
if [ $rc -eq 0 ] && below "$secs" 5; then
  ok "three sessions that each take 2 s to open started in ${secs}s"
else
  fail "three slow sessions: exit $rc in ${secs}s (serial would be >= 6 s): $(cat "$tmp/err")"
fi
fi

# ---- 5. a rank killed on one host fails the job everywhere -----------------

keydirs_before=$(ls -d "${TMPDIR:-/tmp}"/crlaunch-* /tmp/crlaunch-* 2>/dev/null | sort -u)
timeout -k 5 60 "$crlaunch" --ssh "$tmp/ssh" --hosts 10.79.0.2:2,10.79.0.3:2,10.79.0.4:2 \
  -x CRNET_IFACE=10.80.0.0/24 -x CRNET_PORT_RANGE=47000-47099 \
  "$idle_wait" 60000 >"$tmp/out" 2>"$tmp/err" &
launcher=$!
victim=""
# The waits below poll for what they wait for, every 0.1 s for up to 30 s
# (a loaded machine may take that long to start six ranks over SSH).
for _ in $(seq 300); do
  for pid in $(ip netns pids "$ns2"); do
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = idle_wait ] && victim=$pid && break
  done
  [ -n "$victim" ] && break
  sleep 0.1
done
# Every rank started (then each is in init or its barrier).
n=0
for _ in $(seq 300); do
  n=$(count_ranks idle_wait)
  [ "$n" -eq 6 ] && break
  sleep 0.1
done
[ "$n" -eq 6 ] || fail "only $n of 6 ranks started"
# Every rank has passed the rendezvous, so crlaunch and each agent have
# removed their key files (all in /tmp here: the hosts share it).
for _ in $(seq 300); do
  keydirs_now=$(ls -d "${TMPDIR:-/tmp}"/crlaunch-* /tmp/crlaunch-* 2>/dev/null | sort -u)
  [ "$keydirs_now" = "$keydirs_before" ] && break
  sleep 0.1
done
if [ "$keydirs_now" = "$keydirs_before" ]; then
  ok "once every rank is past the rendezvous no key file is left on any host"
else
  fail "key directories left during the job: $(comm -13 <(echo "$keydirs_before") <(echo "$keydirs_now") | tr '\n' ' ')"
fi
# CRNET_IFACE and CRNET_PORT_RANGE hold on every host: the hosts are named
# by their 10.79.0.x addresses, which SSH uses, yet each rank's TCP sockets
# are on its 10.80.0.x address, and every mesh connection has its listening
# end (the accepting rank's port) in the range. Sets nsock, bad_sockets.
check_sockets() {
  local ns lines state local peer lport pport
  bad_sockets=""
  nsock=0
  for ns in "${nss[@]}"; do
    lines=$(ip netns exec "$ns" ss -tanpH state established 2>/dev/null | grep '"idle_wait"')
    while read -r _ _ local peer _; do
      [ -z "$local" ] && continue
      nsock=$((nsock + 1))
      lport=${local##*:}
      pport=${peer##*:}
      case ${local%:*} in 10.80.0.*) ;; *) bad_sockets="$bad_sockets $ns:$local" ;; esac
      if { [ "$lport" -lt 47000 ] || [ "$lport" -gt 47099 ]; } &&
        { [ "$pport" -lt 47000 ] || [ "$pport" -gt 47099 ]; }; then
        bad_sockets="$bad_sockets $ns:$local->$peer(ports)"
      fi
    done <<<"$lines"
  done
}
# The full mesh of 6 ranks: 15 connections, 30 ends.
for _ in $(seq 300); do
  check_sockets
  [ -n "$bad_sockets" ] || [ "$nsock" -ge 30 ] && break
  sleep 0.1
done
if [ -z "$bad_sockets" ] && [ "$nsock" -eq 30 ]; then
  ok "CRNET_IFACE=10.80.0.0/24, CRNET_PORT_RANGE=47000-47099: all $nsock mesh socket ends (ss) on 10.80.0.x, each connection's listening end in the range"
else
  fail "sockets outside CRNET_IFACE/CRNET_PORT_RANGE ($nsock seen, 30 expected):$bad_sockets"
fi
# The key is on no command line and in no environment, on any host.
keyleak=""
for pid in $(pgrep -f 'idle_wait|crlaunch'); do
  if tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -Eq '(^|[^0-9a-fA-F])[0-9a-fA-F]{64}([^0-9a-fA-F]|$)'; then
    keyleak="$keyleak cmdline:$pid"
  fi
  if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null |
    grep -Eq '^CRNET_JOB_KEY=|(^|[^0-9a-fA-F])[0-9a-fA-F]{64}([^0-9a-fA-F]|$)'; then
    keyleak="$keyleak environ:$pid"
  fi
done
[ -z "$keyleak" ] && ok "no key on any command line or in any environment" ||
  fail "the key is visible:$keyleak"
if [ -z "$victim" ]; then
  fail "no rank appeared on the second host"
  kill "$launcher"
fi
t0=$(date +%s.%N)
kill -9 "$victim" 2>/dev/null
wait "$launcher"
rc=$?
secs=$(elapsed "$t0" "$(date +%s.%N)")
# crlaunch names the rank that died first, on its host, with its signal.
if [ $rc -eq 137 ] && below "$secs" 15 &&
  grep -q "crlaunch: rank [23] (pid $victim on host 10.79.0.3) was killed by signal 9" "$tmp/err"; then
  ok "killing a rank on host 2 ended the job in ${secs}s with status $rc: $(grep -m1 'was killed' "$tmp/err")"
else
  fail "after killing a rank on host 2: exit $rc after ${secs}s: $(cat "$tmp/err")"
fi
if no_leftovers_within 5; then
  ok "no process left on any host after the failure"
else
  fail "processes left after the failure"
fi
grep -q "lost rank [23] on host2" "$tmp/err" &&
  ok "the other ranks said whom they lost: $(grep -m1 -o 'lost rank [0-9]* on [^ ]*' "$tmp/err")" ||
  fail "no rank named the lost peer: $(cat "$tmp/err")"

# ---- 6. crlaunch killed: the agents stop their ranks -------------------------

# Not under timeout(1): the SIGKILL must hit crlaunch itself. The idle
# ranks end by themselves after 60 s at the latest.
"$crlaunch" --ssh "$tmp/ssh" --hosts 10.79.0.2:2,10.79.0.3:2,10.79.0.4:2 \
  --timeout 60 "$idle_wait" 60000 >"$tmp/out" 2>"$tmp/err" &
launcher=$!
n=0
for _ in $(seq 300); do
  n=$(count_ranks idle_wait)
  [ "$n" -eq 6 ] && break
  sleep 0.1
done
[ "$n" -eq 6 ] || fail "only $n of 6 ranks started"
kill -9 "$launcher"
{ wait "$launcher"; } 2>/dev/null
if no_leftovers_within 8; then
  ok "crlaunch killed with SIGKILL: no rank or agent left on any host"
else
  fail "processes outlived a killed crlaunch"
fi

# ---- 7. a remote rank's exit status is crlaunch's ---------------------------

run --hosts 10.79.0.2:2,10.79.0.3:2 "$launcher_rank" exit 3 7
if [ $rc -eq 7 ] && grep -q "crlaunch: rank 3 (pid [0-9]* on host 10.79.0.3) exited with status 7" "$tmp/err"; then
  ok "rank 3 on host 2 exiting 7: crlaunch exits 7 and names it"
else
  fail "rank 3 exiting 7: crlaunch exited $rc: $(cat "$tmp/err")"
fi
no_leftovers_within 5 && ok "the sleeping ranks were stopped on both hosts" ||
  fail "sleeping ranks outlived the job"

# ---- 7b. crnet_comm_abort on a remote rank decides crlaunch's status ----------
# Rank 3 (host 2) aborts with code 9, then waits 300 ms and exits 0; the
# others fail because of the abort and exit 1 before it. Its agent passes
# the abort on, so crlaunch exits 9 and names rank 3 as the one that aborted.

run --hosts 10.79.0.2:2,10.79.0.3:2,10.79.0.4:2 "$launcher_init" abort 3 9
if [ $rc -eq 9 ] &&
  grep -q "crlaunch: rank 3 (pid [0-9]* on host 10.79.0.3) aborted the job with code 9" "$tmp/err" &&
  [ "$(grep -c "allreduce: CRNET_EABORTED (code 9)" "$tmp/err")" -eq 5 ]; then
  ok "rank 3 on host 2 aborting with code 9: crlaunch exits 9 in ${secs}s and names it"
else
  fail "rank 3 aborting with code 9: crlaunch exited $rc: $(cat "$tmp/err")"
fi
no_leftovers_within 5 || fail "ranks outlived the aborted job"

# ---- 7b'. the same with lazy links: crlaunch's word reaches every rank -------
# With lazy links most ranks have no link to rank 3 when it aborts; they hear
# it from crlaunch, through their agents ('T' commands), and fail with the
# abort, not with the loss of a peer. A rank killed on host 3 is then named
# with how it ended by the ranks that lose it.

run --hosts 10.79.0.2:2,10.79.0.3:2,10.79.0.4:2 -x CRNET_LAZY_LINKS=1 \
  "$launcher_init" abort 3 9
if [ $rc -eq 9 ] &&
  [ "$(grep -c "allreduce: CRNET_EABORTED (code 9)" "$tmp/err")" -eq 5 ]; then
  ok "lazy links: rank 3 on host 2 aborting with code 9 reaches all 5 others as CRNET_EABORTED"
else
  fail "lazy links: rank 3 aborting with code 9: crlaunch exited $rc: $(cat "$tmp/err")"
fi
no_leftovers_within 5 || fail "ranks outlived the aborted job"

run --hosts 10.79.0.2:2,10.79.0.3:2,10.79.0.4:2 "$launcher_init" kill 5
if [ $rc -eq $((128 + 9)) ] && grep -q "lost rank 5 " "$tmp/err" &&
  ! grep "lost rank 5 " "$tmp/err" | grep -vq "(rank 5 was killed by signal 9 (Killed))"; then
  ok "rank 5 on host 3 killed: the ranks that lost it say it was killed by signal 9"
else
  fail "rank 5 killed: crlaunch exited $rc: $(cat "$tmp/err")"
fi
no_leftovers_within 5 || fail "ranks outlived the failed job"

# ---- 7c. crlaunch --stats: the agents pass their ranks' counters on ---------

run --hosts 10.79.0.2:2,10.79.0.3:2,10.79.0.4:2 --stats "$stats_check"
if [ $rc -eq 0 ] && [ "$(grep -c 'counters ok' "$tmp/out")" -eq 6 ] &&
  grep -q "^crlaunch: collectives of 6 ranks (CRNET_STATS; 6 reported)" "$tmp/err" &&
  grep -Eq "^  allreduce +2 " "$tmp/err"; then
  ok "--stats over three hosts: every rank's counters reached crlaunch ($(grep -E '^  allreduce' "$tmp/err" | tr -s ' '))"
else
  fail "--stats over three hosts: exit $rc: $(cat "$tmp/out" "$tmp/err")"
fi

# ---- 8. SIGTERM to crlaunch reaches the remote ranks -------------------------

"$crlaunch" --ssh "$tmp/ssh" --hosts 10.79.0.2:2,10.79.0.4:1 --timeout 60 \
  "$launcher_rank" sleep 60 >"$tmp/out" 2>"$tmp/err" &
launcher=$!
n=0
for _ in $(seq 300); do
  n=$(count_ranks launcher_rank)
  [ "$n" -eq 3 ] && break
  sleep 0.1
done
kill -TERM "$launcher"
# A watchdog that holds none of our output open (meson waits for it).
(sleep 30 && kill -9 "$launcher") >/dev/null 2>&1 &
watchdog=$!
wait "$launcher"
rc=$?
pkill -P "$watchdog" 2>/dev/null
kill "$watchdog" 2>/dev/null
if [ "$n" -eq 3 ] && [ $rc -eq 143 ] && no_leftovers_within 5; then
  ok "SIGTERM to crlaunch: exit 143, the three remote ranks gone"
else
  fail "SIGTERM to crlaunch: $n ranks seen, exit $rc: $(cat "$tmp/err")"
fi

# ---- 8b. crlaunch frozen (as if cut off): the agents stop their ranks -------
if timing_cases "a silent crlaunch"; then
# SIGSTOP keeps the sessions open but ends the heartbeats, as a network
# partition would; each agent must stop its ranks after CRNET_AGENT_SILENCE.

"$crlaunch" --ssh "$tmp/ssh" --hosts 10.79.0.2:1,10.79.0.3:1 --timeout 60 \
  -x CRNET_AGENT_SILENCE=6 "$launcher_rank" sleep 60 >"$tmp/out" 2>"$tmp/err" &
launcher=$!
n=0
for _ in $(seq 300); do
  n=$(count_ranks launcher_rank)
  [ "$n" -eq 2 ] && break
  sleep 0.1
done
kill -STOP "$launcher"
t0=$(date +%s.%N)
if [ "$n" -eq 2 ] && no_leftovers_within 20; then
  secs=$(elapsed "$t0" "$(date +%s.%N)")
  ok "crlaunch silent (stopped): the agents stopped their ranks after ${secs}s (CRNET_AGENT_SILENCE=6)"
else
  fail "crlaunch silent: $n ranks seen, still running after 20 s: $(leftovers)"
fi
kill -CONT "$launcher"
(sleep 30 && kill -9 "$launcher") >/dev/null 2>&1 &
watchdog=$!
wait "$launcher"
pkill -P "$watchdog" 2>/dev/null
kill "$watchdog" 2>/dev/null
grep -q "no word from crlaunch for 6 s" "$tmp/err" ||
  fail "no agent said why it stopped: $(cat "$tmp/err")"
fi

# ---- 8c. --keep-going: a rank lost on another host, the others go on -------
# Rank 3 (host 10.79.0.3) kills itself at step 4 of examples/survive.c; the
# agent there reports it, crlaunch names it with its host and stops nobody,
# the five survivors on three hosts shrink and finish, crlaunch exits 0.

timeout -k 5 90 "$crlaunch" --ssh "$tmp/ssh" --keep-going --timeout 60 \
  --hosts 10.79.0.2:2,10.79.0.3:2,10.79.0.4:2 "$survive" 10 3 4 \
  >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 0 ] &&
  grep -Eq "^crlaunch: rank 3 \(pid [0-9]+ on host 10.79.0.3\) was killed by signal 9 \(Killed\); the others go on" "$tmp/err" &&
  grep -q "10 steps on 5 of 6 ranks, 1 step redone, ranks lost: 3; every sum right" "$tmp/out" &&
  no_leftovers_within 5; then
  ok "--keep-going over three hosts: $(grep '^crlaunch: rank 3' "$tmp/err"); $(cat "$tmp/out")"
else
  fail "--keep-going over three hosts: exit $rc: $(cat "$tmp/out" "$tmp/err")"
fi

# ---- 8d. --restart: a rank lost on another host starts again there ----------
# As 8c with --restart 1: crlaunch tells the agent of 10.79.0.3 to start rank
# 3 again, the new process joins through crlaunch's rendezvous, links to
# the five survivors on three hosts, and their grow takes it back in; the
# job finishes on 6 of 6 and crlaunch exits 0.

timeout -k 5 90 "$crlaunch" --ssh "$tmp/ssh" --restart 1 --timeout 60 \
  --hosts 10.79.0.2:2,10.79.0.3:2,10.79.0.4:2 "$survive" 10 3 4 grow \
  >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 0 ] &&
  grep -Eq "^crlaunch: rank 3 \(pid [0-9]+ on host 10.79.0.3\) was killed by signal 9 \(Killed\); the others go on" "$tmp/err" &&
  grep -Eq "^crlaunch@[^:]*: rank 3 started again \(pid [0-9]+; restart 1 of 1\)$" "$tmp/err" &&
  grep -q "10 steps on 6 of 6 ranks, 1 step redone, ranks lost: 3; every sum right" "$tmp/out" &&
  no_leftovers_within 5; then
  ok "--restart over three hosts: $(grep 'started again' "$tmp/err"); $(cat "$tmp/out")"
else
  fail "--restart over three hosts: exit $rc: $(cat "$tmp/out" "$tmp/err")"
fi

# ---- 8e. --restart: a host's ranks all gone, started on the next host -------
# While examples/survive.c runs (no rank kills itself), every process of
# host 10.79.0.3 but sshd (its agent, ranks 2 and 3) is killed, as if the
# host had died. crlaunch starts ranks 2 and 3 again on the next host of
# the list, 10.79.0.4, each in a session of its own; the survivors grow
# back to 6 and finish; crlaunch exits 0.

"$crlaunch" --ssh "$tmp/ssh" --restart 2 --timeout 60 \
  --hosts 10.79.0.2:2,10.79.0.3:2,10.79.0.4:2 "$survive" 3000 -1 0 grow \
  >"$tmp/out" 2>"$tmp/err" &
job=$!
host3=${nss[1]}
for _ in $(seq 200); do
  n=$(for pid in $(ip netns pids "$host3"); do cat "/proc/$pid/comm" 2>/dev/null; done | grep -c '^survive$')
  [ "$n" = 2 ] && break
  sleep 0.05
done
for pid in $(ip netns pids "$host3"); do
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = sshd ] || kill -9 "$pid" 2>/dev/null
done
(sleep 90 && kill -9 "$job") >/dev/null 2>&1 &
watchdog=$!
wait "$job"
rc=$?
pkill -P "$watchdog" 2>/dev/null
kill "$watchdog" 2>/dev/null
if [ "$n" = 2 ] && [ $rc -eq 0 ] &&
  grep -Eq "^crlaunch: rank 2 started again on host 10.79.0.4 \(restart [12] of 2\)$" "$tmp/err" &&
  grep -Eq "^crlaunch: rank 3 started again on host 10.79.0.4 \(restart [12] of 2\)$" "$tmp/err" &&
  grep -Eq "^3000 steps on 6 of 6 ranks, [0-9]+ steps? redone, ranks lost: 2 3; every sum right$" "$tmp/out" &&
  no_leftovers_within 5; then
  ok "--restart, a host gone: $(grep 'started again' "$tmp/err" | tr '\n' ' '); $(cat "$tmp/out")"
else
  fail "--restart, a host gone: $n ranks seen there, exit $rc: $(cat "$tmp/out" "$tmp/err")"
fi

# ---- 9. an unreachable host fails clearly -----------------------------------
if timing_cases "an unreachable host"; then

run --hosts 10.79.0.2,10.79.0.99 true
if [ $rc -ne 0 ] && below "$secs" 30 &&
  grep -q "10.79.0.99" "$tmp/err"; then
  ok "unreachable host: exit $rc in ${secs}s: $(grep crlaunch: "$tmp/err" | head -1)"
else
  fail "unreachable host: exit $rc in ${secs}s: $(cat "$tmp/err")"
fi
if no_leftovers_within 5; then
  ok "nothing left behind on the reachable host"
else
  fail "processes left after the unreachable host"
fi
fi

# ---- 10. a network partition: no FIN, no reset ------------------------------
if timing_cases "a partition"; then
# Host 3 (10.79.0.4, ranks 4 and 5) is cut off the bridge while every rank
# waits idle in a barrier: its packets go nowhere and nothing tells anyone.
# TCP keepalive and TCP_USER_TIMEOUT (CRNET_LIVENESS_TIMEOUT=3) make the
# ranks on the other hosts count ranks 4 and 5 as lost within about 3 s;
# they fail, and crlaunch ends the job.

timeout -k 5 90 "$crlaunch" --ssh "$tmp/ssh" --hosts 10.79.0.2:2,10.79.0.3:2,10.79.0.4:2 \
  -x CRNET_LIVENESS_TIMEOUT=3 -x IDLE_WAIT_READY=1 "$idle_wait" 60000 \
  >"$tmp/out" 2>"$tmp/err" &
launcher=$!
# Every rank past init and into the barrier: each says so once the first
# barrier is over (a loaded machine may take seconds to get there).
n=0
for _ in $(seq 600); do
  n=$(grep -c "idle_wait: rank [0-5] ready" "$tmp/out" 2>/dev/null || true)
  [ "$n" -eq 6 ] && break
  sleep 0.1
done
ip link set "crmv${tb_id}3" nomaster
t0=$(date +%s.%N)
# The first rank to report the loss; crlaunch's own end follows its stop
# sequence (SIGTERM, SIGKILL 2 s later, and the unreachable host's ssh is
# abandoned 5 s after that).
detect=""
for _ in $(seq 300); do
  grep -q "lost rank" "$tmp/err" && detect=$(elapsed "$t0" "$(date +%s.%N)") && break
  sleep 0.05
done
wait "$launcher"
rc=$?
secs=$(elapsed "$t0" "$(date +%s.%N)")
ip link set "crmv${tb_id}3" master "crmb$tb_id"
if [ "$n" -eq 6 ] && [ -n "$detect" ] && below "$detect" 7 && [ $rc -ne 0 ] &&
  [ $rc -ne 124 ] && below "$secs" 20 &&
  grep -q "lost rank [45] on .*10.79.0.4" "$tmp/err"; then
  ok "partition of host 3 (CRNET_LIVENESS_TIMEOUT=3): a rank reported the loss after ${detect}s, crlaunch exited $rc after ${secs}s: $(grep -m1 'lost rank' "$tmp/err")"
else
  fail "partition of host 3: $n ranks, loss reported after ${detect:-never}s, exit $rc after ${secs}s: $(cat "$tmp/err")"
fi
if no_leftovers_within 30; then
  ok "nothing left on any host after the partition"
else
  fail "processes left after the partition"
fi
fi

if [ $failures -gt 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all multi-host checks passed"
