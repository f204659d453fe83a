#!/usr/bin/env bash
# The S3 suite: warmlake (or any S3 endpoint) loaded by wl-bench, next to
# the ceilings of this machine measured in the same run: fio on the same
# disk, nginx serving the same object sizes from the same disk (loaded by
# wl-bench in plain-GET mode; page cache warm, and kept out with O_DIRECT as
# warmlake reads; warmlake GETs get a ratio against each), wrk against
# nginx to show wl-bench is not the bottleneck, memcpy, MD5 and raw ISA-L.
# Batch GET rows (bench_batch, local warmlake only) have the per-object GET
# rate of the same objects and clients as their reference: the ratio is the
# speedup.
# Prints ROW lines for bench/report.py. Called by bench/run.sh.
#
#   bench/s3.sh BUILD_DIR [--quick] [--full] [--endpoint URL --access-key K --secret-key S]
#
# Without --endpoint a fresh warmlaked (6 file-backed drives, EC 4+2) is
# started on a free loopback port under BENCH_DIR and stopped at the end.
# --full (or FULL=1) adds the listing of a bucket of FULL_KEYS keys (default
# 10^7) whole, through S3, by one client (the issue's target is 30 s), and
# the cost-growth rows: 4 KiB GET and PUT and 1 MiB GET again once the
# bucket holds GROW_KEYS (10^6) objects, against the same rows at 10^4.
set -euo pipefail
BUILD=$1
shift
QUICK=${QUICK:-0}
FULL=${FULL:-0}
ENDPOINT="" AK="" SK=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --full) FULL=1 ;;
    --endpoint) ENDPOINT=$2; shift ;;
    --access-key) AK=$2; shift ;;
    --secret-key) SK=$2; shift ;;
    *) echo "s3.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

DIR=${BENCH_DIR:?}/s3
WLB=$BUILD/bench/wlbench/wl-bench
JS=$DIR/json
rm -rf "$DIR"
mkdir -p "$DIR" "$JS"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$DIR"
}
trap cleanup EXIT
# A failing step ends the suite (set -e) with the rows so far: say which, on stderr (stdout
# goes to report.py, which keeps only ROW lines).
trap 'echo "bench/s3.sh: failed at line $LINENO: $BASH_COMMAND" >&2' ERR

if [ "$QUICK" = 1 ]; then
  DUR=2; BIG=16MiB; BIG_OBJ=8; MID_OBJ=64; SMALL_OBJ=500; LIST_KEYS=10000; STREAM=1GiB
  CLIENTS=(1 8); FIO_SIZE=512M; TINY=5000
else
  # (STREAM under S3's 5 GiB single-PUT limit: a 10 GiB PUT is refused, 400 EntityTooLarge,
  # which ended every full run here silently until the ERR trap below said so.)
  DUR=5; BIG=64MiB; BIG_OBJ=32; MID_OBJ=256; SMALL_OBJ=2000; LIST_KEYS=100000; STREAM=4GiB
  CLIENTS=(1 8 32); FIO_SIZE=2G; TINY=100000
