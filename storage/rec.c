#include "storage/rec.h"

#include "common/crc.h"
#include "common/err.h"
#include "common/le.h"

#include <string.h>

static uint32_t chunks_of(uint64_t payload_len)
{
    return (uint32_t)((payload_len + REC_CHUNK - 1) / REC_CHUNK);
}

size_t rec_header_len(const rec_id_t *id, size_t meta_len, uint64_t payload_len)
{
    return REC_FIXED + id->bucket_len + id->key_len + id->version_len + meta_len +
           4 * (size_t)chunks_of(payload_len);
}

size_t rec_pad_for(uint64_t rec_off, size_t hdr_len, uint64_t payload_len)
{
    if (payload_len < REC_ALIGN_MIN) return 0;
    return (size_t)((REC_ALIGN - (rec_off + hdr_len) % REC_ALIGN) % REC_ALIGN);
}

size_t rec_pad_max(uint64_t payload_len)
{
    return payload_len < REC_ALIGN_MIN ? 0 : REC_ALIGN - 1;
}

int rec_id_check(const rec_id_t *id)
{
    if (id->bucket_len == 0 || id->bucket_len > REC_MAX_BUCKET || id->key_len > REC_MAX_KEY ||
        id->version_len > REC_MAX_VERSION)
        return ERR_INVAL;
    /* NUL is the separator of index keys; S3 names never contain it. */
    if (memchr(id->bucket, 0, id->bucket_len) || (id->key_len && memchr(id->key, 0, id->key_len)) ||
        (id->version_len && memchr(id->version, 0, id->version_len)))
        return ERR_INVAL;
    return 0;
}

size_t rec_encode_header(uint8_t *buf, uint8_t type, const rec_id_t *id, uint64_t seq,
                         const void *meta, size_t meta_len, const void *payload,
                         uint64_t payload_len, size_t pad)
{
    return rec_encode_header_seeded(buf, 0, type, id, seq, meta, meta_len, payload, payload_len,
                                    pad);
}

size_t rec_encode_header_seeded(uint8_t *buf, uint32_t seed, uint8_t type, const rec_id_t *id,
                                uint64_t seq, const void *meta, size_t meta_len,
                                const void *payload, uint64_t payload_len, size_t pad)
{
    size_t hlen = rec_header_len(id, meta_len, payload_len) + pad;
    uint8_t *p = buf + REC_FIXED;
    const uint8_t *pl = payload;

    memset(buf, 0, REC_FIXED);
    le_put32(buf, REC_MAGIC);
    le_put16(buf + 4, REC_VERSION);
    buf[6] = type;
    le_put32(buf + 8, (uint32_t)hlen);
    le_put32(buf + 12, id->shard);
    le_put64(buf + 16, seq);
    le_put64(buf + 24, payload_len);
    le_put16(buf + 32, id->bucket_len);
    le_put16(buf + 34, id->key_len);
    le_put16(buf + 36, id->version_len);
    le_put32(buf + 40, (uint32_t)meta_len);
    memcpy(p, id->bucket, id->bucket_len);
    p += id->bucket_len;
    if (id->key_len) memcpy(p, id->key, id->key_len);
    p += id->key_len;
    if (id->version_len) memcpy(p, id->version, id->version_len);
    p += id->version_len;
    if (meta_len) memcpy(p, meta, meta_len);
    p += meta_len;
    for (uint64_t off = 0; off < payload_len; off += REC_CHUNK) {
        uint64_t n = payload_len - off < REC_CHUNK ? payload_len - off : REC_CHUNK;
        le_put32(p, crc32c(0, pl + off, n));
        p += 4;
    }
    memset(p, 0, pad);
    le_put32(buf + 44, crc32c(seed, buf, hlen));
    return hlen;
}

int rec_parse_header(const void *buf, size_t avail, rec_view_t *v)
{
    return rec_parse_header_seeded(buf, avail, 0, v);
}

