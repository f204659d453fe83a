#!/usr/bin/env bash
# Installs and starts a warmlake cluster on real hosts over ssh, from its map
# (cluster/map.h: each node's host is taken from its "s3" address, an IP
# address, which is also what ssh connects to).
#
#   deploy/ssh-deploy.sh MAP [--dry-run] [--ssh-user U] [--ssh-opt OPT]...
#       [--build DIR] [--etcd-hosts H1,H2,H3] [--etcd-port P] [--etcd-peer-port P]
#       [--bin-dir DIR] [--data-root DIR] [--state DIR] [--warmlaked-args "ARGS"]
#       [--no-apt] [--init systemd|none] [--etc-dir DIR] [--run-user U]
#       [--log-dir DIR] [--etcd-data-dir DIR]
#
# In order, stopping at the first failure (each step says what and where):
#  1. checks the map (python3 json: shape, ids, addresses, sets); no host
#     is touched when it is wrong;
#  2. keeps the cluster secret and an S3 key pair in STATE (default
#     ./deploy-state/CLUSTER, mode 0600), generated once;
#  3. every host answers ssh (and sudo -n, unless the user is root);
#  4. on every host: runtime packages (etcd-server on etcd hosts) unless
#     --no-apt, the RUN_USER system user (--run-user, default warmlake; made
#     when missing), DATA_ROOT/ID for its nodes (warmlaked makes driveN); binaries, unit
#     (deploy/systemd/warmlaked@.service), map and env files copied with scp
#     into ~/.wl-deploy and installed only when they differ; the secret and
#     credentials sent over ssh's stdin into ETC/{cluster-secret,credentials}
#     (ETC: --etc-dir, default /etc/warmlake; 0600 root);
#  5. etcd members (--etcd-hosts; default the first three distinct node hosts,
#     or the first one when there are fewer): Debian's etcd unit with the
#     drop-in deploy/systemd/etcd.service.d/warmlake.conf, started;
#  6. `wl-admin cluster init --map` once, from the first node's host (a map
#     already stored is left as it is: wl-admin map set replaces it);
#  7. `systemctl daemon-reload && systemctl enable --now warmlaked@ID` for
#     each node (restarted when something it uses changed), then
#     `wl-admin status`.
# Run again, it changes only what differs. --dry-run prints every command
# (ssh and scp lines exactly as they would run; local steps as # comments)
# and runs none. Secrets are never printed, only their file names.
# Binaries: --build DIR, else WL_BUILD, else ./build (server/warmlaked,
# cluster/wl-admin), built for the hosts' Debian release.
#
# --init none: for hosts where PID 1 is not systemd (containers). No unit is
# installed; deploy/wl-init.sh goes to BIN_DIR/wl-init instead, and steps 5
# and 7 run `wl-init start etcd` and `wl-init start ID` (`restart` when
# something they use changed): each daemon in its own session, a pid file
# in /run/warmlake, its output appended to LOG_DIR/NAME.log (--log-dir,
# default /var/log/warmlake), the node as RUN_USER, etcd as Debian's etcd
# user with its data in --etcd-data-dir. Then `wl-init wait ID` on every
# host: each node ready (60 s at most); a restart is rolling, each node
# waited for before the next. ETC/cluster-secret is then 0640
# root:RUN_USER's group (the node reads it itself; under systemd it gets a
# private copy). Nothing restarts them when they fail or the host boots: the
# container's entrypoint or a supervisor runs `wl-init start` for that.
# --etcd-data-dir: etcd's data (default /var/lib/etcd/warmlake-CLUSTER).
# --etc-dir, --bin-dir, --data-root, --log-dir, --etcd-data-dir and
# --run-user are the same on every host; tests/integration/test_deploy.py
# points them into a directory each of its netns hosts has privately
# (deploy/netns-cluster.sh hosts), with --run-user nobody (no user made).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" # (here only: nothing of it goes to the hosts)
ROOT=$(cd "$(dirname "$0")/.." && pwd)

