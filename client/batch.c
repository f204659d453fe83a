/*
 * batch: batch GET request bodies and the response stream parser (batch.h).
 *
 * The parser is a small state machine over the parts of a frame: header,
 * key, etag, payload, crc. Each state knows how many bytes it still wants;
 * a feed takes what it can from the input and moves on when a part is
 * whole, so any split of the stream parses the same (the fuzz target feeds
 * random splits). Header, key, etag and error payloads are copied into the
 * parser (they are small and bounded); success payloads are never copied.
 */
#include "client/batch.h"

#include "common/crc.h"
#include "common/err.h"
#include "common/le.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { S_HDR, S_KEY, S_ETAG, S_PAYLOAD, S_CRC, S_END, S_FAILED };

struct batch_parser {
    batch_cb_t cb;
    uint32_t n;    /* entries requested */
    uint32_t next; /* index the next frame must carry */
    int state;
    int rc;        /* the failure, once S_FAILED */
    uint64_t want; /* bytes still wanted by the current part */
    uint64_t got;  /* payload bytes so far */
    uint32_t crc;  /* running crc32c of the payload */
    uint8_t hdr[BATCH_HDR_LEN];
    uint8_t crcb[4];
    size_t fill; /* bytes of hdr / crcb / key / etag collected */
    batch_entry_t e;
    char key[65536];
    char etag[65536];
    char errcode[BATCH_ERRCODE_MAX + 1];
};

int batch_parser_new(const batch_cb_t *cb, uint32_t n, batch_parser_t **out)
{
    batch_parser_t *p = malloc(sizeof(*p));
    *out = NULL;
    if (!p) return ERR_NOMEM;
    memset(p, 0, offsetof(batch_parser_t, key));
    p->cb = *cb;
    p->n = n;
    p->state = S_HDR;
    p->want = BATCH_HDR_LEN;
    *out = p;
    return 0;
}

void batch_parser_free(batch_parser_t *p)
{
    free(p);
}

uint32_t batch_done(const batch_parser_t *p)
{
    return p->next;
}

int batch_ended(const batch_parser_t *p)
{
    return p->state == S_END;
}

static int fail(batch_parser_t *p, int rc)
{
    p->state = S_FAILED;
    p->rc = rc;
    return rc;
}

/* The header is whole: check it and set up the key. */
static int header_done(batch_parser_t *p)
{
    const uint8_t *h = p->hdr;
    if (memcmp(h, BATCH_MAGIC, 4) != 0) return ERR_CORRUPT;
    if (le_get32(h + 32) != crc32c(0, h, 32)) return ERR_CORRUPT;
    if (le_get16(h + 14) != 0 || le_get32(h + 36) != 0) return ERR_CORRUPT;
    batch_entry_t *e = &p->e;
    memset(e, 0, sizeof(*e));
    e->index = le_get32(h + 4);
    e->status = le_get16(h + 8);
    e->key_len = le_get16(h + 10);
    e->etag_len = le_get16(h + 12);
    e->object_size = le_get64(h + 16);
    e->payload_len = le_get64(h + 24);
    e->key = p->key;
    e->etag = p->etag;
    e->error_code = "";
    if (e->index == BATCH_END_INDEX) {
        if (p->next != p->n || e->status != 200 || e->key_len || e->etag_len || e->payload_len)
            return ERR_CORRUPT;
    } else {
        if (e->index != p->next || e->index >= p->n) return ERR_CORRUPT;
        if (e->status < 200 || e->status > 599) return ERR_CORRUPT;
        int ok = e->status == 200 || e->status == 206;
        if (!ok && e->payload_len > BATCH_ERRCODE_MAX) return ERR_CORRUPT;
        if (e->status == 200 && e->payload_len != e->object_size) return ERR_CORRUPT;
        if (e->status == 206 && e->payload_len > e->object_size) return ERR_CORRUPT;
    }
    return 0;
}

/* Enter the state that follows `from` (skipping empty parts); 0 or a callback's code. */
static int advance(batch_parser_t *p, int from)
{
    batch_entry_t *e = &p->e;
    int s = from;
    for (;;) {
        s++;
        p->fill = 0;
        if (s == S_KEY) {
            p->want = e->key_len;
        } else if (s == S_ETAG) {
            p->key[e->key_len] = 0;
            p->want = e->etag_len;
        } else if (s == S_PAYLOAD) {
            p->etag[e->etag_len] = 0;
            p->want = e->payload_len;
            p->got = 0;
            p->crc = 0;
            int ok = e->status == 200 || e->status == 206;
            if (ok && e->index != BATCH_END_INDEX && p->cb.begin) {
                int rc = p->cb.begin(p->cb.arg, e);
                if (rc) return rc;
            }
        } else if (s == S_CRC) {
            if (e->status != 200 && e->status != 206) p->errcode[p->got] = 0;
            p->want = 4;
        }
        if (p->want > 0 || s == S_CRC) break;
    }
    p->state = s;
    return 0;
}

