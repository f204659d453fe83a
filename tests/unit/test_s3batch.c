/*
 * Batch GET's pieces without a server: the request body parser
 * (s3_xml_batch_get: what it takes, every malformed body refused, the
 * limits) and the response frame heads (s3/batch.h: the bytes as
 * docs/batch-get.md lays them out, round trips, any changed byte refused).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "common/crc.h"
#include "common/err.h"
#include "common/le.h"
#include "s3/batch.h"
#include "s3/xml.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse(const char *body, s3_xml_batch_entry_t **e, int *n)
{
    return s3_xml_batch_get(body, strlen(body), e, n);
}

static void test_xml_fields(void **state)
{
    (void)state;
    s3_xml_batch_entry_t *e;
    int n;
    assert_int_equal(
        parse("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
              "<BatchGet xmlns=\"urn:x\">\n"
              "  <Object><Key>a/1.jpg</Key></Object>\n"
              "  <Object><Range>bytes=0-1023</Range><Key>b.bin</Key></Object>\n"
              "  <Object><Key>c&amp;&#x20AC;</Key><VersionId>0123</VersionId></Object>\n"
              "  <Object><Key>a/1.jpg</Key><Range></Range></Object>\n"
              "</BatchGet>",
              &e, &n),
        0);
    assert_int_equal(n, 4);
    assert_string_equal(e[0].key, "a/1.jpg");
    assert_string_equal(e[0].range, "");
    assert_int_equal(e[0].has_vid, 0);
    assert_string_equal(e[1].key, "b.bin");
    assert_string_equal(e[1].range, "bytes=0-1023");
    assert_string_equal(e[2].key, "c&\xe2\x82\xac");
    assert_string_equal(e[2].vid, "0123");
    assert_int_equal(e[2].has_vid, 1);
    assert_string_equal(e[3].key, "a/1.jpg"); /* the same key again is another entry */
    s3_xml_batch_free(e, n);
    /* No entries at all is a batch (answered with the end frame only). */
    e = (void *)1;
    assert_int_equal(parse("<BatchGet/>", &e, &n), 0);
    assert_int_equal(n, 0);
    s3_xml_batch_free(e, n);
    s3_xml_batch_free(NULL, 0);
}

static void test_xml_malformed(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "",
        "not xml",
        "<BatchGet>",
        "<BatchGet><Object><Key>a</Key></Object>",
        "<Delete><Object><Key>a</Key></Object></Delete>",
        "<BatchGet><Object></Object></BatchGet>",
        "<BatchGet><Object><Key></Key></Object></BatchGet>",
        "<BatchGet><Object><Key>a</Key><Key>b</Key></Object></BatchGet>",
        "<BatchGet><Object><Key>a</Key><VersionId>1</VersionId><VersionId>1</VersionId>"
        "</Object></BatchGet>",
        "<BatchGet><Object><Key>a</Key><VersionId></VersionId></Object></BatchGet>",
        "<BatchGet><Object><Key>a</Key><Range>r</Range><Range>r</Range></Object></BatchGet>",
        "<BatchGet><Object><Key>a</Key><ETag>x</ETag></Object></BatchGet>",
        "<BatchGet><Object><Key>a<b/></Key></Object></BatchGet>",
        "<BatchGet><Key>a</Key></BatchGet>",
        "<BatchGet><Object><Key>a</Key></Object><Other/></BatchGet>",
        "<BatchGet><Object><Key>a</Key></Object></BatchGet><BatchGet/>",
        "<BatchGet><Object><Key>&#0;</Key></Object></BatchGet>",
        "<?xml version=\"1.0\"?><!DOCTYPE BatchGet [<!ENTITY e \"k\">]>"
        "<BatchGet><Object><Key>&e;</Key></Object></BatchGet>",
        "<!DOCTYPE BatchGet SYSTEM \"file:///etc/passwd\"><BatchGet/>",
        /* A good entry, then one that fails: the first's key must not leak (ASan). */
        "<BatchGet><Object><Key>a</Key></Object><Object><Key>b</Key><Key>c</Key></Object>"
        "</BatchGet>",
        "<BatchGet><Object><Key>a</Key></Object><Object><Key>b</Key></Object>junk",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        s3_xml_batch_entry_t *e = NULL;
        int n = -1;
        if (parse(bad[i], &e, &n) != ERR_INVAL) fail_msg("accepted: %s", bad[i]);
    }
    /* A Range or VersionId too long to be one. */
    char body[600];
    snprintf(body, sizeof(body),
             "<BatchGet><Object><Key>a</Key><Range>bytes=%0200d-</Range>"
             "</Object></BatchGet>",
             1);
    s3_xml_batch_entry_t *e;
    int n;
    assert_int_equal(parse(body, &e, &n), ERR_INVAL);
}

