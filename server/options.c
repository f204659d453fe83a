/*
 * options: settings from one table (see options.h): defaults, --help,
 * getopt_long() and the INI file (inih).
 */
#include "server/options.h"

#include "common/log.h"
#include "common/mem.h"
#include "common/num.h"

#include <errno.h>
#include <getopt.h>
#include <ini.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define HELP_COL 25 /* where help text starts in --help */

static void fmt(char *buf, size_t cap, const char *f, ...) __attribute__((format(printf, 3, 4)));
static void fmt(char *buf, size_t cap, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    vsnprintf(buf, cap, f, ap); /* a message cut short is still a message */
    va_end(ap);
}

static int isdig(char c)
{
    return c >= '0' && c <= '9';
}

/* ---- strict parsers ---- */

/* Leading decimal digits of *p into *v (common/num's strict rules); -1 when there are none or
 * they overflow. */
static int digits(const char **p, uint64_t *v)
{
    const char *s = *p;
    while (isdig(*s))
        s++;
    if (num_parse_u64n(*p, (size_t)(s - *p), 0, UINT64_MAX, v) != 0) return -1;
    *p = s;
    return 0;
}

int opt_parse_int(const char *s, int64_t *out)
{
    const char *p = s;
    int neg = *p == '-';
    uint64_t v;
    if (neg) p++;
    if (digits(&p, &v) != 0 || *p) return -1;
    if (v > (uint64_t)INT64_MAX + (neg ? 1 : 0)) return -1;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

int opt_parse_size(const char *s, uint64_t *out)
{
    const char *p = s;
    uint64_t whole, frac = 0, scale = 1, mult = 1;
    if (digits(&p, &whole) != 0) return -1;
    if (*p == '.') {
        p++;
        if (!isdig(*p)) return -1;
        for (int n = 0; isdig(*p); p++, n++) {
            if (n == 18) return -1; /* more precision than any size needs */
            frac = frac * 10 + (uint64_t)(*p - '0');
            scale *= 10;
        }
    }
    switch (*p) {
    case 'k':
    case 'K':
        mult = 1ull << 10;
        break;
    case 'm':
    case 'M':
        mult = 1ull << 20;
        break;
    case 'g':
    case 'G':
        mult = 1ull << 30;
        break;
    case 't':
    case 'T':
        mult = 1ull << 40;
        break;
    default:
        break;
    }
    if (mult != 1) p++;
    if (*p) return -1;
    if (scale != 1 && mult == 1) return -1; /* a fraction of a byte */
    if (whole > UINT64_MAX / mult) return -1;
    uint64_t v = whole * mult;
    uint64_t f = (uint64_t)((unsigned __int128)frac * mult / scale);
    if (v > UINT64_MAX - f) return -1;
    *out = v + f;
    return 0;
}

int opt_parse_real(const char *s, double *out)
{
    const char *p = s;
    if (*p == '-') p++;
    if (!isdig(*p)) return -1;
    while (isdig(*p))
        p++;
    if (*p == '.') {
        p++;
        if (!isdig(*p)) return -1;
        while (isdig(*p))
            p++;
    }
    if (*p) return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end != p || errno == ERANGE || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

/* ---- ranges, as --help shows them and as errors explain them ---- */

static void size_str(char *buf, size_t cap, uint64_t v)
{
    static const char suffix[] = "TGMK";
    for (int i = 0; i < 4; i++) {
        uint64_t unit = 1ull << (10 * (4 - i));
        if (v && v % unit == 0) {
            fmt(buf, cap, "%" PRIu64 "%c", v / unit, suffix[i]);
            return;
        }
    }
    fmt(buf, cap, "%" PRIu64, v);
}

/* The two rows an OPT_PAIR stands for, and their names ("k", "m"). */
static int pair_rows(const opt_ctx_t *ctx, const opt_def_t *d, const opt_def_t *rows[2],
                     char names[2][32])
{
    const char *plus = d->key ? strchr(d->key, '+') : NULL;
    if (!plus || (size_t)(plus - d->key) >= sizeof(names[0]) || strlen(plus + 1) >= 32) return -1;
    memcpy(names[0], d->key, (size_t)(plus - d->key));
    names[0][plus - d->key] = 0;
    strcpy(names[1], plus + 1);
    for (int i = 0; i < 2; i++) {
        rows[i] = opt_find(ctx, d->section, names[i]);
        if (!rows[i] || rows[i]->type == OPT_PAIR) return -1;
    }
    return 0;
}

static void upper(char *s)
{
    for (; *s; s++)
        if (*s >= 'a' && *s <= 'z') *s = (char)(*s - 'a' + 'A');
}

/* Short form: "1..4096", "0 or 4K..1M". */
static void range_str(const opt_ctx_t *ctx, const opt_def_t *d, char *buf, size_t cap)
{
    char lo[32], hi[32];
    const char *zero = d->flags & OPT_ZERO_OK ? "0 or " : "";
    switch (d->type) {
    case OPT_INT:
    case OPT_REAL:
        fmt(buf, cap, "%s%" PRId64 "..%" PRId64, zero, d->min, d->max);
        break;
    case OPT_SIZE:
        size_str(lo, sizeof(lo), (uint64_t)d->min);
        size_str(hi, sizeof(hi), (uint64_t)d->max);
        fmt(buf, cap, "%s%s..%s", zero, lo, hi);
        break;
    case OPT_STR:
        if (d->max)
            fmt(buf, cap, "%" PRId64 "..%" PRId64 " bytes", d->min, d->max);
        else
            fmt(buf, cap, "%s", d->min ? "not empty" : "");
        break;
    case OPT_NAME:
        fmt(buf, cap, "%" PRId64 "..%" PRId64 " of A-Z a-z 0-9 . - _", d->min, d->max);
        break;
    case OPT_ADDR:
        fmt(buf, cap, "port %" PRId64 "..%" PRId64, d->min, d->max);
        break;
    case OPT_LEVEL:
        fmt(buf, cap, "debug|info|warn|error|off");
        break;
    case OPT_PAIR: {
        const opt_def_t *rows[2];
        char names[2][32], r0[64], r1[64];
        if (pair_rows(ctx, d, rows, names) != 0) {
            fmt(buf, cap, "?");
            break;
        }
        range_str(ctx, rows[0], r0, sizeof(r0));
        range_str(ctx, rows[1], r1, sizeof(r1));
        upper(names[0]);
        upper(names[1]);
        fmt(buf, cap, "%s %s, %s %s", names[0], r0, names[1], r1);
        break;
    }
    default:
        fmt(buf, cap, "%s", "");
    }
}

/* Long form, after "want ". */
static void describe(const opt_ctx_t *ctx, const opt_def_t *d, char *buf, size_t cap)
{
    char r[160];
    range_str(ctx, d, r, sizeof(r));
    switch (d->type) {
    case OPT_INT:
        fmt(buf, cap, "a whole number in %s", r);
        break;
    case OPT_SIZE:
        fmt(buf, cap, "a size in %s (bytes, or with a K, M, G or T suffix)", r);
        break;
    case OPT_REAL:
        fmt(buf, cap, "a number in %s", r);
        break;
    case OPT_STR:
        fmt(buf, cap, "text, %s", r);
        break;
    case OPT_NAME:
        fmt(buf, cap, "%" PRId64 "..%" PRId64 " letters, digits, '.', '-' or '_'", d->min, d->max);
        break;
    case OPT_ADDR:
        fmt(buf, cap, "HOST:PORT with PORT in %" PRId64 "..%" PRId64, d->min, d->max);
        break;
    case OPT_LEVEL:
        fmt(buf, cap, "one of debug, info, warn, error, off");
        break;
    case OPT_PAIR:
        fmt(buf, cap, "%s, %s", d->arg ? d->arg : "A+B", r);
        break;
    default:
        fmt(buf, cap, "no value");
    }
}

static const char *own(opt_ctx_t *ctx, const char *s)
{
    if (ctx->nowned == ctx->capowned) {
        ctx->capowned = ctx->capowned ? 2 * ctx->capowned : 16;
        ctx->owned = xrealloc(ctx->owned, ctx->capowned * sizeof(*ctx->owned));
    }
    return ctx->owned[ctx->nowned++] = xstrdup(s);
}

static int in_range(const opt_def_t *d, int64_t v)
{
    return (v == 0 && (d->flags & OPT_ZERO_OK)) || (v >= d->min && v <= d->max);
}

static int bad(opt_ctx_t *ctx, const opt_def_t *d, const char *label, const char *text)
{
    char want[256];
    describe(ctx, d, want, sizeof(want));
    fmt(ctx->err, sizeof(ctx->err), "%s: bad value '%s': want %s", label, text, want);
    return -1;
}

static int name_ok(const char *s)
{
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || isdig(*s) || *s == '.' ||
              *s == '-' || *s == '_'))
            return 0;
    return 1;
}

