#!/usr/bin/env bash
# bench/growth.sh BUILD [ROUNDS]: issue 12's cost growth, both sizes at once.
#
# Two nodes of one build on the same disk (6 file-backed drives each, EC
# 4+2): S's bench bucket holds SMALL_KEYS objects (default 10^4), G's
# GROW_KEYS (default 10^6). Both get the same objects the rows read (4 KiB
# and 1 MiB, through S3), then the rest of their keys from wl-populate
# (heads of an empty object, written into the stopped node's drives), then
# both restart, so that both read their index from its tables (not one from
# a memtable) and both wait until idle. Every row then runs S, G, S, G...
# (ab_rows.sh), so the disk's and the host's swings fall on both alike: the
# ratio G/S is the cost of the bigger bucket (1 is flat; the issue asks
# >= 0.9). bench/s3.sh --full has the same rows, measured minutes apart on
# one node (the grown rows after the 10^7-key listing bucket too).
#
# Environment: DUR (seconds a run, default 5), SMALL_KEYS, GROW_KEYS,
# EXTRA_KEYS (more keys in another bucket of both nodes' drives, default 0:
# s3.sh --full has its 10^7-key listing bucket there), NODE_ARGS (extra
# warmlaked flags for both).
set -euo pipefail
# shellcheck source=bench/ab_rows.sh
source "$(dirname "$0")/ab_rows.sh"
BUILD=$(cd "${1:?usage: bench/growth.sh BUILD [ROUNDS]}" && pwd)
ROUNDS=${2:-3}
DUR=${DUR:-5}
SMALL_KEYS=${SMALL_KEYS:-10000}
GROW_KEYS=${GROW_KEYS:-1000000}
EXTRA_KEYS=${EXTRA_KEYS:-0}
cd "$(dirname "$0")/.."
DIR=${BENCH_DIR:-$PWD/bench/results/scratch}/growth
WLB=$BUILD/bench/wlbench/wl-bench
POP=$BUILD/bench/wl-populate
rm -rf "$DIR"
mkdir -p "$DIR/json"
declare -A PID
cleanup() {
  for p in "${PID[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PID[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$DIR"
}
trap cleanup EXIT
export WARMLAKE_ACCESS_KEY=wlbench WARMLAKE_SECRET_KEY=wlbench-secret-key

start() { # start NAME: its node; sets EP_NAME
  local name=$1 port=""
  # shellcheck disable=SC2086 # the flags split into words
  "$BUILD/server/warmlaked" --listen 127.0.0.1:0 --data "$DIR/$name" --drives 6 --ec 4+2 \
    --drive-capacity 24G --log-level warn ${NODE_ARGS:-} >>"$DIR/$name.log" 2>&1 &
  PID[$name]=$!
  for _ in $(seq 300); do
    port=$(sed -n 's/^warmlaked: ready port=\([0-9]*\).*/\1/p' "$DIR/$name.log" | tail -1)
    [ -n "$port" ] && break
    kill -0 "${PID[$name]}" || { cat "$DIR/$name.log"; exit 1; }
    sleep 0.1
  done
  [ -n "$port" ] || { cat "$DIR/$name.log"; exit 1; }
  eval "EP_$name=http://127.0.0.1:$port"
}
stop() { # stop NAME: a clean stop (its drives closed), and a fresh log for its next start
  kill "${PID[$1]}"
  wait "${PID[$1]}" 2>/dev/null || true
  unset "PID[$1]"
  : >"$DIR/$1.log"
}
idle() { # idle NAME: until the node uses under 5% of a core over 2 s (RocksDB compacting after
  # wl-populate's keys; 300 s at most)
  local a
  for _ in $(seq 150); do
    a=$(awk '{print $14+$15}' "/proc/${PID[$1]}/stat")
    sleep 2
    [ $(($(awk '{print $14+$15}' "/proc/${PID[$1]}/stat") - a)) -lt 10 ] && return
  done
}

for n in S G; do
  start $n
  ep=EP_$n
  for p in "4KiB get4KiB/ 2000" "1MiB get1MiB/ 256" "0 fillproto/ 1"; do
    # shellcheck disable=SC2086 # the pair splits into words
    set -- $p
    "$WLB" get --endpoint "${!ep}" --quiet --size "$1" --prefix "$2" --objects "$3" --clients 8 \
      --ops 1 >/dev/null
  done
  [ "$EXTRA_KEYS" -gt 0 ] && "$WLB" put --endpoint "${!ep}" --quiet --bucket wl-extra --size 0 \
    --clients 1 --ops 1 --prefix proto/ >/dev/null
  stop $n
  keys=$([ $n = S ] && echo "$SMALL_KEYS" || echo "$GROW_KEYS")
  pop=("$POP" --data "$DIR/$n" --drives 6 --ec 4+2)
  echo "# $n: populating wl-bench to $keys keys" >&2
  "${pop[@]}" --bucket wl-bench --like fillproto/000000000000 --format 'fill/%08llu' \
    --count $((keys - 2000 - 256 - 1)) --threads 64 >&2
  if [ "$EXTRA_KEYS" -gt 0 ]; then
    echo "# $n: populating wl-extra with $EXTRA_KEYS keys" >&2
    "${pop[@]}" --bucket wl-extra --like proto/000000000000 --format 'k/%08llu' \
      --count "$EXTRA_KEYS" --threads 64 >&2
  fi
done
for n in S G; do start $n; done
for n in S G; do idle $n; done
# Warm both alike (the rows' index blocks and data in the caches).
for n in S G; do
  ep=EP_$n
  for p in "4KiB get4KiB/ 2000" "1MiB get1MiB/ 256"; do
    # shellcheck disable=SC2086 # the pair splits into words
    set -- $p
    "$WLB" get --endpoint "${!ep}" --quiet --size "$1" --prefix "$2" --objects "$3" --clients 8 \
      --no-prepare --ops 4000 >/dev/null
  done
done

# shellcheck disable=SC2034 # ab_rows reads these
EP_A=${EP_S:?} EP_B=${EP_G:?}
# shellcheck disable=SC2034
rows=(
  "get_4KiB_c8 get ops_per_s --size 4KiB --clients 8 --prefix get4KiB/ --objects 2000 --no-prepare"
  "get_4KiB_c1 get ops_per_s --size 4KiB --clients 1 --prefix get4KiB/ --objects 2000 --no-prepare"
  "put_4KiB_c32 put ops_per_s --size 4KiB --clients 32 --prefix put4KiB/"
  "get_1MiB_c8 get mb_per_s --size 1MiB --clients 8 --prefix get1MiB/ --objects 256 --no-prepare"
)
echo "# build $BUILD; $SMALL_KEYS keys (S) against $GROW_KEYS (G) in the bucket;" \
  "$EXTRA_KEYS in another; $ROUNDS rounds of ${DUR} s each"
printf '%-14s %-30s %-30s %s\n' row "S ($SMALL_KEYS keys)" "G ($GROW_KEYS keys)" "G/S"
ab_rows 14 30
