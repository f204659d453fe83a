#!/usr/bin/env bash
# bench/run.sh [SUITE...] [--quick] [S3 OPTIONS]: run benchmark suites
# (default: all), print a table per suite and write bench/results/SUITE.json
# and SUITE.md. Every row is printed next to a ceiling measured in the same
# run on the same machine.
#
# Suites: storage erasure s3 cluster sets reader heal drain memory (cluster: not in the default set; it
#         compares one node with a 3-node cluster on this machine, bench/cluster.sh, then
#         runs four nodes in network namespaces against one node of the same drives: through
#         one node and spread, a slow node's p99, nodes down, bench/cluster_netns.sh (root);
#         sets: likewise, one node of one set against one node of two sets;
#         reader: not in the default set; warmlake.torch against boto3 and wl-bench,
#         bench/reader.py; heal: not in the default set; a replaced drive refilled by
#         the heal scanner against fio's sequential write, bench/heal.sh; drain: not in
#         the default set; a pool's objects moved to another, bench/drain.sh; memory: not in
#         the default set; a node's memory over a long mixed load against its bounds,
#         bench/memory.sh)
#   --quick                 smaller sizes and shorter runs (CI smoke use)
#   --full                  s3: the rows that take long (10^7-key listing, cost growth to 10^6
#                           objects)
#   s3 options: --endpoint URL --access-key K --secret-key S   measure another
#               S3 server with the same rows instead of a fresh local warmlake
# Environment: BUILD (build dir, default build), BENCH_DIR (scratch dir on
# the disk to measure, default bench/results/scratch), QUICK=1 (= --quick).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${BUILD:-$ROOT/build}
RESULTS=$ROOT/bench/results
export BENCH_DIR=${BENCH_DIR:-$RESULTS/scratch}
export BENCH_RESULTS=$RESULTS
mkdir -p "$RESULTS" "$BENCH_DIR"

suites=()
s3_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) export QUICK=1 ;;
    --full) export FULL=1 ;;
    --endpoint | --access-key | --secret-key) s3_args+=("$1" "$2"); shift ;;
    -*) echo "bench/run.sh: unknown option $1" >&2; exit 2 ;;
    *) suites+=("$1") ;;
  esac
  shift
done
[ ${#suites[@]} -eq 0 ] && suites=(storage erasure s3)

# Always (re)build: a benchmark of stale binaries measures the wrong code.
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j"$(nproc)" >/dev/null

for s in "${suites[@]}"; do
  case "$s" in
    erasure)
      if [ "${QUICK:-0}" = 1 ]; then args=(4 0.2); else args=(16 0.5); fi
      "$BUILD/bench/bench_erasure" "${args[@]}" | python3 bench/report.py erasure "$RESULTS"
      ;;
    storage)
      bash bench/storage.sh "$BUILD" | python3 bench/report.py storage "$RESULTS"
      ;;
    s3)
      bash bench/s3.sh "$BUILD" "${s3_args[@]}" | python3 bench/report.py s3 "$RESULTS"
      ;;
    reader)
      /usr/bin/python3 bench/reader.py | python3 bench/report.py reader "$RESULTS"
      ;;
    cluster)
      bash bench/cluster.sh "$BUILD" "${ROUNDS:-2}" | tee "$RESULTS/cluster.md"
      bash bench/cluster_netns.sh "$BUILD" | tee "$RESULTS/cluster_netns.md"
      ;;
    sets)
      B_LAYOUT=sets bash bench/cluster.sh "$BUILD" "${ROUNDS:-2}" | tee "$RESULTS/sets.md"
      ;;
    heal)
      bash bench/heal.sh "$BUILD" | tee "$RESULTS/heal.md"
      ;;
    drain)
      bash bench/drain.sh "$BUILD" | tee "$RESULTS/drain.md"
      ;;
    memory)
      bash bench/memory.sh "$BUILD" | python3 bench/report.py memory "$RESULTS"
      ;;
    *)
      echo "unknown suite: $s (have: storage erasure s3 cluster sets reader heal drain memory)" >&2
      exit 2
      ;;
  esac
done
