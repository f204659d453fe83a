#!/usr/bin/env bash
# bench/cluster_netns.sh [BUILD]: issue 13's cluster rows. Four nodes, each in a network
# namespace of its own (deploy/netns-cluster.sh: 3 file-backed drives a node, EC 4+2 over the
# 12, etcd), next to one node of the same 12 drives (4+2, two sets) on loopback, in the same
# run on the same disk:
#   - PUT and GET of 4 KiB, 1 MiB and 64 MiB through n1, and spread over the four nodes (a
#     wl-bench per node, the clients split between them, the rates summed): ratio to the
#     single node's row;
#   - ListObjectsV2 over 10^5 keys through n1 (keys/s), ratio to the single node's;
#   - GET 1 MiB p99 with n2 slow: netem's 200 ms delay on its link, or where the kernel has no
#     netem (this VM) n2 stopped 200 ms of every 250 ms: ratio to the healthy p99;
#   - GET 1 MiB with one node down (n4 killed): ratio to healthy. Two nodes down needs a
#     layout that keeps two shards of a set off any pair of nodes: 4+2 over four nodes puts
#     two shards of each set on some node, so any two nodes down take three or four shards of
#     a set. That row runs on a second cluster, EC 2+2 (each set one shard a node), healthy,
#     one node down and two down;
#   - on a third cluster holding REFILL_GB (default 4) GiB of 4 MiB objects, a drive of n3
#     replaced by an empty one and refilled by n3's heal scanner from the other nodes (its rate
#     unbounded: --scrub-rate 1T, as bench/heal.sh): MB/s written to it over the pass's
#     refill (the sets the drive is in, walked first: event=refill_pass), against fio's
#     sequential 1 MiB direct write on the same disk, and against what the network lets it
#     write: it reads k blocks a block written, so 1/k of what iperf3 sends into n3 from the
#     other three nodes at once (the row's second ceiling).
# Every figure is wl-bench's with content verified. Needs root (namespaces) and etcd.
# Environment: ROWS=refill (that row alone), DUR (seconds a run, default 5),
# BENCH_DIR (scratch dir on the disk). Prints one line a row: name, value, ceiling, ratio.
set -euo pipefail
B=$(cd "${1:-build}" && pwd)
DUR=${DUR:-5}
cd "$(dirname "$0")/.."
ROOT=$PWD
DIR=${BENCH_DIR:-$ROOT/bench/results/scratch}/cluster-netns
WLB=$B/bench/wlbench/wl-bench
NS=$ROOT/deploy/netns-cluster.sh
[ "$(id -u)" = 0 ] || { echo "cluster_netns.sh: needs root (network namespaces)" >&2; exit 2; }
rm -rf "$DIR"
mkdir -p "$DIR/json"
SINGLE_PID=""
cleanup() {
  if [ -n "$SINGLE_PID" ]; then
    kill "$SINGLE_PID" 2>/dev/null || true
    wait "$SINGLE_PID" 2>/dev/null || true
  fi
  for c in c42 c22 cr; do
    if [ -d "$DIR/$c" ]; then WL_BUILD=$B "$NS" --dir "$DIR/$c" down >/dev/null 2>&1 || true; fi
  done
  rm -rf "$DIR"
}
trap cleanup EXIT

