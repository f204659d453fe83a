/*
 * obj_meta.c: the head metadata codec (room of the object layer; map in
 * obj_int.h). Its metadata blob, below, is the object's whole description,
 * on every store of the set; a head record carries no payload, except the
 * object's own bytes on the stores T_INLINE names (a small object inline).
 *
 * The blob, version 1 (or 3: an object stored inline, which a reader of
 * version 1 must not take for one with blocks; 2: the same as written by
 * the first release with inline objects, still read):
 *   u8   version   OBJ_META_VERSION, or OBJ_META_COMPACT (OBJ_META_INLINE)
 *                  with T_INLINE; any other value is refused
 *   then fields, each: u8 tag, u16 len (little endian), len bytes of value
 *   and last, the end field: tag T_END, len 0, ending the blob exactly
 * An explicit end: a blob cut short at a field boundary is not taken for
 * whole.
 *
 * Known fields appear in the order of the enum's comments (ranks 1..10),
 * each at most once, and form one of four sets:
 *   deleted:        MTIME UPLOAD DELETED [MARKER]
 *   object:         MTIME UPLOAD LAYOUT    ETAG CTYPE UMETA
 *   inline (v3):    MTIME UPLOAD LAYOUT INLINE [SPARSE] ETAG CTYPE UMETA
 *   multipart:      MTIME UPLOAD MULTIPART ETAG CTYPE UMETA
 * each followed by [VID] [STAMP] (versioning; absent: the null version,
 * stamp = mtime), and a version with data by [UMSTAMP] (absent: its
 * metadata was decided when the head was written, at its stamp). Optional
 * fields are written only when they say something (a VID is never empty,
 * a STAMP never equals the MTIME, an UMSTAMP is never 0 nor the stamp).
 * That is exactly what obj_meta_encode writes, so a blob made only of
 * known fields decodes and re-encodes to the same bytes. Any other tag is
 * a field of a later writer: it is skipped wherever it stands before the
 * end (a change older readers must not ignore takes a new version). A blob
 * with such fields re-encodes without them, to the same obj_info_t.
 *
 * Version 3 keeps the upload id and the ETag in binary where they are 32
 * lowercase hex digits (UPLOAD16, ETAG16: 16 bytes instead of 32, in every
 * head and index entry of a small object, where they were a quarter of the
 * bytes); other values keep the plain fields, and a plain field holding 32
 * lowercase hex digits is refused there (one object, one encoding). A
 * version 2 blob (plain fields only) decodes as before and re-encodes as
 * version 3.
 */
#include "server/obj_int.h"

#include "common/err.h"
#include "common/le.h"

#include <stddef.h>
#include <string.h>

#define OBJ_META_VERSION 1
#define OBJ_META_INLINE  2 /* inline, plain ids: read, never written */
#define OBJ_META_COMPACT 3 /* inline, ids in binary where they are hex */

