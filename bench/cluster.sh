#!/usr/bin/env bash
# bench/cluster.sh BUILD [ROUNDS]: what reaching drives over the node
# protocol costs. Two deployments on the same disk, the same rows, in the
# same run: A, one node with 6 local drives (EC 4+2); B, a cluster of 3
# nodes with 2 drives each (one 4+2 set spanning them), measured through
# node n1, which reaches 4 of the 6 drives over proto/ (loopback TCP). Rows
# alternate A, B, A, B... (ROUNDS each, default 2), so the disk's swings fall
# on both alike; prints each row's figures and B/A (the ceiling of the
# cluster is the same store on one node).
#
# B_LAYOUT=sets: B is instead one node with 12 drives, two 4+2 sets (every
# key on one of them, listings merged over both): what placement and the
# merge cost against the one-set node.
#
# B_LAYOUT=pools: what pools cost. A is one clustered node (a map file, no
# etcd) with 12 drives as one pool of two 4+2 sets; B the same 12 drives as
# two pools of one set each (every request finds its key's pool by a head
# lookup in each pool; new keys split between them).
#
# Environment: ROWS (one per line, "NAME WORKLOAD FIELD WL-BENCH ARGS..."),
# DUR (seconds a run, default 5), BENCH_DIR (scratch dir on the disk).
set -euo pipefail
# shellcheck source=bench/ab_rows.sh
source "$(dirname "$0")/ab_rows.sh"
B=$(cd "${1:-build}" && pwd)
ROUNDS=${2:-2}
DUR=${DUR:-5}
cd "$(dirname "$0")/.."
DIR=${BENCH_DIR:-$PWD/bench/results/scratch}/cluster
WLB=$B/bench/wlbench/wl-bench
rm -rf "$DIR"
mkdir -p "$DIR/json"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$DIR"
}
trap cleanup EXIT
export WARMLAKE_ACCESS_KEY=wlbench WARMLAKE_SECRET_KEY=wlbench-secret-key
export WARMLAKE_CLUSTER_SECRET=bench-cluster-secret-0123456789

wait_ready() { # wait_ready LOG: the port it serves S3 on
  local port=""
  for _ in $(seq 600); do
    port=$(sed -n 's/^warmlaked: ready port=\([0-9]*\).*/\1/p' "$1")
    [ -n "$port" ] && break
    sleep 0.1
  done
  [ -n "$port" ] || { cat "$1" >&2; exit 1; }
  echo "$port"
}

LAYOUT=${B_LAYOUT:-cluster}
if [ "$LAYOUT" = pools ]; then
  # One node, 12 drives: A one pool of two sets, B two pools of one set.
  read -r -a pp <<<"$(python3 -c 'import socket
ss=[socket.socket() for _ in range(4)]
[s.bind(("127.0.0.1",0)) for s in ss]
print(" ".join(str(s.getsockname()[1]) for s in ss))')"
  python3 - "$DIR" "${pp[@]}" <<'PY'
import json, sys
d, p = sys.argv[1], sys.argv[2:]
def node(i):
    return {"id": "n1", "s3": "127.0.0.1:%s" % p[2 * i], "proto": "127.0.0.1:%s" % p[2 * i + 1],
            "drives": 12}
one = {"ec": "4+2", "drives": ["n1/%d" % i for i in range(6)]}
two = {"ec": "4+2", "drives": ["n1/%d" % i for i in range(6, 12)]}
json.dump({"cluster": "bencha", "epoch": 1, "nodes": [node(0)],
           "pools": [{"id": "p0", "sets": [one, two]}]}, open(d + "/a.json", "w"))
json.dump({"cluster": "benchb", "epoch": 1, "nodes": [node(1)],
           "pools": [{"id": "p0", "sets": [one]}, {"id": "p1", "sets": [two]}]},
          open(d + "/b.json", "w"))
PY
  for n in a b; do
    "$B/server/warmlaked" --cluster "$DIR/$n.json" --node n1 --data "$DIR/pools-$n" \
      --drive-capacity 12G --log-level warn >"$DIR/$n.log" 2>&1 &
    PIDS+=($!)
  done