static int addr_ok(const opt_def_t *d, const char *s)
{
    const char *colon = strrchr(s, ':');
    int64_t port;
    if (!colon || colon == s || opt_parse_int(colon + 1, &port) != 0 || port < d->min ||
        port > d->max)
        return 0;
    if (s[0] == '[') /* [v6]:port */
        return colon - s > 2 && colon[-1] == ']';
    return memchr(s, ':', (size_t)(colon - s)) == NULL; /* a bare v6 needs brackets */
}

int opt_parse(opt_ctx_t *ctx, const opt_def_t *d, const char *label, const char *text, void *base)
{
    char *dst = (char *)base + d->off;
    switch (d->type) {
    case OPT_HELP:
    case OPT_CONFIG:
        return 0;
    case OPT_STR:
    case OPT_NAME: {
        size_t n = strlen(text);
        if ((int64_t)n < d->min || (d->max && (int64_t)n > d->max) ||
            (d->type == OPT_NAME && !name_ok(text)))
            return bad(ctx, d, label, text);
        *(const char **)dst = own(ctx, text);
        return 0;
    }
    case OPT_ADDR:
        if (!addr_ok(d, text)) return bad(ctx, d, label, text);
        *(const char **)dst = own(ctx, text);
        return 0;
    case OPT_INT: {
        int64_t v;
        if (opt_parse_int(text, &v) != 0 || !in_range(d, v)) return bad(ctx, d, label, text);
        *(int64_t *)dst = v;
        return 0;
    }
    case OPT_SIZE: {
        uint64_t v;
        if (opt_parse_size(text, &v) != 0 || v > INT64_MAX || !in_range(d, (int64_t)v))
            return bad(ctx, d, label, text);
        *(uint64_t *)dst = v;
        return 0;
    }
    case OPT_REAL: {
        double v;
        if (opt_parse_real(text, &v) != 0 ||
            !((v == 0 && (d->flags & OPT_ZERO_OK)) || (v >= (double)d->min && v <= (double)d->max)))
            return bad(ctx, d, label, text);
        *(double *)dst = v;
        return 0;
    }
    case OPT_LEVEL: {
        int v = log_level_parse(text);
        if (v < 0) return bad(ctx, d, label, text);
        *(int64_t *)dst = v;
        return 0;
    }
    case OPT_PAIR: {
        const opt_def_t *rows[2];
        char names[2][32], first[64];
        const char *plus = strchr(text, '+');
        if (pair_rows(ctx, d, rows, names) != 0) {
            fmt(ctx->err, sizeof(ctx->err), "%s: the option table is wrong", label);
            return -1;
        }
        if (!plus || (size_t)(plus - text) >= sizeof(first)) return bad(ctx, d, label, text);
        memcpy(first, text, (size_t)(plus - text));
        first[plus - text] = 0;
        if (opt_parse(ctx, rows[0], label, first, base) != 0 ||
            opt_parse(ctx, rows[1], label, plus + 1, base) != 0)
            return bad(ctx, d, label, text);
        return 0;
    }
    }
    fmt(ctx->err, sizeof(ctx->err), "%s: unknown option type", label);
    return -1;
}