enum {
    /* rank 3, len ERS_LAYOUT_SIZE: ers_layout_encode of the object's layout,
     * canonical (what ers_layout_encode writes for the layout it decodes to).
     * The object's size is the layout's. */
    T_LAYOUT = 1,
    /* rank 2, len 0..32: the upload id (the version the blocks are stored
     * under, or the multipart upload whose parts make the object); no NUL. */
    T_UPLOAD = 2,
    /* rank 6, len 0..79: the ETag, no quotes; no NUL. */
    T_ETAG = 3,
    /* rank 7, len 0..255: the content type; no NUL. */
    T_CTYPE = 4,
    /* rank 1, len 8: u64 LE, mtime in wall-clock ns since the epoch. */
    T_MTIME = 5,
    /* rank 8, len 0..16384 (obj_info_t.umeta): metadata pairs "name\0value\0": empty, or
     * ending in NUL with an even number of NULs. */
    T_UMETA = 6,
    /* rank 3, len 0: a delete marker. */
    T_DELETED = 7,
    /* rank 3, len 12: u64 LE size, u32 LE number of parts (1..10000): the
     * object is the parts of upload T_UPLOAD, listed in its manifest. */
    T_MULTIPART = 8,
    /* rank 6, len 0, only with T_DELETED: an S3 delete marker (a version). */
    T_MARKER = 9,
    /* rank 9, len OBJ_VID_LEN: the version id, lowercase hex. */
    T_VID = 10,
    /* rank 10, len 8: u64 LE, non-zero, when the head was written, if not at mtime. */
    T_STAMP = 11,
    /* rank 4, len 8, version 2 only, after T_LAYOUT: the object's bytes are the
     * payload of the heads on the stores of u32 LE mask (non-zero, below 1 << n),
     * whose crc32c is u32 LE crc; there are no blocks. */
    T_INLINE = 12,
    /* rank 5, len 0, version 2 only, after T_INLINE: the version has heads only on
     * the stores of T_INLINE's mask (obj_head_write.c, sparse heads). A hint for writers
     * (where a rewrite goes); a reader that skips it finds the same object. */
    T_SPARSE = 13,
    /* rank 2, len 16, version 3 only: the upload id, when it is 32 lowercase hex
     * digits, as the 16 bytes they spell. */
    T_UPLOAD16 = 14,
    /* rank 6, len 16, version 3 only: the ETag, when it is 32 lowercase hex digits,
     * as the 16 bytes they spell. */
    T_ETAG16 = 15,
    /* rank 11, len 8, not with T_DELETED: u64 LE, when the head's metadata (T_UMETA) was
     * decided, if not at the head's stamp: a copy written later (a version promoted to
     * current, a current version kept as noncurrent) keeps its source's time, so that a
     * store can tell a stale copy from a newer rewrite of the same version (shard.c,
     * SHARD_IF_KEPT). Any version: a reader that skips it (an older build) finds the same
     * object, and its writes judge copies by their stamps alone, as before. */
    T_UMSTAMP = 16,
    /* len 0: the end. */
    T_END = 255
};

static const uint8_t rank_of[T_UMSTAMP + 1] = {
    [T_MTIME] = 1,     [T_UPLOAD] = 2,  [T_UPLOAD16] = 2, [T_LAYOUT] = 3,
    [T_MULTIPART] = 3, [T_DELETED] = 3, [T_INLINE] = 4,   [T_SPARSE] = 5,
    [T_ETAG] = 6,      [T_ETAG16] = 6,  [T_MARKER] = 6,   [T_CTYPE] = 7,
    [T_UMETA] = 8,     [T_VID] = 9,     [T_STAMP] = 10,   [T_UMSTAMP] = 11,
};

#define F(t)      (1u << (t))
#define BASE      (F(T_MTIME) | F(T_UPLOAD))
#define LIVE_TAIL (F(T_ETAG) | F(T_CTYPE) | F(T_UMETA))

int obj__meta_tag_known(unsigned tag)
{
    return tag == T_END || (tag < sizeof(rank_of) && rank_of[tag] != 0);
}

/* Well-formed user metadata: whole "name\0value\0" pairs. */
static int umeta_ok(const char *v, size_t n)
{
    size_t nul = 0;
    if (n > sizeof(((obj_info_t *)0)->umeta) || (n && v[n - 1] != 0)) return 0;
    for (const char *p = v; (p = memchr(p, 0, n - (size_t)(p - v))) != NULL; p++)
        nul++;
    return nul % 2 == 0;
}

static size_t put_tlv(uint8_t *b, size_t pos, size_t cap, uint8_t tag, const void *v, size_t n)
{
    if (pos == SIZE_MAX || n > 65535 || pos + 3 + n > cap) return SIZE_MAX;
    b[pos] = tag;
    le_put16(b + pos + 1, (uint16_t)n);
    if (n) memcpy(b + pos + 3, v, n);
    return pos + 3 + n;
}

/* Whether s (n bytes) is 32 lowercase hex digits: 16 bytes in binary. */
static int hex32(const char *s, size_t n)
{
    if (n != 32) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return 1;
}

static int hexval(char c)
{
    return c <= '9' ? c - '0' : c - 'a' + 10;
}

