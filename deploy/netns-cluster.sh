#!/usr/bin/env bash
# A warmlake cluster on this machine with every node in its own network
# namespace, so that faults can be injected into the network between them:
#
#   deploy/netns-cluster.sh [--dir DIR] up N [--drives D] [--ec K+M] [--capacity SIZE]
#                                         [--subnet 10.213.X] [-- WARMLAKED ARGS]
#   deploy/netns-cluster.sh [--dir DIR] hosts N [--subnet 10.213.X]
#   deploy/netns-cluster.sh [--dir DIR] down | status
#   deploy/netns-cluster.sh [--dir DIR] kill NODE|etcd | start NODE|etcd
#   deploy/netns-cluster.sh [--dir DIR] partition NODE | heal NODE
#   deploy/netns-cluster.sh [--dir DIR] slow NODE MS | throttle NODE RATE
#
# NODE is n1..nN (or 1..N). DIR (default ./netns-cluster) holds the state:
# runid, pids, map.json, secret, credentials, env, logs, the nodes' data and
# etcd's. WL_BUILD names the build (server/warmlaked, cluster/wl-admin;
# default ./build).
#
# Layout (RID: a random run id, so that nothing collides with anything else):
#   namespace wlRID-br     a bridge br0, nothing else (no address)
#   namespace wlRID-etcd   etcd on 10.213.X.2:2379 (eth0 on the bridge)
#   namespace wlRID-nI     node nI: S3 on 10.213.X.(10+I):9000, node protocol :9100
#   root: one veth wlRID-h, 10.213.X.1/24, the other end on the bridge, so
#         that aws/boto3 and wl-admin on this machine reach every node.
# The bridge has a namespace of its own so that the root namespace gains
# one interface only (and its connected route, for a /24 no route of the
# machine covers), no bridge (bridged frames never meet the machine's
# bridge netfilter hooks) and no sysctl; deleting the namespaces deletes
# every veth with them, the root end included. X: the first 10.213.X.0/24
# no address or route of the machine uses (or --subnet 10.213.X).
#
# Faults: kill (SIGKILL by the pid file), start (a node or etcd that is not running, again,
# on its data, with the arguments up gave it, waiting until it is ready), partition (the node's port on the
# bridge set down: its packets go nowhere, as with a cable pulled; its TCP
# connections are not reset), heal (port up, qdiscs removed), slow (netem
# delay on the node's interface; fails, exit 3, where the kernel has no
# netem), throttle (tbf rate limit both ways: a slow link, not a delay).
# Every wait is bounded. down stops what up started (by pid), deletes the
# namespaces and the veth; it is safe to run twice and after a failed up.
#
# hosts: N empty "hosts" for deploy/ssh-deploy.sh to deploy into, on the
# same network (the bridge, 10.213.X.(10+I) in namespace wlRID-nI), no etcd
# and no warmlaked: each runs its own sshd on its address, port 22 (its own
# config and host key in DIR/nI; root logs in with the key DIR/ssh/id_ed25519
# only; DIR/ssh/known_hosts holds every host's key), in a mount namespace of
# its own where three places are the host's alone: /run (a tmpfs), root's
# home (DIR/nI/home) and DIR/host (DIR/nI/fs). What the hosts share is the
# rest of this machine's file system, its users and its process table: point
# ssh-deploy.sh's paths (--etc-dir, --data-root, --bin-dir, --log-dir,
# --etcd-data-dir) into DIR/host, and each host has them privately, as real
# hosts would. DIR must not be under root's home, and every directory above
# DIR must be searchable by the users the daemons run as (etcd). down stops
# every process in the namespaces (what was deployed first, then the sshds).
# partition, heal, slow and throttle work on hosts as on nodes.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=./netns-cluster
usage() { sed -n '2,11p' "$0" >&2; exit 2; }
die() { echo "netns-cluster: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
  case $1 in
    --dir) DIR=${2:?}; shift 2 ;;
    --dir=*) DIR=${1#--dir=}; shift ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || usage
CMD=$1; shift
WL_BUILD=${WL_BUILD:-$ROOT/build}
WARMLAKED=$WL_BUILD/server/warmlaked
ADMIN=$WL_BUILD/cluster/wl-admin
SSHD=/usr/sbin/sshd # (an absolute path: sshd re-executes itself)

[ "$(id -u)" = 0 ] || die "needs root (network namespaces)"
command -v ip >/dev/null || die "needs iproute2 (ip)"

# ---- state ----

load() { # the run's id and subnet, or fail
  [ -f "$DIR/runid" ] || die "no cluster in $DIR (no runid): run up first"
  RID=$(cat "$DIR/runid")
  NET=$(cat "$DIR/subnet")
  N=$(cat "$DIR/nodes" 2>/dev/null || echo 0)
  BR=wl$RID-br
}
ns_of() { echo "wl$RID-$1"; }
node_id() { # n2 or 2 -> n2, checked against the cluster
  local id=$1
  [[ $id =~ ^[0-9]+$ ]] && id=n$id
  if ! [[ $id =~ ^n([0-9]+)$ ]] || [ "${BASH_REMATCH[1]}" -lt 1 ] || [ "${BASH_REMATCH[1]}" -gt "$N" ]; then
    die "no node $1 (n1..n$N)"
  fi
  echo "$id"
}
addr_of() { # etcd -> .2, nI -> .(10+I)
  case $1 in
    etcd) echo "$NET.2" ;;
    n*) echo "$NET.$((10 + ${1#n}))" ;;
  esac
}