const opt_def_t *opt_find(const opt_ctx_t *ctx, const char *section, const char *key)
{
    for (size_t i = 0; i < ctx->ndefs; i++) {
        const opt_def_t *d = &ctx->defs[i];
        if (d->section && d->key && strcmp(d->section, section) == 0 && strcmp(d->key, key) == 0)
            return d;
    }
    return NULL;
}

int opt_defaults(opt_ctx_t *ctx)
{
    for (size_t i = 0; i < ctx->ndefs; i++) {
        const opt_def_t *d = &ctx->defs[i];
        char label[128];
        if (!d->def || (d->flags & OPT_EACH)) continue;
        fmt(label, sizeof(label), "the default of %s%s", d->flag ? "--" : "",
            d->flag ? d->flag : d->key);
        if (opt_parse(ctx, d, label, d->def, ctx->conf) != 0) return -1;
    }
    return 0;
}

/* ---- INI file ---- */

static int ini_entry(void *arg, const char *sec, const char *key, const char *value)
{
    opt_ctx_t *ctx = arg;
    const opt_def_t *d = NULL;
    void *base = ctx->conf;
    int plain = 0;
    char label[256];
    if (ctx->err[0]) return 1; /* the first error is the one reported */
    if (!key || !value) return 1;
    for (size_t i = 0; i < ctx->ndefs; i++) {
        const opt_def_t *r = &ctx->defs[i];
        if (!r->section || (r->flags & OPT_EACH) || strcmp(r->section, sec) != 0) continue;
        plain = 1;
        if (r->type != OPT_PAIR && r->key && strcmp(r->key, key) == 0) d = r;
    }
    if (!plain) {
        const char *pattern = NULL;
        base = ctx->resolve ? ctx->resolve(ctx->conf, sec, &pattern, ctx->err, sizeof(ctx->err))
                            : NULL;
        if (!base) {
            if (!ctx->err[0]) fmt(ctx->err, sizeof(ctx->err), "unknown section [%s]", sec);
            return 0;
        }
        d = opt_find(ctx, pattern, key);
        if (d && !(d->flags & OPT_EACH)) d = NULL;
    }
    if (!d) {
        fmt(ctx->err, sizeof(ctx->err), "unknown setting '%s' in [%s]", key, sec);
        return 0;
    }
    if (d->flag)
        fmt(label, sizeof(label), "[%s] %s (--%s)", sec, key, d->flag);
    else
        fmt(label, sizeof(label), "[%s] %s", sec, key);
    return opt_parse(ctx, d, label, value, base) == 0;
}

