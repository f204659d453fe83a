/*
 * report.c: wl-bench's results (map in wlb.h): the table on stdout, the
 * JSON report, and `wl-bench compare` of two reports.
 */
#include "bench/wlbench/wlb.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double ms(uint64_t ns)
{
    return (double)ns / 1e6;
}

static void print_lat_row(const char *name, const hist_t *h, uint64_t ops, uint64_t bytes,
                          uint64_t errors, double secs)
{
    printf("%-10s %9llu %10.1f %9.1f %8.2f %8.2f %8.2f %8.2f %8.2f %7llu\n", name,
           (unsigned long long)ops, (double)ops / secs, (double)bytes / 1e6 / secs,
           ms(hist_quantile(h, 0.5)), ms(hist_quantile(h, 0.9)), ms(hist_quantile(h, 0.99)),
           ms(hist_quantile(h, 0.999)), ms(h->max), (unsigned long long)errors);
}

void report_table(const total_t *t)
{
    char sz[600];
    if (cfg.sizes.n == 1)
        size_format(cfg.sizes.size[0], sz, sizeof(sz));
    else
        snprintf(sz, sizeof(sz), "%s (mean %.0f KiB)", cfg.size_spec,
                 size_dist_mean(&cfg.sizes) / 1024);
    char objs[64] = "a new key per op";
    if (cfg.objects) snprintf(objs, sizeof(objs), "%llu objects", (unsigned long long)cfg.objects);
    printf("wl-bench %s: %s, %d clients, size %s, %s, %.1f s%s\n", cfg.workload, cfg.endpoint,
           cfg.clients, sz, objs, t->secs, cfg.verify ? ", content verified" : "");
    printf("%-10s %9s %10s %9s %8s %8s %8s %8s %8s %7s\n", "op", "ops", "ops/s", "MB/s", "p50 ms",
           "p90 ms", "p99 ms", "p99.9 ms", "max ms", "errors");
    for (int o = 0; o < OP_N; o++) {
        if (!t->ops[o] && !t->errors[o]) continue;
        print_lat_row(op_name[o], &t->lat[o], t->ops[o], t->bytes[o], t->errors[o], t->secs);
        if (o == OP_GET && t->ttfb.count)
            print_lat_row("  ttfb", &t->ttfb, t->ttfb.count, 0, 0, t->secs);
    }
    if (t->list_keys)
        printf("list: %llu keys, %.0f keys/s, %llu full passes\n", (unsigned long long)t->list_keys,
               (double)t->list_keys / t->secs, (unsigned long long)t->list_passes);
    if (t->absent)
        printf("get/stat of keys this run had deleted: %llu (expected 404)\n",
               (unsigned long long)t->absent);
    for (int e = 0; e < t->nerr; e++)
        printf("error %s: %llu\n", t->err[e].name, (unsigned long long)t->err[e].n);
    printf("503 SlowDown: %llu\n", (unsigned long long)t->slowdown);
    printf("content mismatches: %llu%s\n", (unsigned long long)t->mismatches,
           t->mismatches ? "   <<<<<<<< DATA IS WRONG" : "");
}

static json_t *lat_json(const hist_t *h)
{
    return json_pack("{s:f,s:f,s:f,s:f,s:f,s:f,s:f}", "mean", hist_mean(h) / 1e6, "p50",
                     ms(hist_quantile(h, 0.5)), "p90", ms(hist_quantile(h, 0.9)), "p99",
                     ms(hist_quantile(h, 0.99)), "p99.9", ms(hist_quantile(h, 0.999)), "min",
                     h->count ? ms(h->min) : 0.0, "max", ms(h->max));
}