/* The crc is whole: check it, report the entry, start the next frame. */
static int frame_done(batch_parser_t *p)
{
    batch_entry_t *e = &p->e;
    if (le_get32(p->crcb) != p->crc) return ERR_CORRUPT;
    if (e->index == BATCH_END_INDEX) {
        p->state = S_END;
        return 1;
    }
    int ok = e->status == 200 || e->status == 206;
    if (!ok) {
        e->error_code = p->errcode;
        /* Error entries have no begin call: they are reported whole here. */
        if (p->cb.begin) {
            int rc = p->cb.begin(p->cb.arg, e);
            if (rc) return rc;
        }
    }
    if (p->cb.end) {
        int rc = p->cb.end(p->cb.arg, e);
        if (rc) return rc;
    }
    p->next++;
    p->state = S_HDR;
    p->want = BATCH_HDR_LEN;
    p->fill = 0;
    return 0;
}

int batch_feed(batch_parser_t *p, const void *data, size_t len)
{
    const uint8_t *in = data;
    if (p->state == S_FAILED) return p->rc;
    if (p->state == S_END) return len ? fail(p, ERR_CORRUPT) : 1;
    while (len > 0) {
        size_t n = p->want < len ? (size_t)p->want : len;
        int rc = 0;
        switch (p->state) {
        case S_HDR:
            memcpy(p->hdr + p->fill, in, n);
            break;
        case S_KEY:
            memcpy(p->key + p->fill, in, n);
            break;
        case S_ETAG:
            memcpy(p->etag + p->fill, in, n);
            break;
        case S_CRC:
            memcpy(p->crcb + p->fill, in, n);
            break;
        case S_PAYLOAD:
            p->crc = crc32c(p->crc, in, n);
            if (p->e.status == 200 || p->e.status == 206) {
                if (p->cb.data) rc = p->cb.data(p->cb.arg, &p->e, p->got, in, n);
            } else {
                memcpy(p->errcode + p->fill, in, n);
            }
            p->got += n;
            break;
        }
        if (rc) return fail(p, rc);
        p->fill += n;
        p->want -= n;
        in += n;
        len -= n;
        if (p->want > 0) continue;
        if (p->state == S_HDR) {
            rc = header_done(p);
            if (rc == 0) rc = advance(p, S_HDR);
        } else if (p->state == S_CRC) {
            rc = frame_done(p);
            if (rc == 1) return len ? fail(p, ERR_CORRUPT) : 1;
        } else {
            rc = advance(p, p->state);
        }
        if (rc) return fail(p, rc);
    }
    return 0;
}

/* XML-escape s into out at *o (out NULL: only count). */
static void put_esc(char *out, size_t *o, const char *s)
{
    for (; *s; s++) {
        const char *r = NULL;
        switch (*s) {
        case '&':
            r = "&amp;";
            break;
        case '<':
            r = "&lt;";
            break;
        case '>':
            r = "&gt;";
            break;
        case '"':
            r = "&quot;";
            break;
        case '\'':
            r = "&apos;";
            break;
        }
        size_t n = r ? strlen(r) : 1;
        if (out) memcpy(out + *o, r ? r : s, n);
        *o += n;
    }
}

static void put_raw(char *out, size_t *o, const char *s)
{
    size_t n = strlen(s);
    if (out) memcpy(out + *o, s, n);
    *o += n;
}

char *batch_request_body(const char *const *keys, const uint64_t *offs, const uint64_t *lens,
                         size_t n, size_t *out_len)
{
    char *out = NULL;
    /* Two passes: the first counts, the second writes. */
    for (int pass = 0; pass < 2; pass++) {
        size_t o = 0;
        char range[80];
        put_raw(out, &o, "<BatchGet>");
        for (size_t i = 0; i < n; i++) {
            put_raw(out, &o, "<Object><Key>");
            put_esc(out, &o, keys[i]);
            put_raw(out, &o, "</Key>");
            if (lens && lens[i]) {
                snprintf(range, sizeof(range), "<Range>bytes=%llu-%llu</Range>",
                         (unsigned long long)offs[i], (unsigned long long)(offs[i] + lens[i] - 1));
                put_raw(out, &o, range);
            }
            put_raw(out, &o, "</Object>");
        }
        put_raw(out, &o, "</BatchGet>");
        if (!out) {
            out = malloc(o + 1);
            if (!out) return NULL;
        } else {
            out[o] = 0;
            *out_len = o;
        }
    }
    return out;
}
