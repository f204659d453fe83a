#!/usr/bin/env bash
# bench/ab.sh BUILD_A BUILD_B [ROUNDS]: two warmlaked binaries, the same S3
# rows, in the same run. Each binary gets its own node (6 file-backed drives,
# EC 4+2) on the same disk; every row runs A, B, A, B... (ROUNDS times each,
# default 2), so the disk's swings fall on both alike. Prints each row's
# figures for A and B and the ratio of B's mean to A's: the ceiling of a
# change is the binary it changes. Uses BUILD_B's wl-bench for both.
#
#   bench/ab.sh /tmp/old/build build 3
#
# Environment: A_ARGS, B_ARGS: extra warmlaked flags for node A or B (the
# same binary twice with two settings: A_ARGS="--inline-max 0"); ROWS: rows
# to run instead of the default ones, one per line ("NAME WORKLOAD FIELD
# WL-BENCH ARGS..."; a get row reads objects a put row of the same prefix
# wrote, or add --objects N without --no-prepare); DUR: seconds a run.
set -euo pipefail
# shellcheck source=bench/ab_rows.sh
source "$(dirname "$0")/ab_rows.sh"
A=$(cd "$1" && pwd)
B=$(cd "$2" && pwd)
ROUNDS=${3:-2}
DUR=${DUR:-5}
cd "$(dirname "$0")/.."
DIR=${BENCH_DIR:-$PWD/bench/results/scratch}/ab
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

start() { # start NAME BUILD [FLAGS...]: a node; sets EP_NAME
  local name=$1 build=$2 port=""
  shift 2
  "$build/server/warmlaked" --listen 127.0.0.1:0 --data "$DIR/$name" --drives 6 --ec 4+2 \
    --drive-capacity 24G --log-level warn "$@" >"$DIR/$name.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 300); do
    port=$(sed -n 's/^warmlaked: ready port=\([0-9]*\).*/\1/p' "$DIR/$name.log")
    [ -n "$port" ] && break
    sleep 0.1
  done
  [ -n "$port" ] || { cat "$DIR/$name.log"; exit 1; }
  eval "EP_$name=http://127.0.0.1:$port"
}
# shellcheck disable=SC2086 # the flags split into words
start A "$A" ${A_ARGS:-}
# shellcheck disable=SC2086
start B "$B" ${B_ARGS:-}

# ROW NAME WORKLOAD FIELD ARGS...: FIELD is ops_per_s or mb_per_s of the workload's op.
rows=(
  "put_64MiB_c8 put mb_per_s --size 64MiB --clients 8 --prefix p64/"
  "get_64MiB_c8 get mb_per_s --size 64MiB --clients 8 --prefix g64/ --objects 16 --no-prepare"
  "put_1MiB_c8 put mb_per_s --size 1MiB --clients 8 --prefix p1m/"
  "get_1MiB_c8 get mb_per_s --size 1MiB --clients 8 --prefix g1m/ --objects 256 --no-prepare"
  "put_4KiB_c32 put ops_per_s --size 4KiB --clients 32 --prefix p4k/"
  "get_4KiB_c8 get ops_per_s --size 4KiB --clients 8 --prefix g4k/ --objects 2000 --no-prepare"
  # ListObjectsV2 pages of 1,000 keys (x 1000 = keys/s), 8 clients walking 20,000 empty objects.
  "list_v2_pages_c8 list ops_per_s --size 0 --clients 8 --prefix lst/ --objects 20000 --no-prepare"
)
if [ -n "${ROWS:-}" ]; then
  mapfile -t rows <<<"$ROWS"
fi
[ -n "${ROWS:-}" ] || for n in A B; do
  ep=EP_$n
  for p in "64MiB g64/ 16" "1MiB g1m/ 256" "4KiB g4k/ 2000"; do
    set -- $p
    "$WLB" get --endpoint "${!ep}" --quiet --size "$1" --prefix "$2" --objects "$3" --clients 8 \
      --ops 1 >/dev/null
  done
  "$WLB" list --endpoint "${!ep}" --quiet --size 0 --prefix lst/ --objects 20000 --clients 8 \
    --ops 1 >/dev/null
done

printf '%-14s %-30s %-30s %s\n' row "A ($A)" "B ($B)" "B/A"
ab_rows 14 30
