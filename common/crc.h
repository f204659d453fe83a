/*
 * crc: CRC-32C (Castagnoli), the checksum of every record and block.
 *
 * Backed by ISA-L's crc32_iscsi, which picks the SSE4.2/PCLMUL kernel at run
 * time; buffers under 256 bytes take the plain SSE4.2 instruction (crc.c).
 * Standard semantics: crc32c(0, "123456789", 9) == 0xE3069283, and
 * crc32c(crc32c(0, a, n), b, m) equals the CRC of a followed by b.
 */
#ifndef WL_CRC_H
#define WL_CRC_H

#include <stddef.h>
#include <stdint.h>

uint32_t crc32c(uint32_t crc, const void *buf, size_t len);

/*
 * The CRC of a followed by b from crc_a = crc32c(0, a, ...), crc_b =
 * crc32c(0, b, len_b) and len_b alone, without touching the bytes: the
 * multiply by x^(8 len_b) modulo the polynomial that appending len_b bytes
 * amounts to. Cost is O(log len_b) carry-less multiplies (one for a power
 * of two), so a reader that checked fixed-size chunk crcs can derive the
 * crc of the whole without a second pass over the data.
 */
uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

#endif
