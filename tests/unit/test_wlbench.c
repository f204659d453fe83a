/*
 * wl-bench's pieces: the histogram's quantiles against exact sorted
 * values, size parsing and distributions, the content generator (any range
 * reproduces the whole, a flipped byte is found at its offset, keys and
 * sizes change the content), and the client's XML helpers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "bench/wlbench/gen.h"
#include "bench/wlbench/hist.h"
#include "bench/wlbench/sizes.h"
#include "client/s3c.h"

#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void test_hist_quantiles(void **state)
{
    (void)state;
    enum { N = 100000 };
    uint64_t *v = malloc(N * sizeof(uint64_t));
    static hist_t h, a, b;
    hist_init(&h);
    hist_init(&a);
    hist_init(&b);
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < N; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        /* log-uniform over 1 us .. 10 s, like latencies */
        v[i] = 1000 + (uint64_t)(x % 1000) * (1ull << (x >> 58) % 24);
        hist_add(&h, v[i]);
        hist_add(i % 2 ? &a : &b, v[i]);
    }
    hist_merge(&a, &b);
    qsort(v, N, sizeof(uint64_t), cmp_u64);
    const double qs[] = {0.5, 0.9, 0.99, 0.999, 1.0};
    for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++) {
        size_t rank = (size_t)(qs[i] * N + 0.999999);
        uint64_t exact = v[rank - 1], got = hist_quantile(&h, qs[i]);
        /* Within one sub-bucket (1/64) above the exact value, never below it. */
        assert_true(got >= exact);
        assert_true((double)got <= (double)exact * (1.0 + 1.0 / 64) + 1);
        assert_int_equal(hist_quantile(&a, qs[i]), got); /* merging loses nothing */
    }
    assert_int_equal(h.count, N);
    assert_int_equal(h.min, v[0]);
    assert_int_equal(h.max, v[N - 1]);
    assert_int_equal(hist_quantile(&h, 1.0), v[N - 1]);
    /* Small values are exact; an empty histogram answers 0. */
    hist_t s;
    hist_init(&s);
    assert_int_equal(hist_quantile(&s, 0.5), 0);
    for (uint64_t i = 1; i <= 10; i++)
        hist_add(&s, i);
    assert_int_equal(hist_quantile(&s, 0.5), 5);
    assert_int_equal(hist_quantile(&s, 0.9), 9);
    assert_true(hist_mean(&s) == 5.5);
    /* Huge values land in the top bucket, capped by the real max. */
    hist_add(&s, UINT64_MAX / 2);
    assert_int_equal(hist_quantile(&s, 1.0), UINT64_MAX / 2);
    free(v);
}

