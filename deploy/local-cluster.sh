#!/usr/bin/env bash
# A warmlake cluster on this machine whose map lives in etcd, run in the
# background: one etcd member and N nodes of D file-backed drives each, all
# on free loopback ports, everything under DIR (default ./local-cluster).
#
#   deploy/local-cluster.sh up N [--drives D] [--ec K+M] [--dir DIR] [-- WARMLAKED ARGS]
#   deploy/local-cluster.sh status [--dir DIR]
#   deploy/local-cluster.sh down [--dir DIR] [--wipe]
#
# up: the first time, picks the ports and writes DIR/map.json (cluster/map.h),
#   DIR/secret (the cluster secret) and DIR/credentials (an S3 key pair), the
#   last two mode 0600; starts etcd (data in DIR/etcd), stores the map with
#   `wl-admin cluster init`, starts every node (`warmlaked --etcd URL --node nI
#   --data DIR/nI`, secret in WARMLAKE_CLUSTER_SECRET), waits until each says
#   ready (bounded: WL_UP_TIMEOUT seconds, default 90), prints the endpoints
#   and the `aws` environment. On an existing DIR it starts whatever is not
#   running, on the same data, ports and map (N, --drives and --ec then must
#   agree with the map or be left out), and with the WARMLAKED ARGS of the
#   last up that gave some (kept in DIR/args; `--` alone clears them).
# status: each process alive or dead (by its pid file), then `wl-admin status`.
# down: SIGTERM to every process up started (by pid, checked against its
#   command line), a bounded wait (WL_DOWN_TIMEOUT, default 30 s), then
#   SIGKILL; data stays unless --wipe. Safe to run twice or after a failed up.
#
# Binaries: WL_BUILD (server/warmlaked, cluster/wl-admin), else builds ./build
# as run-cluster.sh does (deploy/install-deps.sh, cmake). etcd: Debian's
# etcd-server (ETCD=/path/to/etcd to use another).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# Paths given (--dir, WL_BUILD) are taken from where it is run.
ROOT=$(cd "$(dirname "$0")/.." && pwd)

STARTING=0
die() { echo "local-cluster: $*" >&2; exit 1; }
usage() { sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

CMD=${1:-}
[ -n "$CMD" ] || usage
shift
N='' D='' EC='' DIR=./local-cluster WIPE=0
EXTRA=() HAVE_EXTRA=0
if [ "$CMD" = up ]; then
  [[ ${1:-} =~ ^[0-9]+$ ]] || die "up wants a node count: up N [--drives D] [--ec K+M] [--dir DIR]"
  N=$1
  shift
fi
while [ $# -gt 0 ]; do
  case $1 in
    --drives) [ $# -ge 2 ] || usage; D=$2; shift 2 ;;
    --ec) [ $# -ge 2 ] || usage; EC=$2; shift 2 ;;
    --dir) [ $# -ge 2 ] || usage; DIR=$2; shift 2 ;;
    --wipe) WIPE=1; shift ;;
    --) shift; EXTRA=("$@"); HAVE_EXTRA=1; break ;;
    -h | --help) usage ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
case $CMD in up | down | status) ;; *) usage ;; esac
[ "$CMD" != up ] && { [ -z "$D$EC" ] || die "--drives and --ec go with up"; }
[ "$CMD" = down ] || [ "$WIPE" = 0 ] || die "--wipe goes with down"
[ -z "$D" ] || [[ $D =~ ^[0-9]+$ ]] || die "--drives $D: want a number"
[ -z "$EC" ] || [[ $EC =~ ^[0-9]+\+[0-9]+$ ]] || die "--ec $EC: want K+M"
if [ "$CMD" = up ]; then
  [ "$N" -ge 1 ] || die "up wants at least one node"
  mkdir -p "$DIR"
fi
[ "$CMD" = up ] || [ -d "$DIR" ] || { echo "local-cluster: no cluster in $DIR"; [ "$CMD" = down ] && exit 0; exit 1; }
DIR=$(cd "$DIR" && pwd)

