#!/usr/bin/env bash
# bench/memory.sh BUILD: a node's memory under a long mixed load, against the bounds its
# settings give (server/node_memory.h). A fresh node of 6 file-backed drives (4+2) takes
# ROUNDS rounds (default 8; --quick 3) of SECS seconds (default 25; --quick 8) of 8 clients
# mixing GET 55 / PUT 35 / DELETE 10 over 4 KiB, 256 KiB and 8 MiB objects (3,000 keys),
# each round followed by a short listing; after each round the node's memory report
# (/_warmlake/stats "memory") is read.
#
# Rows: RSS after the last round, against the bound (the index cache's capacity, the stripe
# buffers kept (128 MiB), two commit buffers of 32 MiB and the bounce buffers (4 MiB) a
# drive: what grows with use, memtables, code, stacks and connections aside); RSS growth
# over the second half of the rounds (MiB a minute; levelled off: near 0); malloc's share
# in use of what it holds (1: nothing held free); the share of RSS the bounded owners
# explain. Every round's report is printed as a comment line.
set -euo pipefail
B=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/.."
DIR=${BENCH_DIR:-$PWD/bench/results/scratch}/memory
ROUNDS=${ROUNDS:-8}
SECS=${SECS:-25}
if [ "${QUICK:-0}" = 1 ]; then ROUNDS=3 SECS=8; fi
WLB=$B/bench/wlbench/wl-bench
rm -rf "$DIR"
mkdir -p "$DIR"
PID=""
cleanup() {
  [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
  rm -rf "$DIR"
}
trap cleanup EXIT
export WARMLAKE_ACCESS_KEY=wlbench WARMLAKE_SECRET_KEY=wlbench-secret-key
"$B/server/warmlaked" --listen 127.0.0.1:0 --data "$DIR/wl" --drives 6 --ec 4+2 \
  --drive-capacity 8G --log-level warn >"$DIR/wl.log" 2>&1 &
PID=$!
port=""
for _ in $(seq 300); do
  port=$(sed -n 's/^warmlaked: ready port=\([0-9]*\).*/\1/p' "$DIR/wl.log")
  [ -n "$port" ] && break
  kill -0 "$PID" || { cat "$DIR/wl.log"; exit 1; }
  sleep 0.1
done
[ -n "$port" ] || { cat "$DIR/wl.log"; exit 1; }
EP=http://127.0.0.1:$port
echo "# memory: node pid $PID at $EP, $ROUNDS rounds of $SECS s"
t0=$(date +%s.%N)
for r in $(seq "$ROUNDS"); do
  "$WLB" mixed --endpoint "$EP" --size 4KiB:60,256KiB:30,8MiB:10 --objects 3000 \
    --mix get:55,put:35,delete:10 --clients 8 --duration "$SECS" --quiet --no-prepare \
    --json "$DIR/round$r.json" >/dev/null
  "$WLB" list --endpoint "$EP" --clients 2 --duration 2 --quiet --no-prepare >/dev/null 2>&1 || true
  t=$(python3 -c "import sys; print(float(sys.argv[1]) - float(sys.argv[2]))" "$(date +%s.%N)" "$t0")
  "$WLB" stats --endpoint "$EP" | python3 -c '
import json, sys
m = json.load(sys.stdin)["memory"]
m["t"] = float(sys.argv[1])
print(json.dumps(m))' "$t" >>"$DIR/memory.jsonl"
  python3 -c '
import json, sys
m = json.loads(open(sys.argv[1]).read().splitlines()[-1])
print("# round %s at %.0f s: %s" % (sys.argv[2], m["t"], " ".join(
    "%s=%.0f" % (k, v / 1048576) for k, v in m.items() if k != "t")))' "$DIR/memory.jsonl" "$r"
done
python3 - "$DIR/memory.jsonl" <<'PY'
import json, sys
ms = [json.loads(l) for l in open(sys.argv[1])]
mib = 1 << 20
last = ms[-1]
drives = 6
bound = last["index_cache_capacity"] + (128 << 20) + drives * ((64 << 20) + (4 << 20))
half = ms[len(ms) // 2:]
growth = 0.0
if len(half) >= 2 and half[-1]["t"] > half[0]["t"]:
    growth = (half[-1]["rss"] - half[0]["rss"]) / mib / ((half[-1]["t"] - half[0]["t"]) / 60)
owned = sum(last[k] for k in ("index_cache", "index_memtables", "index_readers", "writer_buffers",
                              "drive_buffers", "stripe_buffers_kept", "stripe_buffers_out"))
print("ROW\tmemory_bound\t%.1f\tMiB\t-" % (bound / mib))
print("ROW\tnode_rss_last_round\t%.1f\tMiB\tmemory_bound" % (last["rss"] / mib))
print("ROW\tnode_rss_peak\t%.1f\tMiB\tmemory_bound" % (max(m["rss"] for m in ms) / mib))
print("ROW\tnode_rss_growth_second_half\t%.2f\tMiB/min\t-" % growth)
print("ROW\tnode_malloc_in_use_share\t%.3f\tfrac\t-" %
      (last["malloc_in_use"] / last["malloc_held"] if last["malloc_held"] else 0))
print("ROW\tnode_rss_explained_by_bounded_owners\t%.3f\tfrac\t-" %
      (owned / last["rss"] if last["rss"] else 0))
PY
