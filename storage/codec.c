#include "storage/codec.h"

#include "common/crc.h"
#include "common/err.h"
#include "common/le.h"

#include <string.h>

static int bad(const char **why, const char *reason)
{
    if (why) *why = reason;
    return ERR_CORRUPT;
}

static int pow2_iu(uint64_t v)
{
    return v >= 4096 && v <= (1u << 20) && (v & (v - 1)) == 0;
}

/* ---- segment superblock ---- */

void codec_sb_encode(uint8_t *b, const seg_sb_t *sb)
{
    memset(b, 0, SEG_SB_LEN);
    le_put32(b, SEG_MAGIC);
    le_put16(b + 4, sb->first_seq ? SEG_VERSION_V2 : SEG_VERSION);
    b[6] = sb->kind;
    le_put32(b + 8, sb->id);
    le_put32(b + 12, sb->iu);
    le_put64(b + 16, sb->seg_size);
    if (sb->first_seq) {
        le_put64(b + 24, sb->first_seq);
        le_put32(b + 32, sb->seed);
        le_put32(b + 36, crc32c(0, b, 36));
    } else {
        le_put32(b + 24, crc32c(0, b, 24));
    }
}

int codec_sb_decode(const uint8_t *b, size_t len, seg_sb_t *sb, const char **why)
{
    if (len != SEG_SB_LEN) return bad(why, "length");
    if (le_get32(b) != SEG_MAGIC) return bad(why, "magic");
    uint16_t version = le_get16(b + 4);
    size_t crc_at = version == SEG_VERSION_V2 ? 36 : 24;
    if (le_get32(b + crc_at) != crc32c(0, b, crc_at)) return bad(why, "crc");
    if (version != SEG_VERSION && version != SEG_VERSION_V2) return bad(why, "version");
    sb->first_seq = version == SEG_VERSION_V2 ? le_get64(b + 24) : 0;
    sb->seed = version == SEG_VERSION_V2 ? le_get32(b + 32) : 0;
    if (version == SEG_VERSION_V2 && !sb->first_seq) return bad(why, "first_seq");
    if (version == SEG_VERSION_V2 && !sb->seed) return bad(why, "seed");
    for (size_t i = crc_at + 4; i < SEG_SB_LEN; i++) /* the rest of the IU is zero */
        if (b[i]) return bad(why, "trailing");
    if (b[6] != SEG_USER && b[6] != SEG_GC) return bad(why, "kind");
    if (b[7] != 0) return bad(why, "reserved");
    sb->kind = b[6];
    sb->id = le_get32(b + 8);
    sb->iu = le_get32(b + 12);
    sb->seg_size = le_get64(b + 16);
    if (!pow2_iu(sb->iu)) return bad(why, "iu");
    if (sb->seg_size % sb->iu || sb->seg_size < 4ull * sb->iu) return bad(why, "segment_size");
    return 0;
}

/* ---- index keys ---- */

size_t codec_key_encode(uint8_t *buf, const rec_id_t *id)
{
    uint8_t *p = buf;
    *p++ = 'o';
    memcpy(p, id->bucket, id->bucket_len);
    p += id->bucket_len;
    *p++ = 0;
    if (id->key_len) memcpy(p, id->key, id->key_len);
    p += id->key_len;
    *p++ = 0;
    if (id->version_len) memcpy(p, id->version, id->version_len);
    p += id->version_len;
    *p++ = 0;
    *p++ = (uint8_t)(id->shard >> 24);
    *p++ = (uint8_t)(id->shard >> 16);
    *p++ = (uint8_t)(id->shard >> 8);
    *p++ = (uint8_t)id->shard;
    return (size_t)(p - buf);
}

int codec_key_decode(const void *buf, size_t len, rec_id_t *id)
{
    const char *b = buf, *p = b + 1, *end = b + len, *z;
    size_t n;
    if (len < 8 || len > KEY_MAX || b[0] != 'o') return ERR_CORRUPT;
    if (!(z = memchr(p, 0, (size_t)(end - p))) || (n = (size_t)(z - p)) == 0 || n > REC_MAX_BUCKET)
        return ERR_CORRUPT;
    id->bucket = p;
    id->bucket_len = (uint16_t)n;
    p = z + 1;
    if (!(z = memchr(p, 0, (size_t)(end - p))) || (n = (size_t)(z - p)) > REC_MAX_KEY)
        return ERR_CORRUPT;
    id->key = p;
    id->key_len = (uint16_t)n;
    p = z + 1;
    if (!(z = memchr(p, 0, (size_t)(end - p))) || (n = (size_t)(z - p)) > REC_MAX_VERSION ||
        end - z != 5)
        return ERR_CORRUPT;
    id->version = p;
    id->version_len = (uint16_t)n;
    const uint8_t *s = (const uint8_t *)z + 1;
    id->shard = (uint32_t)s[0] << 24 | (uint32_t)s[1] << 16 | (uint32_t)s[2] << 8 | s[3];
    return 0;
}