int rec_parse_header_seeded(const void *buf, size_t avail, uint32_t seed, rec_view_t *v)
{
    const uint8_t *b = buf;
    uint32_t stored, crc;

    v->hdr_len = 0;
    if (avail < REC_FIXED) return ERR_AGAIN;
    uint16_t version = le_get16(b + 4);
    if (le_get32(b) != REC_MAGIC || (version != 1 && version != REC_VERSION) || b[7] != 0 ||
        (b[6] != REC_DATA && b[6] != REC_TOMBSTONE))
        return ERR_CORRUPT;
    v->type = b[6];
    v->hdr_len = le_get32(b + 8);
    v->id.shard = le_get32(b + 12);
    v->seq = le_get64(b + 16);
    v->payload_len = le_get64(b + 24);
    v->id.bucket_len = le_get16(b + 32);
    v->id.key_len = le_get16(b + 34);
    v->id.version_len = le_get16(b + 36);
    v->meta_len = le_get32(b + 40);
    v->hdr_crc = le_get32(b + 44);
    if (le_get16(b + 38) != 0 || v->meta_len > REC_MAX_META || v->id.bucket_len == 0 ||
        v->id.bucket_len > REC_MAX_BUCKET || v->id.key_len > REC_MAX_KEY ||
        v->id.version_len > REC_MAX_VERSION || v->payload_len > REC_MAX_PAYLOAD ||
        (v->type == REC_TOMBSTONE && v->payload_len != 0))
        goto corrupt;
    v->n_chunks = chunks_of(v->payload_len);
    uint64_t fields = (uint64_t)REC_FIXED + v->id.bucket_len + v->id.key_len + v->id.version_len +
                      v->meta_len + 4ull * v->n_chunks;
    /* Version 1 has no padding; version 2 less than REC_ALIGN of it. */
    if (v->hdr_len < fields || v->hdr_len - fields >= (version == 1 ? 1 : REC_ALIGN)) goto corrupt;
    if (avail < v->hdr_len) return ERR_AGAIN;
    /* crc with the crc field taken as zero. */
    static const uint8_t zero4[4];
    crc = crc32c(seed, b, 44);
    crc = crc32c(crc, zero4, 4);
    crc = crc32c(crc, b + REC_FIXED, v->hdr_len - REC_FIXED);
    stored = v->hdr_crc;
    if (crc != stored) goto corrupt;
    for (uint64_t i = fields; i < v->hdr_len; i++)
        if (b[i]) goto corrupt;
    v->id.bucket = (const char *)b + REC_FIXED;
    v->id.key = v->id.bucket + v->id.bucket_len;
    v->id.version = v->id.key + v->id.key_len;
    v->meta = (const uint8_t *)v->id.version + v->id.version_len;
    v->chunk_crcs = v->meta + v->meta_len;
    return 0;
corrupt:
    v->hdr_len = 0;
    return ERR_CORRUPT;
}

uint32_t rec_chunk_crc(const rec_view_t *v, uint32_t i)
{
    return le_get32(v->chunk_crcs + 4 * (size_t)i);
}

int rec_verify_chunks(const rec_view_t *v, const uint8_t *buf, uint32_t first, uint32_t last)
{
    for (uint32_t c = first; c <= last && c < v->n_chunks; c++) {
        uint64_t off = (uint64_t)c * REC_CHUNK;
        uint64_t n = v->payload_len - off < REC_CHUNK ? v->payload_len - off : REC_CHUNK;
        if (crc32c(0, buf + (off - (uint64_t)first * REC_CHUNK), n) != rec_chunk_crc(v, c))
            return ERR_CORRUPT;
    }
    return 0;
}

int rec_id_equal(const rec_id_t *a, const rec_id_t *b)
{
    return a->shard == b->shard && a->bucket_len == b->bucket_len && a->key_len == b->key_len &&
           a->version_len == b->version_len && memcmp(a->bucket, b->bucket, a->bucket_len) == 0 &&
           (a->key_len == 0 || memcmp(a->key, b->key, a->key_len) == 0) &&
           (a->version_len == 0 || memcmp(a->version, b->version, a->version_len) == 0);
}

size_t rec_repad(const rec_view_t *v, const uint8_t *hdr, uint8_t *out, size_t pad)
{
    size_t fields = REC_FIXED + v->id.bucket_len + v->id.key_len + v->id.version_len + v->meta_len +
                    4 * (size_t)v->n_chunks;
    size_t hlen = fields + pad;
    static const uint8_t zero4[4];
    memmove(out, hdr, fields);
    memset(out + fields, 0, pad);
    le_put16(out + 4, REC_VERSION);
    le_put32(out + 8, (uint32_t)hlen);
    le_put32(out + 44,
             crc32c(crc32c(crc32c(0, out, 44), zero4, 4), out + REC_FIXED, hlen - REC_FIXED));
    return hlen;
}
