#!/usr/bin/env bash
# bench/heal.sh BUILD: how fast the heal scanner refills a replaced drive,
# against the disk's own sequential write rate measured in the same run.
#
# A node of 6 file-backed drives (4+2) is filled with SIZE objects (default
# 4 MiB, TOTAL bytes in all, default 1 GiB); it stops, drive 2 is replaced by
# an empty one, and it starts again with the scanner on at an unbounded
# rate. One pass rebuilds drive 2's blocks from k = 4 of the other five; the row is
# the bytes written to drive 2 (its host bytes) over the pass's time, and
# the ceiling is fio writing 1 MiB blocks sequentially with O_DIRECT on the
# same file system (what a drive refill in large sequential segments could
# reach). Also printed: the pass's object rate and its MB/s of object data.
#
# A second ceiling says what the refill can reach when, as here, all six
# drives are files on one disk: rebuilding a block reads k = 4 of the
# stripe's other blocks (checked, then decoded) from the same disk that takes
# the write. fio runs four sequential 1 MiB direct readers beside one
# sequential 1 MiB direct writer for a fixed time; the writer's rate is the
# ceiling for the refill's (ceiling_refill_shared_disk). On a real node each
# drive is its own device and only the first ceiling applies.
#
# SOURCES=ram puts the five drives that survive on tmpfs (buffered I/O: a tmpfs with huge pages
# mounted under /dev/shm where the user may, else /dev/shm itself) and only
# the replaced drive on the disk: the reads no longer share the disk with the write, as on a
# node whose drives are devices of their own, and the first ceiling is the one that applies.
#
# Environment: BENCH_DIR (scratch dir on the disk), TOTAL, SIZE (bytes), SOURCES (disk|ram),
# SEGMENT (the node's --segment-size), STATS_OUT (a file that keeps the node's stats after the pass).
set -euo pipefail
B=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/.."
source bench/fio.sh
DIR=${BENCH_DIR:-$PWD/bench/results/scratch}/heal
TOTAL=${TOTAL:-$((1 << 30))}
SIZE=${SIZE:-$((4 << 20))}
[ "${QUICK:-0}" = 1 ] && TOTAL=$((256 << 20))
N=$((TOTAL / SIZE))
SOURCES=${SOURCES:-disk}
# The node's segment size: what it takes for drives under 64 GiB. A node's default for larger
# drives is 256M: SEGMENT=256M refills as on a real one (a segment is sealed, and its unsynced
# blocks flushed, once per segment).
SEGMENT=${SEGMENT:-64M}
SHM=
SHM_MOUNTED=
PID=
cleanup() {
  if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
  rm -rf "$DIR"
  if [ -n "$SHM" ]; then
    rm -rf "${SHM:?}"/drive*
    [ -z "$SHM_MOUNTED" ] || umount "$SHM"
    rmdir "$SHM"
  fi
}
trap cleanup EXIT
rm -rf "$DIR"
mkdir -p "$DIR/data"
if [ "$SOURCES" = ram ]; then
  # A tmpfs of its own with huge pages where this user may mount one: the survivors' reads
  # stand in for DMA from devices of their own, and 4 KiB pages made them cost a third of the
  # machine's CPU (page-cache walks and copies); with 2 MiB pages the copies alone remain.
  SHM=$(mktemp -d /dev/shm/wl-heal.XXXXXX)
  if mount -t tmpfs -o size=$((TOTAL * 2)),huge=always wlheal "$SHM" 2>/dev/null; then
    SHM_MOUNTED=1
  fi
  for i in 0 1 3 4 5; do
    mkdir "$SHM/drive$i"
    ln -s "$SHM/drive$i" "$DIR/data/drive$i"
  done
fi
export WARMLAKE_ACCESS_KEY=wlbench WARMLAKE_SECRET_KEY=wlbench-secret-key

start() { # start ARGS...: the node, its S3 port in $PORT
  "$B/server/warmlaked" --listen 127.0.0.1:0 --data "$DIR/data" --drives 6 --ec 4+2 \
    --drive-capacity 4G --segment-size "$SEGMENT" "$@" >"$DIR/out" 2>>"$DIR/log" &
  PID=$!
  PORT=
  for _ in $(seq 600); do
    PORT=$(sed -n 's/^warmlaked: ready port=\([0-9]*\).*/\1/p' "$DIR/out")
    [ -n "$PORT" ] && break
    sleep 0.1
  done
  [ -n "$PORT" ] || { cat "$DIR/log" >&2; exit 1; }
}
stop() {
  kill "$PID"; wait "$PID" 2>/dev/null || true; PID=
}