/* A string field: in binary (tag16) when compact and it is hex32, else plain (tag). */
static size_t put_id(uint8_t *b, size_t pos, size_t cap, int compact, uint8_t tag, uint8_t tag16,
                     const char *v, size_t n)
{
    uint8_t bin[16];
    if (!compact || !hex32(v, n)) return put_tlv(b, pos, cap, tag, v, n);
    for (int i = 0; i < 16; i++)
        bin[i] = (uint8_t)(hexval(v[2 * i]) << 4 | hexval(v[2 * i + 1]));
    return put_tlv(b, pos, cap, tag16, bin, sizeof(bin));
}

static int get_id(char *dst, size_t cap, const uint8_t *v, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    if (n != 16 || cap < 33) return ERR_CORRUPT;
    for (size_t i = 0; i < 16; i++) {
        dst[2 * i] = digits[v[i] >> 4];
        dst[2 * i + 1] = digits[v[i] & 15];
    }
    dst[32] = 0;
    return 0;
}

/* The length of a string field of cap bytes, SIZE_MAX when it is not terminated. */
static size_t str_len(const char *s, size_t cap)
{
    size_t n = strnlen(s, cap);
    return n < cap ? n : SIZE_MAX;
}

size_t obj_meta_encode(const obj_info_t *in, uint8_t *b, size_t cap)
{
    uint8_t lay[ERS_LAYOUT_SIZE], mt[8], mp[12], stamp[8], inl[8], ums[8];
    size_t up = str_len(in->upload_id, sizeof(in->upload_id));
    size_t et = str_len(in->etag, sizeof(in->etag));
    size_t ct = str_len(in->content_type, sizeof(in->content_type));
    size_t pos = 1;
    /* Nothing is written that obj_meta_decode would refuse. */
    if (cap < 1 || up == SIZE_MAX ||
        (in->vid[0] && (strlen(in->vid) != OBJ_VID_LEN || !obj_vid_valid(in->vid))) ||
        (in->marker && !in->deleted) || (in->inl && (in->deleted || in->multipart)) ||
        (in->sparse && !in->inl))
        return 0;
    if (!in->deleted && (et == SIZE_MAX || ct == SIZE_MAX || !umeta_ok(in->umeta, in->umeta_len) ||
                         (in->multipart ? in->nparts < 1 || in->nparts > OBJ_MPU_MAX_PARTS
                                        : ers_layout_check(&in->layout) != 0)))
        return 0;
    int compact = in->inl != 0;
    b[0] = compact ? OBJ_META_COMPACT : OBJ_META_VERSION;
    le_put64(mt, in->mtime_ns);
    pos = put_tlv(b, pos, cap, T_MTIME, mt, 8);
    pos = put_id(b, pos, cap, compact, T_UPLOAD, T_UPLOAD16, in->upload_id, up);
    if (in->deleted) {
        pos = put_tlv(b, pos, cap, T_DELETED, NULL, 0);
        if (in->marker) pos = put_tlv(b, pos, cap, T_MARKER, NULL, 0);
    } else {
        if (in->multipart) {
            le_put64(mp, in->size);
            le_put32(mp + 8, (uint32_t)in->nparts);
            pos = put_tlv(b, pos, cap, T_MULTIPART, mp, sizeof(mp));
        } else {
            ers_layout_encode(&in->layout, lay);
            pos = put_tlv(b, pos, cap, T_LAYOUT, lay, sizeof(lay));
            if (in->inl) {
                le_put32(inl, in->inl);
                le_put32(inl + 4, in->inl_crc);
                pos = put_tlv(b, pos, cap, T_INLINE, inl, sizeof(inl));
                if (in->sparse) pos = put_tlv(b, pos, cap, T_SPARSE, NULL, 0);
            }
        }
        pos = put_id(b, pos, cap, compact, T_ETAG, T_ETAG16, in->etag, et);
        pos = put_tlv(b, pos, cap, T_CTYPE, in->content_type, ct);
        pos = put_tlv(b, pos, cap, T_UMETA, in->umeta, in->umeta_len);
    }
    if (in->vid[0]) pos = put_tlv(b, pos, cap, T_VID, in->vid, OBJ_VID_LEN);
    if (in->stamp_ns && in->stamp_ns != in->mtime_ns) {
        le_put64(stamp, in->stamp_ns);
        pos = put_tlv(b, pos, cap, T_STAMP, stamp, 8);
    }
    if (!in->deleted && in->umeta_ns &&
        in->umeta_ns != (in->stamp_ns ? in->stamp_ns : in->mtime_ns)) {
        le_put64(ums, in->umeta_ns);
        pos = put_tlv(b, pos, cap, T_UMSTAMP, ums, 8);
    }
    pos = put_tlv(b, pos, cap, T_END, NULL, 0);
    return pos == SIZE_MAX ? 0 : pos;
}