void codec_seg_key(uint8_t k[SEG_KEY_LEN], uint32_t id)
{
    k[0] = 's';
    k[1] = (uint8_t)(id >> 24);
    k[2] = (uint8_t)(id >> 16);
    k[3] = (uint8_t)(id >> 8);
    k[4] = (uint8_t)id;
}

/* ---- entries ---- */

size_t codec_ent_encode(uint8_t *b, const ent_t *e)
{
    b[0] = ENT_VERSION;
    b[1] = e->type;
    le_put32(b + 2, e->seg);
    le_put64(b + 6, e->off);
    le_put32(b + 14, e->rec_len);
    le_put32(b + 18, e->hdr_len);
    le_put64(b + 22, e->payload_len);
    le_put64(b + 30, e->seq);
    le_put32(b + 38, e->hdr_crc);
    if (e->meta_len) memcpy(b + ENT_FIXED, e->meta, e->meta_len);
    return ENT_FIXED + e->meta_len;
}

int codec_ent_decode(const void *buf, size_t len, ent_t *e, const char **why)
{
    const uint8_t *b = buf;
    if (len < ENT_FIXED) return bad(why, "length");
    if (b[0] != ENT_VERSION) return bad(why, "version");
    if (b[1] != REC_DATA && b[1] != REC_TOMBSTONE) return bad(why, "type");
    if (len - ENT_FIXED > REC_MAX_META) return bad(why, "meta_len");
    e->type = b[1];
    e->seg = le_get32(b + 2);
    e->off = le_get64(b + 6);
    e->rec_len = le_get32(b + 14);
    e->hdr_len = le_get32(b + 18);
    e->payload_len = le_get64(b + 22);
    e->seq = le_get64(b + 30);
    e->hdr_crc = le_get32(b + 38);
    e->meta = b + ENT_FIXED;
    e->meta_len = (uint32_t)(len - ENT_FIXED);
    if (e->payload_len > REC_MAX_PAYLOAD) return bad(why, "payload_len");
    if (e->hdr_len < REC_FIXED + (uint64_t)e->meta_len) return bad(why, "hdr_len");
    if (e->rec_len != (uint64_t)e->hdr_len + e->payload_len) return bad(why, "rec_len");
    return 0;
}

/* ---- segment accounting ---- */

void codec_segmeta_encode(uint8_t *b, const segmeta_t *m)
{
    b[0] = SEGMETA_VERSION;
    b[1] = m->kind;
    b[2] = m->open;
    le_put64(b + 3, m->live);
    le_put64(b + 11, m->tail);
    le_put64(b + 19, m->min_seq);
    le_put64(b + 27, m->max_seq);
    le_put64(b + 35, m->sealed_ns);
}

int codec_segmeta_decode(const void *buf, size_t len, segmeta_t *m, const char **why)
{
    const uint8_t *b = buf;
    if (len != SEGMETA_LEN) return bad(why, "length");
    if (b[0] != SEGMETA_VERSION) return bad(why, "version");
    if (b[1] != SEG_USER && b[1] != SEG_GC) return bad(why, "kind");
    if (b[2] > 1) return bad(why, "open");
    m->kind = b[1];
    m->open = b[2];
    m->live = le_get64(b + 3);
    m->tail = le_get64(b + 11);
    m->min_seq = le_get64(b + 19);
    m->max_seq = le_get64(b + 27);
    m->sealed_ns = le_get64(b + 35);
    if (m->min_seq > m->max_seq && !(m->min_seq == UINT64_MAX && m->max_seq == 0))
        return bad(why, "seq_range");
    return 0;
}

/* ---- drive counters ---- */

void codec_drvmeta_encode(uint8_t *b, const drvmeta_t *m)
{
    b[0] = DRVMETA_VERSION;
    le_put64(b + 1, m->next_seq);
    le_put32(b + 9, m->next_seg_id);
    le_put64(b + 13, m->lifetime_host);
}

int codec_drvmeta_decode(const void *buf, size_t len, drvmeta_t *m, const char **why)
{
    const uint8_t *b = buf;
    if (len != DRVMETA_LEN) return bad(why, "length");
    if (b[0] != DRVMETA_VERSION) return bad(why, "version");
    m->next_seq = le_get64(b + 1);
    m->next_seg_id = le_get32(b + 9);
    m->lifetime_host = le_get64(b + 13);
    if (m->next_seq == 0) return bad(why, "next_seq");
    return 0;
}

int codec_drvmeta_decode_v0(const void *buf, size_t len, drvmeta_t *m)
{
    const uint8_t *b = buf;
    if (len != DRVMETA_LEN_V0) return ERR_CORRUPT;
    m->next_seq = le_get64(b);
    m->next_seg_id = le_get32(b + 8);
    m->lifetime_host = le_get64(b + 12);
    return 0;
}
