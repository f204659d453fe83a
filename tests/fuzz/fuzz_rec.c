/*
 * Fuzz the segment record parser: any bytes must parse to a header whose
 * fields stay inside the input, or be refused; never a crash or overread.
 */
#include "common/err.h"
#include "storage/rec.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rec_view_t v;
    /* Copy to an exact-size heap buffer so ASan sees any overread. */
    uint8_t *buf = malloc(size ? size : 1);
    memcpy(buf, data, size);
    int rc = rec_parse_header(buf, size, &v);
    if (rc == 0) {
        if (v.hdr_len > size || (const uint8_t *)v.id.bucket < buf ||
            v.chunk_crcs + 4ull * v.n_chunks > buf + size)
            abort();
        volatile uint32_t sink = 0;
        for (uint32_t i = 0; i < v.n_chunks; i++)
            sink ^= rec_chunk_crc(&v, i);
        uint64_t avail = size - v.hdr_len;
        if (v.payload_len <= avail && v.n_chunks)
            sink ^= (uint32_t)rec_verify_chunks(&v, buf + v.hdr_len, 0, v.n_chunks - 1);
        (void)sink;
        rec_id_t copy = v.id;
        if (!rec_id_equal(&copy, &v.id)) abort();
    } else if (rc != ERR_AGAIN && rc != ERR_CORRUPT) {
        abort();
    }
    free(buf);
    return 0;
}
