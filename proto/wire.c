/*
 * wire: frame header and message codec (the layout is in wire.h).
 */
#include "proto/wire.h"

#include "common/crc.h"
#include "common/err.h"
#include "common/le.h"

#include <string.h>

static const char *const type_names[PROTO_TYPE_END] = {
    [PROTO_HELLO] = "HELLO",
    [PROTO_AUTH] = "AUTH",
    [PROTO_PUT] = "PUT",
    [PROTO_READ] = "READ",
    [PROTO_READ_SPLIT] = "READ_SPLIT",
    [PROTO_GET] = "GET",
    [PROTO_STAT] = "STAT",
    [PROTO_DEL] = "DEL",
    [PROTO_SCAN] = "SCAN",
    [PROTO_STATS] = "STATS",
    [PROTO_PING] = "PING",
    [PROTO_NODE_STATS] = "NODE_STATS",
    [PROTO_HEAL_NOW] = "HEAL_NOW",
};

const char *proto_type_name(unsigned type)
{
    return type > 0 && type < PROTO_TYPE_END ? type_names[type] : "?";
}

void proto_hdr_encode(uint8_t out[PROTO_HDR], const proto_hdr_t *h)
{
    le_put32(out, PROTO_MAGIC);
    out[4] = PROTO_VERSION;
    out[5] = h->type;
    le_put16(out + 6, h->flags);
    le_put64(out + 8, h->id);
    le_put32(out + 16, h->len);
    le_put32(out + 20, (uint32_t)h->status);
    le_put32(out + 24, 0);
    le_put32(out + 28, 0);
}

uint32_t proto_hdr_crc_start(const uint8_t hdr[PROTO_HDR])
{
    return crc32c(0, hdr, 24);
}

void proto_hdr_put_crc(uint8_t hdr[PROTO_HDR], uint32_t crc)
{
    le_put32(hdr + 24, crc);
}

void proto_hdr_seal(uint8_t out[PROTO_HDR], const proto_hdr_t *h, const void *payload)
{
    proto_hdr_encode(out, h);
    uint32_t crc = proto_hdr_crc_start(out);
    if (h->len) crc = crc32c(crc, payload, h->len);
    proto_hdr_put_crc(out, crc);
}

void proto_hdr_seal_known(uint8_t out[PROTO_HDR], const proto_hdr_t *h, const uint8_t *payload,
                          size_t at, size_t n, uint32_t crc)
{
    proto_hdr_encode(out, h);
    uint32_t c = proto_hdr_crc_start(out);
    if (at) c = crc32c(c, payload, at);
    c = crc32c_combine(c, crc, n);
    if (h->len > at + n) c = crc32c(c, payload + at + n, h->len - at - n);
    proto_hdr_put_crc(out, c);
}

int proto_hdr_decode(const uint8_t *p, size_t n, proto_hdr_t *h)
{
    if (n < PROTO_HDR) return ERR_AGAIN;
    if (le_get32(p) != PROTO_MAGIC || p[4] != PROTO_VERSION || le_get32(p + 28) != 0)
        return ERR_CORRUPT;
    h->type = p[5];
    h->flags = le_get16(p + 6);
    h->id = le_get64(p + 8);
    h->len = le_get32(p + 16);
    h->status = (int32_t)le_get32(p + 20);
    h->crc = le_get32(p + 24);
    if (h->type == 0 || h->type >= PROTO_TYPE_END || (h->flags & ~PROTO_F_RESP) ||
        h->len > PROTO_MAX_PAYLOAD || h->status > 0)
        return ERR_CORRUPT;
    return 0;
}

int proto_frame_ok(const uint8_t hdr[PROTO_HDR], const void *payload, size_t len)
{
    uint32_t crc = proto_hdr_crc_start(hdr);
    if (len) crc = crc32c(crc, payload, len);
    return crc == le_get32(hdr + 24);
}

/* ---- writer ---- */

void proto_w_init(proto_w_t *w, void *buf, size_t cap)
{
    w->p = buf;
    w->len = 0;
    w->cap = cap;
    w->err = 0;
}

/* Room for n more bytes, or err set. */
static uint8_t *w_room(proto_w_t *w, size_t n)
{
    if (w->err || n > w->cap - w->len) {
        w->err = ERR_TOO_LARGE;
        return NULL;
    }
    uint8_t *at = w->p + w->len;
    w->len += n;
    return at;
}

void proto_w_u8(proto_w_t *w, uint8_t v)
{
    uint8_t *p = w_room(w, 1);
    if (p) *p = v;
}

void proto_w_u16(proto_w_t *w, uint16_t v)
{
    uint8_t *p = w_room(w, 2);
    if (p) le_put16(p, v);
}