fi
SIZES=("$BIG" 1MiB 4KiB)
objects_for() { case "$1" in "$BIG") echo $BIG_OBJ ;; 1MiB) echo $MID_OBJ ;; *) echo $SMALL_OBJ ;; esac; }
row() { printf 'ROW\t%s\t%s\t%s\t%s\n' "$@"; }
# jget FILE EXPR: a figure out of a wl-bench JSON file (EXPR indexes the loaded dict j).
jget() { python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
say() { echo "# $*"; }

# ---------------------------------------------------------------- ceilings
say "ceilings: fio on $DIR, CPU"
. "$(dirname "$0")/fio.sh"
F=$DIR/fio.dat
fio --name=prep --filename="$F" --size=$FIO_SIZE --rw=write --bs=1M --direct=1 --ioengine=libaio \
  --iodepth=16 >/dev/null
common=(--name=ceiling --filename="$F" --size=$FIO_SIZE --direct=1 --ioengine=libaio --time_based
        --runtime=$DUR --bs=1M --iodepth=16)
read -r FIO_W _ < <(fio_job write "${common[@]}" --rw=write)
read -r FIO_R _ < <(fio_job read "${common[@]}" --rw=read)
row fio_seq_write_1MiB "$FIO_W" MB/s -
row fio_seq_read_1MiB "$FIO_R" MB/s -
rm -f "$F"
# Durable small writes at the suite's concurrencies: what 4 KiB PUTs could get.
for c in "${CLIENTS[@]}"; do
  read -r _ iops < <(fio_job write --name=small --directory="$DIR" --size=64M --rw=write --bs=4k \
    --ioengine=sync --direct=1 --fdatasync=1 --numjobs="$c" --group_reporting --time_based \
    --runtime=$DUR)
  row "fio_4KiB_write_fdatasync_${c}jobs" "$iops" ops/s -
  rm -f "$DIR"/small.*
done
CPU=$("$BUILD/bench/bench_ceiling" 4 2 "$([ "$QUICK" = 1 ] && echo 0.3 || echo 1)")
echo "$CPU"
MD5=$(echo "$CPU" | awk -F'\t' '$2=="ceiling_md5"{print $3}')
# A large PUT can go no faster than the disk takes data after parity, nor than MD5.
PUT_CEIL=$(python3 -c "print(min($FIO_W * 4 / 6, $MD5))")
row ceiling_large_put "$PUT_CEIL" MB/s -
# Concurrent PUTs' MD5s share the node's vector lanes (common/md5.h): eight streams at once go
# several times one stream's rate, so for the rows with clients the disk is the ceiling.
MD5_N=$(echo "$CPU" | awk -F'\t' '$2=="ceiling_md5_8_streams"{print $3}')
PUT_CEIL_N=$(python3 -c "print(min($FIO_W * 4 / 6, $MD5_N))")
row ceiling_large_put_8_streams "$PUT_CEIL_N" MB/s -
# The same, durable: a PUT is acknowledged only once its blocks are on the drives, so six
# writers (one per drive) each writing 1 MiB and fdatasync-ing it, as the drive engine's
# group commit does at best. On some disks (this VM's) a flush costs far more than the
# write: the ceiling above then overstates what any durable store could get.
read -r FIO_WS _ < <(fio_job write --name=durable --directory="$DIR" --size=256M --rw=write --bs=1M \
  --ioengine=sync --direct=1 --fdatasync=1 --numjobs=6 --group_reporting --time_based --runtime=$DUR)
rm -f "$DIR"/durable.*
row fio_1MiB_write_fdatasync_6jobs "$FIO_WS" MB/s -
PUT_CEIL_DURABLE=$(python3 -c "print(min($FIO_WS * 4 / 6, $MD5))")
row ceiling_large_put_durable "$PUT_CEIL_DURABLE" MB/s -

# ------------------------------------------------------------------ nginx
say "nginx serving the same sizes from $DIR/www"
NG=$DIR/nginx
mkdir -p "$NG/tmp" "$DIR/www"
NPORT=$(free_port)
NPORT_DISK=$(free_port)
cat >"$NG/nginx.conf" <<CONF
worker_processes $(nproc);
daemon off;
pid $NG/nginx.pid;
error_log $NG/error.log warn;
$([ "$(id -u)" = 0 ] && echo "user root;")
events { worker_connections 4096; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 10000000;
  keepalive_timeout 300s;
  client_body_temp_path $NG/tmp/body;
  proxy_temp_path $NG/tmp/proxy;
  fastcgi_temp_path $NG/tmp/fastcgi;
  uwsgi_temp_path $NG/tmp/uwsgi;
  scgi_temp_path $NG/tmp/scgi;
  server {
    listen 127.0.0.1:$NPORT;
    root $DIR/www;
  }
  # The same files with the page cache kept out: O_DIRECT reads in a thread
  # pool, as warmlake reads its drives. Dropping the cache once is not enough:
  # a run re-reads its objects many times, so after the first pass it is warm.
  # nginx reads a file smaller than its output buffer without O_DIRECT (as the
  # unaligned rest of a direct read), so each smaller size gets one buffer of
  # its own size: with 2m buffers its 1 MiB and 4 KiB files came from the page
  # cache (the disk saw 1 MB read while nginx sent 8 GB).
  server {
    listen 127.0.0.1:$NPORT_DISK;
    root $DIR/www;
    directio 4k;
    directio_alignment 4k;
    aio threads;
    output_buffers 4 2m;
$(for s in "${SIZES[@]}"; do
    case "$s" in
      1MiB) echo "    location /wl/g$s/ { output_buffers 1 1m; }" ;;
      4KiB) echo "    location /wl/g$s/ { output_buffers 1 4k; }" ;;
    esac
  done)
  }
}
CONF
nginx -c "$NG/nginx.conf" -p "$NG" >"$NG/out.log" 2>&1 &
PIDS+=($!)
for s in "${SIZES[@]}"; do
  "$WLB" gen --dir "$DIR/www" --bucket wl --prefix "g$s/" --objects "$(objects_for "$s")" --size "$s" >/dev/null
