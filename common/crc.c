#include "common/crc.h"

#include <isa-l/crc.h>
#include <limits.h>

uint32_t crc32c(uint32_t crc, const void *buf, size_t len)
{
    const unsigned char *p = buf;
    uint32_t raw = ~crc;

    /* ISA-L takes an int length; feed huge buffers in pieces. */
    while (len > 0) {
        int n = len > (size_t)(INT_MAX & ~4095) ? (INT_MAX & ~4095) : (int)len;
        raw = crc32_iscsi((unsigned char *)p, n, raw);
        p += n;
        len -= (size_t)n;
    }
    return ~raw;
}