die() { echo "ssh-deploy: $*" >&2; exit 1; }
usage() { sed -n '2,54p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

MAP='' DRY=0 SSH_USER='' BUILD=${WL_BUILD:-$ROOT/build} ETCD_HOSTS='' ETCD_PORT=2379 PEER_PORT=2380
BIN_DIR=/usr/local/bin DATA_ROOT=/var/lib/warmlake STATE='' WL_ARGS='' APT=1
INIT=systemd ETC=/etc/warmlake RUN_USER=warmlake LOG_DIR='' ETCD_DATA=''
SSH_OPTS=(-o BatchMode=yes -o ConnectTimeout=10)
while [ $# -gt 0 ]; do
  case $1 in
    --dry-run) DRY=1; shift ;;
    --no-apt) APT=0; shift ;;
    -h | --help) usage ;;
    --ssh-user | --ssh-opt | --build | --etcd-hosts | --etcd-port | --etcd-peer-port | --bin-dir | \
      --data-root | --state | --warmlaked-args | --init | --etc-dir | --run-user | --log-dir | \
      --etcd-data-dir)
      [ $# -ge 2 ] || die "$1 wants a value"
      case $1 in
        --ssh-user) SSH_USER=$2 ;; --ssh-opt) SSH_OPTS+=(-o "$2") ;; --build) BUILD=$2 ;;
        --etcd-hosts) ETCD_HOSTS=$2 ;; --etcd-port) ETCD_PORT=$2 ;; --etcd-peer-port) PEER_PORT=$2 ;;
        --bin-dir) BIN_DIR=$2 ;; --data-root) DATA_ROOT=$2 ;; --state) STATE=$2 ;;
        --warmlaked-args) WL_ARGS=$2 ;;
        --init) INIT=$2 ;; --etc-dir) ETC=$2 ;; --run-user) RUN_USER=$2 ;; --log-dir) LOG_DIR=$2 ;;
        --etcd-data-dir) ETCD_DATA=$2 ;;
      esac
      shift 2 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) [ -z "$MAP" ] || die "one map only ($MAP, then $1)"; MAP=$1; shift ;;
  esac
done
[ -n "$MAP" ] || usage
[ -r "$MAP" ] || die "cannot read the map $MAP"
for p in "$ETCD_PORT" "$PEER_PORT"; do
  if ! [[ $p =~ ^[0-9]+$ ]] || [ "$p" -lt 1 ] || [ "$p" -gt 65535 ]; then die "port $p: want 1..65535"; fi
done
case $INIT in systemd | none) ;; *) die "--init $INIT: want systemd or none" ;; esac
[ "$INIT" = none ] || [ -z "$LOG_DIR" ] || die "--log-dir is for --init none (under systemd the journal has the logs)"
LOG_DIR=${LOG_DIR:-/var/log/warmlake}
for d in "$BIN_DIR" "$DATA_ROOT" "$ETC" "$LOG_DIR" ${ETCD_DATA:+"$ETCD_DATA"}; do
  [[ $d =~ ^/[A-Za-z0-9._/-]*$ ]] || die "$d: want an absolute path of A-Z a-z 0-9 . _ - /"