done
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$NPORT/" && break; sleep 0.1; done
drop_cache() { # the page cache of every file under a dir (our files only)
  python3 - "$1" <<'PY'
import os, sys
for root, _, files in os.walk(sys.argv[1]):
    for f in files:
        fd = os.open(os.path.join(root, f), os.O_RDONLY)
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
PY
}
plain_get() { # plain_get PORT SIZE CLIENTS TAG
  "$WLB" get --plain --quiet --endpoint "http://127.0.0.1:$1" --bucket wl --prefix "g$2/" \
    --objects "$(objects_for "$2")" --size "$2" --clients "$3" --duration $DUR --json "$JS/nginx_$4.json" \
    >"$JS/nginx_$4.txt"
}
for s in "${SIZES[@]}"; do
  for c in "${CLIENTS[@]}"; do
    drop_cache "$DIR/www"
    plain_get "$NPORT_DISK" "$s" "$c" "${s}_c${c}_disk"
    plain_get "$NPORT" "$s" "$c" "${s}_c${c}_warm"
    for t in disk warm; do
      f=$JS/nginx_${s}_c${c}_$t.json
      if [ "$s" = 4KiB ]; then
        row "nginx_get_${s}_c${c}_$t" "$(jget "$f" 'j["ops"]["get"]["ops_per_s"]')" ops/s -
      else
        row "nginx_get_${s}_c${c}_$t" "$(jget "$f" 'j["ops"]["get"]["mb_per_s"]')" MB/s -
      fi
    done
  done
done
row nginx_get_4KiB_c8_p99 "$(jget "$JS/nginx_4KiB_c8_warm.json" 'j["ops"]["get"]["latency_ms"]["p99"]')" ms -
# wrk on one 4 KiB file vs wl-bench on the same server: is wl-bench the bottleneck?
WRK=$(wrk -t2 -c8 -d${DUR}s "http://127.0.0.1:$NPORT/wl/g4KiB/000000000000" | awk '/Requests\/sec/{print $2}')
row wrk_nginx_4KiB_c8 "$WRK" ops/s -
# The same file, the same 8 connections, right after wrk: the tools' own cost compared.
"$WLB" get --plain --quiet --endpoint "http://127.0.0.1:$NPORT" --bucket wl --prefix g4KiB/ --objects 1 \
  --size 4KiB --clients 8 --duration $DUR --json "$JS/nginx_wlbench_vs_wrk.json" >/dev/null
row wlbench_nginx_4KiB_c8 "$(jget "$JS/nginx_wlbench_vs_wrk.json" 'j["ops"]["get"]["ops_per_s"]')" ops/s \
  wrk_nginx_4KiB_c8
kill "${PIDS[0]}" && wait "${PIDS[0]}" 2>/dev/null || true
PIDS=()
rm -rf "$DIR/www"

# --------------------------------------------------------------- warmlake
LOCAL=0
if [ -z "$ENDPOINT" ]; then
  LOCAL=1
  AK=wlbench SK=wlbench-secret-key
  start_node() { # start_node [WARMLAKED ARGS...]
    WARMLAKE_ACCESS_KEY=$AK WARMLAKE_SECRET_KEY=$SK "$BUILD/server/warmlaked" --listen 127.0.0.1:0 \
      --data "$DIR/wl" --drives 6 --ec 4+2 --drive-capacity 24G --log-level warn "$@" >"$DIR/wl.log" 2>&1 &
    WL_PID=$!
    PIDS=("$WL_PID")
    for _ in $(seq 300); do
      port=$(sed -n 's/^warmlaked: ready port=\([0-9]*\).*/\1/p' "$DIR/wl.log")
      [ -n "$port" ] && break
      kill -0 "$WL_PID" || { cat "$DIR/wl.log"; exit 1; }
      sleep 0.1
    done
    ENDPOINT=http://127.0.0.1:$port
  }
  start_node
  say "warmlaked pid $WL_PID at $ENDPOINT, data $DIR/wl"
fi
export WARMLAKE_ACCESS_KEY=$AK WARMLAKE_SECRET_KEY=$SK
wlb() { "$WLB" "$@" --endpoint "$ENDPOINT" --quiet; }
[ "$LOCAL" = 1 ] && wlb stats >"$JS/stats_before.json"

