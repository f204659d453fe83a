/*
 * test_checksum: the S3 additional checksums (s3/checksum.c): known values
 * of each algorithm, base64 decoding, and CRC combination checked against
 * the CRC computed directly over the concatenation, for CRC32, CRC32C and
 * CRC64NVME, at split points from 0 through odd lengths to powers of two.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "common/crc.h"
#include "s3/checksum.h"

#include <stdint.h>
#include <string.h>

static uint64_t direct(int algo, const void *p, size_t n)
{
    cks_t c;
    char b64[64];
    uint8_t d[8];
    assert_int_equal(cks_init(&c, algo), 0);
    cks_update(&c, p, n);
    cks_final(&c, b64, sizeof(b64));
    assert_int_equal(cks_decode(algo, b64, d), 0);
    return cks_crc_from_digest(algo, d);
}

static void test_known_values(void **state)
{
    (void)state;
    /* The catalogue check values of "123456789". */
    assert_int_equal(direct(CKS_CRC32, "123456789", 9), 0xCBF43926u);
    assert_int_equal(direct(CKS_CRC32C, "123456789", 9), 0xE3069283u);
    assert_true(direct(CKS_CRC64NVME, "123456789", 9) == 0xAE8B14860A799888ull);
    assert_int_equal(direct(CKS_CRC32, "", 0), 0);
}

static void expect_b64(int algo, const char *in, const char *want)
{
    cks_t c;
    char b64[CKS_MAX_B64];
    assert_int_equal(cks_init(&c, algo), 0);
    /* In two pieces: the state carries across updates. */
    size_t n = strlen(in);
    cks_update(&c, in, n / 2);
    cks_update(&c, in + n / 2, n - n / 2);
    cks_final(&c, b64, sizeof(b64));
    assert_string_equal(b64, want);
    uint8_t d[CKS_MAX_DIGEST];
    assert_int_equal(cks_decode(algo, b64, d), 0);
}

/*
 * The algorithms S3 added later: SHA-512 and MD5 of "abc" (FIPS 180 and RFC 1321), the
 * xxHashes of nothing (xxHash's own check values), as base64 of the big-endian (canonical)
 * digest; and by name, as headers and elements spell them.
 */
static void test_later_algorithms(void **state)
{
    (void)state;
    expect_b64(
        CKS_SHA512, "abc",
        "3a81oZNherrMQXNJriBBMRLm+k6JqX6iCp7u5ktV05ohkpkqJ0/BqDa6PCOj/uu9RU1EI2Q86A4qmslPpUyknw==");
    expect_b64(CKS_MD5, "abc", "kAFQmDzST7DWlj99KOF/cg==");
    expect_b64(CKS_XXHASH64, "", "70bbN1HY6Zk=");              /* 0xEF46DB3751D8E999 */
    expect_b64(CKS_XXHASH3, "", "LQaABTjTlMI=");               /* 0x2D06800538D394C2 */
    expect_b64(CKS_XXHASH128, "", "maoG0wFHmNhgAcMkRo1Jfw=="); /* 0x99AA06D3...468D497F */
    assert_int_equal(cks_algo("x-amz-checksum-sha512"), CKS_SHA512);
    assert_int_equal(cks_algo("MD5"), CKS_MD5);
    assert_int_equal(cks_algo("XXHASH64"), CKS_XXHASH64);
    assert_int_equal(cks_algo("xxhash3"), CKS_XXHASH3);
    assert_int_equal(cks_algo("XXHASH128"), CKS_XXHASH128);
    assert_int_equal(cks_algo("xxhash32"), CKS_NONE);
    for (int a = CKS_SHA512; a < CKS_N; a++)
        assert_false(cks_is_crc(a));
}

/* CRC-64/NVME one byte at a time, from its definition: what the sliced loop must equal. */
static uint64_t crc64nvme_bitwise(const uint8_t *p, size_t n)
{
    uint64_t c = ~0ull;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int b = 0; b < 8; b++)
            c = c & 1 ? (c >> 1) ^ 0x9A6C9329AC4BC9B5ull : c >> 1;
    }
    return ~c;
}

