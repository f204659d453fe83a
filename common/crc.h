/*
 * crc: CRC-32C (Castagnoli), the checksum of every record and block.
 *
 * Backed by ISA-L's crc32_iscsi, which picks the SSE4.2/PCLMUL kernel at run
 * time. Standard semantics: crc32c(0, "123456789", 9) == 0xE3069283, and
 * crc32c(crc32c(0, a, n), b, m) equals the CRC of a followed by b.
 */
#ifndef WL_CRC_H
#define WL_CRC_H

#include <stddef.h>
#include <stdint.h>

uint32_t crc32c(uint32_t crc, const void *buf, size_t len);

#endif
