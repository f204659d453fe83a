#!/usr/bin/env bash
# bench/drain.sh BUILD: how fast draining a pool moves its objects, against
# the disk measured in the same run.
#
# One clustered node (a map file, no etcd) with 12 file-backed drives: pool
# p0 (drives 0-5, one 4+2 set) and pool p1 (drives 6-11). p1 starts
# draining, so the fill (TOTAL bytes of SIZE objects, default 1 GiB of 4 MiB)
# lands in p0; the node stops, the map's next epoch drains p0 instead, and
# the node starts again with --drain-rate unbounded: its mover copies every
# object to p1 (reads 6 drives, writes 6) and drops p0's copies. The row is
# the first pass's object bytes over its time, and the bytes written to p1's
# drives (host bytes: blocks, parity, heads, index) over the same time.
#
# Ceilings, same run, same file system: fio sequential 1 MiB direct writes
# (what the target drives could take), and fio with one sequential writer
# beside one sequential reader (a move reads as much as it writes, from the
# same disk here: on real hardware the two pools are different drives).
#
# Environment: BENCH_DIR (scratch dir on the disk), TOTAL, SIZE (bytes).
set -euo pipefail
B=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/.."
source bench/fio.sh
DIR=${BENCH_DIR:-$PWD/bench/results/scratch}/drain
TOTAL=${TOTAL:-$((1 << 30))}
SIZE=${SIZE:-$((4 << 20))}
[ "${QUICK:-0}" = 1 ] && TOTAL=$((256 << 20))
N=$((TOTAL / SIZE))
PID=
cleanup() {
  if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
  rm -rf "$DIR"
}
trap cleanup EXIT
rm -rf "$DIR"
mkdir -p "$DIR/data"
export WARMLAKE_ACCESS_KEY=wlbench WARMLAKE_SECRET_KEY=wlbench-secret-key
export WARMLAKE_CLUSTER_SECRET=bench-cluster-secret-0123456789

map() { # map EPOCH DRAINING_POOL: the map file
  python3 - "$DIR/map.json" "$1" "$2" "$S3" "$PROTO" <<'PY'
import json, sys
path, epoch, draining, s3, proto = sys.argv[1:]
pools = [{"id": "p%d" % p, "sets": [{"ec": "4+2", "drives": ["n1/%d" % i for i in
                                                              range(6 * p, 6 * p + 6)]}]}
         for p in range(2)]
pools[int(draining)]["state"] = "draining"
json.dump({"cluster": "benchdrain", "epoch": int(epoch),
           "nodes": [{"id": "n1", "s3": "127.0.0.1:" + s3, "proto": "127.0.0.1:" + proto,
                      "drives": 12}], "pools": pools}, open(path, "w"))
PY
}
read -r S3 PROTO <<<"$(python3 -c 'import socket
ss=[socket.socket() for _ in range(2)]
[s.bind(("127.0.0.1",0)) for s in ss]
print(" ".join(str(s.getsockname()[1]) for s in ss))')"

start() { # start ARGS...
  "$B/server/warmlaked" --cluster "$DIR/map.json" --node n1 --data "$DIR/data" \
    --drive-capacity 4G --segment-size 64M --scrub-interval 0 "$@" >"$DIR/out" 2>>"$DIR/log" &
  PID=$!
  for _ in $(seq 600); do
    grep -q '^warmlaked: ready port=' "$DIR/out" && return
    sleep 0.1
  done
  cat "$DIR/log" >&2
  exit 1
}
stop() {
  kill "$PID"; wait "$PID" 2>/dev/null || true; PID=
}

# Ceilings: sequential 1 MiB direct writes; and one writer beside one reader.
read -r fio_mb _ < <(fio_job write --name=seq --filename="$DIR/fio.dat" --size="$TOTAL" \
  --bs=1M --rw=write --direct=1 --ioengine=libaio --iodepth=4 --end_fsync=1)
rm -f "$DIR/fio.dat"
fio --output-format=json --directory="$DIR" --bs=1M --direct=1 --ioengine=libaio --iodepth=4 \
  --runtime=10 --time_based \
  --name=rd --rw=read --size="$TOTAL" \
  --name=wr --rw=write --size="$TOTAL" --new_group --end_fsync=1 >"$DIR/fio-mix.json"
read -r mix_wr mix_rd < <(python3 -c '
import json, sys
j = {x["jobname"]: x for x in json.load(open(sys.argv[1]))["jobs"]}
print(j["wr"]["write"]["bw_bytes"] / 1e6, j["rd"]["read"]["bw_bytes"] / 1e6)' "$DIR/fio-mix.json")
rm -f "$DIR"/rd.* "$DIR"/wr.* "$DIR/fio-mix.json"

map 1 1
start
EP="http://127.0.0.1:$S3"
"$B/bench/wlbench/wl-bench" put --endpoint "$EP" --bucket drain --size "$SIZE" --objects "$N" \
  --order seq --ops "$N" --clients 4 --duration 600 --quiet --json "$DIR/put.json" >/dev/null
stop
mv "$DIR/log" "$DIR/log.fill" # (its mover's passes over the empty p1)
map 2 0
start --drain-rate 1T
stats() { "$B/bench/wlbench/wl-bench" stats --endpoint "$EP"; }
for _ in $(seq 6000); do
  done_=$(stats | python3 -c 'import json,sys; print(json.load(sys.stdin).get("drain",{}).get("done",0))')
  [ "$done_" = 1 ] && break
  sleep 0.2
done
stats | python3 -c '
import json, re, sys
st = json.load(sys.stdin)
dr = st["drain"]
m = re.search(r"event=drain_pass keys_left=(\d+) uploads_left=\d+ bytes=(\d+) seconds=([\d.]+)",
              open(sys.argv[3]).read())
left, moved, secs = int(m.group(1)), int(m.group(2)), float(m.group(3))
host = sum(d.get("host_bytes", 0) for d in st["drives"][6:12])
obj_mb = moved / secs / 1e6 if secs else 0
wr_mb = host / secs / 1e6 if secs else 0
fio, mix_wr = float(sys.argv[1]), float(sys.argv[2])
print("drain: %d keys, %.0f MB of objects moved in %.1f s (first pass, %d left): %.1f MB/s of "
      "objects; %.1f MB/s written to the target drives" % (dr["keys"], moved / 1e6, secs, left,
                                                            obj_mb, wr_mb))
print("ceiling fio sequential 1 MiB direct write: %.1f MB/s; ratio (target writes) %.3f" % (
      fio, wr_mb / fio if fio else 0))
print("ceiling fio 1 writer beside 1 reader (same disk): writer %.1f MB/s; ratio %.3f" % (
      mix_wr, wr_mb / mix_wr if mix_wr else 0))
' "$fio_mb" "$mix_wr" "$DIR/log"
stop
