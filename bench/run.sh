#!/usr/bin/env bash
# bench/run.sh [SUITE...]: run benchmark suites (default: all that exist),
# print a table per suite and write bench/results/SUITE.json. Every row is
# printed next to a ceiling measured in the same run on the same machine.
#
# Suites: storage erasure
# Environment: BUILD (build dir, default build), BENCH_DIR (scratch dir on
# the disk to measure, default bench/results/scratch), QUICK=1 (smaller runs).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${BUILD:-$ROOT/build}
RESULTS=$ROOT/bench/results
export BENCH_DIR=${BENCH_DIR:-$RESULTS/scratch}
mkdir -p "$RESULTS" "$BENCH_DIR"

if [ ! -x "$BUILD/bench/bench_erasure" ]; then
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$BUILD" -j"$(nproc)" >/dev/null
fi

suites=("$@")
[ ${#suites[@]} -eq 0 ] && suites=(storage erasure)

for s in "${suites[@]}"; do
  case "$s" in
    erasure)
      if [ "${QUICK:-0}" = 1 ]; then args=(4 0.2); else args=(16 0.5); fi
      "$BUILD/bench/bench_erasure" "${args[@]}" | python3 bench/report.py erasure "$RESULTS"
      ;;
    storage)
      bash bench/storage.sh "$BUILD" | python3 bench/report.py storage "$RESULTS"
      ;;
    *)
      echo "unknown suite: $s (have: storage erasure)" >&2
      exit 2
      ;;
  esac
done