ns() { WL_BUILD=$B "$NS" --dir "$DIR/$1" "${@:2}" >>"$DIR/$1.ctl" 2>&1 || { cat "$DIR/$1.ctl" >&2; exit 1; }; }
up() { # up NAME EC: four nodes of 3 drives; its endpoints in S3_N1..S3_N4, its keys exported
  ns "$1" up 4 --drives 3 --ec "$2" --capacity 8G -- --segment-size 64M --scrub-rate 1T
  set -a
  # shellcheck disable=SC1090,SC1091 # written by netns-cluster.sh up
  . "$DIR/$1/credentials"
  # shellcheck disable=SC1090,SC1091
  . "$DIR/$1/env"
  set +a
}
# fig JSON WORKLOAD FIELD [latency]: a figure of one wl-bench run (content verified).
fig() {
  python3 - "$@" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["mismatches"] == 0, sys.argv[1]
o = j["ops"][sys.argv[2]]
print(round(o["latency_ms"]["p99"] if len(sys.argv) > 4 else o[sys.argv[3]], 2))
PY
}
# one NAME EP WORKLOAD FIELD ARGS...: one wl-bench on EP, its figure.
one() {
  local name=$1 ep=$2 wl=$3 field=$4
  shift 4
  "$WLB" "$wl" --endpoint "$ep" --quiet --duration "$DUR" --json "$DIR/json/$name.json" "$@" \
    >/dev/null
  fig "$DIR/json/$name.json" "$wl" "$field"
}
# spread NAME WORKLOAD FIELD CLIENTS PREFIX OWN ARGS...: a wl-bench on every node at once,
# CLIENTS/4 clients each (OWN=1: each its own prefix, as PUTs of new keys need); the sum.
spread() {
  local name=$1 wl=$2 field=$3 c=$4 prefix=$5 own=$6 i ep pids=()
  shift 6
  for i in 1 2 3 4; do
    ep=S3_N$i
    "$WLB" "$wl" --endpoint "${!ep}" --quiet --duration "$DUR" --clients $((c / 4 ? c / 4 : 1)) \
      --prefix "$prefix$([ "$own" = 1 ] && echo "n$i/")" --json "$DIR/json/${name}_n$i.json" "$@" \
      >/dev/null &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i"; done
  for i in 1 2 3 4; do fig "$DIR/json/${name}_n$i.json" "$wl" "$field"; done |
    awk '{s += $1} END {printf "%.1f\n", s}'
}
row() { # row NAME VALUE UNIT CEILING_NAME CEILING
  printf '%-44s %10s %-6s %-26s %10s %s\n' "$1" "$2" "$3" "$4" "$5" \
    "$(python3 -c "import sys; print('%.3f' % (float(sys.argv[1]) / float(sys.argv[2])) if float(sys.argv[2]) else '-')" "$2" "$5")"
}
prepare() { # prepare EP: the objects the GET and list rows read
  local p size prefix n
  for p in "64MiB g64/ 8" "1MiB g1m/ 256" "4KiB g4k/ 2000"; do
    read -r size prefix n <<<"$p"
    "$WLB" get --endpoint "$EP" --quiet --size "$size" --prefix "$prefix" --objects "$n" \
      --clients 8 --ops 1 >/dev/null
  done
}