int opt_load_ini(opt_ctx_t *ctx, const char *file)
{
    char msg[sizeof(ctx->err)];
    ctx->err[0] = 0;
    errno = 0;
    int line = ini_parse(file, ini_entry, ctx);
    if (line == 0 && !ctx->err[0]) return 0;
    if (line == -1) {
        fmt(ctx->err, sizeof(ctx->err), "%s: cannot read: %s", file,
            strerror(errno ? errno : ENOENT));
    } else if (line < 0) {
        fmt(ctx->err, sizeof(ctx->err), "%s: out of memory", file);
    } else if (ctx->err[0]) {
        memcpy(msg, ctx->err, sizeof(msg));
        fmt(ctx->err, sizeof(ctx->err), "%s, line %d: %s", file, line, msg);
    } else {
        fmt(ctx->err, sizeof(ctx->err), "%s, line %d: not 'key = value' or '[section]'", file,
            line);
    }
    return -1;
}

/* ---- command line ---- */

int opt_command_line(opt_ctx_t *ctx, int argc, char **argv, FILE *out, const char *head,
                     const char *tail)
{
    struct option *lo = xcalloc(ctx->ndefs + 1, sizeof(*lo));
    const opt_def_t **used = xcalloc((size_t)argc + 1, sizeof(*used));
    const char **vals = xcalloc((size_t)argc + 1, sizeof(*vals));
    const opt_def_t *help = NULL;
    size_t nlo = 0;
    int nused = 0, rc = 0, o;
    for (size_t i = 0; i < ctx->ndefs; i++) {
        const opt_def_t *d = &ctx->defs[i];
        if (!d->flag) continue;
        if (d->type == OPT_HELP) help = d;
        lo[nlo++] = (struct option){d->flag, d->type == OPT_HELP ? no_argument : required_argument,
                                    NULL, 256 + (int)i};
    }
    ctx->err[0] = 0;
    optind = 0; /* glibc: start over (tests parse more than one command line) */
    opterr = 0;
    int asked = 0;
    while ((o = getopt_long(argc, argv, help ? ":h" : ":", lo, NULL)) != -1) {
        if (o == 'h') {
            asked = 1;
        } else if (o == ':') {
            if (!ctx->err[0]) {
                const char *name = optopt >= 256 ? ctx->defs[optopt - 256].flag : "?";
                fmt(ctx->err, sizeof(ctx->err), "--%s needs a value (see --help)", name);
            }
        } else if (o == '?') {
            if (!ctx->err[0]) {
                if (optopt > 0 && optopt < 256)
                    fmt(ctx->err, sizeof(ctx->err), "unknown option '-%c' (see --help)", optopt);
                else
                    fmt(ctx->err, sizeof(ctx->err), "unknown or ambiguous option '%s' (see --help)",
                        argv[optind - 1]);
            }
        } else {
            const opt_def_t *d = &ctx->defs[o - 256];
            if (d->type == OPT_HELP) {
                asked = 1;
                continue;
            }
            used[nused] = d;
            vals[nused++] = optarg;
        }
    }
    if (asked) {
        opt_usage(ctx, out, head, tail);
        rc = 1;
        goto done;
    }
    if (!ctx->err[0] && optind < argc)
        fmt(ctx->err, sizeof(ctx->err), "unexpected argument '%s' (see --help)", argv[optind]);
    if (ctx->err[0]) {
        rc = -1;
        goto done;
    }
    /* The config files first, so that flags override them. */
    for (int i = 0; i < nused && rc == 0; i++)
        if (used[i]->type == OPT_CONFIG && opt_load_ini(ctx, vals[i]) != 0) rc = -1;
    for (int i = 0; i < nused && rc == 0; i++) {
        char label[64];
        fmt(label, sizeof(label), "--%s", used[i]->flag);
        if (opt_parse(ctx, used[i], label, vals[i], ctx->conf) != 0) rc = -1;
    }
done:
    free(lo);
    free(used);
    free(vals);
    return rc;
}

