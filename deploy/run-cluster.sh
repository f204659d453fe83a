#!/usr/bin/env bash
# Several warmlake nodes on this machine serving one S3 namespace: N nodes
# (default 3) of D file-backed drives each (default 2), one erasure set over
# all N x D drives (4+2 for 3 x 2), or with -e K+M sets of K+M cut from them
# (-n 3 -d 4 -e 4+2: two sets, each across all three nodes), node i serving
# S3 on 127.0.0.1:(9000+i)
# and its peers on 127.0.0.1:(9100+i). Writes DIR/map.json (the cluster map,
# cluster/map.h) and DIR/secret once, starts every node, prints the
# endpoints, and stops them all (by pid) on Ctrl-C or when one exits.
#
#   deploy/run-cluster.sh [-n NODES] [-d DRIVES] [-e K+M] [-p BASE_PORT] [-D DIR] [-- WARMLAKED ARGS]
#
# Builds first (deploy/install-deps.sh, cmake) unless WL_BUILD names a build.
set -euo pipefail
cd "$(dirname "$0")/.."
N=3 D=2 EC='' BASE=9000 DIR=./cluster-data
while getopts "n:d:e:p:D:" o; do
  case $o in
    n) N=$OPTARG ;; d) D=$OPTARG ;; e) EC=$OPTARG ;; p) BASE=$OPTARG ;; D) DIR=$OPTARG ;;
    *) sed -n '2,14p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ "${1:-}" = "--" ] && shift
if [ -z "${WL_BUILD:-}" ]; then
  deploy/install-deps.sh
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build -j"$(nproc)"
  WL_BUILD=build
fi
mkdir -p "$DIR"
( umask 077
  [ -f "$DIR/secret" ] || tr -dc 'A-Za-z0-9' </dev/urandom | head -c 48 >"$DIR/secret" || true
  if [ ! -f "$DIR/credentials" ]; then
    ak=$(tr -dc 'A-Z0-9' </dev/urandom | head -c 20 || true)
    sk=$(tr -dc 'A-Za-z0-9' </dev/urandom | head -c 40 || true)
    printf 'WARMLAKE_ACCESS_KEY=%s\nWARMLAKE_SECRET_KEY=%s\n' "$ak" "$sk" >"$DIR/credentials"
  fi )
set -a
# shellcheck disable=SC1091
. "$DIR/credentials"
set +a
if [ ! -f "$DIR/map.json" ]; then
  {
    printf '{"cluster": "local", "epoch": 1,'
    [ -n "$EC" ] && printf ' "ec": "%s",' "$EC"
    printf ' "nodes": [\n'
    for i in $(seq 1 "$N"); do
      sep=","; [ "$i" = "$N" ] && sep=""
      printf '  {"id": "n%d", "s3": "127.0.0.1:%d", "proto": "127.0.0.1:%d", "drives": %d}%s\n' \
        "$i" $((BASE + i)) $((BASE + 100 + i)) "$D" "$sep"
    done
    printf ']}\n'
  } >"$DIR/map.json"
fi
PIDS=()
stop() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap stop EXIT INT TERM
for i in $(seq 1 "$N"); do
  "$WL_BUILD/server/warmlaked" --cluster "$DIR/map.json" --node "n$i" --data "$DIR/n$i" \
    --cluster-secret-file "$DIR/secret" "$@" >"$DIR/n$i.log" 2>&1 &
  PIDS+=($!)
done
for i in $(seq 1 "$N"); do
  for _ in $(seq 1 300); do
    grep -q "ready port=" "$DIR/n$i.log" 2>/dev/null && break
    kill -0 "${PIDS[$((i - 1))]}" 2>/dev/null || { cat "$DIR/n$i.log"; exit 1; }
    sleep 0.1
  done
done
printf '\nwarmlake cluster "local": %d nodes x %d drives, map %s\n' "$N" "$D" "$DIR/map.json"
for i in $(seq 1 "$N"); do printf '  node n%d: http://127.0.0.1:%d  (log %s)\n' "$i" $((BASE + i)) "$DIR/n$i.log"; done
printf '\nIn another shell (any node serves every object):\n\n'
printf '  export AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY=%s AWS_DEFAULT_REGION=us-east-1\n' \
  "$WARMLAKE_ACCESS_KEY" "$WARMLAKE_SECRET_KEY"
printf '  aws --endpoint-url http://127.0.0.1:%d s3 mb s3://demo\n' $((BASE + 1))
printf '  aws --endpoint-url http://127.0.0.1:%d s3 cp ./README.md s3://demo/\n' $((BASE + 1))
printf '  aws --endpoint-url http://127.0.0.1:%d s3 ls s3://demo\n\n' $((BASE + N))
wait -n "${PIDS[@]}" || true
echo "run-cluster: a node exited; stopping the others" >&2
