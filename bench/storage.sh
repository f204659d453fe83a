#!/usr/bin/env bash
# The storage suite: fio ceilings and the drive engine's figures, same disk,
# same run. Prints ROW lines for bench/report.py. Called by bench/run.sh.
#   bench/storage.sh BUILD_DIR      (BENCH_DIR: scratch dir, QUICK=1: smaller)
set -euo pipefail
BUILD=$1
DIR=${BENCH_DIR:?}/storage
mkdir -p "$DIR"
trap 'rm -rf "$DIR"' EXIT

if [ "${QUICK:-0}" = 1 ]; then SIZE=512M; RT=3; else SIZE=2G; RT=8; fi

. "$(dirname "$0")/fio.sh"

F="$DIR/fio.dat"
common=(--name=ceiling --filename="$F" --size=$SIZE --direct=1 --ioengine=libaio
        --time_based --runtime=$RT --group_reporting)
# Preallocate and fill the file once so reads hit real blocks.
fio --name=prep --filename="$F" --size=$SIZE --rw=write --bs=1M --direct=1 --ioengine=libaio \
    --iodepth=16 >/dev/null

read -r bw _ < <(fio_job write "${common[@]}" --rw=write --bs=1M --iodepth=16)
printf 'ROW\tfio_seq_write_1MiB\t%s\tMB/s\t-\n' "$bw"
read -r bw _ < <(fio_job read "${common[@]}" --rw=read --bs=1M --iodepth=16)
printf 'ROW\tfio_seq_read_1MiB\t%s\tMB/s\t-\n' "$bw"
read -r bw _ < <(fio_job read "${common[@]}" --rw=randread --bs=64k --iodepth=16)
printf 'ROW\tfio_randread_64KiB\t%s\tMB/s\t-\n' "$bw"
# Durable 1 MiB appends, one at a time (write + fdatasync): what a single
# writer that waits for durability can get from the raw disk.
read -r bw _ < <(fio_job write --name=ceiling --filename="$DIR/append.dat" --size=$SIZE \
  --rw=write --bs=1M --ioengine=sync --direct=1 --fdatasync=1 --time_based --runtime=$RT)
printf 'ROW\tfio_seq_write_1MiB_fdatasync_qd1\t%s\tMB/s\t-\n' "$bw"
rm -f "$DIR/append.dat"
# The same, once over a fresh preallocated file: what the engine does. The row
# above runs time-based over one file and so mostly overwrites blocks already
# written; appends into fallocated (unwritten) space make each fdatasync also
# commit the extent conversion to the filesystem journal.
read -r bw _ < <(fio_job write --name=ceiling --filename="$DIR/append.dat" --size=$SIZE \
  --rw=write --bs=1M --ioengine=sync --direct=1 --fdatasync=1 --fallocate=native)
printf 'ROW\tfio_seq_write_1MiB_fdatasync_qd1_fresh\t%s\tMB/s\t-\n' "$bw"
rm -f "$DIR/append.dat"
# The raw rate of durable small appends: 4 KiB write + fdatasync, one at a time.
read -r _ iops < <(fio_job write --name=ceiling --filename="$DIR/append.dat" --size=256M \
  --rw=write --bs=4k --ioengine=sync --direct=1 --fdatasync=1 --time_based --runtime=$RT)
printf 'ROW\traw_4KiB_write_fdatasync_ops\t%s\tops/s\t-\n' "$iops"
rm -f "$F" "$DIR/append.dat"

if [ "${QUICK:-0}" = 1 ]; then
  "$BUILD/bench/bench_storage" "$DIR" quick
else
  "$BUILD/bench/bench_storage" "$DIR"
fi
