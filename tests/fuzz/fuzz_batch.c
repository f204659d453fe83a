/*
 * Fuzz the batch GET response parser (client/batch.h). Input: byte 0 is the
 * number of entries asked, byte 1 the feed step, the rest the stream. The
 * stream is parsed whole and in pieces: both must end the same way, report
 * the same entries done, and deliver the same payload bytes; payload pieces
 * arrive in order, within the entry's announced length.
 */
#include "client/batch.h"
#include "common/err.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t sum;  /* a digest of the payload bytes and their places */
    uint64_t next; /* next payload offset expected */
    uint32_t begun, ended;
} acc_t;

static int on_begin(void *arg, const batch_entry_t *e)
{
    acc_t *a = arg;
    if (e->key_len != strlen(e->key) && memchr(e->key, 0, e->key_len) == NULL) abort();
    a->begun++;
    a->next = 0;
    return 0;
}

static int on_data(void *arg, const batch_entry_t *e, uint64_t off, const void *p, size_t n)
{
    acc_t *a = arg;
    if (off != a->next || off + n > e->payload_len) abort();
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        a->sum = a->sum * 31 + b[i] + (off + i) * 7 + e->index;
    a->next += n;
    return 0;
}

static int on_end(void *arg, const batch_entry_t *e)
{
    acc_t *a = arg;
    if ((e->status == 200 || e->status == 206) && a->next != e->payload_len) abort();
    if (strlen(e->error_code) > BATCH_ERRCODE_MAX) abort();
    a->ended++;
    return 0;
}

static int run(const uint8_t *d, size_t n, uint32_t entries, size_t step, acc_t *a, uint32_t *done)
{
    batch_cb_t cb = {on_begin, on_data, on_end, a};
    batch_parser_t *p;
    if (batch_parser_new(&cb, entries, &p) != 0) abort();
    int rc = 0;
    /* Bytes after the end frame are fed too: they must be refused whatever the split. */
    for (size_t o = 0; o < n && rc >= 0; o += step)
        rc = batch_feed(p, d + o, n - o < step ? n - o : step);
    if (rc == 0 && n == 0) rc = batch_feed(p, d, 0);
    *done = batch_done(p);
    if (*done > entries || *done != a->ended) abort();
    if (rc == 1 && (!batch_ended(p) || *done != entries)) abort();
    batch_parser_free(p);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    uint32_t entries = data[0];
    size_t step = 1 + data[1] % 61;
    acc_t a = {0}, b = {0};
    uint32_t da, db;
    int ra = run(data + 2, size - 2, entries, size, &a, &da);
    int rb = run(data + 2, size - 2, entries, step, &b, &db);
    if (ra != rb || da != db || a.sum != b.sum || a.ended != b.ended) abort();
    return 0;
}
