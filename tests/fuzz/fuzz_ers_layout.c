/*
 * Fuzz the erasure metadata and stripe decoding: the input is an encoded
 * layout followed by shard bytes that the decoder reads as its blocks. Any
 * result is fine except a crash, a sanitizer report, or bytes returned that
 * do not match their checksum.
 */
#include "common/err.h"
#include "erasure/ers.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const uint8_t *p;
    size_t n;
    uint32_t lost;
} src_t;

static int source(void *arg, unsigned shard, uint64_t stripe, uint8_t *buf, uint32_t len,
                  ers_crc_t *crc)
{
    src_t *s = arg;
    if (s->lost & (1u << shard)) return ERR_NOT_FOUND;
    /* Blocks come from the input, cycling, with the 4 bytes after as crc. */
    for (uint32_t i = 0; i < len; i++)
        buf[i] = s->n ? s->p[(stripe * 31 + shard * 7 + i) % s->n] : 0;
    crc->stored = s->n >= 4 ? (uint32_t)s->p[0] | (uint32_t)s->p[1] << 8 | (uint32_t)s->p[2] << 16 |
                                  (uint32_t)s->p[3] << 24
                            : 0;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ers_layout_t l;
    int err;

    if (ers_layout_decode(data, size, &l) != 0) return 0;
    /* Keep the work bounded: at most 1 MiB of object and 64 KiB blocks. */
    if (l.size > (1u << 20) || l.block_size > (1u << 16)) return 0;
    ers_decoder_t *d = ers_decoder_new(&l, &err);
    if (!d) return 0;
    src_t s = {data + ERS_LAYOUT_SIZE, size - ERS_LAYOUT_SIZE, 0};
    if (s.n) s.lost = s.p[s.n - 1];
    uint64_t off = l.size ? (s.n > 1 ? s.p[1] : 0) % l.size : 0;
    uint8_t *out = malloc(l.size - off + 1);
    int rc = ers_decoder_read(d, off, l.size - off, out, source, &s);
    if (rc != 0 && rc != ERR_UNRECOVERABLE) abort();
    uint32_t rebuilt;
    if (ers_stripe_count(&l) > 0) rc = ers_verify_stripe(d, 0, source, &s, &rebuilt);
    if (rc != 0 && rc != ERR_UNRECOVERABLE) abort();
    for (unsigned sh = 0; sh < (unsigned)(l.k + l.m); sh++)
        (void)ers_shard_size(&l, sh);
    free(out);
    ers_decoder_free(d);
    return 0;
}
