/* Record codec: round trips, and every header or payload corruption is caught. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "common/crc.h"
#include "common/err.h"
#include "storage/rec.h"

#include <stdlib.h>
#include <string.h>

static rec_id_t mkid(const char *b, const char *k, const char *v, uint32_t shard)
{
    return (rec_id_t){b, (uint16_t)strlen(b), k,    (uint16_t)strlen(k),
                      v, (uint16_t)strlen(v), shard};
}

static void test_round_trip(void **state)
{
    (void)state;
    size_t sizes[] = {0, 1, 100, REC_CHUNK - 1, REC_CHUNK, REC_CHUNK + 1, 3 * REC_CHUNK + 17};
    size_t pads[] = {0, 7, REC_ALIGN - 1};
    for (size_t i = 0; i < 3 * sizeof(sizes) / sizeof(sizes[0]); i++) {
        size_t n = sizes[i / 3], pad = pads[i % 3];
        uint8_t *payload = malloc(n + 1);
        for (size_t j = 0; j < n; j++)
            payload[j] = (uint8_t)(j * 7 + i);
        rec_id_t id = mkid("bucket", "dir/key.parquet", "v1", 3);
        size_t hl = rec_header_len(&id, 5, n) + pad;
        uint8_t *buf = malloc(hl + n);
        assert_int_equal(rec_encode_header(buf, REC_DATA, &id, 42, "meta!", 5, payload, n, pad),
                         hl);
        memcpy(buf + hl, payload, n);
        rec_view_t v;
        assert_int_equal(rec_parse_header(buf, hl + n, &v), 0);
        assert_int_equal(v.type, REC_DATA);
        assert_int_equal(v.seq, 42);
        assert_int_equal(v.payload_len, n);
        assert_int_equal(v.hdr_len, hl);
        assert_int_equal(v.meta_len, 5);
        assert_memory_equal(v.meta, "meta!", 5);
        assert_true(rec_id_equal(&v.id, &id));
        if (n) assert_int_equal(rec_verify_chunks(&v, buf + hl, 0, v.n_chunks - 1), 0);
        /* Short buffers ask for more. */
        assert_int_equal(rec_parse_header(buf, 10, &v), ERR_AGAIN);
        assert_int_equal(rec_parse_header(buf, hl - 1, &v), ERR_AGAIN);
        assert_int_equal(v.hdr_len, hl);

        /* Every single-bit flip in the header is detected. */
        for (size_t bit = 0; bit < hl * 8; bit++) {
            buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
            int rc = rec_parse_header(buf, hl + n, &v);
            assert_true(rc == ERR_CORRUPT || rc == ERR_AGAIN);
            buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        }
        /* Payload flips are detected by the chunk crcs. */
        for (size_t j = 0; j < n; j += 997) {
            assert_int_equal(rec_parse_header(buf, hl + n, &v), 0);
            buf[hl + j] ^= 0x40;
            assert_int_equal(rec_verify_chunks(&v, buf + hl, 0, v.n_chunks - 1), ERR_CORRUPT);
            buf[hl + j] ^= 0x40;
        }
        free(buf);
        free(payload);
    }
}

static void test_tombstone_and_limits(void **state)
{
    (void)state;
    rec_id_t id = mkid("b", "", "", 0);
    uint8_t buf[256];
    rec_view_t v;
    size_t hl = rec_encode_header(buf, REC_TOMBSTONE, &id, 7, NULL, 0, NULL, 0, 0);
    assert_int_equal(rec_parse_header(buf, hl, &v), 0);
    assert_int_equal(v.type, REC_TOMBSTONE);
    assert_int_equal(v.n_chunks, 0);
    assert_int_equal(rec_id_check(&id), 0);
    rec_id_t bad = mkid("b", "k", "", 0);
    bad.key = "k\0x";
    bad.key_len = 3;
    assert_int_equal(rec_id_check(&bad), ERR_INVAL);
    rec_id_t nob = mkid("", "k", "", 0);
    assert_int_equal(rec_id_check(&nob), ERR_INVAL);
    memset(buf, 0, sizeof(buf));
    assert_int_equal(rec_parse_header(buf, sizeof(buf), &v), ERR_CORRUPT);
}