done
[[ $SSH_USER =~ ^[A-Za-z0-9._-]*$ ]] || die "--ssh-user $SSH_USER: not a user name"
[[ $RUN_USER =~ ^[a-z_][a-z0-9_-]*$ ]] || die "--run-user $RUN_USER: not a user name"
[[ $WL_ARGS != *[\'\"\\\$\`]* ]] || die "--warmlaked-args: no quotes, \\, \$ or \` (it goes into a systemd env file)"

# ---- 1. the map, checked before anything else happens
PLAN=$(python3 - "$MAP" "$ETCD_HOSTS" <<'EOF'
import ipaddress, json, re, sys

path, etcd_arg = sys.argv[1], sys.argv[2]
def fail(msg):
    sys.stderr.write("ssh-deploy: %s: %s\n" % (path, msg))
    sys.exit(1)
try:
    with open(path) as f:
        m = json.load(f)
except json.JSONDecodeError as e:
    fail("not JSON: line %d column %d: %s" % (e.lineno, e.colno, e.msg))
except (OSError, UnicodeDecodeError) as e:
    fail("cannot read: %s" % e)
ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
HOST = re.compile(r"^[A-Za-z0-9._-]{1,253}$")
if not isinstance(m, dict):
    fail("want a JSON object (cluster/map.h)")
if not isinstance(m.get("cluster"), str) or not ID.match(m["cluster"]):
    fail('"cluster": want an id of 1..64 of A-Z a-z 0-9 . - _')
if not isinstance(m.get("epoch"), int) or isinstance(m["epoch"], bool) or m["epoch"] < 1:
    fail('"epoch": want a positive integer')
nodes = m.get("nodes")
if not isinstance(nodes, list) or not nodes:
    fail('"nodes": want a non-empty list')

def split(addr, where):
    if not isinstance(addr, str):
        fail("%s: want \"HOST:PORT\"" % where)
    mt = re.match(r"^\[([0-9A-Fa-f:.]+)\]:(\d+)$", addr) or re.match(r"^([^:\[\]]+):(\d+)$", addr)
    if not mt:
        fail("%s %r: want HOST:PORT (or [IPv6]:PORT)" % (where, addr))
    host, port = mt.group(1), int(mt.group(2))
    if not 1 <= port <= 65535:
        fail("%s %r: port out of 1..65535" % (where, addr))
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        # warmlaked listens on (and peers dial) the map's addresses as IP literals.
        fail("%s %r: want an IP address (warmlaked listens on it; host names are not "
             "resolved)" % (where, addr))
    if ip.is_unspecified:
        fail("%s %r: the host must be an address ssh can reach (not a wildcard)" % (where, addr))
    return host, port

seen, hosts, drives, used = set(), [], {}, set()
for i, n in enumerate(nodes):
    where = "nodes[%d]" % i
    if not isinstance(n, dict):
        fail("%s: want an object" % where)
    nid = n.get("id")
    if not isinstance(nid, str) or not ID.match(nid):
        fail("%s: \"id\": want 1..64 of A-Z a-z 0-9 . - _" % where)
    if nid in seen:
        fail("node id %s twice" % nid)
    seen.add(nid)
    for k in ("s3", "proto", "drives"):
        if k not in n:
            fail("node %s: no \"%s\"" % (nid, k))
    h, p = split(n["s3"], "node %s s3" % nid)
    h2, p2 = split(n["proto"], "node %s proto" % nid)
    for a in ((h, p), (h2, p2)):
        if a in used:
            fail("node %s: %s:%d is used twice" % (nid, a[0], a[1]))
        used.add(a)
    d = n["drives"]
    if not isinstance(d, int) or isinstance(d, bool) or not 1 <= d <= 20:
        fail("node %s: \"drives\": want 1..20" % nid)
    drives[nid] = d
    hosts.append((nid, h, d))
EC = re.compile(r"^(\d+)\+(\d+)$")
if "ec" in m and not (isinstance(m["ec"], str) and EC.match(m["ec"])):
    fail('"ec": want "K+M"')
for j, s in enumerate(m.get("sets") or []):
    if not isinstance(s, dict) or not isinstance(s.get("ec"), str) or not EC.match(s["ec"]):
        fail('sets[%d]: want {"ec": "K+M", "drives": [...]}' % j)
    k, mm = map(int, EC.match(s["ec"]).groups())
    ds = s.get("drives")
    if not isinstance(ds, list) or len(ds) != k + mm or len(set(map(str, ds))) != len(ds):
        fail("sets[%d]: want %d distinct drives" % (j, k + mm))
    for dr in ds:
        nd = str(dr).split("/")
        if len(nd) != 2 or nd[0] not in drives or not nd[1].isdigit() or int(nd[1]) >= drives[nd[0]]:
            fail("sets[%d]: no drive %s in the map (want NODE/N)" % (j, dr))
if etcd_arg:
    etcd = etcd_arg.split(",")
    for h in etcd:
        if not (HOST.match(h) or ":" in h):
            fail("--etcd-hosts %r: not a host" % h)
    if len(set(etcd)) != len(etcd):
        fail("--etcd-hosts names a host twice")
else:
    distinct = list(dict.fromkeys(h for _, h, _ in hosts))
    etcd = distinct[:3] if len(distinct) >= 3 else distinct[:1]
print("CLUSTER", m["cluster"])
for nid, h, d in hosts:
    print("NODE", nid, h, d)
for h in etcd:
    try:
        ip = "ip" if ipaddress.ip_address(h) else ""
    except ValueError:
        ip = "name"
    print("ETCD", h, ip)
EOF
) || exit 1

CLUSTER='' NODE_IDS=() NODE_HOST=() NODE_DRIVES=() ETCD=() ETCD_IS_IP=()
while read -r kind a b c; do
  case $kind in
    CLUSTER) CLUSTER=$a ;;
    NODE) NODE_IDS+=("$a"); NODE_HOST+=("$b"); NODE_DRIVES+=("$c") ;;
    ETCD) ETCD+=("$a"); ETCD_IS_IP+=("$b") ;;
  esac