static char *many(int count, size_t keylen)
{
    size_t cap = (size_t)count * (keylen + 32) + 64, len = 0;
    char *b = malloc(cap);
    len += (size_t)sprintf(b, "<BatchGet>");
    for (int i = 0; i < count; i++) {
        len += (size_t)sprintf(b + len, "<Object><Key>");
        memset(b + len, 'k', keylen);
        len += keylen;
        len += (size_t)sprintf(b + len, "</Key></Object>");
    }
    sprintf(b + len, "</BatchGet>");
    return b;
}

static void test_xml_limits(void **state)
{
    (void)state;
    s3_xml_batch_entry_t *e;
    int n;
    char *b = many(S3_XML_BATCH_MAX, 3);
    assert_int_equal(parse(b, &e, &n), 0);
    assert_int_equal(n, S3_XML_BATCH_MAX);
    s3_xml_batch_free(e, n);
    free(b);
    b = many(S3_XML_BATCH_MAX + 1, 3);
    assert_int_equal(parse(b, &e, &n), ERR_TOO_LARGE);
    free(b);
    b = many(2, S3_XML_MAX_KEY);
    assert_int_equal(parse(b, &e, &n), 0);
    assert_int_equal(strlen(e[1].key), S3_XML_MAX_KEY);
    s3_xml_batch_free(e, n);
    free(b);
    b = many(2, S3_XML_MAX_KEY + 1);
    assert_int_equal(parse(b, &e, &n), ERR_INVAL);
    free(b);
}

static void test_head_bytes(void **state)
{
    (void)state;
    s3_batch_head_t h = {7, 206, 3, 32, 0x0102030405060708ull, 1024}, back;
    uint8_t p[S3_BATCH_HEAD];
    s3_batch_head_encode(&h, p);
    assert_memory_equal(p, "WLB1", 4);
    assert_int_equal(le_get32(p + 4), 7);
    assert_int_equal(le_get16(p + 8), 206);
    assert_int_equal(le_get16(p + 10), 3);
    assert_int_equal(le_get16(p + 12), 32);
    assert_int_equal(le_get16(p + 14), 0);
    assert_true(le_get64(p + 16) == 0x0102030405060708ull);
    assert_int_equal(p[16], 0x08); /* little-endian on the wire */
    assert_true(le_get64(p + 24) == 1024);
    assert_int_equal(le_get32(p + 32), crc32c(0, p, 32));
    assert_int_equal(le_get32(p + 36), 0);
    assert_int_equal(s3_batch_head_decode(p, &back), 0);
    assert_true(back.index == h.index && back.status == h.status && back.key_len == h.key_len &&
                back.etag_len == h.etag_len && back.object_size == h.object_size &&
                back.payload_len == h.payload_len);
    assert_true(s3_batch_frame_len(&h) == 40 + 3 + 32 + 1024 + 4);
    /* Every byte counts: one changed anywhere is refused. */
    for (int i = 0; i < S3_BATCH_HEAD; i++)
        for (int bit = 0; bit < 8; bit++) {
            p[i] ^= (uint8_t)(1u << bit);
            assert_int_equal(s3_batch_head_decode(p, &back), ERR_INVAL);
            p[i] ^= (uint8_t)(1u << bit);
        }
    /* The end frame, and end frames that carry something. */
    s3_batch_head_t end = {S3_BATCH_END, 200, 0, 0, 0, 0};
    s3_batch_head_encode(&end, p);
    assert_int_equal(s3_batch_head_decode(p, &back), 0);
    assert_true(s3_batch_frame_len(&end) == 44);
    s3_batch_head_t bad[] = {{S3_BATCH_END, 500, 0, 0, 0, 0},
                             {S3_BATCH_END, 200, 1, 0, 0, 0},
                             {S3_BATCH_END, 200, 0, 1, 0, 0},
                             {S3_BATCH_END, 200, 0, 0, 1, 0},
                             {S3_BATCH_END, 200, 0, 0, 0, 1}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        s3_batch_head_encode(&bad[i], p);
        assert_int_equal(s3_batch_head_decode(p, &back), ERR_INVAL);
    }
    /* A length past 64 bits saturates instead of wrapping. */
    s3_batch_head_t huge = {0, 200, 10, 10, 0, UINT64_MAX - 20};
    assert_true(s3_batch_frame_len(&huge) == UINT64_MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_xml_fields),
        cmocka_unit_test(test_xml_malformed),
        cmocka_unit_test(test_xml_limits),
        cmocka_unit_test(test_head_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