static void test_crc64nvme_slices(void **state)
{
    (void)state;
    static uint8_t buf[4096 + 8];
    uint32_t x = 12345;
    for (size_t i = 0; i < sizeof(buf); i++) {
        x = x * 1103515245u + 12345u;
        buf[i] = (uint8_t)(x >> 16);
    }
    /* Every start alignment, lengths around the 8-byte steps and across the 64- and 16-byte
     * folds, updates split anywhere. */
    for (size_t start = 0; start < 8; start++)
        for (size_t n = 0; n < 1100; n += (n < 40 ? 1 : 37)) {
            uint64_t want = crc64nvme_bitwise(buf + start, n);
            assert_true(direct(CKS_CRC64NVME, buf + start, n) == want);
            for (size_t cut = 0; cut <= n; cut += 3) {
                cks_t c;
                char b64[64];
                uint8_t d[8];
                assert_int_equal(cks_init(&c, CKS_CRC64NVME), 0);
                cks_update(&c, buf + start, cut);
                cks_update(&c, buf + start + cut, n - cut);
                cks_final(&c, b64, sizeof(b64));
                assert_int_equal(cks_decode(CKS_CRC64NVME, b64, d), 0);
                assert_true(cks_crc_from_digest(CKS_CRC64NVME, d) == want);
            }
        }
    assert_true(direct(CKS_CRC64NVME, buf, 4096) == crc64nvme_bitwise(buf, 4096));
}

static void test_decode(void **state)
{
    (void)state;
    uint8_t d[32];
    assert_int_equal(cks_decode(CKS_CRC32, "y/Q5Jg==", d), 0);
    assert_int_equal(cks_crc_from_digest(CKS_CRC32, d), 0xCBF43926u);
    /* Wrong length, wrong padding, non-canonical trailing bits, foreign characters. */
    assert_int_equal(cks_decode(CKS_CRC32, "y/Q5Jg=", d), -1);
    assert_int_equal(cks_decode(CKS_CRC32, "y/Q5J===", d), -1);
    assert_int_equal(cks_decode(CKS_CRC32, "y/Q5Jh==", d), -1);
    assert_int_equal(cks_decode(CKS_CRC32, "y/Q5-g==", d), -1);
    assert_int_equal(cks_decode(CKS_CRC64NVME, "y/Q5Jg==", d), -1);
    assert_int_equal(cks_decode(CKS_NONE, "", d), -1);
    assert_int_equal(cks_decode(CKS_SHA1, NULL, d), -1);
    /* Round trip of every length. */
    for (int algo = CKS_CRC32; algo < CKS_N; algo++) {
        uint8_t in[CKS_MAX_DIGEST], out[CKS_MAX_DIGEST];
        char b64[CKS_MAX_B64];
        for (int i = 0; i < CKS_MAX_DIGEST; i++)
            in[i] = (uint8_t)(i * 37 + algo);
        cks_encode(in, cks_digest_len(algo), b64, sizeof(b64));
        assert_int_equal(cks_decode(algo, b64, out), 0);
        assert_memory_equal(in, out, cks_digest_len(algo));
    }
}

static void test_combine(void **state)
{
    (void)state;
    static uint8_t buf[300000];
    uint32_t x = 4242;
    for (size_t i = 0; i < sizeof(buf); i++) {
        x = x * 1103515245u + 12345u;
        buf[i] = (uint8_t)(x >> 16);
    }
    static const size_t cuts[] = {0,    1,     2,     3,      7,      8,     255,
                                  4096, 65536, 99991, 150000, 299999, 300000};
    static const int algos[] = {CKS_CRC32, CKS_CRC32C, CKS_CRC64NVME};
    for (size_t a = 0; a < 3; a++) {
        int algo = algos[a];
        uint64_t whole = direct(algo, buf, sizeof(buf));
        for (size_t c = 0; c < sizeof(cuts) / sizeof(cuts[0]); c++) {
            size_t k = cuts[c];
            uint64_t ca = direct(algo, buf, k), cb = direct(algo, buf + k, sizeof(buf) - k);
            assert_true(cks_crc_combine(algo, ca, cb, sizeof(buf) - k) == whole);
        }
        /* Many unequal parts folded left to right, as a Complete does. */
        uint64_t acc = 0;
        size_t off = 0, len = 1;
        for (int first = 1; off < sizeof(buf); first = 0) {
            size_t n = len < sizeof(buf) - off ? len : sizeof(buf) - off;
            uint64_t cp = direct(algo, buf + off, n);
            acc = first ? cp : cks_crc_combine(algo, acc, cp, n);
            off += n;
            len = len * 3 + 1;
        }
        assert_true(acc == whole);
    }
    /* The same as the engine's own crc32c_combine (common/crc.c). */
    uint32_t a = crc32c(0, buf, 1000), b = crc32c(0, buf + 1000, 5000);
    assert_int_equal(cks_crc_combine(CKS_CRC32C, a, b, 5000), crc32c_combine(a, b, 5000));
    /* Huge lengths (the part of a 5 TiB object) stay in range. */
    assert_true(cks_crc_combine(CKS_CRC32, 0x12345678u, 0, 5ull << 40) <= 0xffffffffu);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_values),     cmocka_unit_test(test_later_algorithms),
        cmocka_unit_test(test_crc64nvme_slices), cmocka_unit_test(test_decode),
        cmocka_unit_test(test_combine),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