/* Rewrite the header's crc after a deliberate edit, so only the rule under test can refuse it. */
static void reseal(uint8_t *buf, size_t hl)
{
    memset(buf + 44, 0, 4);
    uint32_t c = crc32c(0, buf, hl);
    for (int i = 0; i < 4; i++)
        buf[44 + i] = (uint8_t)(c >> (8 * i));
}

static void test_padding(void **state)
{
    (void)state;
    size_t n = 3 * REC_CHUNK + 5;
    uint8_t *payload = calloc(1, n), *buf = malloc(2 * REC_ALIGN + n), *out = malloc(2 * REC_ALIGN);
    rec_id_t id = mkid("bkt", "a/b", "", 9);
    size_t base = rec_header_len(&id, 3, n);
    rec_view_t v, w;

    /* Large payloads are padded to an aligned start; small ones never. */
    assert_int_equal(rec_pad_for(0, 100, REC_ALIGN_MIN - 1), 0);
    assert_int_equal(rec_pad_for(0, 100, REC_ALIGN_MIN), REC_ALIGN - 100);
    assert_int_equal(rec_pad_for(REC_ALIGN - 100, 100, REC_ALIGN_MIN), 0);
    assert_int_equal((5000 + 123 + rec_pad_for(5000, 123, 1u << 20)) % REC_ALIGN, 0);

    /* Re-padding keeps identity, sequence and chunk crcs and parses as written. */
    size_t hl = rec_encode_header(buf, REC_DATA, &id, 77, "xyz", 3, payload, n, 100);
    assert_int_equal(hl, base + 100);
    assert_int_equal(rec_parse_header(buf, hl, &v), 0);
    size_t pads[] = {0, 1, REC_ALIGN - 1};
    for (int i = 0; i < 3; i++) {
        size_t nl = rec_repad(&v, buf, out, pads[i]);
        assert_int_equal(nl, base + pads[i]);
        assert_int_equal(rec_parse_header(out, nl, &w), 0);
        assert_int_equal(w.seq, 77);
        assert_int_equal(w.payload_len, n);
        assert_true(rec_id_equal(&w.id, &id));
        assert_memory_equal(w.chunk_crcs, v.chunk_crcs, 4 * v.n_chunks);
        assert_memory_equal(w.meta, "xyz", 3);
    }

    /* A non-zero padding byte is refused even under a valid crc. */
    buf[hl - 1] = 1;
    reseal(buf, hl);
    assert_int_equal(rec_parse_header(buf, hl, &v), ERR_CORRUPT);
    /* So is REC_ALIGN or more of padding. */
    hl = rec_encode_header(buf, REC_DATA, &id, 77, "xyz", 3, payload, n, REC_ALIGN - 1);
    buf[8] = (uint8_t)(hl + 1), buf[9] = (uint8_t)((hl + 1) >> 8);
    buf[hl] = 0;
    reseal(buf, hl + 1);
    assert_int_equal(rec_parse_header(buf, hl + 1, &v), ERR_CORRUPT);

    /* Version 1 records (never padded) are still read; a padded version 1 is not. */
    hl = rec_encode_header(buf, REC_DATA, &id, 5, "xyz", 3, payload, n, 0);
    buf[4] = 1;
    reseal(buf, hl);
    assert_int_equal(rec_parse_header(buf, hl, &v), 0);
    assert_int_equal(v.hdr_len, base);
    hl = rec_encode_header(buf, REC_DATA, &id, 5, "xyz", 3, payload, n, 4);
    buf[4] = 1;
    reseal(buf, hl);
    assert_int_equal(rec_parse_header(buf, hl, &v), ERR_CORRUPT);
    buf[4] = 3; /* unknown version */
    reseal(buf, hl);
    assert_int_equal(rec_parse_header(buf, hl, &v), ERR_CORRUPT);
    free(payload);
    free(buf);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_tombstone_and_limits),
        cmocka_unit_test(test_padding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
