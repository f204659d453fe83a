/*
 * Fuzz the drive's on-disk format decoders (storage/codec.h): the first byte
 * picks the decoder, the rest is its input. Any bytes must be refused
 * (ERR_CORRUPT) or decode to values that encode back to exactly the same
 * bytes; never a crash or an overread.
 */
#include "common/err.h"
#include "storage/codec.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    size_t n = size - 1;
    /* Copy to an exact-size heap buffer so ASan sees any overread. */
    uint8_t *buf = malloc(n ? n : 1);
    memcpy(buf, data + 1, n);
    uint8_t *out = malloc(n + KEY_MAX + ENT_FIXED + SEG_SB_LEN);
    const char *why = NULL;
    int rc;

    switch (data[0] % 6) {
    case 0: {
        seg_sb_t sb;
        rc = codec_sb_decode(buf, n, &sb, &why);
        if (rc == 0) {
            codec_sb_encode(out, &sb);
            if (n != SEG_SB_LEN || memcmp(out, buf, n) != 0) abort();
        }
        break;
    }
    case 1: {
        rec_id_t id;
        rc = codec_key_decode(buf, n, &id);
        if (rc == 0 && (codec_key_encode(out, &id) != n || memcmp(out, buf, n) != 0)) abort();
        break;
    }
    case 2: {
        ent_t e;
        rc = codec_ent_decode(buf, n, &e, &why);
        if (rc == 0) {
            if (e.meta < buf || e.meta + e.meta_len > buf + n) abort();
            if (codec_ent_encode(out, &e) != n || memcmp(out, buf, n) != 0) abort();
        }
        break;
    }
    case 3: {
        segmeta_t m;
        rc = codec_segmeta_decode(buf, n, &m, &why);
        if (rc == 0) {
            codec_segmeta_encode(out, &m);
            if (n != SEGMETA_LEN || memcmp(out, buf, n) != 0) abort();
        }
        break;
    }
    case 4: {
        drvmeta_t m;
        rc = codec_drvmeta_decode(buf, n, &m, &why);
        if (rc == 0) {
            codec_drvmeta_encode(out, &m);
            if (n != DRVMETA_LEN || memcmp(out, buf, n) != 0) abort();
        }
        break;
    }
    default: {
        drvmeta_t m;
        rc = codec_drvmeta_decode_v0(buf, n, &m);
        if (rc == 0 && n != DRVMETA_LEN_V0) abort();
        break;
    }
    }
    if (rc != 0 && rc != ERR_CORRUPT) abort();
    if (rc == ERR_CORRUPT && data[0] % 6 != 1 && data[0] % 6 != 5 && !why) abort();
    free(out);
    free(buf);
    return 0;
}