# A pid from DIR/NAME.pid if it is still the process we started: alive,
# running EXE, in namespace NS. Empty otherwise (never a reused pid).
our_pid() { # NAME EXE NS
  local f=$DIR/$1.pid pid exe
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  [[ $pid =~ ^[0-9]+$ ]] || return 0
  exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 0
  [ "${exe% (deleted)}" = "$(readlink -f "$2")" ] || return 0
  [ "$(ip netns identify "$pid" 2>/dev/null)" = "$3" ] || return 0
  echo "$pid"
}
wait_gone() { # PID SECONDS: 0 once it is gone
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    [ -d "/proc/$1" ] || return 0
    # a zombie child of ours is gone too
    [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" = Z ] && return 0
    sleep 0.1
  done
  return 1
}
stop_pids() { # "PID:WHAT"...: TERM to all, up to 10 s for each, then KILL
  local pw
  for pw in "$@"; do kill -TERM "${pw%%:*}" 2>/dev/null || true; done
  for pw in "$@"; do
    wait_gone "${pw%%:*}" 10 && continue
    echo "netns-cluster: ${pw#*:} (pid ${pw%%:*}) still up after 10 s: SIGKILL" >&2
    kill -KILL "${pw%%:*}" 2>/dev/null || true
    wait_gone "${pw%%:*}" 5 || echo "netns-cluster: ${pw#*:} (pid ${pw%%:*}) did not die" >&2
  done
}

# ---- down ----

down() {
  [ -f "$DIR/runid" ] || { echo "netns-cluster: nothing up in $DIR"; return 0; }
  RID=$(cat "$DIR/runid")
  N=$(cat "$DIR/nodes" 2>/dev/null || echo 0)
  local i name pid ns stop=()
  for ((i = 1; i <= N; i++)); do
    pid=$(our_pid "n$i" "$WARMLAKED" "wl$RID-n$i")
    [ -z "$pid" ] || stop+=("$pid:node n$i")
  done
  [ ${#stop[@]} -eq 0 ] || stop_pids "${stop[@]}" # the nodes first, all at once; then etcd
  rm -f "$DIR"/n*.pid
  pid=$(our_pid etcd "$(command -v etcd || echo /usr/bin/etcd)" "wl$RID-etcd")
  [ -z "$pid" ] || stop_pids "$pid:etcd"
  rm -f "$DIR/etcd.pid"
  # Whatever else runs in our namespaces was started in them: a pid file lost
  # to a failed up; under hosts, the sshds, their sessions and what was
  # deployed through them (warmlaked, etcd). Stopped too, by pid, before the
  # namespaces go: warmlaked first, all at once (a node's clean stop wants
  # its etcd), then the rest, all at once.
  local mode nss first=() rest=()
  mode=$(cat "$DIR/mode" 2>/dev/null || echo up)
  nss=$(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^wl$RID-" || true)
  for ns in $nss; do
    for pid in $(ip netns pids "$ns" 2>/dev/null || true); do
      name=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-60 || true)
      [ "$mode" = hosts ] || echo "netns-cluster: left in $ns: $name (pid $pid)" >&2
      if [ "$(basename "$(readlink "/proc/$pid/exe" 2>/dev/null)" " (deleted)")" = warmlaked ]; then
        first+=("$pid:$name in $ns")
      else
        rest+=("$pid:$name in $ns")
      fi
    done
  done
  [ ${#first[@]} -eq 0 ] || stop_pids "${first[@]}"
  [ ${#rest[@]} -eq 0 ] || stop_pids "${rest[@]}"
  for ns in $nss; do
    ip netns del "$ns" 2>/dev/null || echo "netns-cluster: could not delete namespace $ns" >&2
  done
  # The root end goes with its peer in wlRID-br; in case up failed between the two:
  if ip link show "wl$RID-h" >/dev/null 2>&1; then ip link del "wl$RID-h" 2>/dev/null || true; fi
  rm -f "$DIR/runid" "$DIR/subnet" "$DIR/nodes" "$DIR/env" "$DIR/mode"
  echo "netns-cluster: down ($DIR)"
}

# ---- the network: what up and hosts share ----

begin() { # MODE N: a new run in DIR (its id, mode and size); from here on a failure takes down what was made
  [ -f "$DIR/runid" ] && die "$DIR already holds a cluster (wl$(cat "$DIR/runid")-*): run down first"
  RID=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
  BR=wl$RID-br
  echo "$RID" >"$DIR/runid"
  echo "$2" >"$DIR/nodes"
  echo "$1" >"$DIR/mode"
  # shellcheck disable=SC2064 # the mode now
  trap "rc=\$?; if [ \$rc -ne 0 ]; then echo 'netns-cluster: $1 failed; taking down what it made' >&2; down >&2 || true; fi" EXIT
}

net_up() { # [SUBNET]: the bridge's namespace and the root namespace's veth onto it, NET set
  # Two runs at once must not pick one subnet: a lock from the pick to the address.
  # (The lock is on this script's own file: no lock file to leave behind.)
  { exec 9<"$0" && flock -w 30 9; } 2>/dev/null || true
  NET=${1:-$(pick_subnet)}
  if ! [[ $NET =~ ^10\.213\.([0-9]+)$ ]] || [ "${BASH_REMATCH[1]}" -gt 255 ]; then
    die "--subnet must be 10.213.X"
  fi
  if [ -n "$1" ] && subnets_used | grep -qxF "$NET."; then die "$NET.0/24 is in use here"; fi
  echo "$NET" >"$DIR/subnet"

  ip netns add "$BR"
  ip -n "$BR" link set lo up
  ip -n "$BR" link add br0 type bridge
  ip -n "$BR" link set br0 up
  ip link add "wl$RID-h" type veth peer name host netns "$BR"
  ip -n "$BR" link set host master br0 up
  ip addr add "$NET.1/24" dev "wl$RID-h"
  ip link set "wl$RID-h" up
  exec 9>&-
}

add_ns() { # MEMBER (etcd, nI): its namespace, lo up, eth0 on the bridge with its address
  local ns
  ns=$(ns_of "$1")
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip -n "$BR" link add "v$1" type veth peer name eth0 netns "$ns"
  ip -n "$BR" link set "v$1" master br0 up
  ip -n "$ns" addr add "$(addr_of "$1")/24" dev eth0
  ip -n "$ns" link set eth0 up
}

# ---- up ----

subnets_used() {
  (ip -4 -o addr show; ip -4 route show table all) 2>/dev/null | grep -oE '10\.213\.[0-9]+\.' | sort -u || true
}
pick_subnet() {
  local x used
  used=$(subnets_used)
  for x in $(seq 0 255); do
    grep -qxF "10.213.$x." <<<"$used" || { echo "10.213.$x"; return 0; }
  done
  die "no free 10.213.X.0/24"
}

launch_node() { # ID ETCD_URL CAPACITY [WARMLAKED ARGS]: in its namespace, in the background
  local id=$1 url=$2 cap=$3
  shift 3
  ip netns exec "$(ns_of "$id")" setsid "$WARMLAKED" --etcd "$url" --node "$id" \
    --data "$DIR/$id" --drive-capacity "$cap" "$@" </dev/null >>"$DIR/$id.log" 2>&1 &
  echo $! >"$DIR/$id.pid"
}

launch_etcd() { # URL: on its data directory, in its namespace, in the background
  ip netns exec "$(ns_of etcd)" setsid "$(command -v etcd)" --name default --data-dir "$DIR/etcd" \
    --listen-client-urls "$1" --advertise-client-urls "$1" \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster default=http://127.0.0.1:2380 </dev/null >>"$DIR/etcd.log" 2>&1 &
  echo $! >"$DIR/etcd.pid"
}

wait_etcd() { # URL: until it answers (30 s), or fail
  local i rc
  for ((i = 0; i < 150; i++)); do
    rc=0; timeout 5 "$ADMIN" --etcd "$1" cluster show >/dev/null 2>&1 || rc=$?
    [ "$rc" = 2 ] || [ "$rc" = 0 ] && return 0 # answers (no map yet, or the map)
    [ -d "/proc/$(cat "$DIR/etcd.pid")" ] || { tail -20 "$DIR/etcd.log" >&2; die "etcd exited"; }
    sleep 0.2
  done
  tail -20 "$DIR/etcd.log" >&2
  die "etcd did not answer on $1 in 30 s"
}

up() {
  [ $# -ge 1 ] || usage
  N=$1; shift
  if ! [[ $N =~ ^[0-9]+$ ]] || [ "$N" -lt 1 ] || [ "$N" -gt 64 ]; then die "up: N must be 1..64"; fi
  local D=3 EC=4+2 CAP=2G NET_OPT=''
  while [ $# -gt 0 ]; do
    case $1 in
      --drives) D=${2:?}; shift 2 ;;
      --ec) EC=${2:?}; shift 2 ;;
      --capacity) CAP=${2:?}; shift 2 ;;
      --subnet) NET_OPT=${2:?}; shift 2 ;;
      --) shift; break ;;
      *) usage ;;
    esac
  done
  [ -x "$WARMLAKED" ] || die "no $WARMLAKED: set WL_BUILD"
  [ -x "$ADMIN" ] || die "no $ADMIN: set WL_BUILD"
  command -v etcd >/dev/null || die "no etcd: deploy/install-deps.sh installs etcd-server"
  mkdir -p "$DIR"
  DIR=$(cd "$DIR" && pwd)
  begin up "$N"
  net_up "$NET_OPT"
  local m ns i
  for m in etcd $(seq -f 'n%g' 1 "$N"); do add_ns "$m"; done

  wl_make_secret "$DIR/secret"
  wl_make_credentials "$DIR/credentials"
  wl_load_credentials "$DIR/credentials"
  WARMLAKE_CLUSTER_SECRET=$(cat "$DIR/secret")
  export WARMLAKE_CLUSTER_SECRET

  # etcd: a fresh data directory each run (the map is put there below).
  local url="http://$NET.2:2379"
  rm -rf "$DIR/etcd" "$DIR/etcd.log"
  launch_etcd "$url"
  echo "$url" >"$DIR/etcd.url"
  wait_etcd "$url"
  local rc

  {
    printf '{"cluster": "netns-%s", "epoch": 1, "ec": "%s", "nodes": [\n' "$RID" "$EC"
    for ((i = 1; i <= N; i++)); do
      printf '  {"id": "n%d", "s3": "%s:9000", "proto": "%s:9100", "drives": %d}%s\n' \
        "$i" "$(addr_of "n$i")" "$(addr_of "n$i")" "$D" "$([ "$i" = "$N" ] || echo ,)"
    done
    printf ']}\n'
  } >"$DIR/map.json"
  timeout 30 "$ADMIN" --etcd "$url" cluster init --map "$DIR/map.json" >"$DIR/init.log" 2>&1 ||
    { cat "$DIR/init.log" >&2; die "wl-admin cluster init failed"; }

  # What start gives a node again: its capacity, then up's WARMLAKED ARGS, one a line.
  printf '%s\n' "$CAP" "$@" >"$DIR/node-args"
  for ((i = 1; i <= N; i++)); do
    mkdir -p "$DIR/n$i"
    : >"$DIR/n$i.log" # (start appends: a ready line is looked for past the old ones)
    launch_node "n$i" "$url" "$CAP" "$@"
  done
  local deadline=$((SECONDS + 60))
  for ((i = 1; i <= N; i++)); do
    rc=0
    wl_wait_ready "$DIR/n$i.log" "$(cat "$DIR/n$i.pid")" "$deadline" || rc=$?
    [ "$rc" = 0 ] || tail -20 "$DIR/n$i.log" >&2
    [ "$rc" != 1 ] || die "node n$i exited"
    [ "$rc" != 2 ] || die "node n$i not ready in 60 s"
  done
  {
    printf 'ETCD=%s\n' "$url"
    for ((i = 1; i <= N; i++)); do printf 'S3_N%d=http://%s:9000\n' "$i" "$(addr_of "n$i")"; done
    printf 'AWS_ACCESS_KEY_ID=%s\nAWS_SECRET_ACCESS_KEY=%s\nAWS_DEFAULT_REGION=us-east-1\n' \
      "$WARMLAKE_ACCESS_KEY" "$WARMLAKE_SECRET_KEY"
  } >"$DIR/env"
  trap - EXIT
  printf 'warmlake cluster netns-%s: %d nodes x %d drives, ec %s, etcd %s\n' "$RID" "$N" "$D" "$EC" "$url"
  for ((i = 1; i <= N; i++)); do
    printf '  n%d  http://%s:9000  namespace %s  pid %s\n' "$i" "$(addr_of "n$i")" \
      "$(ns_of "n$i")" "$(cat "$DIR/n$i.pid")"
  done
  printf 'access key %s\nsecret key %s\n' "$WARMLAKE_ACCESS_KEY" "$WARMLAKE_SECRET_KEY"
  printf '(all of it in %s/env; then: aws --endpoint-url http://%s:9000 s3 ls)\n' "$DIR" "$(addr_of n1)"
}

# ---- hosts ----

hosts() {
  [ $# -ge 1 ] || usage
  N=$1; shift
  if ! [[ $N =~ ^[0-9]+$ ]] || [ "$N" -lt 1 ] || [ "$N" -gt 64 ]; then die "hosts: N must be 1..64"; fi
  local NET_OPT=''
  while [ $# -gt 0 ]; do
    case $1 in
      --subnet) NET_OPT=${2:?}; shift 2 ;;
      *) usage ;;
    esac
  done
  [ -x "$SSHD" ] || die "no $SSHD: apt-get install openssh-server (deploy/install-deps.sh installs it)"
  { command -v ssh-keygen && command -v ssh; } >/dev/null || die "no ssh: apt-get install openssh-client"
  command -v unshare >/dev/null || die "no unshare (util-linux)"
  local home
  home=$(getent passwd root | cut -d: -f6)
  home=${home:-/root}
  mkdir -p "$DIR"
  DIR=$(cd "$DIR" && pwd -P)
  case $DIR/ in "$home"/*) die "$DIR is under $home, which every host has privately: take a DIR elsewhere" ;; esac
  begin hosts "$N"
  net_up "$NET_OPT"

  rm -rf "$DIR/ssh" "$DIR/host"
  mkdir -p "$DIR/ssh" "$DIR/host"
  ssh-keygen -q -t ed25519 -N '' -C "netns-hosts-$RID" -f "$DIR/ssh/id_ed25519"
  cp "$DIR/ssh/id_ed25519.pub" "$DIR/ssh/authorized_keys"
  : >"$DIR/ssh/known_hosts"
  local i j m a d
  for ((i = 1; i <= N; i++)); do
    m=n$i a=$(addr_of "n$i") d=$DIR/n$i
    add_ns "$m"
    rm -rf "$d"
    mkdir -p "$d/home" "$d/fs"
    chmod 0700 "$d/home"
    chmod 0755 "$d/fs"
    ssh-keygen -q -t ed25519 -N '' -C "$m" -f "$d/ssh_host_ed25519_key"
    echo "$a $(cut -d' ' -f1,2 "$d/ssh_host_ed25519_key.pub")" >>"$DIR/ssh/known_hosts"
    # StrictModes no: the key files are in DIR, wherever that is (/tmp is world-writable).
    cat >"$d/sshd_config" <<EOF
# netns-cluster.sh hosts: host $m ($(ns_of "$m"))
ListenAddress $a:22
HostKey $d/ssh_host_ed25519_key
PidFile $d/sshd.pid
AuthorizedKeysFile $DIR/ssh/authorized_keys
AllowUsers root
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
X11Forwarding no
AllowTcpForwarding no
AllowAgentForwarding no
PermitTunnel no
PrintMotd no
Subsystem sftp internal-sftp
EOF
    # Its own mount namespace (private: nothing mounted in it reaches the machine's),
    # gone with the last process in it. sshd wants /run/sshd (privilege separation).
    # shellcheck disable=SC2016 # the script's own $1..$4
    ip netns exec "$(ns_of "$m")" unshare --mount --propagation private /bin/sh -c '
      set -e
      mount -t tmpfs -o mode=0755,size=64m wl-host-run /run
      install -d -m 0755 /run/sshd
      mount --bind "$1/fs" "$2"
      mount --bind "$1/home" "$3"
      exec setsid "$4" -D -f "$1/sshd_config" -E "$1/sshd.log"' \
      wl-host "$d" "$DIR/host" "$home" "$SSHD" </dev/null >>"$d/sshd.out" 2>&1 &
    echo $! >"$DIR/$m.pid"
  done
  # Each answers, with the key, as what it says it is (its host key): bounded.
  local ok
  for ((i = 1; i <= N; i++)); do
    a=$(addr_of "n$i") ok=''
    for ((j = 0; j < 50; j++)); do
      if ssh -F /dev/null -i "$DIR/ssh/id_ed25519" -o IdentitiesOnly=yes -o BatchMode=yes \
        -o UserKnownHostsFile="$DIR/ssh/known_hosts" -o StrictHostKeyChecking=yes \
        -o ConnectTimeout=2 "root@$a" true </dev/null >/dev/null 2>&1; then
        ok=1
        break
      fi
      [ -n "$(our_pid "n$i" "$SSHD" "$(ns_of "n$i")")" ] ||
        { cat "$DIR/n$i/sshd.out" "$DIR/n$i/sshd.log" >&2 2>/dev/null || true; die "sshd of n$i exited"; }
      sleep 0.2
    done
    [ -n "$ok" ] || { tail -20 "$DIR/n$i/sshd.log" >&2 || true; die "ssh root@$a did not answer in 10 s"; }
  done
  {
    printf 'HOSTS='
    for ((i = 1; i <= N; i++)); do printf '%s%s' "$(addr_of "n$i")" "$([ "$i" = "$N" ] || echo ,)"; done
    printf '\n'
    for ((i = 1; i <= N; i++)); do printf 'HOST_N%d=%s\n' "$i" "$(addr_of "n$i")"; done
    printf 'SSH_KEY=%s\nSSH_KNOWN_HOSTS=%s\nHOST_DIR=%s\n' \
      "$DIR/ssh/id_ed25519" "$DIR/ssh/known_hosts" "$DIR/host"
  } >"$DIR/env"
  trap - EXIT
  printf 'netns hosts wl%s: %d, each with its own sshd (root, key %s)\n' "$RID" "$N" "$DIR/ssh/id_ed25519"
  for ((i = 1; i <= N; i++)); do
    printf '  n%d  %s  namespace %s  sshd pid %s\n' "$i" "$(addr_of "n$i")" "$(ns_of "n$i")" \
      "$(cat "$DIR/n$i.pid")"
  done
  printf '(all of it in %s/env) then:\n' "$DIR"
  printf '  ssh -i %s -o UserKnownHostsFile=%s root@%s\n' "$DIR/ssh/id_ed25519" \
    "$DIR/ssh/known_hosts" "$(addr_of n1)"
  printf '  deploy/ssh-deploy.sh MAP --init none --no-apt --run-user nobody --ssh-opt IdentityFile=%s' \
    "$DIR/ssh/id_ed25519"
  printf ' --ssh-opt UserKnownHostsFile=%s' "$DIR/ssh/known_hosts"
  printf ' --etc-dir %s/etc --data-root %s/data --bin-dir %s/bin --log-dir %s/log --etcd-data-dir %s/etcd\n' \
    "$DIR/host" "$DIR/host" "$DIR/host" "$DIR/host" "$DIR/host"
}

# ---- status and faults ----

status() {
  load
  local i pid state ns port members mode
  mode=$(cat "$DIR/mode" 2>/dev/null || echo up)
  if [ "$mode" = hosts ]; then
    echo "netns hosts wl$RID in $DIR: $N hosts, subnet $NET.0/24"
    members=$(seq -f 'n%g' 1 "$N")
  else
    echo "cluster netns-$RID in $DIR: $N nodes, subnet $NET.0/24, etcd $(cat "$DIR/etcd.url")"
    members="etcd $(seq -f 'n%g' 1 "$N")"
  fi
  for m in $members; do
    ns=$(ns_of "$m")
    if [ "$mode" = hosts ]; then pid=$(our_pid "$m" "$SSHD" "$ns")
    elif [ "$m" = etcd ]; then pid=$(our_pid etcd "$(command -v etcd)" "$ns")
    else pid=$(our_pid "$m" "$WARMLAKED" "$ns"); fi
    state="pid $(cat "$DIR/$m.pid" 2>/dev/null || echo -) $([ -n "$pid" ] && echo alive || echo dead)"
    # Under hosts: sshd's pid, then what runs in the namespace, by binary.
    [ "$mode" != hosts ] || state="sshd $state; running: $(ns_programs "$ns")"
    port=$(ip -n "$BR" -br link show "v$m" 2>/dev/null | awk '{print $2}')
    [ "$port" = DOWN ] && state="$state, partitioned"
    if ip netns exec "$ns" tc qdisc show dev eth0 2>/dev/null | grep -qE 'netem|tbf'; then
      state="$state, $(ip netns exec "$ns" tc qdisc show dev eth0 | grep -oE '(netem|tbf).*' | head -1)"
    fi
    printf '  %-5s %-15s namespace %-14s %s\n' "$m" "$(addr_of "$m")" "$ns" "$state"
  done
  [ "$mode" != hosts ] || return 0
  WARMLAKE_CLUSTER_SECRET=$(cat "$DIR/secret") timeout 20 "$ADMIN" --etcd "$(cat "$DIR/etcd.url")" status ||
    echo "(wl-admin status failed: rc $?)"
}

ns_programs() { # NS: "sshd x1, warmlaked x1": what runs in NS, by binary
  local p
  for p in $(ip netns pids "$1" 2>/dev/null); do
    basename "$(readlink "/proc/$p/exe" 2>/dev/null)" " (deleted)"
  done | sort | uniq -c | awk '{ printf "%s%s x%s", (NR > 1 ? ", " : ""), $2, $1 }'
}

kill_node() {
  load
  local id pid
  if [ "${1:?NODE or etcd}" = etcd ]; then
    id=etcd
    pid=$(our_pid etcd "$(command -v etcd)" "$(ns_of etcd)")
  else
    id=$(node_id "$1")
    pid=$(our_pid "$id" "$WARMLAKED" "$(ns_of "$id")")
  fi
  [ -n "$pid" ] || die "$id is not running"
  kill -KILL "$pid"
  wait_gone "$pid" 10 || die "$id (pid $pid) survived SIGKILL for 10 s"
  echo "killed $id (pid $pid)"
}

start() { # NODE or etcd: not running now; again on its data, as up started it
  load
  local what=${1:?NODE or etcd} pid url
  url=$(cat "$DIR/etcd.url")
  if [ "$what" = etcd ]; then
    pid=$(our_pid etcd "$(command -v etcd)" "$(ns_of etcd)")
    [ -z "$pid" ] || die "etcd is running (pid $pid)"
    launch_etcd "$url"
    wait_etcd "$url"
    echo "started etcd (pid $(cat "$DIR/etcd.pid"))"
    return
  fi
  local id
  id=$(node_id "$what")
  pid=$(our_pid "$id" "$WARMLAKED" "$(ns_of "$id")")
  [ -z "$pid" ] || die "$id is running (pid $pid)"
  local -a args
  mapfile -t args <"$DIR/node-args"
  wl_load_credentials "$DIR/credentials" # (as up gave them: the same users, the same secret)
  WARMLAKE_CLUSTER_SECRET=$(cat "$DIR/secret")
  export WARMLAKE_CLUSTER_SECRET
  local mark # (the log is appended to: its ready line is looked for past the old ones)
  mark=$(stat -c %s "$DIR/$id.log" 2>/dev/null || echo 0)
  launch_node "$id" "$url" "${args[@]}"
  local rc=0 deadline=$((SECONDS + 60))
  wl_wait_ready "$DIR/$id.log" "$(cat "$DIR/$id.pid")" "$deadline" "$mark" || rc=$?
  [ "$rc" = 0 ] || tail -20 "$DIR/$id.log" >&2
  [ "$rc" != 1 ] || die "node $id exited"
  [ "$rc" != 2 ] || die "node $id not ready in 60 s"
  echo "started $id (pid $(cat "$DIR/$id.pid"))"
}

partition() {
  load
  local id
  id=$(node_id "${1:?NODE}")
  ip -n "$BR" link set "v$id" down
  echo "partitioned $id (its bridge port is down)"
}

heal() {
  load
  local id ns
  id=$(node_id "${1:?NODE}")
  ns=$(ns_of "$id")
  ip -n "$BR" link set "v$id" up
  ip netns exec "$ns" tc qdisc del dev eth0 root 2>/dev/null || true
  ip netns exec "$BR" tc qdisc del dev "v$id" root 2>/dev/null || true
  echo "healed $id"
}

slow() {
  load
  local id ms err
  id=$(node_id "${1:?NODE}")
  ms=${2:?MS}
  [[ $ms =~ ^[0-9]+$ ]] || die "slow: MS must be a number of milliseconds"
  command -v tc >/dev/null || { echo "netns-cluster: slow: no tc (iproute2)" >&2; exit 3; }
  if ! err=$(ip netns exec "$(ns_of "$id")" tc qdisc replace dev eth0 root netem delay "${ms}ms" 2>&1); then
    echo "netns-cluster: slow: netem is not available in this kernel ($err);" \
      "no delay can be injected here (partition works; throttle NODE RATE limits bandwidth)" >&2
    exit 3
  fi
  echo "slowed $id: every packet it sends is delayed ${ms} ms"
}

throttle() {
  load
  local id rate
  id=$(node_id "${1:?NODE}")
  rate=${2:?RATE (tc units: 1mbit, 500kbit)}
  command -v tc >/dev/null || die "throttle: no tc (iproute2)"
  # Both directions: what it sends (its eth0) and what it is sent (its bridge port).
  ip netns exec "$(ns_of "$id")" tc qdisc replace dev eth0 root tbf rate "$rate" burst 16kb latency 5s
  ip netns exec "$BR" tc qdisc replace dev "v$id" root tbf rate "$rate" burst 16kb latency 5s
  echo "throttled $id to $rate each way"
}

case $CMD in
  up) up "$@" ;;
  hosts) hosts "$@" ;;
  down) down ;;
  status) status ;;
  kill) kill_node "$@" ;;
  start) start "$@" ;;
  partition) partition "$@" ;;
  heal) heal "$@" ;;
  slow) slow "$@" ;;
  throttle) throttle "$@" ;;
  *) usage ;;
esac
