#!/usr/bin/env python3
"""Formats benchmark rows into a table and bench/results/SUITE.json.

Input lines (others are passed through as log):
  ROW <tab> name <tab> value <tab> unit <tab> ceiling
where ceiling is a number, the name of another row of the same suite (its
value is the ceiling), or "-" when no ceiling applies. ratio = value/ceiling;
for units where lower is better (s, x, B/obj) the table says so.
"""
import json
import os
import sys

LOWER_BETTER = {"s", "ms", "us", "x", "B/obj", "B", "MiB", "MiB/min"}


def main():
    suite = sys.argv[1]
    outdir = sys.argv[2]
    rows, order = {}, []
    for line in sys.stdin:
        line = line.rstrip("\n")
        if not line.startswith("ROW\t"):
            print(line, flush=True)
            continue
        _, name, value, unit, ceil = (line.split("\t") + ["-"] * 5)[:5]
        rows[name] = {"name": name, "value": float(value), "unit": unit, "ceiling_ref": ceil}
        order.append(name)
    out = []
    for name in order:
        r = rows[name]
        ref = r.pop("ceiling_ref")
        ceiling = None
        if ref not in ("-", ""):
            try:
                ceiling = float(ref)
            except ValueError:
                ceiling = rows[ref]["value"] if ref in rows else None
                r["ceiling_name"] = ref
        r["ceiling"] = ceiling
        r["ratio"] = (r["value"] / ceiling) if ceiling else None
        out.append(r)
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, suite + ".json"), "w") as f:
        json.dump({"suite": suite, "rows": out}, f, indent=1)
    w = max([len(r["name"]) for r in out] + [10])
    print()
    print("suite %s" % suite)
    print("%-*s %14s %-8s %14s %8s  %s" % (w, "row", "value", "unit", "ceiling", "ratio", "ceiling row"))
    for r in out:
        c = "%14.4g" % r["ceiling"] if r["ceiling"] is not None else "%14s" % "-"
        ra = "%8.3f" % r["ratio"] if r["ratio"] is not None else "%8s" % "-"
        note = r.get("ceiling_name", "")
        if r["unit"] in LOWER_BETTER:
            note = (note + " (lower is better)").strip()
        print("%-*s %14.4g %-8s %s %s  %s" % (w, r["name"], r["value"], r["unit"], c, ra, note))
    md = os.path.join(outdir, suite + ".md")
    with open(md, "w") as f:
        f.write("| %s row | value | unit | ceiling (same run) | ratio |\n|---|---|---|---|---|\n" % suite)
        for r in out:
            c = "-" if r["ceiling"] is None else "%.4g" % r["ceiling"]
            if r.get("ceiling_name"):
                c += " (%s)" % r["ceiling_name"]
            ra = "-" if r["ratio"] is None else "%.3f" % r["ratio"]
            f.write("| %s | %.4g | %s | %s | %s |\n" % (r["name"], r["value"], r["unit"], c, ra))
    print("wrote %s and %s" % (os.path.join(outdir, suite + ".json"), md))


if __name__ == "__main__":
    main()
