/*
 * The batch GET response parser (client/batch.h) and request body: frames
 * built here byte by byte as docs/batch-get.md lays them out, parsed whole
 * and in every split, with per-entry errors, cut streams (entries before
 * the cut good, none after), and every kind of corruption refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "client/batch.h"
#include "common/crc.h"
#include "common/err.h"
#include "common/le.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A growing byte string. */
typedef struct {
    uint8_t *p;
    size_t n;
} buf_t;

static void put(buf_t *b, const void *d, size_t n)
{
    b->p = realloc(b->p, b->n + n + 1);
    assert_non_null(b->p);
    memcpy(b->p + b->n, d, n);
    b->n += n;
}

static void frame(buf_t *b, uint32_t index, uint16_t status, const char *key, const char *etag,
                  uint64_t size, const void *payload, size_t plen)
{
    uint8_t h[BATCH_HDR_LEN] = {0};
    memcpy(h, BATCH_MAGIC, 4);
    le_put32(h + 4, index);
    le_put16(h + 8, status);
    le_put16(h + 10, (uint16_t)strlen(key));
    le_put16(h + 12, (uint16_t)strlen(etag));
    le_put64(h + 16, size);
    le_put64(h + 24, plen);
    le_put32(h + 32, crc32c(0, h, 32));
    put(b, h, sizeof(h));
    put(b, key, strlen(key));
    put(b, etag, strlen(etag));
    put(b, payload, plen);
    uint8_t c[4];
    le_put32(c, crc32c(0, payload, plen));
    put(b, c, 4);
}

static void end_frame(buf_t *b)
{
    frame(b, BATCH_END_INDEX, 200, "", "", 0, "", 0);
}

/* What the callbacks saw. */
typedef struct {
    char data[8][256];
    size_t len[8];
    int status[8];
    char code[8][64];
    char key[8][64];
    int begun, ended;
    int fail_at; /* the end callback of this entry fails (ERR_IO); -1 never */
} seen_t;

static int on_begin(void *arg, const batch_entry_t *e)
{
    seen_t *s = arg;
    assert_true(e->index < 8);
    assert_int_equal(s->begun, (int)e->index);
    s->begun++;
    s->status[e->index] = e->status;
    snprintf(s->key[e->index], sizeof(s->key[0]), "%s", e->key);
    s->len[e->index] = 0;
    return 0;
}

static int on_data(void *arg, const batch_entry_t *e, uint64_t off, const void *p, size_t n)
{
    seen_t *s = arg;
    assert_int_equal(off, s->len[e->index]);
    assert_true(off + n <= sizeof(s->data[0]));
    memcpy(s->data[e->index] + off, p, n);
    s->len[e->index] += n;
    return 0;
}

static int on_end(void *arg, const batch_entry_t *e)
{
    seen_t *s = arg;
    if ((int)e->index == s->fail_at) return ERR_IO;
    snprintf(s->code[e->index], sizeof(s->code[0]), "%s", e->error_code);
    s->ended++;
    return 0;
}

/* Parse stream in pieces of step bytes: the last batch_feed result. */
static int parse(const buf_t *b, uint32_t n, size_t step, seen_t *s, uint32_t *done)
{
    memset(s, 0, sizeof(*s));
    s->fail_at = s->fail_at ? s->fail_at : -1;
    batch_cb_t cb = {on_begin, on_data, on_end, s};
    batch_parser_t *p;
    assert_int_equal(batch_parser_new(&cb, n, &p), 0);
    int rc = 0;
    for (size_t o = 0; o < b->n && rc == 0; o += step)
        rc = batch_feed(p, b->p + o, b->n - o < step ? b->n - o : step);
    if (done) *done = batch_done(p);
    if (rc == 1) assert_true(batch_ended(p));
    batch_parser_free(p);
    return rc;
}

/* Three entries: a whole object, a range, a missing key. */
static buf_t three(void)
{
    buf_t b = {0};
    frame(&b, 0, 200, "a/1.jpg", "e1", 5, "hello", 5);
    frame(&b, 1, 206, "b.bin", "e2", 100, "ran", 3);
    frame(&b, 2, 404, "c", "", 0, "NoSuchKey", 9);
    end_frame(&b);
    return b;
}

static void test_good_any_split(void **state)
{
    (void)state;
    buf_t b = three();
    seen_t s;
    for (size_t step = 1; step <= b.n; step++) {
        uint32_t done;
        assert_int_equal(parse(&b, 3, step, &s, &done), 1);
        assert_int_equal(done, 3);
        assert_int_equal(s.ended, 3);
        assert_int_equal(s.len[0], 5);
        assert_memory_equal(s.data[0], "hello", 5);
        assert_string_equal(s.key[0], "a/1.jpg");
        assert_int_equal(s.status[1], 206);
        assert_memory_equal(s.data[1], "ran", 3);
        assert_int_equal(s.status[2], 404);
        assert_string_equal(s.code[2], "NoSuchKey");
        assert_int_equal(s.len[2], 0); /* an error payload is not data */
    }
    free(b.p);
}

static void test_empty_object_and_no_entries(void **state)
{
    (void)state;
    buf_t b = {0};
    frame(&b, 0, 200, "empty", "d41d8cd98f00b204e9800998ecf8427e", 0, "", 0);
    end_frame(&b);
    seen_t s;
    assert_int_equal(parse(&b, 1, 7, &s, NULL), 1);
    assert_int_equal(s.begun, 1);
    assert_int_equal(s.ended, 1);
    free(b.p);
    buf_t e = {0};
    end_frame(&e);
    assert_int_equal(parse(&e, 0, 1, &s, NULL), 1);
    free(e.p);
}