void proto_w_u32(proto_w_t *w, uint32_t v)
{
    uint8_t *p = w_room(w, 4);
    if (p) le_put32(p, v);
}

void proto_w_u64(proto_w_t *w, uint64_t v)
{
    uint8_t *p = w_room(w, 8);
    if (p) le_put64(p, v);
}

void proto_w_bytes(proto_w_t *w, const void *b, size_t n)
{
    uint8_t *p = w_room(w, n);
    if (p && n) memcpy(p, b, n);
}

void proto_w_str(proto_w_t *w, const char *s)
{
    size_t n = strlen(s);
    if (n > UINT16_MAX) {
        w->err = ERR_TOO_LARGE;
        return;
    }
    proto_w_u16(w, (uint16_t)n);
    proto_w_bytes(w, s, n);
}

void proto_w_blob_len(proto_w_t *w, size_t n)
{
    if (n > PROTO_MAX_PAYLOAD) {
        w->err = ERR_TOO_LARGE;
        return;
    }
    proto_w_u32(w, (uint32_t)n);
}

void proto_w_blob(proto_w_t *w, const void *b, size_t n)
{
    proto_w_blob_len(w, n);
    proto_w_bytes(w, b, n);
}

/* ---- reader ---- */

void proto_r_init(proto_r_t *r, const void *buf, size_t len)
{
    r->p = buf;
    r->len = len;
    r->off = 0;
    r->err = 0;
}

const uint8_t *proto_r_bytes(proto_r_t *r, size_t n)
{
    if (r->err || n > r->len - r->off) {
        r->err = ERR_CORRUPT;
        return NULL;
    }
    const uint8_t *at = r->p + r->off;
    r->off += n;
    return at;
}

uint8_t proto_r_u8(proto_r_t *r)
{
    const uint8_t *p = proto_r_bytes(r, 1);
    return p ? *p : 0;
}

uint16_t proto_r_u16(proto_r_t *r)
{
    const uint8_t *p = proto_r_bytes(r, 2);
    return p ? le_get16(p) : 0;
}

uint32_t proto_r_u32(proto_r_t *r)
{
    const uint8_t *p = proto_r_bytes(r, 4);
    return p ? le_get32(p) : 0;
}

uint64_t proto_r_u64(proto_r_t *r)
{
    const uint8_t *p = proto_r_bytes(r, 8);
    return p ? le_get64(p) : 0;
}

void proto_r_str(proto_r_t *r, char *out, size_t cap)
{
    uint16_t n = proto_r_u16(r);
    const uint8_t *p = proto_r_bytes(r, n);
    if (!p || n >= cap || memchr(p, 0, n)) {
        r->err = ERR_CORRUPT;
        out[0] = 0;
        return;
    }
    memcpy(out, p, n);
    out[n] = 0;
}

const uint8_t *proto_r_blob(proto_r_t *r, uint32_t *n)
{
    uint32_t len = proto_r_u32(r);
    const uint8_t *p = proto_r_bytes(r, len);
    *n = p ? len : 0;
    return p;
}

int proto_r_end(const proto_r_t *r)
{
    return r->err || r->off != r->len ? ERR_CORRUPT : 0;
}

/* ---- messages ---- */

void proto_w_id(proto_w_t *w, const char *bucket, const char *key, const char *version,
                uint32_t shard)
{
    proto_w_str(w, bucket);
    proto_w_str(w, key);
    proto_w_str(w, version);
    proto_w_u32(w, shard);
}

void proto_r_id(proto_r_t *r, proto_id_t *id)
{
    proto_r_str(r, id->bucket, sizeof(id->bucket));
    proto_r_str(r, id->key, sizeof(id->key));
    proto_r_str(r, id->version, sizeof(id->version));
    id->shard = proto_r_u32(r);
    /* Every record has a bucket and a key (the version may be empty: a head's position). */
    if (!r->err && (!id->bucket[0] || !id->key[0])) r->err = ERR_CORRUPT;
}

void proto_w_stat(proto_w_t *w, const proto_stat_t *st)
{
    proto_w_u64(w, st->len);
    proto_w_u64(w, st->seq);
    proto_w_u32(w, st->crc);
    proto_w_u32(w, st->meta_len);
}

void proto_r_stat(proto_r_t *r, proto_stat_t *st)
{
    st->len = proto_r_u64(r);
    st->seq = proto_r_u64(r);
    st->crc = proto_r_u32(r);
    st->meta_len = proto_r_u32(r);
}