/* ---- help ---- */

static void print_row(FILE *f, const char *left, const char *help, const char *extra)
{
    int w = fprintf(f, "  %s", left);
    if (w < HELP_COL - 1)
        fprintf(f, "%*s", HELP_COL - w, "");
    else
        fprintf(f, "\n%*s", HELP_COL, "");
    for (const char *h = help ? help : ""; *h;) {
        const char *nl = strchr(h, '\n');
        size_t n = nl ? (size_t)(nl - h) : strlen(h);
        fprintf(f, "%.*s\n", (int)n, h);
        h += n;
        if (*h == '\n' && *++h) fprintf(f, "%*s", HELP_COL, "");
    }
    if (!help || !*help) fputc('\n', f);
    if (extra[0]) fprintf(f, "%*s%s\n", HELP_COL, "", extra);
}

/* "default 32; range 1..4096; [server] workers" */
static void row_extra(const opt_ctx_t *ctx, const opt_def_t *d, int with_key, char *buf, size_t cap)
{
    char def[96] = "", range[160] = "", key[96] = "";
    if (d->type == OPT_HELP || d->type == OPT_CONFIG) {
        buf[0] = 0;
        return;
    }
    if (d->type == OPT_PAIR) {
        const opt_def_t *rows[2];
        char names[2][32];
        if (pair_rows(ctx, d, rows, names) == 0 && rows[0]->def && rows[1]->def)
            fmt(def, sizeof(def), "default %s+%s; ", rows[0]->def, rows[1]->def);
        if (with_key) fmt(key, sizeof(key), "; [%s] %s, %s", d->section, names[0], names[1]);
    } else {
        if (d->def)
            fmt(def, sizeof(def), "default %s; ", d->def);
        else if (with_key && (d->type == OPT_STR || d->type == OPT_NAME))
            fmt(def, sizeof(def), "default none; ");
        if (with_key && d->section) fmt(key, sizeof(key), "; [%s] %s", d->section, d->key);
    }
    range_str(ctx, d, range, sizeof(range));
    fmt(buf, cap, "%s%s%s", def, range[0] ? range : "any", key);
}

void opt_usage(const opt_ctx_t *ctx, FILE *f, const char *head, const char *tail)
{
    char left[128], extra[256];
    if (head) fputs(head, f);
    for (size_t i = 0; i < ctx->ndefs; i++) {
        const opt_def_t *d = &ctx->defs[i];
        if (!d->flag) continue;
        fmt(left, sizeof(left), "--%s%s%s", d->flag, d->arg ? " " : "", d->arg ? d->arg : "");
        row_extra(ctx, d, 1, extra, sizeof(extra));
        print_row(f, left, d->help, extra);
    }
    int first = 1;
    for (size_t i = 0; i < ctx->ndefs; i++) {
        const opt_def_t *d = &ctx->defs[i];
        if (d->flag || !d->section) continue;
        if (first) fputs("Config file only (--config FILE):\n", f);
        first = 0;
        fmt(left, sizeof(left), "[%s] %s%s%s", d->section, d->key, d->arg ? " " : "",
            d->arg ? d->arg : "");
        row_extra(ctx, d, 0, extra, sizeof(extra));
        print_row(f, left, d->help, extra);
    }
    if (tail) fputs(tail, f);
}

void opt_free(opt_ctx_t *ctx)
{
    for (size_t i = 0; i < ctx->nowned; i++)
        free(ctx->owned[i]);
    free(ctx->owned);
    ctx->owned = NULL;
    ctx->nowned = ctx->capowned = 0;
}