static int get_str(char *dst, size_t cap, const uint8_t *v, size_t n)
{
    if (n >= cap || memchr(v, 0, n)) return ERR_CORRUPT;
    memcpy(dst, v, n);
    dst[n] = 0;
    return 0;
}

/* One known field's value into o. */
static int get_field(unsigned tag, const uint8_t *v, size_t n, obj_info_t *o)
{
    uint8_t lay[ERS_LAYOUT_SIZE];
    switch (tag) {
    case T_LAYOUT:
        if (n != ERS_LAYOUT_SIZE || ers_layout_decode(v, n, &o->layout) != 0) return ERR_CORRUPT;
        /* Reserved bytes and all: one layout has one encoding. */
        ers_layout_encode(&o->layout, lay);
        if (memcmp(lay, v, n) != 0) return ERR_CORRUPT;
        o->size = o->layout.size;
        return 0;
    case T_UPLOAD:
        return get_str(o->upload_id, sizeof(o->upload_id), v, n);
    case T_ETAG:
        return get_str(o->etag, sizeof(o->etag), v, n);
    case T_UPLOAD16:
        return get_id(o->upload_id, sizeof(o->upload_id), v, n);
    case T_ETAG16:
        return get_id(o->etag, sizeof(o->etag), v, n);
    case T_CTYPE:
        return get_str(o->content_type, sizeof(o->content_type), v, n);
    case T_MTIME:
        if (n != 8) return ERR_CORRUPT;
        o->mtime_ns = le_get64(v);
        return 0;
    case T_UMETA:
        if (!umeta_ok((const char *)v, n)) return ERR_CORRUPT;
        memcpy(o->umeta, v, n);
        o->umeta_len = n;
        return 0;
    case T_DELETED:
        o->deleted = 1;
        return n == 0 ? 0 : ERR_CORRUPT;
    case T_MARKER:
        o->marker = 1;
        return n == 0 ? 0 : ERR_CORRUPT;
    case T_VID:
        if (n != OBJ_VID_LEN || get_str(o->vid, sizeof(o->vid), v, n) || !obj_vid_valid(o->vid))
            return ERR_CORRUPT;
        return 0;
    case T_STAMP:
        /* Never 0: obj_meta_encode writes no stamp for 0 (one head, one encoding). */
        if (n != 8 || le_get64(v) == 0) return ERR_CORRUPT;
        o->stamp_ns = le_get64(v);
        return 0;
    case T_UMSTAMP:
        if (n != 8 || le_get64(v) == 0) return ERR_CORRUPT;
        o->umeta_ns = le_get64(v);
        return 0;
    case T_INLINE:
        if (n != 8 || le_get32(v) == 0) return ERR_CORRUPT;
        o->inl = le_get32(v);
        o->inl_crc = le_get32(v + 4);
        return 0;
    case T_SPARSE:
        o->sparse = 1;
        return n == 0 ? 0 : ERR_CORRUPT;
    case T_MULTIPART:
        if (n != 12 || le_get32(v + 8) < 1 || le_get32(v + 8) > OBJ_MPU_MAX_PARTS)
            return ERR_CORRUPT;
        o->multipart = 1;
        o->size = le_get64(v);
        o->nparts = (int)le_get32(v + 8);
        return 0;
    }
    return ERR_CORRUPT;
}

