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
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" # before the cd: the path may be relative
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
  wl_build .
  WL_BUILD=build
fi
mkdir -p "$DIR"
wl_make_secret "$DIR/secret"
wl_make_credentials "$DIR/credentials"
wl_load_credentials "$DIR/credentials"
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
  # Up to 30 s for each node; one still starting after that is listed all the
  # same (its log says when it is ready). One that exited ends it all.
  rc=0
  wl_wait_ready "$DIR/n$i.log" "${PIDS[$((i - 1))]}" $((SECONDS + 30)) || rc=$?
  [ "$rc" != 1 ] || { cat "$DIR/n$i.log"; exit 1; }
done
printf '\nwarmlake cluster "local": %d nodes x %d drives, map %s\n' "$N" "$D" "$DIR/map.json"
for i in $(seq 1 "$N"); do printf '  node n%d: http://127.0.0.1:%d  (log %s)\n' "$i" $((BASE + i)) "$DIR/n$i.log"; done
printf '\nIn another shell (any node serves every object):\n\n'
wl_print_aws_howto "http://127.0.0.1:$((BASE + 1))" "http://127.0.0.1:$((BASE + N))"
echo
wait -n "${PIDS[@]}" || true
echo "run-cluster: a node exited; stopping the others" >&2
