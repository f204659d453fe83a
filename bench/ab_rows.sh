# bench/ab_rows.sh, sourced by ab.sh and cluster.sh: the interleaved A/B rows.
#
# ab_rows NAME_WIDTH FIG_WIDTH: each row of the array `rows` ("NAME WORKLOAD FIELD
# WL-BENCH ARGS...", FIELD ops_per_s or mb_per_s of the workload's op) runs against
# $EP_A and $EP_B in turn, A B A B..., ROUNDS times each, DUR seconds a run, so that
# the disk's swings fall on both alike; a run with content mismatches fails. Prints
# the row's name, A's figures, B's, and the ratio of B's mean to A's. Uses WLB (the
# wl-bench binary) and DIR/json for the runs' results.
ab_rows() {
  local nw=$1 fw=$2 r name wl field i n ep f v ratio
  local -a va vb
  for r in "${rows[@]}"; do
    # shellcheck disable=SC2086 # the row splits into words
    set -- $r
    name=$1 wl=$2 field=$3
    shift 3
    va=() vb=()
    for i in $(seq "$ROUNDS"); do
      for n in A B; do
        ep=EP_$n
        f=$DIR/json/${name}_${n}_$i.json
        "$WLB" "$wl" --endpoint "${!ep}" --quiet --duration "$DUR" --json "$f" "$@" >/dev/null
        v=$(python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['mismatches']==0; \
print(round(j['ops'][sys.argv[2]][sys.argv[3]], 1))" "$f" "$wl" "$field")
        if [ $n = A ]; then va+=("$v"); else vb+=("$v"); fi
      done
    done
    ratio=$(python3 -c "import sys; a=[float(x) for x in sys.argv[1].split()]; \
b=[float(x) for x in sys.argv[2].split()]; print('%.3f' % ((sum(b)/len(b))/(sum(a)/len(a))))" \
      "${va[*]}" "${vb[*]}")
    printf "%-${nw}s %-${fw}s %-${fw}s %s\n" "$name" "${va[*]}" "${vb[*]}" "$ratio"
  done
}
