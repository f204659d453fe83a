#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine:
#   1. install dependencies (deploy/install-deps.sh)
#   2. Release build with -Werror, ctest (unit tests + fuzz corpus replay)
#   3. ASan+UBSan build, ctest again
#   4. libFuzzer build (clang), each fuzzer for a bounded number of runs
#   5. pytest integration tests, when there are any: each suite once under ASan+UBSan (the
#      S3 suites through a 4-node cluster), and in the Release build the S3 suites on one
#      node (Debian's boto3 and the newest botocore) and those ASan does not run
# Ends with one summary line "tests: N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
JOBS=${JOBS:-$(nproc)}
FUZZ_RUNS=${FUZZ_RUNS:-20000}

passed=0
failed=0
failures=()
step() { # step NAME CMD...: run a step, count it, say how long it took
  local name=$1; shift
  local t0=$SECONDS
  echo "=== $name"
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); failures+=("$name"); fi
  echo "=== $name: $((SECONDS - t0)) s"
}

deploy/install-deps.sh || { echo "tests: 0 passed, 1 failed"; exit 1; }

build() { # build DIR CMAKE_ARGS...
  local dir=$1; shift
  cmake -S . -B "$dir" -DWERROR=ON "$@" >/dev/null && cmake --build "$dir" -j"$JOBS"
}

ctest_in() {
  (cd "$1" && ctest --output-on-failure -j"$JOBS")
}

format_check() {
  git ls-files '*.c' '*.h' | xargs clang-format --dry-run --Werror
}
step "clang-format" format_check
step "release build" build build -DCMAKE_BUILD_TYPE=Release
step "release ctest" ctest_in build

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
step "sanitize build" build build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSANITIZE=ON
step "sanitize ctest" ctest_in build-asan

fuzz_all() {
  local rc=0
  for f in build-fuzz/tests/fuzz/fuzz_*; do
    [ -x "$f" ] || continue
    local name=${f##*/fuzz_}
    local corpus="$ROOT/tests/fuzz/corpus/$name"
    local work
    work=$(mktemp -d)
    echo "--- $name: $FUZZ_RUNS runs"
    "$f" -runs="$FUZZ_RUNS" -max_len=65536 -rss_limit_mb=2048 "$work" "$corpus" \
      >"$work.log" 2>&1 || { tail -40 "$work.log"; rc=1; }
    rm -rf "$work" "$work.log"
  done
  return $rc
}
step "fuzz build" env CC=clang bash -c 'cmake -S . -B build-fuzz -DFUZZ=ON -DBUILD_TESTING=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null && cmake --build build-fuzz --target fuzzers -j'"$JOBS"
step "fuzz run" fuzz_all

if compgen -G "tests/integration/test_*.py" >/dev/null; then
  # Each suite runs under ASan+UBSan once: the S3 suites through a 4-node cluster
  # (WL_CLUSTER, conftest.py: the same gateway and object layer as on one node, plus the
  # protocol and the peers' stores), every other suite on the nodes it starts itself. The
  # Release build runs what ASan does not: the S3 suites on one node, under Debian's boto3
  # and the newest botocore, and the suites that skip themselves under ASan (deploy scripts,
  # network namespaces). Running the other suites in Release too took 5-6 more minutes for
  # what the sanitized run of the same tests already checks.
  # Every pass: two pytest-xdist workers, a file's tests on one (their fixtures are per file;
  # conftest gives each worker its own ports). Much of a test is waiting (leases, scanner
  # passes, nodes starting), so two side by side beat one even under ASan on two cores
  # (session 49: 767 s -> 576 s for the sanitized pass, 421 s -> 315 s for the cluster one).
  # WL_XDIST=1: one worker a pass (a test that flakes only side by side, or a slower machine).
  XDIST=${WL_XDIST:-2}
  s3_suites=(tests/integration/test_s3_*.py tests/integration/test_sigv4_clients.py)
  release_only=(tests/integration/test_deploy.py tests/integration/test_netns.py)
  step "integration, Release: S3 suites on one node, deploy, netns (pytest)" \
    env WL_BUILD="$ROOT/build" /usr/bin/python3 -m pytest -q -n "$XDIST" --dist loadfile \
    "${s3_suites[@]}" "${release_only[@]}"
  step "integration under ASan+UBSan (pytest)" \
    env WL_BUILD="$ROOT/build-asan" WL_SANITIZED=1 /usr/bin/python3 -m pytest -q -n "$XDIST" \
    --dist loadfile tests/integration \
    "${s3_suites[@]/#/--ignore=}" "${release_only[@]/#/--ignore=}"
  step "S3 suites through a 4-node cluster under ASan+UBSan (pytest)" \
    env WL_BUILD="$ROOT/build-asan" WL_SANITIZED=1 WL_CLUSTER=4 \
    /usr/bin/python3 -m pytest -q -n "$XDIST" --dist loadfile "${s3_suites[@]}"
fi

echo
[ ${#failures[@]} -gt 0 ] && echo "failed steps: ${failures[*]}"
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