done <<<"$PLAN"
STATE=${STATE:-./deploy-state/$CLUSTER}
ETCD_DATA_SET=${ETCD_DATA:+1}
ETCD_DATA=${ETCD_DATA:-/var/lib/etcd/warmlake-$CLUSTER}
# Every host, once, in map order, then the etcd hosts that run no node.
mapfile -t HOSTS < <(printf '%s\n' "${NODE_HOST[@]}" "${ETCD[@]}" | awk '!seen[$0]++')
urlhost() { case $1 in *:*) echo "[$1]" ;; *) echo "$1" ;; esac; }
ETCD_URLS=$(for h in "${ETCD[@]}"; do printf 'http://%s:%s,' "$(urlhost "$h")" "$ETCD_PORT"; done)
ETCD_URLS=${ETCD_URLS%,}
[ $((${#ETCD[@]} % 2)) = 1 ] || echo "ssh-deploy: warning: ${#ETCD[@]} etcd members: an odd number tolerates as many failures with one fewer" >&2

WARMLAKED=$BUILD/server/warmlaked ADMIN=$BUILD/cluster/wl-admin
for b in "$WARMLAKED" "$ADMIN"; do [ -x "$b" ] || die "$b missing: build first (cmake) or give --build DIR"; done
for f in "$ROOT/deploy/systemd/warmlaked@.service" "$ROOT/deploy/systemd/etcd.service.d/warmlake.conf" \
  "$ROOT/deploy/wl-init.sh"; do
  [ -r "$f" ] || die "$f missing"
done
if [ "$DRY" = 0 ]; then
  command -v ssh >/dev/null || die "ssh missing (apt-get install openssh-client)"
  command -v scp >/dev/null || die "scp missing (apt-get install openssh-client)"
fi

# ---- how commands are shown and run
q() { # q ARG: ARG quoted for a POSIX shell, readably
  if [[ $1 =~ ^[A-Za-z0-9_./:@=,+%-]+$ ]]; then printf '%s' "$1"; else printf "'%s'" "${1//\'/\'\\\'\'}"; fi
}
show() { # show [< FILE] ARG...: the command line as a shell would take it
  local in='' out='' a
  if [ "$1" = "<" ]; then in=$2; shift 2; fi
  for a in "$@"; do out+="$(q "$a") "; done
  out=${out% }
  [ -z "$in" ] || out+=" < $(q "$in")"
  printf '%s\n' "$out"
}
STEP=''
run() { # run [< FILE] CMD...: print it under --dry-run, else run it; a failure ends the deploy
  if [ "$DRY" = 1 ]; then show "$@"; return 0; fi
  local in=/dev/null rc=0
  if [ "$1" = "<" ]; then in=$2; shift 2; fi
  "$@" <"$in" || rc=$?
  [ "$rc" = 0 ] || die "$STEP failed (exit $rc): $(show "$@")"
}
note() { # a local step: a comment under --dry-run, a line of progress otherwise
  if [ "$DRY" = 1 ]; then printf '# %s\n' "$*"; else printf 'ssh-deploy: %s\n' "$*"; fi
}
target() { if [ -n "$SSH_USER" ]; then echo "$SSH_USER@$1"; else echo "$1"; fi; }
remote_user=${SSH_USER:-$(id -un)}
SUDO=(sudo -n)
[ "$remote_user" = root ] && SUDO=()
on() { # on HOST SCRIPT [< FILE]: run SCRIPT as root on HOST
  local h=$1 script=$2
  shift 2
  local cmd
  cmd="$(show "${SUDO[@]}" sh -c "set -e; $script")"
  if [ $# -ge 2 ] && [ "$1" = "<" ]; then
    run "<" "$2" ssh "${SSH_OPTS[@]}" "$(target "$h")" "$cmd"
  else
    run ssh "${SSH_OPTS[@]}" "$(target "$h")" "$cmd"
  fi
}
nodes_on() { local i; for i in "${!NODE_IDS[@]}"; do [ "${NODE_HOST[$i]}" = "$1" ] && echo "${NODE_IDS[$i]}"; done; return 0; }
is_etcd() { local h; for h in "${ETCD[@]}"; do [ "$h" = "$1" ] && return 0; done; return 1; }

# ---- 2. secrets and the files each host gets, under STATE
note "cluster $CLUSTER: ${#NODE_IDS[@]} nodes on ${#HOSTS[@]} hosts; etcd on ${ETCD[*]} ($ETCD_URLS)"
if [ ! -s "$STATE/cluster-secret" ] || [ ! -s "$STATE/credentials" ]; then
  note "generate $STATE/cluster-secret and $STATE/credentials (mode 0600, once)"
  if [ "$DRY" = 0 ]; then
    mkdir -p "$STATE"
    wl_make_secret "$STATE/cluster-secret"
    wl_make_credentials "$STATE/credentials"
  fi
fi
# New ones are made 0600; this is for ones that were there before (put by hand).
[ "$DRY" = 1 ] || chmod 0600 "$STATE/cluster-secret" "$STATE/credentials"

FILES=()
stage_files() { # stage_files HOST: FILES, what HOST gets, written under STATE/stage/HOST (not under --dry-run)
  local h=$1 dir=$STATE/stage/$1 id i
  if [ "$INIT" = systemd ]; then FILES=("$dir/warmlaked@.service"); else FILES=("$dir/wl-init"); fi
  FILES+=("$dir/map.json")
  for id in $(nodes_on "$h"); do FILES+=("$dir/$id.env"); done
  if is_etcd "$h"; then
    FILES+=("$dir/etcd.env")
    [ "$INIT" = none ] || FILES+=("$dir/warmlake.conf")
  fi
  if [ "$DRY" = 1 ]; then
    note "write ${FILES[*]}"
    return 0
  fi
  mkdir -p "$dir"
  if [ "$INIT" = systemd ]; then
    # The unit's paths and user, as given (all the defaults leave it as it is).
    local user=(-e "s/^User=warmlake\$/User=$RUN_USER/")
    [ "$RUN_USER" = warmlake ] || user+=(-e '/^Group=warmlake$/d') # then the user's own group
    sed -e "s,/usr/local/bin/,$BIN_DIR/,g" -e "s,/var/lib/warmlake/,$DATA_ROOT/,g" \
      -e "s,/etc/warmlake/,$ETC/,g" "${user[@]}" \
      "$ROOT/deploy/systemd/warmlaked@.service" >"$dir/warmlaked@.service"
  else
    # wl-init's settings, one line each.
    sed -e "s,^ETC=.*,ETC=$ETC," -e "s,^BIN=.*,BIN=$BIN_DIR," -e "s,^DATA=.*,DATA=$DATA_ROOT," \
      -e "s,^LOGS=.*,LOGS=$LOG_DIR," -e "s,^RUN_USER=.*,RUN_USER=$RUN_USER," \
      "$ROOT/deploy/wl-init.sh" >"$dir/wl-init"
  fi
  cp "$MAP" "$dir/map.json"
  for id in $(nodes_on "$h"); do
    printf 'WARMLAKE_ETCD=%s\nWARMLAKED_ARGS=%s\n' "$ETCD_URLS" "$WL_ARGS" >"$dir/$id.env"
  done
  if is_etcd "$h"; then
    [ "$INIT" = none ] || sed -e "s,/etc/warmlake/,$ETC/,g" \
      "$ROOT/deploy/systemd/etcd.service.d/warmlake.conf" >"$dir/warmlake.conf"
    local u listen initial=''
    u=$(urlhost "$h")
    listen=$u
    for i in "${!ETCD[@]}"; do [ "${ETCD[$i]}" = "$h" ] && [ "${ETCD_IS_IP[$i]}" = name ] && listen=0.0.0.0; done
    for i in "${ETCD[@]}"; do initial+="$i=http://$(urlhost "$i"):$PEER_PORT,"; done
    {
      echo "DAEMON_ARGS="
      echo "ETCD_NAME=$h"
      echo "ETCD_DATA_DIR=$ETCD_DATA"
      if [ "$listen" = 127.0.0.1 ]; then
        echo "ETCD_LISTEN_CLIENT_URLS=http://127.0.0.1:$ETCD_PORT"
      else
        echo "ETCD_LISTEN_CLIENT_URLS=http://$listen:$ETCD_PORT,http://127.0.0.1:$ETCD_PORT"
      fi
      echo "ETCD_ADVERTISE_CLIENT_URLS=http://$u:$ETCD_PORT"
      echo "ETCD_LISTEN_PEER_URLS=http://$listen:$PEER_PORT"
      echo "ETCD_INITIAL_ADVERTISE_PEER_URLS=http://$u:$PEER_PORT"
      echo "ETCD_INITIAL_CLUSTER=${initial%,}"
      echo "ETCD_INITIAL_CLUSTER_STATE=new"
      echo "ETCD_INITIAL_CLUSTER_TOKEN=warmlake-$CLUSTER"
    } >"$dir/etcd.env"
  fi
}

# ---- 3. every host answers before any is changed
STEP="reaching a host"
for h in "${HOSTS[@]}"; do
  STEP="ssh to $h (and sudo -n there)"
  run ssh "${SSH_OPTS[@]}" "$(target "$h")" "$(show "${SUDO[@]}" true)"
done

# ---- 4. packages, user, directories, files
RUNTIME="librocksdb7.8 libuv1 libisal2 libjansson4 libcurl4 libinih1 libssl3 libzstd1 libexpat1"
inst() { # inst SRC DST MODE [MARK]: a snippet installing SRC as DST when they differ (then touching MARK)
  printf 'if ! cmp -s %s %s; then install -D -m %s %s %s%s; fi; ' \
    "$(q "$1")" "$(q "$2")" "$3" "$(q "$1")" "$(q "$2")" "${4:+; touch $4}"
}
MARK_NODES=$ETC/.restart-nodes MARK_ETCD=$ETC/.restart-etcd
for h in "${HOSTS[@]}"; do
  nodes=$(nodes_on "$h" | tr '\n' ' ')
  STEP="preparing $h"
  s=''
  if [ "$APT" = 1 ]; then
    pk=$RUNTIME
    is_etcd "$h" && pk+=" etcd-server"
    post=''
    # Without systemd, etcd-server's postinst starts Debian's own etcd (its sysvinit
    # script, on 127.0.0.1:2379): the member wl-init starts could not listen. Only
    # just after the install, when no etcd of ours runs there yet.
    if [ "$INIT" = none ] && is_etcd "$h"; then
      post=" if [ -x /etc/init.d/etcd ]; then /etc/init.d/etcd stop || true; update-rc.d etcd disable || true; fi;"
    fi
    s+="dpkg-query -W $pk >/dev/null 2>&1 || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $pk;$post }; "
  elif is_etcd "$h"; then
    s+="command -v etcd >/dev/null || { echo \"no etcd on $h: apt-get install etcd-server there, or leave out --no-apt\" >&2; exit 1; }; "
  fi
  s+="id -u $RUN_USER >/dev/null 2>&1 || useradd --system --user-group --home-dir $DATA_ROOT --shell /usr/sbin/nologin $RUN_USER; "
  if is_etcd "$h" && { [ "$INIT" = none ] || [ -n "$ETCD_DATA_SET" ]; }; then
    # Debian's etcd unit runs etcd as etcd, as wl-init does; the package makes the user.
    s+="id -u etcd >/dev/null 2>&1 || { echo \"no etcd user on $h: Debian's etcd-server makes it\" >&2; exit 1; }; "
    s+="install -d -o etcd -g etcd -m 0700 $ETCD_DATA; "
  fi
  group=$RUN_USER # useradd --user-group: the user's own group; a user there before may have another
  [ "$RUN_USER" = warmlake ] || group="\"\$(id -gn $RUN_USER)\""
  s+="install -d -m 0755 $ETC; install -d -o $RUN_USER -g $group -m 0750 $DATA_ROOT"
  # Not DATA_ROOT/ID/driveN: warmlaked makes those. A drive0 there before the
  # node's first start (its layout file) reads as data of the one-set layout
  # from before that file, and a map of more sets is refused (server/node_drives.c
  # check_layout).
  for id in $nodes; do s+=" $DATA_ROOT/$id"; done
  run ssh "${SSH_OPTS[@]}" "$(target "$h")" "mkdir -p .wl-deploy && $(show "${SUDO[@]}" sh -c "set -e; $s")"

  STEP="copying files to $h"
  stage_files "$h"
  run scp -q "${SSH_OPTS[@]}" "$WARMLAKED" "$ADMIN" "${FILES[@]}" "$(target "$h"):.wl-deploy/"

  STEP="installing the secrets on $h"
  for f in cluster-secret credentials; do
    # Under --init none the node reads the secret itself, as RUN_USER (systemd
    # hands it a private copy instead); the credentials are read by wl-init as root.
    own=root:root mode=0600
    [ "$INIT:$f" != none:cluster-secret ] || own="root:\"\$(id -gn $RUN_USER)\"" mode=0640
    on "$h" "umask 077; cat >$ETC/$f.new; if cmp -s $ETC/$f.new $ETC/$f; then rm $ETC/$f.new; else mv $ETC/$f.new $ETC/$f; touch $MARK_NODES; fi; chown $own $ETC/$f; chmod $mode $ETC/$f" \
      "<" "$STATE/$f"
  done

  STEP="installing on $h"
  s="$(inst .wl-deploy/warmlaked "$BIN_DIR/warmlaked" 0755 "$MARK_NODES")"
  s+="$(inst .wl-deploy/wl-admin "$BIN_DIR/wl-admin" 0755 "$MARK_NODES")"
  if [ "$INIT" = systemd ]; then
    s+="$(inst .wl-deploy/warmlaked@.service /etc/systemd/system/warmlaked@.service 0644 "$MARK_NODES")"
  else
    # Its paths and user are how the nodes are started: a change restarts them (etcd
    # takes a new log directory at its next restart).
    s+="$(inst .wl-deploy/wl-init "$BIN_DIR/wl-init" 0755 "$MARK_NODES")"
  fi
  s+="$(inst .wl-deploy/map.json "$ETC/map.json" 0644)"
  for id in $nodes; do s+="$(inst ".wl-deploy/$id.env" "$ETC/$id.env" 0644 "$MARK_NODES")"; done
  if is_etcd "$h"; then
    s+="$(inst .wl-deploy/etcd.env "$ETC/etcd.env" 0644 "$MARK_ETCD")"
    [ "$INIT" = none ] ||
      s+="$(inst .wl-deploy/warmlake.conf /etc/systemd/system/etcd.service.d/warmlake.conf 0644 "$MARK_ETCD")"
  fi
  if [ "$INIT" = systemd ]; then s+="systemctl daemon-reload"; else s=${s%; }; fi
  on "$h" "$s"
done

# ---- 5. etcd: every member started without waiting for it (a member is
# ready only once a quorum is up), restarted when its settings changed
for h in "${ETCD[@]}"; do
  STEP="starting etcd on $h"
  if [ "$INIT" = systemd ]; then
    on "$h" "systemctl enable etcd; if [ -e $MARK_ETCD ]; then systemctl restart --no-block etcd; rm -f $MARK_ETCD; else systemctl start --no-block etcd; fi"
  else
    on "$h" "if [ -e $MARK_ETCD ]; then $BIN_DIR/wl-init restart etcd; rm -f $MARK_ETCD; else $BIN_DIR/wl-init start etcd; fi"
  fi
done

# ---- 6. the map, once
first=${NODE_HOST[0]}
STEP="storing the map in etcd (wl-admin cluster init, on $first)"
on "$first" "i=0; rc=1; while [ \$i -lt 60 ]; do rc=0; $BIN_DIR/wl-admin --etcd $ETCD_URLS cluster show >/dev/null 2>&1 || rc=\$?; [ \$rc != 1 ] && break; i=\$((i + 1)); sleep 2; done; [ \$rc != 1 ] || { echo \"etcd at $ETCD_URLS not answering after 120 s: see $([ "$INIT" = systemd ] && echo "journalctl -u etcd" || echo "$LOG_DIR/etcd.log") on its hosts\" >&2; exit 1; }; if [ \$rc = 2 ]; then $BIN_DIR/wl-admin --etcd $ETCD_URLS cluster init --map $ETC/map.json; else echo \"etcd already holds a map: left as it is (wl-admin map set --map FILE replaces it)\"; fi"

# ---- 7. the nodes
for h in "${HOSTS[@]}"; do
  ids=$(nodes_on "$h" | tr '\n' ' ')
  ids=${ids% }
  [ -n "$ids" ] || continue
  STEP="starting the nodes on $h"
  if [ "$INIT" = systemd ]; then
    # shellcheck disable=SC2086 # one unit for each id
    units=$(printf 'warmlaked@%s ' $ids)
    units=${units% }
    on "$h" "systemctl daemon-reload; if [ -e $MARK_NODES ]; then systemctl enable $units; systemctl restart $units; rm -f $MARK_NODES; else systemctl enable --now $units; fi"
  else
    # A restart is rolling: one node at a time, each waited for until ready (its
    # peers run). A start is not waited for here: a node is ready once it has
    # met its peers (or given up on them after a while), so all start first.
    on "$h" "if [ -e $MARK_NODES ]; then $BIN_DIR/wl-init restart $ids; rm -f $MARK_NODES; else $BIN_DIR/wl-init start $ids; fi"
  fi
done
if [ "$INIT" = none ]; then
  for h in "${HOSTS[@]}"; do
    ids=$(nodes_on "$h" | tr '\n' ' ')
    ids=${ids% }
    [ -n "$ids" ] || continue
    STEP="waiting for the nodes on $h to be ready"
    on "$h" "$BIN_DIR/wl-init wait $ids"
  done
fi
STEP="wl-admin status (on $first)"
run ssh "${SSH_OPTS[@]}" "$(target "$first")" "$BIN_DIR/wl-admin --etcd $ETCD_URLS status"
note "done: S3 on every node's s3 address; credentials in $STATE/credentials (WARMLAKE_ACCESS_KEY/WARMLAKE_SECRET_KEY are AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY)"
