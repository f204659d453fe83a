#!/usr/bin/env bash
# bench/storage_ab.sh BUILD_A BUILD_B [ROUNDS]: the drive engine's append
# rows of two builds in the same run, next to fio's ceilings for as many
# durable 4 KiB appenders (1, 8, 32 jobs) and the 1 MiB write+fdatasync one.
# Phases run A, B, A, B... (ROUNDS each, default 2) so the disk's swings fall
# on both alike; the table gives each row's mean for A and B, B/A, and B's
# ratio to its ceiling. BUILD_A may be an engine without asynchronous writes
# (bench_storage built with -DBENCH_SYNC_ONLY): its async rows are absent.
#   BENCH_DIR=/tmp/x bench/storage_ab.sh /tmp/main-build build 2
set -euo pipefail
A=$(cd "$1" && pwd)
B=$(cd "$2" && pwd)
ROUNDS=${3:-2}
DIR=${BENCH_DIR:?}/storage_ab
mkdir -p "$DIR"
trap 'if [ -n "${KEEP:-}" ]; then cp "$OUT" "$KEEP"; fi; rm -rf "$DIR"' EXIT
RT=${RT:-5}
. "$(dirname "$0")/fio.sh"
OUT=$DIR/rows.txt
: >"$OUT"

read -r bw _ < <(fio_job write --name=ceiling --filename="$DIR/append.dat" --size=1G \
  --rw=write --bs=1M --ioengine=sync --direct=1 --fdatasync=1 --time_based --runtime=$RT)
printf 'C\tfio_seq_write_1MiB_fdatasync_qd1\t%s\n' "$bw" >>"$OUT"
rm -f "$DIR/append.dat"
for j in 1 8 32; do
  mkdir -p "$DIR/jobs"
  read -r _ iops < <(fio_job write --name=ceiling --directory="$DIR/jobs" --size=32M \
    --numjobs=$j --group_reporting --rw=write --bs=4k --ioengine=sync --direct=1 --fdatasync=1 \
    --time_based --runtime=$RT)
  if [ $j = 1 ]; then n=raw_4KiB_write_fdatasync_ops; else n=raw_4KiB_write_fdatasync_j${j}_ops; fi
  printf 'C\t%s\t%s\n' "$n" "$iops" >>"$OUT"
  rm -rf "$DIR/jobs"
done

for i in $(seq "$ROUNDS"); do
  for n in A B; do
    b=$A
    [ $n = B ] && b=$B
    "$b/bench/bench_storage" "$DIR/run" append async | sed "s/^ROW/$n/" >>"$OUT"
  done
done

python3 - "$OUT" "$A" "$B" <<'EOF'
import sys
ceil, vals, order = {}, {}, []
for line in open(sys.argv[1]):
    f = line.rstrip("\n").split("\t")
    if f[0] == "C":
        ceil[f[1]] = float(f[2])
        continue
    side, name, v, unit, c = f
    if name not in vals:
        vals[name] = {"A": [], "B": [], "unit": unit, "ceil": c}
        order.append(name)
    vals[name][side].append(float(v))
mean = lambda x: sum(x) / len(x) if x else None
fmt = lambda x: "%12.1f" % x if x is not None else "%12s" % "-"
print("A = %s\nB = %s" % (sys.argv[2], sys.argv[3]))
for k, v in ceil.items():
    print("ceiling %-36s %12.1f" % (k, v))
print("%-42s %12s %12s %7s %12s %8s  %s" % ("row", "A", "B", "B/A", "ceiling", "B/ceil", "unit"))
for n in order:
    r = vals[n]
    a, b = mean(r["A"]), mean(r["B"])
    c = ceil.get(r["ceil"])
    print("%-42s %s %s %7s %s %8s  %s" % (n, fmt(a), fmt(b),
          "%.3f" % (b / a) if a and b else "-", fmt(c),
          "%.3f" % (b / c) if b and c else "-", r["unit"]))
EOF