int report_json(const total_t *t)
{
    json_t *root = json_object(), *ops = json_object(), *errs = json_object();
    json_object_set_new(root, "tool", json_string("wl-bench"));
    json_object_set_new(root, "format", json_integer(1));
    json_object_set_new(root, "workload", json_string(cfg.workload));
    json_object_set_new(root, "endpoint", json_string(cfg.endpoint));
    json_object_set_new(root, "time", json_integer((json_int_t)time(NULL)));
    json_object_set_new(
        root, "config",
        json_pack("{s:i,s:s,s:I,s:f,s:I,s:s,s:I,s:b,s:b}", "clients", cfg.clients, "size",
                  cfg.size_spec, "objects", (json_int_t)cfg.objects, "duration_limit_s",
                  cfg.duration, "ops_limit", (json_int_t)cfg.ops, "order",
                  cfg.random_order ? "random" : "sequential", "range_size",
                  (json_int_t)cfg.range_size, "verify", cfg.verify, "plain", cfg.plain));
    json_object_set_new(root, "duration_s", json_real(t->secs));
    for (int o = 0; o < OP_N; o++) {
        if (!t->ops[o] && !t->errors[o]) continue;
        json_t *j =
            json_pack("{s:I,s:I,s:I,s:f,s:f,s:o}", "ops", (json_int_t)t->ops[o], "bytes",
                      (json_int_t)t->bytes[o], "errors", (json_int_t)t->errors[o], "ops_per_s",
                      (double)t->ops[o] / t->secs, "mb_per_s", (double)t->bytes[o] / 1e6 / t->secs,
                      "latency_ms", lat_json(&t->lat[o]));
        if (o == OP_GET && t->ttfb.count) json_object_set_new(j, "ttfb_ms", lat_json(&t->ttfb));
        json_object_set_new(ops, op_name[o], j);
    }
    json_object_set_new(root, "ops", ops);
    for (int e = 0; e < t->nerr; e++)
        json_object_set_new(errs, t->err[e].name, json_integer((json_int_t)t->err[e].n));
    json_object_set_new(root, "errors", errs);
    json_object_set_new(root, "slowdown", json_integer((json_int_t)t->slowdown));
    json_object_set_new(root, "mismatches", json_integer((json_int_t)t->mismatches));
    json_object_set_new(root, "list_keys", json_integer((json_int_t)t->list_keys));
    json_object_set_new(root, "list_keys_per_s", json_real((double)t->list_keys / t->secs));
    int rc = json_dump_file(root, cfg.json_path, JSON_INDENT(1) | JSON_SORT_KEYS);
    json_decref(root);
    if (rc != 0) fprintf(stderr, "wl-bench: cannot write %s\n", cfg.json_path);
    return rc;
}

/* ---- compare ---- */

int report_compare(const char *a_path, const char *b_path)
{
    json_error_t je;
    json_t *a = json_load_file(a_path, 0, &je);
    if (!a) {
        fprintf(stderr, "wl-bench: %s: %s (line %d)\n", a_path, je.text, je.line);
        return 2;
    }
    json_t *b = json_load_file(b_path, 0, &je);
    if (!b) {
        fprintf(stderr, "wl-bench: %s: %s (line %d)\n", b_path, je.text, je.line);
        json_decref(a);
        return 2;
    }
    printf("A: %s (%s)\nB: %s (%s)\n", a_path, json_string_value(json_object_get(a, "workload")),
           b_path, json_string_value(json_object_get(b, "workload")));
    printf("%-22s %14s %14s %9s\n", "figure", "A", "B", "change");
    static const struct {
        const char *field, *lat, *label;
        int higher_better;
    } figs[] = {{"ops_per_s", NULL, "ops/s", 1}, {"mb_per_s", NULL, "MB/s", 1},
                {NULL, "p50", "p50 ms", 0},      {NULL, "p90", "p90 ms", 0},
                {NULL, "p99", "p99 ms", 0},      {NULL, "p99.9", "p99.9 ms", 0},
                {NULL, "max", "max ms", 0},      {"errors", NULL, "errors", 0}};
    json_t *aops = json_object_get(a, "ops"), *bops = json_object_get(b, "ops");
    for (int o = 0; o < OP_N; o++) {
        json_t *ao = json_object_get(aops, op_name[o]), *bo = json_object_get(bops, op_name[o]);
        if (!ao && !bo) continue;
        for (size_t f = 0; f < sizeof(figs) / sizeof(figs[0]); f++) {
            json_t *av, *bv;
            if (figs[f].field) {
                av = json_object_get(ao, figs[f].field);
                bv = json_object_get(bo, figs[f].field);
            } else {
                av = json_object_get(json_object_get(ao, "latency_ms"), figs[f].lat);
                bv = json_object_get(json_object_get(bo, "latency_ms"), figs[f].lat);
            }
            char label[64];
            snprintf(label, sizeof(label), "%s %s", op_name[o], figs[f].label);
            double x = json_number_value(av), y = json_number_value(bv);
            char change[32] = "-";
            const char *verdict = "";
            if (av && bv && x != 0) {
                double pct = (y - x) / x * 100;
                snprintf(change, sizeof(change), "%+.1f%%", pct);
                if (fabs(pct) >= 5)
                    verdict = (pct > 0) == figs[f].higher_better ? "  better" : "  worse";
            }
            printf("%-22s %14.6g %14.6g %9s%s\n", label, x, y, change, verdict);
        }
    }
    const char *totals[] = {"list_keys_per_s", "slowdown", "mismatches"};
    for (int i = 0; i < 3; i++) {
        double x = json_number_value(json_object_get(a, totals[i]));
        double y = json_number_value(json_object_get(b, totals[i]));
        if (x == 0 && y == 0) continue;
        printf("%-22s %14.6g %14.6g %9s\n", totals[i], x, y, "");
    }
    int bad = json_integer_value(json_object_get(b, "mismatches")) > 0;
    json_decref(a);
    json_decref(b);
    return bad ? 1 : 0;
}