/* A head's condition after its mode byte (0: none, no fields). */
static void r_cond(proto_r_t *r, proto_req_t *q, uint8_t mode)
{
    q->cond_mode = mode;
    if (mode > PROTO_COND_MAX) r->err = ERR_CORRUPT;
    if (mode) {
        q->cond_stamp = proto_r_u64(r);
        proto_r_str(r, q->cond_upload, sizeof(q->cond_upload));
        proto_r_str(r, q->cond_self, sizeof(q->cond_self));
    }
}

int proto_req_decode(unsigned type, const void *payload, size_t len, proto_req_t *q)
{
    proto_r_t r;
    proto_r_init(&r, payload, len);
    q->type = (uint8_t)type;
    q->drive = 0;
    q->id.bucket[0] = q->id.key[0] = q->id.version[0] = 0;
    q->id.shard = 0;
    q->off = 0;
    q->len = q->tail_len = q->meta_cap = q->cap = q->limit = 0;
    q->meta = q->data = NULL;
    q->meta_len = q->data_len = 0;
    q->cond_mode = 0;
    q->cond_stamp = 0;
    q->cond_upload[0] = q->cond_self[0] = 0;
    switch (type) {
    case PROTO_HELLO:
        q->version = proto_r_u16(&r);
        proto_r_str(&r, q->cluster, sizeof(q->cluster));
        proto_r_str(&r, q->node, sizeof(q->node));
        q->epoch = proto_r_u64(&r);
        {
            const uint8_t *n = proto_r_bytes(&r, PROTO_NONCE);
            if (n) memcpy(q->nonce, n, PROTO_NONCE);
        }
        break;
    case PROTO_AUTH: {
        const uint8_t *m = proto_r_bytes(&r, PROTO_MAC);
        if (m) memcpy(q->mac, m, PROTO_MAC);
        break;
    }
    case PROTO_PUT:
        q->drive = proto_r_u32(&r);
        proto_r_id(&r, &q->id);
        r_cond(&r, q, proto_r_u8(&r));
        q->meta = proto_r_blob(&r, &q->meta_len);
        q->data = proto_r_blob(&r, &q->data_len);
        break;
    case PROTO_READ:
        q->drive = proto_r_u32(&r);
        proto_r_id(&r, &q->id);
        q->off = proto_r_u64(&r);
        q->len = proto_r_u32(&r);
        break;
    case PROTO_READ_SPLIT:
        q->drive = proto_r_u32(&r);
        proto_r_id(&r, &q->id);
        q->len = proto_r_u32(&r);
        q->tail_len = proto_r_u32(&r);
        break;
    case PROTO_GET:
        q->drive = proto_r_u32(&r);
        proto_r_id(&r, &q->id);
        q->meta_cap = proto_r_u32(&r);
        q->cap = proto_r_u32(&r);
        break;
    case PROTO_STAT:
        q->drive = proto_r_u32(&r);
        proto_r_id(&r, &q->id);
        q->meta_cap = proto_r_u32(&r);
        break;
    case PROTO_DEL:
        q->drive = proto_r_u32(&r);
        proto_r_id(&r, &q->id);
        /* A condition only when the payload goes on (a plain delete ends at the id); present,
         * it is one: mode 0 there would be a second spelling of "none". */
        if (!r.err && r.off < r.len) {
            uint8_t mode = proto_r_u8(&r);
            if (!mode) r.err = ERR_CORRUPT;
            r_cond(&r, q, mode);
        }
        break;
    case PROTO_SCAN:
        q->drive = proto_r_u32(&r);
        proto_r_str(&r, q->id.bucket, sizeof(q->id.bucket));
        proto_r_str(&r, q->prefix, sizeof(q->prefix));
        q->how = proto_r_u8(&r);
        proto_r_str(&r, q->from_key, sizeof(q->from_key));
        proto_r_str(&r, q->from_version, sizeof(q->from_version));
        q->limit = proto_r_u32(&r);
        q->with_meta = proto_r_u8(&r);
        if (q->with_meta > 1) r.err = ERR_CORRUPT;
        break;
    case PROTO_STATS:
        q->drive = proto_r_u32(&r);
        break;
    case PROTO_PING:
    case PROTO_NODE_STATS:
    case PROTO_HEAL_NOW:
        break;
    default:
        return ERR_INVAL;
    }
    return proto_r_end(&r);
}

size_t proto_put_data_at(const void *payload, size_t avail)
{
    /* The fields of a PUT, as proto_req_decode reads them, up to the data blob's length. */
    proto_req_t q;
    proto_r_t r;
    proto_r_init(&r, payload, avail);
    (void)proto_r_u32(&r);
    proto_r_id(&r, &q.id);
    r_cond(&r, &q, proto_r_u8(&r));
    (void)proto_r_blob(&r, &q.meta_len);
    (void)proto_r_u32(&r);
    return r.err ? 0 : r.off;
}
