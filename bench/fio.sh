# Sourced by the bench suites: one fio job, its figures.
# fio_job read|write ARGS...: run fio, print "MB/s iops" of the job's read or write side
# (--group_reporting jobs report as one).
fio_job() {
  local side=$1; shift
  fio --output-format=json "$@" | python3 -c '
import json, sys
j = json.load(sys.stdin)["jobs"][0][sys.argv[1]]
print(j["bw_bytes"] / 1e6, j["iops"])' "$side"
}
