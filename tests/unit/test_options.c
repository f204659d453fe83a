#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "server/options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void test_parse_int(void **state)
{
    (void)state;
    int64_t v;
    assert_int_equal(opt_parse_int("0", &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(opt_parse_int("042", &v), 0);
    assert_int_equal(v, 42);
    assert_int_equal(opt_parse_int("-5", &v), 0);
    assert_int_equal(v, -5);
    assert_int_equal(opt_parse_int("9223372036854775807", &v), 0);
    assert_true(v == INT64_MAX);
    assert_int_equal(opt_parse_int("-9223372036854775808", &v), 0);
    assert_true(v == INT64_MIN);
    const char *bad[] = {"",
                         "-",
                         "+3",
                         " 3",
                         "3 ",
                         "12x",
                         "0x10",
                         "1e3",
                         "3.0",
                         "--3",
                         "9223372036854775808",
                         "99999999999999999999999"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(opt_parse_int(bad[i], &v), -1);
}

static void test_parse_size(void **state)
{
    (void)state;
    struct {
        const char *s;
        uint64_t v;
    } good[] = {
        {"0", 0},
        {"100", 100},
        {"4k", 4096},
        {"4K", 4096},
        {"1m", 1 << 20},
        {"16G", 16ull << 30},
        {"16g", 16ull << 30},
        {"2T", 2ull << 40},
        {"1.5G", 3ull << 29},
        {"0.3K", 307}, /* rounded down to whole bytes, as before */
        {"18446744073709551615", UINT64_MAX},
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        uint64_t v = 1;
        assert_int_equal(opt_parse_size(good[i].s, &v), 0);
        assert_true(v == good[i].v);
    }
    const char *bad[] = {
        "",    "5Q", "1.5",  ".5G", "1.G",  "+1G", " 1G",       "1G ",
        "1GB", "-1", "0x10", "1e3", "16M1", "K",   "16777216T", "18446744073709551616"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint64_t v;
        assert_int_equal(opt_parse_size(bad[i], &v), -1);
    }
}

static void test_parse_real(void **state)
{
    (void)state;
    double v;
    assert_int_equal(opt_parse_real("1.83", &v), 0);
    assert_true(v == 1.83);
    assert_int_equal(opt_parse_real("0.001", &v), 0);
    assert_int_equal(opt_parse_real("-2", &v), 0);
    assert_true(v == -2);
    const char *bad[] = {"", "nan", "inf", "1e3", ".5", "5.", "+1", " 1", "1 ", "0x1p3", "1,5"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(opt_parse_real(bad[i], &v), -1);
}

/* A small table of every kind, as warmlaked's. */
typedef struct {
    const char *name;
    int64_t count, a, b, level;
    uint64_t size;
    double real;
    const char *listen;
    uint64_t item[4];
} tconf_t;

static const opt_def_t table[] = {
    {"name", "NAME", "main", "name", OPT_NAME, 0, 1, 16, "dflt", offsetof(tconf_t, name), "a name"},
    {"count", "N", "main", "count", OPT_INT, 0, 1, 100, "10", offsetof(tconf_t, count),
     "a count\nsecond line"},
    {"size", "SIZE", "main", "size", OPT_SIZE, OPT_ZERO_OK, 4096, 1 << 20, "64K",
     offsetof(tconf_t, size), "a size"},
    {"real", "X", "main", "real", OPT_REAL, 0, 0, 10, "1.5", offsetof(tconf_t, real), "a real"},
    {"listen", "ADDR:PORT", "main", "listen", OPT_ADDR, 0, 0, 65535, "127.0.0.1:9000",
     offsetof(tconf_t, listen), "an address"},
    {"level", "LEVEL", "main", "level", OPT_LEVEL, 0, 0, 0, "info", offsetof(tconf_t, level),
     "a log level"},
    {"ab", "A+B", "pair", "a+b", OPT_PAIR, 0, 0, 0, NULL, 0, "a pair"},
    {"config", "FILE", NULL, NULL, OPT_CONFIG, 0, 0, 0, NULL, 0, "config file"},
    {"help", NULL, NULL, NULL, OPT_HELP, 0, 0, 0, NULL, 0, "this text"},
    {NULL, "N", "pair", "a", OPT_INT, 0, 1, 16, "4", offsetof(tconf_t, a), "first"},
    {NULL, "N", "pair", "b", OPT_INT, 0, 0, 4, "2", offsetof(tconf_t, b), "second"},
    {NULL, "SIZE", "item.N", "size", OPT_SIZE, OPT_EACH, 1, 1 << 20, NULL, 0, "an item's size"},
};

static void *resolve(void *conf, const char *sec, const char **pattern, char *err, size_t cap)
{
    tconf_t *c = conf;
    int64_t n;
    if (strncmp(sec, "item.", 5) != 0) return NULL;
    if (opt_parse_int(sec + 5, &n) != 0 || n < 0 || n > 3) {
        snprintf(err, cap, "bad [%s]", sec);
        return NULL;
    }
    *pattern = "item.N";
    return &c->item[n];
}

static void ctx_init(opt_ctx_t *ctx, tconf_t *c)
{
    memset(ctx, 0, sizeof(*ctx));
    memset(c, 0, sizeof(*c));
    ctx->defs = table;
    ctx->ndefs = sizeof(table) / sizeof(table[0]);
    ctx->conf = c;
    ctx->resolve = resolve;
    assert_int_equal(opt_defaults(ctx), 0);
}

static int run(opt_ctx_t *ctx, ...)
{
    char *argv[32] = {"prog"};
    int argc = 1;
    va_list ap;
    va_start(ap, ctx);
    for (char *a; (a = va_arg(ap, char *)) != NULL;)
        argv[argc++] = a;
    va_end(ap);
    FILE *out = fopen("/dev/null", "w");
    int rc = opt_command_line(ctx, argc, argv, out, NULL, NULL);
    fclose(out);
    return rc;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
}

static void test_defaults_and_flags(void **state)
{
    (void)state;
    opt_ctx_t ctx;
    tconf_t c;
    ctx_init(&ctx, &c);
    assert_string_equal(c.name, "dflt");
    assert_int_equal(c.count, 10);
    assert_int_equal(c.size, 65536);
    assert_true(c.real == 1.5);
    assert_int_equal(c.a, 4);
    assert_int_equal(c.b, 2);
    assert_int_equal(run(&ctx, "--count", "7", "--size=0", "--ab", "8+1", "--name", "x.y-z_1",
                         "--level", "warn", "--listen", "[::1]:0", NULL),
                     0);
    assert_int_equal(c.count, 7);
    assert_int_equal(c.size, 0);
    assert_int_equal(c.a, 8);
    assert_int_equal(c.b, 1);
    assert_string_equal(c.name, "x.y-z_1");
    assert_int_equal(c.level, 2);
    assert_string_equal(c.listen, "[::1]:0");
    opt_free(&ctx);
}

static void test_bad_flags(void **state)
{
    (void)state;
    struct {
        const char *flag, *value, *want;
    } cases[] = {
        {"--count", "12x", "--count: bad value '12x': want a whole number in 1..100"},
        {"--count", "+3", "1..100"},
        {"--count", "0", "1..100"},
        {"--count", "99999999999", "1..100"},
        {"--size", "5Q", "--size: bad value '5Q': want a size in 0 or 4K..1M"},
        {"--size", "2M", "0 or 4K..1M"},
        {"--real", "11", "a number in 0..10"},
        {"--name", "a<b", "1..16 letters"},
        {"--name", "", "1..16 letters"},
        {"--listen", "nohost", "HOST:PORT with PORT in 0..65535"},
        {"--listen", "::1:80", "HOST:PORT"},
        {"--listen", "h:65536", "HOST:PORT"},
        {"--level", "loud", "one of debug"},
        {"--ab", "8", "A+B, A 1..16, B 0..4"},
        {"--ab", "8+5", "A+B"},
        {"--ab", "8++1", "A+B"},
        {"--bogus", "1", "unknown or ambiguous option '--bogus'"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        opt_ctx_t ctx;
        tconf_t c;
        ctx_init(&ctx, &c);
        assert_int_equal(run(&ctx, cases[i].flag, cases[i].value, NULL), -1);
        if (!strstr(ctx.err, cases[i].want))
            fail_msg("%s %s: %s", cases[i].flag, cases[i].value, ctx.err);
        opt_free(&ctx);
    }
    opt_ctx_t ctx;
    tconf_t c;
    ctx_init(&ctx, &c);
    assert_int_equal(run(&ctx, "--count", NULL), -1);
    assert_non_null(strstr(ctx.err, "--count needs a value"));
    assert_int_equal(run(&ctx, "stray", NULL), -1);
    assert_non_null(strstr(ctx.err, "unexpected argument 'stray'"));
    /* --help wins over everything else. */
    assert_int_equal(run(&ctx, "--count", "x", "--help", NULL), 1);
    assert_int_equal(run(&ctx, "-h", NULL), 1);
    opt_free(&ctx);
}

static void test_ini(void **state)
{
    (void)state;
    char path[] = "/tmp/wl-test-options-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    opt_ctx_t ctx;
    tconf_t c;
    ctx_init(&ctx, &c);
    write_file(path, "[main]\ncount = 20 ; comment\nsize = 8k\nname = fromfile\n"
                     "[pair]\na = 3\nb = 1\n[item.2]\nsize = 1M\n");
    /* The file applies first, whatever the order: flags override it. */
    assert_int_equal(run(&ctx, "--count", "30", "--config", path, NULL), 0);
    assert_int_equal(c.count, 30);
    assert_int_equal(c.size, 8192);
    assert_string_equal(c.name, "fromfile");
    assert_int_equal(c.a, 3);
    assert_int_equal(c.b, 1);
    assert_int_equal(c.item[2], 1 << 20);
    opt_free(&ctx);

    struct {
        const char *text, *want;
    } cases[] = {
        {"[main]\ncount = abc\n",
         ", line 2: [main] count (--count): bad value 'abc': want a whole"},
        {"[main]\ncount = 5\nsize = 5Q\n", ", line 3: [main] size (--size): bad value '5Q'"},
        {"[main]\nnope = 1\n", ", line 2: unknown setting 'nope' in [main]"},
        {"[other]\ncount = 1\n", ", line 2: unknown section [other]"},
        {"[pair]\na+b = 1+1\n", "unknown setting 'a+b'"},
        {"[item.9]\nsize = 1\n", ", line 2: bad [item.9]"},
        {"[item.1]\nsize = 2M\n", ", line 2: [item.1] size: bad value '2M': want a size in 1..1M"},
        {"[main]\njunk\n", ", line 2: not 'key = value'"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ctx_init(&ctx, &c);
        write_file(path, cases[i].text);
        assert_int_equal(opt_load_ini(&ctx, path), -1);
        if (!strstr(ctx.err, cases[i].want) || strncmp(ctx.err, path, strlen(path)) != 0)
            fail_msg("%s: %s", cases[i].text, ctx.err);
        opt_free(&ctx);
    }
    unlink(path);
    ctx_init(&ctx, &c);
    assert_int_equal(opt_load_ini(&ctx, path), -1);
    assert_non_null(strstr(ctx.err, "cannot read"));
    opt_free(&ctx);
}

static void test_usage(void **state)
{
    (void)state;
    opt_ctx_t ctx;
    tconf_t c;
    char *buf = NULL;
    size_t len = 0;
    ctx_init(&ctx, &c);
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    opt_usage(&ctx, f, "HEAD\n", "TAIL\n");
    assert_int_equal(fclose(f), 0);
    const char *want[] = {"HEAD\n",
                          "  --count N              a count\n"
                          "                         second line\n"
                          "                         default 10; 1..100; [main] count\n",
                          "default 64K; 0 or 4K..1M; [main] size",
                          "--ab A+B",
                          "default 4+2; A 1..16, B 0..4; [pair] a, b",
                          "  --help                 this text\n",
                          "Config file only",
                          "[pair] a N",
                          "[item.N] size SIZE",
                          "TAIL\n"};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        if (!strstr(buf, want[i])) fail_msg("missing %s in:\n%s", want[i], buf);
    free(buf);
    opt_free(&ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_int),  cmocka_unit_test(test_parse_size),
        cmocka_unit_test(test_parse_real), cmocka_unit_test(test_defaults_and_flags),
        cmocka_unit_test(test_bad_flags),  cmocka_unit_test(test_ini),
        cmocka_unit_test(test_usage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