# The ceiling: sequential 1 MiB direct writes, flushed at the end.
read -r fio_mb _ < <(fio_job write --name=seq --filename="$DIR/fio.dat" --size="$TOTAL" \
  --bs=1M --rw=write --direct=1 --ioengine=libaio --iodepth=4 --end_fsync=1)
rm -f "$DIR/fio.dat"
# The shared-disk ceiling: k = 4 readers (files laid out first) and one writer at once.
mix_wr=0 mix_rd=0
[ "$SOURCES" = ram ] || fio --output-format=json --directory="$DIR" --bs=1M --direct=1 --ioengine=libaio --iodepth=4 \
  --runtime=10 --time_based \
  --name=rd --rw=read --numjobs=4 --size=$((TOTAL / 4)) --group_reporting \
  --name=wr --rw=write --size="$TOTAL" --new_group --end_fsync=1 >"$DIR/fio-mix.json"
[ "$SOURCES" = ram ] || read -r mix_wr mix_rd < <(python3 -c '
import json, sys
j = {x["jobname"]: x for x in json.load(open(sys.argv[1]))["jobs"]}
print(j["wr"]["write"]["bw_bytes"] / 1e6, j["rd"]["read"]["bw_bytes"] / 1e6)' "$DIR/fio-mix.json")
rm -f "$DIR"/rd.* "$DIR"/wr.* "$DIR/fio-mix.json"

start --scrub-interval 0
"$B/bench/wlbench/wl-bench" put --endpoint "http://127.0.0.1:$PORT" --bucket heal \
  --size "$SIZE" --objects "$N" --order seq --ops "$N" --clients 4 --duration 600 --quiet \
  --json "$DIR/put.json" >/dev/null
stop
rm -rf "$DIR/data/drive2"
start --scrub-interval 1 --scrub-rate 1T
stats() { "$B/bench/wlbench/wl-bench" stats --endpoint "http://127.0.0.1:$PORT"; }
# The pass's end is its log line. (Asking the node's stats each 0.2 s, through a wl-bench and a
# python3 behind pyenv's shell shim, took 8-9% of this 2-core machine's CPU from the refill.)
for _ in $(seq 3000); do
  grep -q "event=scrub_pass" "$DIR/log" && break
  sleep 0.2
done
stats >"$DIR/stats.json"
[ -z "${STATS_OUT:-}" ] || cp "$DIR/stats.json" "$STATS_OUT"
python3 -c '
import json, re, sys
st = json.load(open(sys.argv[6]))
sc, d2 = st["scrub"], st["drives"][2]
# The refilling pass: the first scrub_pass line (stats hold the pass running now).
m = re.search(r"event=scrub_pass objects=(\d+) bytes=(\d+) seconds=([\d.]+)", open(sys.argv[4]).read())
objs, vbytes, secs = int(m.group(1)), int(m.group(2)), float(m.group(3))
fio = float(sys.argv[1])
mb = d2["host_bytes"] / secs / 1e6 if secs else 0
print("heal refill: drive 2 rebuilt, %.0f MB in %.1f s: %.1f MB/s written to it "
      "(%.0f objects/s, %.1f MB/s of objects verified); blocks fixed %d" % (
          d2["host_bytes"] / 1e6, secs, mb, objs / secs if secs else 0,
          vbytes / secs / 1e6 if secs else 0, sc["blocks_fixed"]))
print("ceiling fio sequential 1 MiB direct write: %.1f MB/s; ratio %.3f (target 0.5)" % (
      fio, mb / fio if fio else 0))
# Commits of the refilled drive: flushed, and written unsynced (a flush at each round of heads).
print("drive 2: %d records, %d flushes, %d commits without a flush of their own" % (
      d2["flush_records"], d2["flushes"], d2.get("unsynced_commits", 0)))
wr, rd = float(sys.argv[2]), float(sys.argv[3])
if sys.argv[5] == "disk":
    print("ceiling_refill_shared_disk (fio: 1 writer beside 4 readers on the same disk): "
          "writer %.1f MB/s (readers %.1f MB/s); ratio %.3f" % (wr, rd, mb / wr if wr else 0))
else:
    print("sources: the five other drives on tmpfs; only drive 2 is on the disk")
' "$fio_mb" "$mix_wr" "$mix_rd" "$DIR/log" "$SOURCES" "$DIR/stats.json"
stop