static void test_sizes(void **state)
{
    (void)state;
    uint64_t v;
    assert_int_equal(size_parse("4KiB", &v), 0);
    assert_int_equal(v, 4096);
    assert_int_equal(size_parse("64MiB", &v), 0);
    assert_int_equal(v, 64u << 20);
    assert_int_equal(size_parse("1MB", &v), 0);
    assert_int_equal(v, 1000000);
    assert_int_equal(size_parse("2g", &v), 0);
    assert_int_equal(v, 2ull << 30);
    assert_int_equal(size_parse("1.5KiB", &v), 0);
    assert_int_equal(v, 1536);
    assert_int_equal(size_parse("0", &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(size_parse("123", &v), 0);
    assert_int_equal(v, 123);
    const char *bad[] = {"", "KiB", "-1", "4 KiB", "4XB", "0.3B", "1e30"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(size_parse(bad[i], &v), -1);

    size_dist_t d;
    assert_int_equal(size_dist_parse("4KiB:70,1MiB:25,64MiB:5", &d), 0);
    assert_int_equal(d.n, 3);
    assert_int_equal(d.total, 100);
    /* Picks follow the weights (uniform inputs from a simple generator). */
    uint64_t counts[3] = {0}, x = 1;
    for (int i = 0; i < 100000; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t s = size_dist_pick(&d, x);
        counts[s == 4096 ? 0 : s == (1u << 20) ? 1 : 2]++;
    }
    assert_true(counts[0] > 69000 && counts[0] < 71000);
    assert_true(counts[1] > 24000 && counts[1] < 26000);
    assert_true(counts[2] > 4500 && counts[2] < 5500);
    assert_true(size_dist_mean(&d) > 3.62e6 && size_dist_mean(&d) < 3.63e6);
    assert_int_equal(size_dist_parse("1MiB", &d), 0);
    assert_int_equal(size_dist_pick(&d, UINT64_MAX), 1u << 20);
    assert_int_equal(size_dist_parse("4KiB:0", &d), -1);
    assert_int_equal(size_dist_parse("4KiB:x", &d), -1);
    assert_int_equal(size_dist_parse("4KiB:-1", &d), -1);
    assert_int_equal(size_dist_parse(",", &d), -1);
    char out[32];
    size_format(64u << 20, out, sizeof(out));
    assert_string_equal(out, "64MiB");
    size_format(1000, out, sizeof(out));
    assert_string_equal(out, "1000B");
}

static void test_gen(void **state)
{
    (void)state;
    enum { N = 100003 };
    uint8_t *whole = malloc(N), *part = malloc(N);
    uint64_t seed = gen_seed(1, "wlb/000000000007", N);
    gen_fill(seed, 0, whole, N);
    assert_int_equal(gen_check(seed, 0, whole, N), -1);
    /* Any range at any offset reproduces the same bytes. */
    const size_t offs[] = {0, 1, 7, 8, 9, 4095, 65537, N - 1};
    for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
        size_t off = offs[i], len = N - off < 1000 ? N - off : 1000;
        gen_fill(seed, off, part, len);
        assert_memory_equal(part, whole + off, len);
        assert_int_equal(gen_check(seed, off, whole + off, len), -1);
        assert_int_equal(gen_check(seed, off, whole + off, 0), -1);
    }
    /* A flipped byte is found at its offset, wherever it is. */
    const size_t flips[] = {0, 3, 8, 12345, N - 1};
    for (size_t i = 0; i < sizeof(flips) / sizeof(flips[0]); i++) {
        whole[flips[i]] ^= 0x20;
        assert_int_equal(gen_check(seed, 0, whole, N), (int64_t)flips[i]);
        assert_int_equal(gen_check(seed, 3, whole + 3, N - 3),
                         flips[i] >= 3 ? (int64_t)(flips[i] - 3) : -1);
        whole[flips[i]] ^= 0x20;
    }
    /* Another key, size or run seed gives other content. */
    assert_true(gen_seed(1, "wlb/000000000008", N) != seed);
    assert_true(gen_seed(1, "wlb/000000000007", N + 1) != seed);
    assert_true(gen_seed(2, "wlb/000000000007", N) != seed);
    gen_fill(gen_seed(1, "wlb/000000000008", N), 0, part, N);
    assert_true(gen_check(seed, 0, part, N) >= 0);
    char key[64];
    gen_key("p/", 42, key, sizeof(key));
    assert_string_equal(key, "p/000000000042");
    free(whole);
    free(part);
}

static int nkeys;
static void count_key(void *arg, const char *text, size_t len)
{
    (void)arg;
    (void)text;
    (void)len;
    nkeys++;
}

/* s3c_xml_each_of: what each name's elements said, in document order. */
static void record_el(void *arg, int which, const char *text, size_t len)
{
    char *log = arg;
    size_t at = strlen(log);
    snprintf(log + at, 256 - at, "%d=%.*s;", which, (int)len, text);
}

static void test_xml_helpers(void **state)
{
    (void)state;
    const char *list =
        "<?xml version=\"1.0\"?><ListBucketResult><Contents><Key>a&amp;b</Key></Contents>"
        "<Contents><Key>c</Key></Contents><IsTruncated>true</IsTruncated>"
        "<NextContinuationToken>tok/1</NextContinuationToken></ListBucketResult>";
    char out[64];
    nkeys = 0;
    assert_int_equal(s3c_xml_each(list, strlen(list), "Key", count_key, NULL), 2);
    assert_int_equal(nkeys, 2);
    s3c_xml_text(list, strlen(list), "Key", out, sizeof(out));
    assert_string_equal(out, "a&b");
    s3c_xml_text(list, strlen(list), "NextContinuationToken", out, sizeof(out));
    assert_string_equal(out, "tok/1");
    s3c_xml_text(list, strlen(list), "Missing", out, sizeof(out));
    assert_string_equal(out, "");
    /* Several names in one pass; an element nested in a matched one is part of its text. */
    static const char *const names[] = {"Key", "IsTruncated", "NextContinuationToken"};
    char log[256] = "";
    assert_int_equal(s3c_xml_each_of(list, strlen(list), names, 3, record_el, log), 4);
    assert_string_equal(log, "0=a&b;0=c;1=true;2=tok/1;");
    log[0] = 0;
    const char *nested = "<r><Key>x<IsTruncated>y</IsTruncated>z</Key></r>";
    assert_int_equal(s3c_xml_each_of(nested, strlen(nested), names, 3, record_el, log), 1);
    assert_string_equal(log, "0=xyz;");
    assert_int_equal(s3c_xml_each_of("<a><Key>", 8, names, 3, NULL, NULL), -1);
    const char *err = "<Error><Code>SlowDown</Code><Message>x</Message></Error>";
    s3c_xml_text(err, strlen(err), "Code", out, sizeof(out));
    assert_string_equal(out, "SlowDown");
    /* Not XML, and entity declarations (billion laughs), are refused. */
    assert_int_equal(s3c_xml_each("<a><b>", 6, "b", NULL, NULL), -1);
    const char *bomb =
        "<!DOCTYPE x [<!ENTITY a \"aaaa\"><!ENTITY b \"&a;&a;&a;\">]><x><Key>&b;</Key></x>";
    assert_int_equal(s3c_xml_each(bomb, strlen(bomb), "Key", NULL, NULL), -1);
    char enc[64];
    assert_true(s3c_encode_path("/b/a b+c/ü", enc, sizeof(enc)) > 0);
    assert_string_equal(enc, "/b/a%20b%2Bc/%C3%BC");
    assert_int_equal(s3c_encode_path("/abcdef", enc, 4), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hist_quantiles),
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_gen),
        cmocka_unit_test(test_xml_helpers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
