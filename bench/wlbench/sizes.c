#include "bench/wlbench/sizes.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int size_parse(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    if (!s || !*s || *s == '-') return -1;
    double v = strtod(s, &end);
    if (end == s || errno || v < 0) return -1;
    static const struct {
        const char *unit;
        double mul;
    } units[] = {{"", 1},
                 {"b", 1},
                 {"k", 1024.0},
                 {"kib", 1024.0},
                 {"kb", 1e3},
                 {"m", 1048576.0},
                 {"mib", 1048576.0},
                 {"mb", 1e6},
                 {"g", 1073741824.0},
                 {"gib", 1073741824.0},
                 {"gb", 1e9},
                 {"t", 1099511627776.0},
                 {"tib", 1099511627776.0},
                 {"tb", 1e12}};
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcasecmp(end, units[i].unit) == 0) {
            double r = v * units[i].mul;
            if (r > 1.8e19 || r != (double)(uint64_t)r) return -1; /* fractional bytes */
            *out = (uint64_t)r;
            return 0;
        }
    }
    return -1;
}

int size_dist_parse(const char *s, size_dist_t *d)
{
    memset(d, 0, sizeof(*d));
    char buf[512];
    if (!s || strlen(s) >= sizeof(buf)) return -1;
    strcpy(buf, s);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (d->n == SIZES_MAX) return -1;
        char *colon = strchr(tok, ':');
        uint64_t w = 1;
        if (colon) {
            *colon = 0;
            char *end;
            errno = 0;
            unsigned long long x = strtoull(colon + 1, &end, 10);
            if (end == colon + 1 || *end || errno || colon[1] == '-') return -1;
            w = x;
        }
        if (size_parse(tok, &d->size[d->n]) != 0) return -1;
        d->weight[d->n] = w;
        d->total += w;
        d->n++;
    }
    return d->n && d->total ? 0 : -1;
}

uint64_t size_dist_pick(const size_dist_t *d, uint64_t r)
{
    /* r * total / 2^64: uniform over [0, total) without modulo bias worth noting */
    uint64_t x = (uint64_t)(((unsigned __int128)r * d->total) >> 64);
    for (int i = 0; i < d->n; i++) {
        if (x < d->weight[i]) return d->size[i];
        x -= d->weight[i];
    }
    return d->size[d->n - 1];
}

double size_dist_mean(const size_dist_t *d)
{
    double s = 0;
    for (int i = 0; i < d->n; i++)
        s += (double)d->size[i] * (double)d->weight[i];
    return d->total ? s / (double)d->total : 0;
}

void size_format(uint64_t v, char *out, int cap)
{
    static const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (i < 4 && v && v % 1024 == 0) {
        v /= 1024;
        i++;
    }
    snprintf(out, (size_t)cap, "%llu%s", (unsigned long long)v, u[i]);
}
