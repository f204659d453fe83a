/*
 * Fuzz the object head metadata codec (server/obj_meta.c). Whatever decodes:
 *   - made of known fields only, it re-encodes to the very same bytes;
 *   - with fields of a later writer (unknown tags, skipped), it re-encodes
 *     without them: decode(encode(decode(x))) equals decode(x) field by
 *     field, and the encoding is byte-stable on its own output.
 */
#include "common/err.h"
#include "server/obj_int.h"

#include <stdlib.h>
#include <string.h>

static int same(const obj_info_t *a, const obj_info_t *b)
{
    return a->size == b->size && a->mtime_ns == b->mtime_ns && strcmp(a->etag, b->etag) == 0 &&
           strcmp(a->content_type, b->content_type) == 0 &&
           strcmp(a->upload_id, b->upload_id) == 0 && a->layout.k == b->layout.k &&
           a->layout.m == b->layout.m && a->layout.block_size == b->layout.block_size &&
           a->layout.size == b->layout.size && a->umeta_len == b->umeta_len &&
           memcmp(a->umeta, b->umeta, a->umeta_len) == 0 && a->deleted == b->deleted &&
           a->multipart == b->multipart && a->nparts == b->nparts && a->marker == b->marker &&
           strcmp(a->vid, b->vid) == 0 && a->stamp_ns == b->stamp_ns && a->inl == b->inl &&
           a->inl_crc == b->inl_crc && a->sparse == b->sparse && a->umeta_ns == b->umeta_ns;
}

/* A blob that decoded: does it hold a field the codec does not know? */
static int has_unknown(const uint8_t *b, size_t len)
{
    for (size_t pos = 1; pos + 3 <= len; pos += 3 + (size_t)(b[pos + 1] | b[pos + 2] << 8))
        if (!obj__meta_tag_known(b[pos])) return 1;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    obj_info_t info, again;
    uint8_t *buf = malloc(size ? size : 1), out[HEAD_MAX], out2[HEAD_MAX];
    memcpy(buf, data, size); /* exactly size bytes: ASan sees any read past them */
    if (obj_meta_decode(buf, size, &info) == 0) {
        size_t n = obj_meta_encode(&info, out, sizeof(out));
        if (n == 0) abort();
        /* One encoding per object, except version 2 (inline, plain ids), which is read
         * and re-encoded as version 3. */
        if (!has_unknown(buf, size) && buf[0] != 2 && (n != size || memcmp(out, buf, n) != 0))
            abort();
        if (obj_meta_decode(out, n, &again) != 0 || !same(&info, &again)) abort();
        if (obj_meta_encode(&again, out2, sizeof(out2)) != n || memcmp(out, out2, n) != 0) abort();
    }
    free(buf);
    return 0;
}