/* A stream cut anywhere: no failure, the entries whose crc arrived are done, no others. */
static void test_cut(void **state)
{
    (void)state;
    buf_t b = three();
    size_t ends[3], o = 0;
    /* Offsets just past each entry's crc. */
    size_t sizes[3] = {BATCH_HDR_LEN + 7 + 2 + 5 + 4, BATCH_HDR_LEN + 5 + 2 + 3 + 4,
                       BATCH_HDR_LEN + 1 + 0 + 9 + 4};
    for (int i = 0; i < 3; i++)
        ends[i] = o += sizes[i];
    for (size_t cut = 0; cut < b.n; cut++) {
        buf_t c = {b.p, cut};
        seen_t s;
        uint32_t done;
        assert_int_equal(parse(&c, 3, 3, &s, &done), 0);
        uint32_t want = 0;
        for (int i = 0; i < 3; i++)
            want += cut >= ends[i];
        assert_int_equal(done, want);
        assert_int_equal(s.ended, (int)want);
    }
    free(b.p);
}

/* Flip each byte of the stream in turn: a header or payload change is refused (crc), never
   delivered as a good entry with other bytes. */
static void test_corrupt(void **state)
{
    (void)state;
    buf_t b = three();
    for (size_t i = 0; i < b.n; i++) {
        b.p[i] ^= 0x40;
        seen_t s;
        uint32_t done;
        int rc = parse(&b, 3, 1 + i % 5, &s, &done);
        b.p[i] ^= 0x40;
        /* The key and etag are not under a crc (the header's lengths are): a flip there
           changes the name reported, not the data. Everything else fails. */
        if (rc == 1) {
            assert_int_equal(s.len[0], 5);
            assert_memory_equal(s.data[0], "hello", 5);
            assert_memory_equal(s.data[1], "ran", 3);
            continue;
        }
        assert_int_equal(rc, ERR_CORRUPT);
        /* Entries before the damaged frame stay good. */
        if (done >= 1) assert_memory_equal(s.data[0], "hello", 5);
    }
    free(b.p);
}

static void test_refused(void **state)
{
    (void)state;
    seen_t s;
    /* Out of order. */
    buf_t b = {0};
    frame(&b, 1, 200, "k", "e", 1, "x", 1);
    assert_int_equal(parse(&b, 2, 100, &s, NULL), ERR_CORRUPT);
    free(b.p);
    /* More entries than asked. */
    b = (buf_t){0};
    frame(&b, 0, 200, "k", "e", 1, "x", 1);
    frame(&b, 1, 200, "k", "e", 1, "x", 1);
    assert_int_equal(parse(&b, 1, 100, &s, NULL), ERR_CORRUPT);
    free(b.p);
    /* The end before all entries. */
    b = (buf_t){0};
    frame(&b, 0, 200, "k", "e", 1, "x", 1);
    end_frame(&b);
    assert_int_equal(parse(&b, 2, 100, &s, NULL), ERR_CORRUPT);
    free(b.p);
    /* Bytes after the end. */
    b = (buf_t){0};
    end_frame(&b);
    put(&b, "x", 1);
    assert_int_equal(parse(&b, 0, 100, &s, NULL), ERR_CORRUPT);
    free(b.p);
    /* A 200 whose payload is not the object's size; a 206 beyond it. */
    b = (buf_t){0};
    frame(&b, 0, 200, "k", "e", 2, "x", 1);
    assert_int_equal(parse(&b, 1, 100, &s, NULL), ERR_CORRUPT);
    free(b.p);
    b = (buf_t){0};
    frame(&b, 0, 206, "k", "e", 1, "xy", 2);
    assert_int_equal(parse(&b, 1, 100, &s, NULL), ERR_CORRUPT);
    free(b.p);
    /* An error payload longer than any error code. */
    char big[BATCH_ERRCODE_MAX + 1];
    memset(big, 'A', sizeof(big));
    b = (buf_t){0};
    frame(&b, 0, 500, "k", "", 0, big, sizeof(big));
    assert_int_equal(parse(&b, 1, 100, &s, NULL), ERR_CORRUPT);
    free(b.p);
    /* A callback's failure stops the parse with its code, and sticks. */
    b = three();
    memset(&s, 0, sizeof(s));
    s.fail_at = 1;
    batch_cb_t cb = {on_begin, on_data, on_end, &s};
    batch_parser_t *p;
    assert_int_equal(batch_parser_new(&cb, 3, &p), 0);
    assert_int_equal(batch_feed(p, b.p, b.n), ERR_IO);
    assert_int_equal(batch_feed(p, b.p, 1), ERR_IO);
    assert_int_equal(batch_done(p), 1);
    batch_parser_free(p);
    free(b.p);
}

static void test_request_body(void **state)
{
    (void)state;
    const char *keys[] = {"a/1.jpg", "x<&>\"'y", "b.bin"};
    uint64_t offs[] = {0, 0, 10}, lens[] = {0, 0, 1024};
    size_t n;
    char *body = batch_request_body(keys, offs, lens, 3, &n);
    assert_non_null(body);
    assert_int_equal(n, strlen(body));
    assert_string_equal(body, "<BatchGet><Object><Key>a/1.jpg</Key></Object>"
                              "<Object><Key>x&lt;&amp;&gt;&quot;&apos;y</Key></Object>"
                              "<Object><Key>b.bin</Key><Range>bytes=10-1033</Range></Object>"
                              "</BatchGet>");
    free(body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_any_split),
        cmocka_unit_test(test_empty_object_and_no_entries),
        cmocka_unit_test(test_cut),
        cmocka_unit_test(test_corrupt),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_request_body),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