int obj_meta_decode(const uint8_t *b, size_t len, obj_info_t *o)
{
    size_t pos = 1;
    unsigned seen = 0, last = 0;
    obj_info_clear(o);
    if (len < 1 ||
        (b[0] != OBJ_META_VERSION && b[0] != OBJ_META_INLINE && b[0] != OBJ_META_COMPACT))
        return ERR_CORRUPT;
    while (len - pos >= 3) {
        unsigned tag = b[pos];
        size_t n = le_get16(b + pos + 1);
        const uint8_t *v = b + pos + 3;
        if (n > len - pos - 3) return ERR_CORRUPT;
        pos += 3 + n;
        if (tag == T_END) {
            /* A binary id stands for the plain one; only version 3 has them. */
            unsigned bin = seen & (F(T_UPLOAD16) | F(T_ETAG16));
            if (bin && b[0] != OBJ_META_COMPACT) return ERR_CORRUPT;
            if (bin & F(T_UPLOAD16)) seen |= F(T_UPLOAD);
            if (bin & F(T_ETAG16)) seen |= F(T_ETAG);
            unsigned core = seen & ~(F(T_VID) | F(T_STAMP) | F(T_SPARSE) | F(T_UMSTAMP) | bin);
            if ((seen & F(T_UMSTAMP)) && (seen & F(T_DELETED))) return ERR_CORRUPT;
            int whole = core == (BASE | F(T_DELETED)) ||
                        core == (BASE | F(T_DELETED) | F(T_MARKER)) ||
                        core == (BASE | F(T_LAYOUT) | LIVE_TAIL) ||
                        core == (BASE | F(T_MULTIPART) | LIVE_TAIL);
            /* Version 2 is exactly the inline object; version 1 never is. */
            if (b[0] == OBJ_META_INLINE || b[0] == OBJ_META_COMPACT)
                whole = core == (BASE | F(T_LAYOUT) | F(T_INLINE) | LIVE_TAIL);
            else if (seen & (F(T_INLINE) | F(T_SPARSE)))
                whole = 0;
            /* A stamp equal to the mtime is never written: one head, one encoding. */
            if (seen & F(T_STAMP)) {
                if (o->stamp_ns == o->mtime_ns) return ERR_CORRUPT;
            } else {
                o->stamp_ns = o->mtime_ns;
            }
            /* Nor a metadata time equal to the stamp. */
            if ((seen & F(T_UMSTAMP)) && o->umeta_ns == o->stamp_ns) return ERR_CORRUPT;
            return whole && n == 0 && pos == len ? 0 : ERR_CORRUPT;
        }
        if (!obj__meta_tag_known(tag)) continue; /* a later writer's field */
        /* In order, once each, one of LAYOUT / MULTIPART / DELETED. */
        if (rank_of[tag] <= last) return ERR_CORRUPT;
        last = rank_of[tag];
        seen |= F(tag);
        if (get_field(tag, v, n, o) != 0) return ERR_CORRUPT;
        /* Version 3 writes hex ids in binary: a plain one is another encoding of them. */
        if (b[0] == OBJ_META_COMPACT && (tag == T_UPLOAD || tag == T_ETAG) &&
            hex32((const char *)v, n))
            return ERR_CORRUPT;
    }
    return ERR_CORRUPT; /* no end marker */
}

void obj_info_clear(obj_info_t *o)
{
    memset(o, 0, offsetof(obj_info_t, umeta));
    memset(&o->umeta_len, 0, sizeof(*o) - offsetof(obj_info_t, umeta_len));
}

void obj_info_copy(obj_info_t *dst, const obj_info_t *src)
{
    if (dst == src) return;
    memcpy(dst, src, offsetof(obj_info_t, umeta));
    memcpy(dst->umeta, src->umeta, src->umeta_len);
    memcpy(&dst->umeta_len, &src->umeta_len, sizeof(*dst) - offsetof(obj_info_t, umeta_len));
}

int obj_umeta_next(const obj_info_t *info, size_t *pos, const char **name, const char **value)
{
    size_t p = *pos;
    if (p >= info->umeta_len) return 0;
    const char *n = info->umeta + p;
    size_t nl = strnlen(n, info->umeta_len - p);
    if (p + nl + 1 >= info->umeta_len) return 0;
    const char *v = n + nl + 1;
    size_t vl = strnlen(v, info->umeta_len - p - nl - 1);
    *pos = p + nl + 1 + vl + 1;
    *name = n;
    *value = v;
    return 1;
}

const char *obj_umeta_get(const obj_info_t *info, const char *name)
{
    const char *n, *v;
    for (size_t p = 0; obj_umeta_next(info, &p, &n, &v);)
        if (strcmp(n, name) == 0) return v;
    return "";
}