else
  "$B/server/warmlaked" --listen 127.0.0.1:0 --data "$DIR/single" --drives 6 --ec 4+2 \
    --drive-capacity 24G --log-level warn >"$DIR/single.log" 2>&1 &
  PIDS+=($!)
fi
read -r -a ports <<<"$(python3 -c 'import socket
ss=[socket.socket() for _ in range(6)]
[s.bind(("127.0.0.1",0)) for s in ss]
print(" ".join(str(s.getsockname()[1]) for s in ss))')"
python3 - "$DIR/map.json" "${ports[@]}" <<'PY'
import json, sys
p = sys.argv[2:]
json.dump({"cluster": "bench", "epoch": 1, "nodes": [
    {"id": "n%d" % (i + 1), "s3": "127.0.0.1:%s" % p[2 * i], "proto": "127.0.0.1:%s" % p[2 * i + 1],
     "drives": 2} for i in range(3)]}, open(sys.argv[1], "w"))
PY
if [ "$LAYOUT" = pools ]; then
  :
elif [ "$LAYOUT" = sets ]; then
  "$B/server/warmlaked" --listen 127.0.0.1:0 --data "$DIR/sets" --drives 12 --ec 4+2 \
    --drive-capacity 12G --log-level warn >"$DIR/sets.log" 2>&1 &
  PIDS+=($!)
else
  for i in 1 2 3; do
    "$B/server/warmlaked" --cluster "$DIR/map.json" --node "n$i" --data "$DIR/n$i" \
      --drive-capacity 8G --log-level warn >"$DIR/n$i.log" 2>&1 &
    PIDS+=($!)
  done
fi
if [ "$LAYOUT" = pools ]; then
  EP_A=http://127.0.0.1:$(wait_ready "$DIR/a.log")
  EP_B=http://127.0.0.1:$(wait_ready "$DIR/b.log")
else
  EP_A=http://127.0.0.1:$(wait_ready "$DIR/single.log")
fi
if [ "$LAYOUT" = pools ]; then
  :
elif [ "$LAYOUT" = sets ]; then
  EP_B=http://127.0.0.1:$(wait_ready "$DIR/sets.log")
else
  for i in 1 2 3; do port=$(wait_ready "$DIR/n$i.log"); [ $i = 1 ] && EP_B=http://127.0.0.1:$port; done
fi

rows=(
  "put_1MiB_c8 put mb_per_s --size 1MiB --clients 8 --prefix p1m/"
  "get_1MiB_c8 get mb_per_s --size 1MiB --clients 8 --prefix g1m/ --objects 256 --no-prepare"
  "put_4KiB_c32 put ops_per_s --size 4KiB --clients 32 --prefix p4k/"
  "get_4KiB_c8 get ops_per_s --size 4KiB --clients 8 --prefix g4k/ --objects 2000 --no-prepare"
  "put_64MiB_c4 put mb_per_s --size 64MiB --clients 4 --prefix p64/"
  "list_v2_pages_c8 list ops_per_s --size 0 --clients 8 --prefix lst/ --objects 20000 --no-prepare"
)
if [ -n "${ROWS:-}" ]; then
  mapfile -t rows <<<"$ROWS"
fi
[ -n "${ROWS:-}" ] || for n in A B; do
  ep=EP_$n
  for p in "1MiB g1m/ 256" "4KiB g4k/ 2000"; do
    set -- $p
    "$WLB" get --endpoint "${!ep}" --quiet --size "$1" --prefix "$2" --objects "$3" --clients 8 \
      --ops 1 >/dev/null
  done
  "$WLB" list --endpoint "${!ep}" --quiet --size 0 --prefix lst/ --objects 20000 --clients 8 \
    --ops 1 >/dev/null
done

if [ "$LAYOUT" = pools ]; then
  printf '%-17s %-28s %-28s %s\n' row "A: 12 drives, 1 pool x 2 sets" "B: 2 pools x 1 set" "B/A"
elif [ "$LAYOUT" = sets ]; then
  printf '%-17s %-28s %-28s %s\n' row "A: 1 node, 6 drives" "B: 1 node, 12 drives, 2 sets" "B/A"
else
  printf '%-17s %-28s %-28s %s\n' row "A: 1 node, 6 drives" "B: 3 nodes x 2 (via n1)" "B/A"
fi
ab_rows 17 28