printf '%-44s %10s %-6s %-26s %10s %s\n' row value unit ceiling "" ratio
# ROWS=refill: the refill row alone (its own cluster; the others take most of the run).
if [ "${ROWS:-all}" != refill ]; then
  up c42 4+2
  "$B/server/warmlaked" --listen 127.0.0.1:0 --data "$DIR/single" --drives 12 --ec 4+2 \
    --drive-capacity 8G --segment-size 64M --log-level warn >"$DIR/single.log" 2>&1 &
  SINGLE_PID=$!
  port=""
  for _ in $(seq 600); do
    port=$(sed -n 's/^warmlaked: ready port=\([0-9]*\).*/\1/p' "$DIR/single.log")
    [ -n "$port" ] && break
    kill -0 "$SINGLE_PID" || { cat "$DIR/single.log" >&2; exit 1; }
    sleep 0.1
  done
  [ -n "$port" ] || { cat "$DIR/single.log" >&2; exit 1; }
  SINGLE=http://127.0.0.1:$port
  for EP in "$SINGLE" "$S3_N1"; do
    prepare
    "$WLB" list --endpoint "$EP" --quiet --size 0 --prefix lst/ --objects 100000 --clients 8 \
      --ops 1 >/dev/null
  done

  declare -A one_row
  for r in "put 4KiB 32 ops_per_s ops/s" "get 4KiB 8 ops_per_s ops/s" "put 1MiB 8 mb_per_s MB/s" \
    "get 1MiB 8 mb_per_s MB/s" "put 64MiB 4 mb_per_s MB/s" "get 64MiB 4 mb_per_s MB/s"; do
    read -r wl size c field unit <<<"$r"
    tag=${wl}_${size}_c$c
    case $wl/$size in
    put/*) args=(--size "$size") pre=p$size/ own=1 ;;
    get/64MiB) args=(--size "$size" --objects 8 --no-prepare) pre=g64/ own=0 ;;
    get/1MiB) args=(--size "$size" --objects 256 --no-prepare) pre=g1m/ own=0 ;;
    get/4KiB) args=(--size "$size" --objects 2000 --no-prepare) pre=g4k/ own=0 ;;
    esac
    s=$(one "single_$tag" "$SINGLE" "$wl" "$field" "${args[@]}" --clients "$c" --prefix "$pre")
    n1=$(one "n1_$tag" "$S3_N1" "$wl" "$field" "${args[@]}" --clients "$c" --prefix "$pre")
    sp=$(spread "spread_$tag" "$wl" "$field" "$c" "$pre" "$own" "${args[@]}")
    one_row[$tag]=$n1
    row "${tag}_via_n1" "$n1" "$unit" "single_node_$tag" "$s"
    row "${tag}_spread_4_nodes" "$sp" "$unit" "single_node_$tag" "$s"
  done
  "$WLB" list --endpoint "$SINGLE" --quiet --size 0 --prefix lst/ --objects 100000 --clients 8 \
    --no-prepare --duration "$DUR" --json "$DIR/json/single_list.json" >/dev/null
  "$WLB" list --endpoint "$S3_N1" --quiet --size 0 --prefix lst/ --objects 100000 --clients 8 \
    --no-prepare --duration "$DUR" --json "$DIR/json/n1_list.json" >/dev/null
  lkeys() { python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['list_keys_per_s']))" "$1"; }
  row list_v2_100k_keys_c8_via_n1 "$(lkeys "$DIR/json/n1_list.json")" keys/s single_node_list \
    "$(lkeys "$DIR/json/single_list.json")"

  # Healthy p99 of GET 1 MiB through n1, then with n2 slow: netem's 200 ms delay where the kernel
  # has netem; else n2 stopped for 200 ms of every 250 ms (SIGSTOP/SIGCONT), as slow a peer.
  p99=$(fig "$DIR/json/n1_get_1MiB_c8.json" get mb_per_s p99)
  slow_get() {
    "$WLB" get --endpoint "$S3_N1" --quiet --duration "$DUR" --size 1MiB --clients 8 --objects 256 \
      --no-prepare --prefix g1m/ --json "$DIR/json/slow.json" >/dev/null
  }
  if WL_BUILD=$B "$NS" --dir "$DIR/c42" slow n2 200 >>"$DIR/c42.ctl" 2>&1; then
    slow_get
    ns c42 heal n2
    how=n2_netem_200ms
  else
    n2=$(cat "$DIR/c42/n2.pid")
    (
      end=$((SECONDS + DUR + 2))
      while [ $SECONDS -lt "$end" ]; do
        kill -STOP "$n2"
        sleep 0.2
        kill -CONT "$n2"
        sleep 0.05
      done
    ) &
    stutter=$!
    slow_get
    wait "$stutter"
    kill -CONT "$n2"
    how=n2_stopped_200_of_250ms
  fi
  row "get_1MiB_c8_p99_ms_$how" "$(fig "$DIR/json/slow.json" get mb_per_s p99)" ms healthy_p99_ms \
    "$p99"
  row "get_1MiB_c8_MBps_$how" "$(fig "$DIR/json/slow.json" get mb_per_s)" MB/s healthy_get_1MiB_c8 \
    "${one_row[get_1MiB_c8]}"
  ns c42 kill n4
  row get_1MiB_c8_via_n1_n4_down "$(one down1 "$S3_N1" get mb_per_s --size 1MiB --clients 8 \
    --objects 256 --no-prepare --prefix g1m/)" MB/s healthy_get_1MiB_c8 "${one_row[get_1MiB_c8]}"
  ns c42 down
  kill "$SINGLE_PID"
  wait "$SINGLE_PID" 2>/dev/null || true
  SINGLE_PID=""

  # Two nodes down: EC 2+2, one shard of each set a node.
  up c22 2+2
  "$WLB" get --endpoint "$S3_N1" --quiet --size 1MiB --prefix g1m/ --objects 256 --clients 8 \
    --ops 1 >/dev/null
  h=$(one c22_healthy "$S3_N1" get mb_per_s --size 1MiB --clients 8 --objects 256 --no-prepare \
    --prefix g1m/)
  ns c22 kill n4
  d1=$(one c22_down1 "$S3_N1" get mb_per_s --size 1MiB --clients 8 --objects 256 --no-prepare \
    --prefix g1m/)
  ns c22 kill n3
  d2=$(one c22_down2 "$S3_N1" get mb_per_s --size 1MiB --clients 8 --objects 256 --no-prepare \
    --prefix g1m/)
  row ec22_get_1MiB_c8_healthy "$h" MB/s - 0
  row ec22_get_1MiB_c8_n4_down "$d1" MB/s ec22_healthy "$h"
  row ec22_get_1MiB_c8_n3_n4_down "$d2" MB/s ec22_healthy "$h"
  ns c22 down
fi

# A drive of n3 replaced by an empty one, on a third cluster that holds only 4 MiB objects
# (REFILL_GB of them, as bench/heal.sh: a pass over the other rows' objects, 10^5 of them empty,
# measured per-object costs, not a refill): `wl-admin drive replace` starts n3's heal scanner,
# which rebuilds the drive from the other nodes' shards (over the node protocol). The row: the
# bytes written to it over the time to its refill (a pass walks the sets of a refilled drive
# first and logs event=refill_pass when they are done; a cluster of one set logs only its
# scrub_pass), against fio's sequential 1 MiB direct write of as many bytes on the same disk.
up cr 4+2
"$WLB" put --endpoint "$S3_N1" --quiet --size 4MiB --clients 4 --objects $((${REFILL_GB:-4} * 256)) \
  --order seq --ops $((${REFILL_GB:-4} * 256)) --duration 600 --prefix r/ >/dev/null
# The network's ceiling: a refill reads k blocks (here from n1, n2 and n4) for each block it
# writes, so it can write at most 1/k of what the other nodes can send n3 at once (measured
# here: three iperf3 streams into n3, one from each, summed; on this VM the veths, the bridge
# and TCP share the same two cores as everything else).
net_mb=0
if command -v iperf3 >/dev/null; then
  nsn() { sed -n "s/.*namespace \(wl[0-9a-f]*-$1\) .*/\1/p" "$DIR/cr.ctl" | head -1; }
  a3=${S3_N3#http://}
  a3=${a3%:*}
  ipids=()
  for p in 5201 5202 5203; do
    timeout 30 ip netns exec "$(nsn n3)" iperf3 -s -1 -B "$a3" -p "$p" >/dev/null 2>&1 &
    ipids+=($!)
  done
  for _ in $(seq 100); do
    [ "$(ip netns exec "$(nsn n3)" ss -ltnH | grep -c ":520[123] ")" = 3 ] && break
    sleep 0.1
  done
  j=0
  for n in n1 n2 n4; do
    timeout 30 ip netns exec "$(nsn $n)" iperf3 -c "$a3" -p $((5201 + j)) -t 3 -J \
      >"$DIR/json/iperf_$n.json" 2>/dev/null &
    ipids+=($!)
    j=$((j + 1))
  done
  for pid in "${ipids[@]}"; do wait "$pid" || true; done
  net_mb=$(python3 - "$DIR"/json/iperf_n*.json <<'PY'
import json, sys
s = 0.0
for f in sys.argv[1:]:
    try:
        s += json.load(open(f))["end"]["sum_received"]["bits_per_second"] / 8e6
    except (ValueError, KeyError):
        pass
print(round(s, 1))
PY
)
fi
[ "$net_mb" != 0 ] || echo "cluster_netns.sh: no network ceiling (iperf3 missing or failed)" >&2
ADMIN=$B/cluster/wl-admin
ns cr kill n3
rm -rf "$DIR/cr/n3/drive0"
ns cr start n3
WARMLAKE_CLUSTER_SECRET=$(cat "$DIR/cr/secret") "$ADMIN" --etcd "$ETCD" drive replace n3/0 \
  >>"$DIR/cr.ctl" 2>&1
# The pass's end is its log line, with its time (no polling of the node: that took CPU from it).
for _ in $(seq 3000); do
  grep -qE "event=(refill|scrub)_pass" "$DIR/cr/n3.log" && break
  sleep 0.2
done
pass=$(grep -m1 -E "event=(refill|scrub)_pass" "$DIR/cr/n3.log" || true)
secs=$(sed -n 's/.*seconds=\([0-9.]*\).*/\1/p' <<<"$pass")
[ -n "$secs" ] || { echo "cluster_netns.sh: n3's heal pass did not end" >&2; exit 1; }
read -r refilled calls < <("$WLB" stats --endpoint "$S3_N3" | python3 -c 'import json, sys
j = json.load(sys.stdin)
print(j["drives"][0]["host_bytes"], j.get("proto", {}).get("calls", 0))')
ns cr down
# shellcheck source=bench/fio.sh
source "$ROOT/bench/fio.sh"
read -r fio_mb _ < <(fio_job write --name=seq --filename="$DIR/fio.dat" \
  --size=$(((refilled >> 20) + 64))M --bs=1M --rw=write --direct=1 --ioengine=libaio --iodepth=4 \
  --end_fsync=1)
rm -f "$DIR/fio.dat"
rate=$(python3 -c "import sys
print(round(int(sys.argv[1]) / 1e6 / float(sys.argv[2]), 1))" "$refilled" "$secs")
row network_into_n3_from_3_nodes_MBps "$net_mb" MB/s - 0
row cluster_refill_n3_drive0_MBps "$rate" MB/s fio_seq_write_1MiB_direct "$fio_mb"
row cluster_refill_n3_drive0_MBps "$rate" MB/s network_into_n3/k=4 "$(python3 -c "import sys
print(round(float(sys.argv[1]) / 4, 1))" "$net_mb")"
objs=$(sed -n 's/.* objects=\([0-9]*\).*/\1/p' <<<"$pass")
echo "(refilled $((refilled >> 20)) MiB; n3's node-protocol calls since its start: $calls," \
  "$((calls / (objs > 0 ? objs : 1))) an object; ${pass#*event=})"