for s in "${SIZES[@]}"; do
  # The objects GETs read, written once per size by 8 clients (not measured).
  wlb get --size "$s" --clients 8 --ops 1 --prefix "get$s/" --objects "$(objects_for "$s")" >/dev/null
  for c in "${CLIENTS[@]}"; do
    tag=${s}_c$c
    [ "$LOCAL" = 1 ] && wlb stats >"$JS/stats_put_${tag}_before.json"
    wlb put --size "$s" --clients "$c" --duration $DUR --prefix "put$tag/" --json "$JS/put_$tag.json" \
      >"$JS/put_$tag.txt"
    if [ "$LOCAL" = 1 ] && [ "$s" = 4KiB ]; then
      # Group commit: records per flush over this PUT run, all drives (issue 12: it must grow
      # with the clients, not stay at one record a flush).
      wlb stats >"$JS/stats_put_${tag}_after.json"
      rpf=$(python3 -c 'import json, sys
a, b = (json.load(open(p))["drives"] for p in sys.argv[1:3])
f = sum(d["flushes"] for d in b) - sum(d["flushes"] for d in a)
r = sum(d["flush_records"] for d in b) - sum(d["flush_records"] for d in a)
print("%.2f" % (r / f if f else 0))' "$JS/stats_put_${tag}_before.json" "$JS/stats_put_${tag}_after.json")
      row "records_per_flush_put_${tag}" "$rpf" records -
    fi
    wlb get --size "$s" --clients "$c" --duration $DUR --prefix "get$s/" --objects "$(objects_for "$s")" \
      --no-prepare --json "$JS/get_$tag.json" >"$JS/get_$tag.txt"
    for op in put get; do
      f=$JS/${op}_$tag.json
      mm=$(jget "$f" 'j["mismatches"]')
      [ "$mm" = 0 ] || { echo "s3.sh: $mm CONTENT MISMATCHES in $f" >&2; cat "${f%.json}.txt" >&2; exit 1; }
    done
    # GETs against nginx reading the same disk, and again against nginx serving from RAM.
    if [ "$s" = 4KiB ]; then
      row "put_${tag}" "$(jget "$JS/put_$tag.json" 'j["ops"]["put"]["ops_per_s"]')" ops/s "fio_4KiB_write_fdatasync_${c}jobs"
      g=$(jget "$JS/get_$tag.json" 'j["ops"]["get"]["ops_per_s"]')
      row "get_${tag}" "$g" ops/s "nginx_get_${tag}_disk"
      row "get_${tag}_vs_cache" "$g" ops/s "nginx_get_${tag}_warm"
    else
      p=$(jget "$JS/put_$tag.json" 'j["ops"]["put"]["mb_per_s"]')
      row "put_${tag}" "$p" MB/s ceiling_large_put
      row "put_${tag}_vs_durable" "$p" MB/s ceiling_large_put_durable
      if [ "$c" -gt 1 ]; then row "put_${tag}_vs_8_streams" "$p" MB/s ceiling_large_put_8_streams; fi
      g=$(jget "$JS/get_$tag.json" 'j["ops"]["get"]["mb_per_s"]')
      row "get_${tag}" "$g" MB/s "nginx_get_${tag}_disk"
      row "get_${tag}_vs_cache" "$g" MB/s "nginx_get_${tag}_warm"
    fi
  done
done
row get_4KiB_c8_p99 "$(jget "$JS/get_4KiB_c8.json" 'j["ops"]["get"]["latency_ms"]["p99"]')" ms nginx_get_4KiB_c8_p99

# Batch GET (warmlake's extension, docs/batch-get.md) against per-object GETs of the same
# 16 KiB objects from the same clients (one keep-alive connection each): objects/s, the ratio
# is the speedup. Only against a local warmlake (another S3 server has no batch GET).
if [ "$LOCAL" = 1 ]; then
  for c in 1 8; do
    "$BUILD/bench/bench_batch" "$ENDPOINT" "$SMALL_OBJ" 16384 "$c" "$DUR" 256
  done
fi

# Mixed 90/10 GET/PUT of 1 MiB objects at 8 clients.
wlb mixed --mix get:90,put:10 --size 1MiB --clients 8 --duration $DUR --prefix get1MiB/ \
  --objects $MID_OBJ --no-prepare --json "$JS/mixed.json" >"$JS/mixed.txt"
row mixed_90get_10put_1MiB_c8 "$(jget "$JS/mixed.json" 'sum(o["mb_per_s"] for o in j["ops"].values())')" MB/s \
  nginx_get_1MiB_c8_disk
[ "$(jget "$JS/mixed.json" 'j["mismatches"]')" = 0 ] || { cat "$JS/mixed.txt" >&2; exit 1; }

# ListObjectsV2 over LIST_KEYS keys (empty objects), 8 clients walking the prefix.
# The keys are written first (not measured); the measured run also counts the
# node's CPU time (/proc) and the client's: on this two-core machine they share
# the cores, so keys/s alone measures the client too; keys per node core is the
# node's own figure. The client scans each page for its keys (wl-bench's
# scan_page, about 0.2 us a key; an expat pass was 1.2 us and 40-45% of the two
# cores), checked against expat every 64th page.
wlb list --size 0 --objects $LIST_KEYS --clients 8 --ops 1 --prefix lst/ >/dev/null
node_cpu() { [ "$LOCAL" = 1 ] && awk '{print $14 + $15}' "/proc/$WL_PID/stat" || echo 0; }
cpu0=$(node_cpu)
TIMEFORMAT='%R %U %S'
{ time wlb list --size 0 --objects $LIST_KEYS --clients 8 --duration $DUR --prefix lst/ --no-prepare \
  --json "$JS/list.json" >"$JS/list.txt"; } 2>"$JS/list.time"
unset TIMEFORMAT
cpu1=$(node_cpu)
LIST_V2=$(jget "$JS/list.json" 'j["list_keys_per_s"]')
[ "$(jget "$JS/list.json" 'j["mismatches"]')" = 0 ] || { cat "$JS/list.txt" >&2; exit 1; }
if [ "$LOCAL" = 1 ]; then
  read -r LWALL LUSR LSYS <"$JS/list.time"
  LKEYS=$(jget "$JS/list.json" 'j["list_keys"]')
  LNODE=$(python3 -c "print(($cpu1 - $cpu0) / $(getconf CLK_TCK))")
  row list_v2_node_cpu_s_per_wall_s "$(python3 -c "print($LNODE / $LWALL)")" cores -
  row list_v2_client_cpu_s_per_wall_s "$(python3 -c "print(($LUSR + $LSYS) / $LWALL)")" cores -
  row list_v2_keys_per_node_core_s "$(python3 -c "print($LKEYS / $LNODE if $LNODE else 0)")" keys/s -
fi
if [ "$LOCAL" = 0 ]; then
  row list_v2_keys_per_s "$LIST_V2" keys/s -
else
  # Listing rows that need a stopped node's drives (wl-populate): the object
  # layer's own listing of the same keys by 8 threads in one process (the
  # ceiling of the S3 row: no HTTP, no XML), and buckets of many keys, whose
  # heads wl-populate writes through the object layer (PUTs through S3 would
  # take hours). Keys k/0000000.. : prefix k/0005 is 1,000 of them in any
  # bucket of 10^4 keys or more.
  PAGE_SMALL=10000
  PAGE_BIG=${PAGE_BIG:-$([ "$QUICK" = 1 ] && echo 30000 || echo 100000)}
  FULL_KEYS=${FULL_KEYS:-10000000}
  buckets=("wl-list-small $PAGE_SMALL" "wl-list-big $PAGE_BIG")
  [ "$FULL" = 1 ] && buckets+=("wl-list-full $FULL_KEYS")
  for b in "${buckets[@]}"; do
    set -- $b
    wlb put --bucket "$1" --size 0 --clients 1 --ops 1 --prefix proto/ >/dev/null
  done
  wlb stats >"$JS/stats_after.json" # before wl-populate writes heads of its own
  stop_node() { kill "$WL_PID" 2>/dev/null && wait "$WL_PID" 2>/dev/null || true; PIDS=(); }
  stop_node
  POP=("$BUILD/bench/wl-populate" --data "$DIR/wl" --drives 6 --ec 4+2)
  read -r _ _ _ _ _ _ _ CEIL _ < <("${POP[@]}" --bucket wl-bench --list lst/ --threads 8)
  row list_objlayer_8threads_keys_per_s "${CEIL#(}" keys/s -
  row list_v2_keys_per_s "$LIST_V2" keys/s list_objlayer_8threads_keys_per_s
  for b in "${buckets[@]}"; do
    set -- $b
    say "populating $1 with $2 keys"
    "${POP[@]}" --bucket "$1" --like proto/000000000000 --format 'k/%07llu' --count "$2" --threads 64
  done
  start_node
  # Reopening drives that wl-populate just filled sets RocksDB compacting for a
  # while: measure once the node is idle (under 5% of a core over 2 s; 300 s at most).
  for _ in $(seq 150); do
    a=$(awk '{print $14+$15}' "/proc/$WL_PID/stat")
    sleep 2
    [ $(($(awk '{print $14+$15}' "/proc/$WL_PID/stat") - a)) -lt 10 ] && break
  done
  # One client, one 1,000-key page (prefix k/0005) over and over: its latency
  # must not grow with the bucket (ratio: big over small, 1 is flat).
  for b in "${buckets[@]:0:2}"; do # warm both alike first (index blocks in the cache)
    set -- $b
    wlb list --bucket "$1" --prefix k/0005 --objects 1000 --no-prepare --clients 1 --ops 50 >/dev/null
  done
  for b in "${buckets[@]:0:2}"; do
    set -- $b
    wlb list --bucket "$1" --prefix k/0005 --objects 1000 --no-prepare --clients 1 --duration $DUR \
      --json "$JS/page_$2.json" >"$JS/page_$2.txt"
    [ "$(jget "$JS/page_$2.json" 'j["mismatches"]')" = 0 ] || { cat "$JS/page_$2.txt" >&2; exit 1; }
  done
  row list_page_1000_in_${PAGE_SMALL}_keys_p50 "$(jget "$JS/page_$PAGE_SMALL.json" \
    'j["ops"]["list"]["latency_ms"]["p50"]')" ms -
  row list_page_1000_in_${PAGE_BIG}_keys_p50 "$(jget "$JS/page_$PAGE_BIG.json" \
    'j["ops"]["list"]["latency_ms"]["p50"]')" ms list_page_1000_in_${PAGE_SMALL}_keys_p50
  if [ "$FULL" = 1 ]; then
    # The whole bucket, page after page, by one client: one pass, timed.
    wlb list --bucket wl-list-full --prefix k/ --objects "$FULL_KEYS" --no-prepare --clients 1 \
      --ops $((FULL_KEYS / 1000)) --json "$JS/list_full.json" >"$JS/list_full.txt"
    [ "$(jget "$JS/list_full.json" 'j["mismatches"]')" = 0 ] || { cat "$JS/list_full.txt" >&2; exit 1; }
    row "list_whole_${FULL_KEYS}_keys" "$(jget "$JS/list_full.json" 'j["duration_s"]')" s 30

    # Cost growth: the bucket of the rows above (about 10^4 objects when they ran) grown to
    # GROW_KEYS objects (wl-populate, heads of an empty object), and three of its rows again:
    # the ratio to the same row at 10^4 objects (1 is flat; the issue asks >= 0.9). The
    # drives' indexes also hold the listing buckets' FULL_KEYS keys by now.
    GROW_KEYS=${GROW_KEYS:-1000000}
    wlb put --size 0 --clients 1 --ops 1 --prefix growproto/ >/dev/null
    stop_node
    say "populating wl-bench with $GROW_KEYS keys"
    "${POP[@]}" --bucket wl-bench --like growproto/000000000000 --format 'fill/%08llu' \
      --count "$GROW_KEYS" --threads 64
    start_node
    for _ in $(seq 150); do # idle first, as above
      a=$(awk '{print $14+$15}' "/proc/$WL_PID/stat")
      sleep 2
      [ $(($(awk '{print $14+$15}' "/proc/$WL_PID/stat") - a)) -lt 10 ] && break
    done
    g=$GROW_KEYS
    wlb get --size 4KiB --clients 8 --duration $DUR --prefix get4KiB/ --objects $SMALL_OBJ --no-prepare \
      --json "$JS/grow_get4k.json" >"$JS/grow_get4k.txt"
    wlb put --size 4KiB --clients 32 --duration $DUR --prefix growput/ --json "$JS/grow_put4k.json" \
      >"$JS/grow_put4k.txt"
    wlb get --size 1MiB --clients 8 --duration $DUR --prefix get1MiB/ --objects $MID_OBJ --no-prepare \
      --json "$JS/grow_get1m.json" >"$JS/grow_get1m.txt"
    for f in grow_get4k grow_put4k grow_get1m; do
      [ "$(jget "$JS/$f.json" 'j["mismatches"]')" = 0 ] || { cat "$JS/$f.txt" >&2; exit 1; }
    done
    row "get_4KiB_c8_in_${g}_keys" "$(jget "$JS/grow_get4k.json" 'j["ops"]["get"]["ops_per_s"]')" \
      ops/s get_4KiB_c8
    row "put_4KiB_c32_in_${g}_keys" "$(jget "$JS/grow_put4k.json" 'j["ops"]["put"]["ops_per_s"]')" \
      ops/s put_4KiB_c32
    row "get_1MiB_c8_in_${g}_keys" "$(jget "$JS/grow_get1m.json" 'j["ops"]["get"]["mb_per_s"]')" \
      MB/s get_1MiB_c8
  fi
fi

if [ "$LOCAL" = 1 ]; then
  python3 - "$JS/stats_before.json" "$JS/stats_after.json" <<'PY'
import json, sys
ja, jb = (json.load(open(p)) for p in sys.argv[1:3])
a, b = ja["total"], jb["total"]
user = b["user_bytes"] - a["user_bytes"]
host = b["host_bytes"] - a["host_bytes"]
print("ROW\tdrive_write_amp_over_run\t%.4f\tx\t-" % (host / user if user else 0))
print("ROW\trelocated_by_compaction\t%.1f\tMB\t-" % ((b["relocated_bytes"] - a["relocated_bytes"]) / 1e6))
# The RocksDB indexes' own writes (flushes and compactions; no WAL) over the run, all drives.
idx = sum(d["index_bytes"] for d in jb["drives"]) - sum(d["index_bytes"] for d in ja["drives"])
print("ROW\tindex_bytes_over_run\t%.3f\tMB\t-" % (idx / 1e6))
print("ROW\tindex_share_of_host_bytes\t%.6f\tfrac\t-" % (idx / host if host else 0))
# The node's memory after the suite's rows (server/node_memory.h): what it holds, and how much
# of that its bounded owners explain (the index cache and memtables, the commit, bounce and
# stripe buffers); the rest is code, thread stacks, connections and malloc's free memory.
m = jb.get("memory")
if m:
    mib = 1 << 20
    owned = (m["index_cache"] + m["index_memtables"] + m["index_readers"] + m["writer_buffers"] +
             m["drive_buffers"] + m["stripe_buffers_kept"] + m["stripe_buffers_out"])
    print("ROW\tnode_rss_after_rows\t%.1f\tMiB\t-" % (m["rss"] / mib))
    print("ROW\tnode_malloc_held_after_rows\t%.1f\tMiB\t-" % (m["malloc_held"] / mib))
    print("ROW\tnode_malloc_in_use_share\t%.3f\tfrac\t-" %
          (m["malloc_in_use"] / m["malloc_held"] if m["malloc_held"] else 0))
    print("ROW\tnode_rss_explained_by_bounded_owners\t%.3f\tfrac\t-" %
          (owned / m["rss"] if m["rss"] else 0))
PY

  # One STREAM-sized object up and down over one connection, on a fresh
  # process over fresh drives, so the peak RSS growth is what one streaming
  # connection costs (over the earlier rows' data, compaction's buffers of six
  # drives would be counted with it).
  kill "$WL_PID" 2>/dev/null && wait "$WL_PID" 2>/dev/null || true
  rm -rf "$DIR/wl"
  start_node
  hwm() { awk '/VmHWM/{print $2}' "/proc/$WL_PID/status"; }
  base=$(hwm)
  wlb put --size $STREAM --clients 1 --ops 1 --duration 1200 --prefix stream/ --json "$JS/stream_put.json" \
    >"$JS/stream_put.txt"
  after_put=$(hwm)
  wlb get --size $STREAM --clients 1 --ops 1 --duration 1200 --prefix stream/ --objects 1 --no-prepare \
    --json "$JS/stream_get.json" >"$JS/stream_get.txt"
  after_get=$(hwm)
  [ "$(jget "$JS/stream_get.json" 'j["mismatches"]')" = 0 ] || { cat "$JS/stream_get.txt" >&2; exit 1; }
  row "stream_put_${STREAM}_c1" "$(jget "$JS/stream_put.json" 'j["ops"]["put"]["mb_per_s"]')" MB/s ceiling_large_put
  row "stream_get_${STREAM}_c1" "$(jget "$JS/stream_get.json" 'j["ops"]["get"]["mb_per_s"]')" MB/s fio_seq_read_1MiB
  row stream_rss_base "$(python3 -c "print($base/1024)")" MiB -
  row stream_put_peak_rss_growth "$(python3 -c "print(($after_put-$base)/1024)")" MiB -
  row stream_get_peak_rss_growth "$(python3 -c "print(($after_get-$after_put)/1024)")" MiB -

  # Space for tiny objects: TINY one-byte objects PUT by 32 clients onto fresh
  # drives; the bytes they take on disk, all six drives: segments (records,
  # heads, padding: everything the engine appended, from the drives' counters)
  # and the index (its files after a clean stop), per object. Inline (the
  # default) and erasure-coded (--inline-max 0), next to the issue's target of
  # 1 KiB per object (a popular erasure-coded store needs 5.17 KB).
  row tiny_target_bytes 1024 B -
  for mode in inline ec; do
    kill "$WL_PID" 2>/dev/null && wait "$WL_PID" 2>/dev/null || true
    rm -rf "$DIR/wl"
    if [ $mode = ec ]; then start_node --inline-max 0; else start_node; fi
    wlb put --size 1B --clients 32 --ops $TINY --prefix tiny/ --json "$JS/tiny_$mode.json" \
      >"$JS/tiny_$mode.txt"
    wlb stats >"$JS/tiny_stats_$mode.json"
    kill -TERM "$WL_PID" && wait "$WL_PID" 2>/dev/null || true
    idx=$(du -sb --total "$DIR"/wl/drive*/index | tail -1 | cut -f1)
    # Then each drive compacted offline (wl-drive compact: the segments' live records
    # packed, the index's runs merged), and what is on disk measured again: the bytes the
    # segments that stand were written with, and the index's files.
    written=0
    for d in "$DIR"/wl/drive*; do
      out=$("$BUILD/storage/wl-drive" compact "$d" 2>"$JS/wl-drive.log") ||
        { cat "$JS/wl-drive.log" >&2; echo "s3.sh: wl-drive compact $d failed" >&2; exit 1; }
      w=$(echo "$out" | sed -n 's/^written_bytes *//p')
      [ -n "$w" ] || { echo "s3.sh: no written_bytes from wl-drive stats of $d" >&2; exit 1; }
      written=$((written + w))
    done
    idx_c=$(du -sb --total "$DIR"/wl/drive*/index | tail -1 | cut -f1)
    python3 - "$JS/tiny_stats_$mode.json" "$JS/tiny_$mode.json" "$idx" $mode "$written" "$idx_c" <<'PY'
import json, sys
st, run = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
n, idx, mode = run["ops"]["put"]["ops"], int(sys.argv[3]), sys.argv[4]
seg = sum(d["host_bytes"] - d["index_bytes"] for d in st["drives"])
print("ROW\ttiny_1B_put_c32_%s\t%.0f\tops/s\t-" % (mode, run["ops"]["put"]["ops_per_s"]))
print("ROW\ttiny_1B_segment_bytes_per_object_%s\t%.0f\tB\t-" % (mode, seg / n))
print("ROW\ttiny_1B_index_bytes_per_object_%s\t%.0f\tB\t-" % (mode, idx / n))
print("ROW\ttiny_1B_disk_bytes_per_object_%s\t%.0f\tB\ttiny_target_bytes" % (mode, (seg + idx) / n))
# The records alone, without the IU padding of small group commits: what compaction, which
# packs live records densely, brings the segments down to.
live = sum(d["live_bytes"] for d in st["drives"])
print("ROW\ttiny_1B_live_record_bytes_per_object_%s\t%.0f\tB\t-" % (mode, live / n))
# Measured after compaction (wl-drive compact on each drive): the segments and the index.
written, idx_c = int(sys.argv[5]), int(sys.argv[6])
print("ROW\ttiny_1B_compacted_segment_bytes_per_object_%s\t%.0f\tB\t-" % (mode, written / n))
print("ROW\ttiny_1B_compacted_index_bytes_per_object_%s\t%.0f\tB\t-" % (mode, idx_c / n))
print("ROW\ttiny_1B_compacted_bytes_per_object_%s\t%.0f\tB\ttiny_target_bytes"
      % (mode, (written + idx_c) / n))
# The padding: IU-sized commits that carried fewer bytes of records than an IU.
pad = sum(d["padding_bytes"] for d in st["drives"])
print("ROW\ttiny_1B_padding_bytes_per_object_%s\t%.0f\tB\t-" % (mode, pad / n))
PY
  done
fi
say "wl-bench JSON of every run: bench/results/s3-runs/"
rm -rf "${BENCH_RESULTS:?}/s3-runs"
cp -r "$JS" "$BENCH_RESULTS/s3-runs"
