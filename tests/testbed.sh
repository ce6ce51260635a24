# A test bed of hosts on this machine, for the multi-host test and the
# spawn benchmark: source it, then
#
#   testbed_up N      N hosts (1..9): network namespaces crnet-mh<pid>-1..N,
#                     each with eth0 on a bridge here, 10.79.0.(i+1)/24 and
#                     fd79::(i+1)/64, a second IPv4 network 10.80.0.(i+1)/24
#                     (for CRNET_IFACE tests), and an sshd that takes a
#                     throwaway key; this namespace is 10.79.0.1, fd79::1
#                     and 10.80.0.1
#   "$tb/ssh" HOST    ssh with that key (for crlaunch --ssh)
#   testbed_down      removes everything
#
# testbed_up returns 77 with a one-line reason in $tb_why when namespaces,
# bridges or sshd are not available here, and 1 when something broke.
# The namespaces share the file system, as hosts sharing a home directory
# would, so the same paths work on every "host".

tb_id=$$
tb=""
tb_lock=""
tb_hosts=0
tb_nss=()
tb_why=""

testbed_down() {
  local ns i pid
  for ns in "${tb_nss[@]}"; do
    [ -f "$tb/$ns/sshd.pid" ] && kill "$(cat "$tb/$ns/sshd.pid")" 2>/dev/null
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
  done
  for i in $(seq "$tb_hosts"); do ip link del "crmv$tb_id$i" 2>/dev/null; done
  for ns in "${tb_nss[@]}"; do ip netns del "$ns" 2>/dev/null; done
  ip link del "crmb$tb_id" 2>/dev/null
  [ -n "$tb" ] && rm -rf "$tb"
  tb_nss=()
  tb_hosts=0
  if [ -n "$tb_lock" ]; then
    exec {tb_lock}>&-
    tb_lock=""
  fi
}

testbed_up() {
  local n=$1 i ns err up
  [ "$(id -u)" -eq 0 ] || { tb_why="needs root to make network namespaces"; return 77; }
  [ -x /usr/sbin/sshd ] || { tb_why="needs sshd (apt-get install openssh-server)"; return 77; }
  command -v ssh >/dev/null || { tb_why="needs ssh (apt-get install openssh-client)"; return 77; }
  # One test bed on a machine at a time: every bed takes the same
  # addresses, so a second one (another clone's test run) would take this
  # one's routes. The other's run is a minute or two; wait for it.
  exec {tb_lock}>/tmp/crnet-testbed.lock
  flock -w 240 "$tb_lock" ||
    { tb_why="another crnet test bed held this machine for 4 minutes"; return 1; }
  tb=$(mktemp -d /tmp/crnet-testbed.XXXXXX)
  # What a run killed before its clean-up left behind (its pid is in the
  # names, and gone) would clash with the fixed addresses below.
  local link owner
  for link in $(ip -o link show type bridge 2>/dev/null | awk -F': ' '$2 ~ /^crmb[0-9]+$/ { print $2 }'); do
    owner=${link#crmb}
    kill -0 "$owner" 2>/dev/null || ip link del "$link" 2>/dev/null
  done
  for ns in $(ip netns list 2>/dev/null | awk '$1 ~ /^crnet-mh[0-9]+-[0-9]+$/ { print $1 }'); do
    owner=${ns#crnet-mh}
    owner=${owner%-*}
    kill -0 "$owner" 2>/dev/null && continue
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
  done
  err=$(ip link add "crmb$tb_id" type bridge 2>&1) || { tb_why="cannot make a bridge: $err"; return 77; }
  ip addr add 10.79.0.1/24 dev "crmb$tb_id" || { tb_why="cannot add IPv4 addresses"; return 77; }
  ip addr add fd79::1/64 dev "crmb$tb_id" nodad 2>/dev/null ||
    { tb_why="cannot add IPv6 addresses (IPv6 off?)"; return 77; }
  ip addr add 10.80.0.1/24 dev "crmb$tb_id"
  ip link set "crmb$tb_id" up
  ssh-keygen -q -t ed25519 -N '' -f "$tb/id" || { tb_why="ssh-keygen failed"; return 1; }
  ssh-keygen -q -t ed25519 -N '' -f "$tb/hostkey" || { tb_why="ssh-keygen failed"; return 1; }
  mkdir -p /run/sshd && chmod 755 /run/sshd
  for i in $(seq "$n"); do
    ns=crnet-mh$tb_id-$i
    err=$(ip netns add "$ns" 2>&1) || { tb_why="cannot make network namespaces: $err"; return 77; }
    tb_nss+=("$ns")
    tb_hosts=$i
    mkdir "$tb/$ns"
    ip link add "crmv$tb_id$i" type veth peer name eth0 netns "$ns"
    ip link set "crmv$tb_id$i" master "crmb$tb_id" up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "10.79.0.$((i + 1))/24" dev eth0
    ip -n "$ns" addr add "fd79::$((i + 1))/64" dev eth0 nodad ||
      { tb_why="cannot add IPv6 addresses in a namespace"; return 77; }
    ip -n "$ns" addr add "10.80.0.$((i + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
    # SetEnv SHLVL=1: a login shell's rc files that skip work in nested
    # shells (many do) stay quick.
    cat >"$tb/$ns/sshd_config" <<SSHD
ListenAddress 10.79.0.$((i + 1))
ListenAddress [fd79::$((i + 1))]
HostKey $tb/hostkey
PidFile $tb/$ns/sshd.pid
AuthorizedKeysFile $tb/id.pub
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
MaxStartups 100:30:200
MaxSessions 100
LogLevel ERROR
SetEnv SHLVL=1
SSHD
    ip netns exec "$ns" unshare --uts sh -c \
      "hostname host$i && exec /usr/sbin/sshd -f $tb/$ns/sshd_config -E $tb/$ns/sshd.log" ||
      { tb_why="sshd in $ns did not start: $(cat "$tb/$ns/sshd.log")"; return 1; }
  done
  cat >"$tb/ssh" <<SSH
#!/bin/sh
exec ssh -i $tb/id -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR "\$@"
SSH
  chmod +x "$tb/ssh"
  # Until every sshd answers (bounded: 30 s, which a loaded machine may
  # need to start them).
  local until=$((SECONDS + 30))
  for i in $(seq "$n"); do
    up=0
    while [ $SECONDS -lt $until ]; do
      if "$tb/ssh" -o BatchMode=yes -o ConnectTimeout=2 "10.79.0.$((i + 1))" true 2>/dev/null; then
        up=1
        break
      fi
      sleep 0.1
    done
    [ $up -eq 1 ] || { tb_why="sshd on 10.79.0.$((i + 1)) never answered: $(cat "$tb"/*/sshd.log)"; return 1; }
  done
  return 0
}