# ---- processes by pid file: NAME.pid holds a pid, valid only while that
# process still runs the command line up gave it (pids are reused).
pid_of() { # pid_of NAME: the pid if that process is ours and alive, else nothing
  local f="$DIR/$1.pid" p
  [ -f "$f" ] || return 0
  p=$(cat "$f" 2>/dev/null || true)
  [[ $p =~ ^[0-9]+$ ]] || return 0
  [ -r "/proc/$p/cmdline" ] || return 0
  # Ours: its command line names this cluster's directory.
  tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -qF -- "$DIR/" || return 0
  echo "$p"
}
names() { # every process up may have started: etcd first, then the map's nodes (and any pid file)
  echo etcd
  {
    [ -f "$DIR/map.json" ] && python3 -c '
import json, sys
for n in json.load(open(sys.argv[1]))["nodes"]:
    print(n["id"])' "$DIR/map.json" 2>/dev/null
    local f
    for f in "$DIR"/*.pid; do [ -e "$f" ] && basename "$f" .pid; done
  } | grep -vx etcd | sort -uV
}

stop_some() { # stop_some NAME...: SIGTERM, a bounded wait, then SIGKILL
  local name p pids=() left timeout=${WL_DOWN_TIMEOUT:-30}
  for name in "$@"; do
    p=$(pid_of "$name")
    if [ -n "$p" ]; then
      kill -TERM "$p" 2>/dev/null || true
      pids+=("$p")
      echo "local-cluster: stopping $name (pid $p)"
    fi
  done
  local deadline=$((SECONDS + timeout))
  while [ ${#pids[@]} -gt 0 ]; do
    left=()
    for p in "${pids[@]}"; do
      # Gone, or a zombie (up's shell, its parent, has exited: init reaps it).
      [ -d "/proc/$p" ] && [ "$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)" != Z ] && left+=("$p")
    done
    [ ${#left[@]} -eq 0 ] && break
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "local-cluster: still running after ${timeout}s, SIGKILL: ${left[*]}" >&2
      kill -KILL "${left[@]}" 2>/dev/null || true
      sleep 0.5
      break
    fi
    sleep 0.2
  done
  for name in "$@"; do rm -f "$DIR/$name.pid"; done
}
# Nodes first (they leave etcd cleanly), etcd last.
stop_all() {
  # shellcheck disable=SC2046
  stop_some $(names | grep -v '^etcd$')
  stop_some etcd
}

binaries() {
  if [ -z "${WL_BUILD:-}" ]; then
    wl_build "$ROOT"
    WL_BUILD=$ROOT/build
  fi
  WL_BUILD=$(cd "$WL_BUILD" && pwd)
  WARMLAKED=$WL_BUILD/server/warmlaked
  ADMIN=$WL_BUILD/cluster/wl-admin
  [ -x "$WARMLAKED" ] || die "$WARMLAKED missing (WL_BUILD=$WL_BUILD)"
  [ -x "$ADMIN" ] || die "$ADMIN missing (WL_BUILD=$WL_BUILD)"
}

etcd_url() { sed -n 's/^ETCD_URL=//p' "$DIR/etcd.conf"; }

if [ "$CMD" = down ]; then
  stop_all
  if [ "$WIPE" = 1 ]; then
    # Only what up writes: the directory itself may hold other files of the user.
    for name in $(names); do rm -rf "${DIR:?}/$name" "$DIR/$name.log" "$DIR/$name.pid"; done
    rm -f "$DIR"/map.json "$DIR"/map.json.tmp "$DIR"/secret "$DIR"/credentials "$DIR"/etcd.conf \
      "$DIR"/secret.tmp.* "$DIR"/credentials.tmp.* # (temp files of wl_make_*, left by a crash)
    rmdir "$DIR" 2>/dev/null || true
    echo "local-cluster: stopped; data wiped"
  else
    echo "local-cluster: stopped; data kept in $DIR (up again restarts on it, down --wipe removes it)"
  fi
  exit 0
fi

if [ "$CMD" = status ]; then
  [ -f "$DIR/etcd.conf" ] || die "no cluster in $DIR (up first)"
  binaries
  for name in $(names); do
    p=$(pid_of "$name")
    if [ -n "$p" ]; then printf '%-6s alive (pid %s)\n' "$name" "$p"; else printf '%-6s dead\n' "$name"; fi
  done
  echo
  rc=0
  WARMLAKE_CLUSTER_SECRET=$(cat "$DIR/secret") "$ADMIN" --etcd "$(etcd_url)" status || rc=$?
  # wl-admin says nothing when etcd does not answer (exit 1): say it here.
  [ "$rc" != 1 ] || echo "local-cluster: etcd at $(etcd_url) not answering (wl-admin status: exit 1)" >&2
  exit "$rc"
fi

# ---- up
binaries
ETCD=${ETCD:-$(command -v etcd || true)}
[ -x "$ETCD" ] || die "etcd missing: apt-get install etcd-server (deploy/install-deps.sh does)"

# free_ports K: K distinct free loopback TCP ports, below the kernel's ephemeral range. A
# port bound to 0 and released comes from that range, where any outgoing connection (a node's
# to its peers or to etcd, started before it listens) may take it first: a node then failed
# with "address already in use" on its own S3 port.
free_ports() {
  python3 - "$1" <<'EOF'
import random, socket, sys
try:
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except (OSError, ValueError, IndexError):
    low = 32768
socks, ports = [], []
while len(ports) < int(sys.argv[1]):
    port = random.randrange(10000, max(low, 10001))
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        s.close()
        continue
    socks.append(s)
    ports.append(port)
print(" ".join(map(str, ports)))
EOF
}

wl_make_secret "$DIR/secret"
wl_make_credentials "$DIR/credentials"
# New ones are made 0600; this is for ones that were there before (put by hand).
chmod 0600 "$DIR/secret" "$DIR/credentials"

if [ ! -f "$DIR/etcd.conf" ]; then
  read -r cp pp < <(free_ports 2)
  printf 'ETCD_URL=http://127.0.0.1:%d\nETCD_PEER=http://127.0.0.1:%d\n' "$cp" "$pp" >"$DIR/etcd.conf"
fi
URL=$(etcd_url)
PEER=$(sed -n 's/^ETCD_PEER=//p' "$DIR/etcd.conf")

if [ -f "$DIR/map.json" ]; then
  # An existing cluster: its map decides; arguments that disagree are refused.
  read -r mn md mec < <(python3 -c '
import json, sys
m = json.load(open(sys.argv[1]))
print(len(m["nodes"]), m["nodes"][0]["drives"], m.get("ec", "-"))' "$DIR/map.json") ||
    die "$DIR/map.json does not parse"
  [ "$N" = "$mn" ] || die "$DIR holds a cluster of $mn nodes, not $N (down --wipe to start over)"
  [ -z "$D" ] || [ "$D" = "$md" ] || die "$DIR's nodes have $md drives, not $D"
  [ -z "$EC" ] || [ "$EC" = "$mec" ] || die "$DIR's map has ec $mec, not $EC"
  D=$md
else
  D=${D:-2}
  read -ra ports < <(free_ports $((2 * N)))
  {
    printf '{"cluster": "local", "epoch": 1,'
    [ -n "$EC" ] && printf ' "ec": "%s",' "$EC"
    printf ' "nodes": [\n'
    for i in $(seq 1 "$N"); do
      sep=","; [ "$i" = "$N" ] && sep=""
      printf '  {"id": "n%d", "s3": "127.0.0.1:%d", "proto": "127.0.0.1:%d", "drives": %d}%s\n' \
        "$i" "${ports[$((2 * i - 2))]}" "${ports[$((2 * i - 1))]}" "$D" "$sep"
    done
    printf ']}\n'
  } >"$DIR/map.json.tmp"
  mv "$DIR/map.json.tmp" "$DIR/map.json"
fi

# Whatever fails from here on leaves the started processes to `down`: say so.
STARTING=1
trap '[ $? = 0 ] || [ "$STARTING" = 0 ] || echo "local-cluster: up failed; what it started keeps running: deploy/local-cluster.sh down --dir $DIR" >&2' EXIT

fsize() { stat -c %s "$1" 2>/dev/null || echo 0; }

if [ -z "$(pid_of etcd)" ]; then
  setsid "$ETCD" --name local --data-dir "$DIR/etcd" \
    --listen-client-urls "$URL" --advertise-client-urls "$URL" \
    --listen-peer-urls "$PEER" --initial-advertise-peer-urls "$PEER" \
    --initial-cluster "local=$PEER" >>"$DIR/etcd.log" 2>&1 </dev/null &
  echo $! >"$DIR/etcd.pid"
fi
deadline=$((SECONDS + ${WL_UP_TIMEOUT:-90}))
while :; do
  rc=0
  "$ADMIN" --etcd "$URL" cluster show >/dev/null 2>&1 || rc=$?
  [ "$rc" != 1 ] && break # 0: a map; 2: none yet; 1: etcd not answering
  [ -n "$(pid_of etcd)" ] || { tail -20 "$DIR/etcd.log" >&2; die "etcd exited; see $DIR/etcd.log"; }
  [ "$SECONDS" -lt "$deadline" ] || die "etcd not answering on $URL; see $DIR/etcd.log"
  sleep 0.2
done
if [ "$rc" = 2 ]; then
  "$ADMIN" --etcd "$URL" cluster init --map "$DIR/map.json" >/dev/null || die "wl-admin cluster init failed"
fi

# The daemons' own arguments: as given, kept for the next up; else the last ones given (a node
# restarted without them came back with other settings, its drives' capacity among them).
if [ "$HAVE_EXTRA" = 1 ]; then
  if [ ${#EXTRA[@]} -gt 0 ]; then printf '%s\0' "${EXTRA[@]}" >"$DIR/args"; else rm -f "$DIR/args"; fi
elif [ -f "$DIR/args" ]; then
  mapfile -d '' -t EXTRA <"$DIR/args"
fi

wl_load_credentials "$DIR/credentials"
WARMLAKE_CLUSTER_SECRET=$(cat "$DIR/secret")
export WARMLAKE_CLUSTER_SECRET
declare -A OFF
for i in $(seq 1 "$N"); do
  [ -z "$(pid_of "n$i")" ] || continue
  mkdir -p "$DIR/n$i"
  OFF[$i]=$(fsize "$DIR/n$i.log")
  setsid "$WARMLAKED" --etcd "$URL" --node "n$i" --data "$DIR/n$i" "${EXTRA[@]}" \
    >>"$DIR/n$i.log" 2>&1 </dev/null &
  echo $! >"$DIR/n$i.pid"
done
unset WARMLAKE_CLUSTER_SECRET
for i in $(seq 1 "$N"); do
  [ -n "${OFF[$i]:-}" ] || continue # was already running
  # Ready since this up started it (the log is appended to, run after run).
  rc=0
  wl_wait_ready "$DIR/n$i.log" "$(pid_of "n$i")" "$deadline" "${OFF[$i]}" || rc=$?
  if [ "$rc" = 1 ]; then
    tail -20 "$DIR/n$i.log" >&2
    die "node n$i exited; see $DIR/n$i.log"
  fi
  [ "$rc" = 0 ] || die "node n$i not ready after ${WL_UP_TIMEOUT:-90}s; see $DIR/n$i.log"
done
STARTING=0

mapfile -t S3 < <(python3 -c '
import json, sys
for n in json.load(open(sys.argv[1]))["nodes"]:
    print(n["id"], n["s3"])' "$DIR/map.json")
printf '\nwarmlake cluster "local": %d nodes x %d drives, map in etcd %s (%s)\n' "$N" "$D" "$URL" "$DIR/map.json"
for l in "${S3[@]}"; do
  read -r id addr <<<"$l"
  printf '  node %s: http://%s  (pid %s, log %s)\n' "$id" "$addr" "$(pid_of "$id")" "$DIR/$id.log"
done
E1=http://${S3[0]#* }
EN=http://${S3[$((N - 1))]#* }
printf '\nTo use it (any node serves every object):\n\n'
wl_print_aws_howto "$E1" "$EN"
printf '\n  deploy/local-cluster.sh status --dir %s\n' "$DIR"
printf '  deploy/local-cluster.sh down --dir %s [--wipe]\n\n' "$DIR"
