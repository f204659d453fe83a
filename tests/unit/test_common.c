#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

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
        cmocka_unit_test(test_crc32c_vectors),
        cmocka_unit_test(test_err_strings),
        cmocka_unit_test(test_sim_clock),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
