#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "common/bufpool.h"
#include "common/clock.h"
#include "common/crc.h"
#include "common/err.h"

#include <errno.h>
#include <string.h>

static void test_crc32c_vectors(void **state)
{
    (void)state;
    /* RFC 3720 B.4 and the common check value. */
    uint8_t zeros[32] = {0}, ones[32];
    memset(ones, 0xff, sizeof(ones));
    assert_int_equal(crc32c(0, "123456789", 9), 0xE3069283u);
    assert_int_equal(crc32c(0, zeros, 32), 0x8A9136AAu);
    assert_int_equal(crc32c(0, ones, 32), 0x62A8AB43u);
    assert_int_equal(crc32c(0, "", 0), 0u);
    /* Chaining equals one pass. */
    assert_int_equal(crc32c(crc32c(0, "12345", 5), "6789", 4), 0xE3069283u);
}

static void test_crc32c_combine(void **state)
{
    (void)state;
    static uint8_t buf[200000];
    uint32_t x = 12345;
    for (size_t i = 0; i < sizeof(buf); i++) {
        x = x * 1103515245u + 12345u;
        buf[i] = (uint8_t)(x >> 16);
    }
    /* Splits at 0, at powers of two (one table entry) and at odd lengths. */
    const size_t lens[] = {0, 1, 3, 4096, 65536, 65537, 131072, 199999, 200000};
    for (size_t a = 0; a < sizeof(lens) / sizeof(lens[0]); a++)
        for (size_t b = 0; b < sizeof(lens) / sizeof(lens[0]); b++) {
            size_t la = lens[a] / 2, lb = lens[b] / 2; /* la + lb fits in buf */
            uint32_t ca = crc32c(0, buf, la), cb = crc32c(0, buf + la, lb);
            assert_int_equal(crc32c_combine(ca, cb, lb), crc32c(0, buf, la + lb));
        }
    /* Chunk by chunk, as the drive engine derives a block's crc from its chunk crcs. */
    uint32_t run = 0;
    for (size_t off = 0; off < sizeof(buf); off += 65536) {
        size_t n = sizeof(buf) - off < 65536 ? sizeof(buf) - off : 65536;
        run = crc32c_combine(run, crc32c(0, buf + off, n), n);
    }
    assert_int_equal(run, crc32c(0, buf, sizeof(buf)));
    /* A wrong length gives a wrong crc: the length is part of the operator. */
    assert_int_not_equal(crc32c_combine(crc32c(0, buf, 10), crc32c(0, buf + 10, 10), 11),
                         crc32c(0, buf, 20));
}

static void test_bufpool(void **state)
{
    (void)state;
    bufpool_t *p = bufpool_new(8u << 20);
    bufpool_stats_t st;
    /* Page-aligned; 2 MiB and up on a 2 MiB boundary (transparent huge pages). */
    uint8_t *a = bufpool_get(p, 100), *b = bufpool_get(p, 3u << 20);
    assert_int_equal((uintptr_t)a % 4096, 0);
    assert_int_equal((uintptr_t)b % (2u << 20), 0);
    memset(a, 1, 100);
    memset(b, 2, 3u << 20); /* the whole size asked for is there */
    bufpool_stats(p, &st);
    assert_int_equal(st.maps, 2);
    assert_true(st.out_bytes >= (3u << 20) + 100);
    /* Given back, then reused: no new mapping for a size that fits. */
    bufpool_put(p, b);
    bufpool_put(p, a);
    bufpool_stats(p, &st);
    assert_int_equal(st.out_bytes, 0);
    assert_true(st.kept_bytes >= 3u << 20);
    uint8_t *c = bufpool_get(p, 2u << 20);
    assert_ptr_equal(c, b); /* the smallest that fits: not the 100-byte one */
    uint8_t *d = bufpool_get(p, 50);
    assert_ptr_equal(d, a);
    bufpool_stats(p, &st);
    assert_int_equal(st.maps, 2);
    /* No more than keep_bytes stay kept: the rest is unmapped at once. */
    uint8_t *big[4];
    for (int i = 0; i < 4; i++)
        big[i] = bufpool_get(p, 4u << 20);
    for (int i = 0; i < 4; i++)
        bufpool_put(p, big[i]);
    bufpool_put(p, c);
    bufpool_put(p, d);
    bufpool_stats(p, &st);
    assert_true(st.kept_bytes <= 8u << 20);
    assert_int_equal(st.out_bytes, 0);
    bufpool_put(p, NULL);
    bufpool_free(p);
}

static void test_err_strings(void **state)
{
    (void)state;
    assert_string_equal(err_name(ERR_NOSPC), "NOSPC");
    assert_non_null(err_str(-9999));
    assert_string_equal(err_name(-9999), "UNKNOWN");
    assert_int_equal(err_from_errno(ENOSPC), ERR_NOSPC);
    assert_int_equal(err_from_errno(EIO), ERR_IO);
}

static void test_sim_clock(void **state)
{
    wl_sim_clock_t c;
    (void)state;
    clock_sim_init(&c, 5);
    assert_int_equal(c.base.now_ns(&c.base), 5);
    c.base.sleep_ns(&c.base, 10);
    assert_int_equal(c.base.now_ns(&c.base), 15);
    assert_true(clock_real()->now_ns(clock_real()) > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32c_vectors), cmocka_unit_test(test_crc32c_combine),
        cmocka_unit_test(test_bufpool),        cmocka_unit_test(test_err_strings),
        cmocka_unit_test(test_sim_clock),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
