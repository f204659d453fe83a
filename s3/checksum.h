/*
 * checksum: the additional checksums of S3 (x-amz-checksum-ALGO) computed
 * over a streamed body: CRC32, CRC32C, CRC64NVME, SHA1, SHA256. Values are
 * base64 of the big-endian digest, as S3 sends and returns them. No I/O.
 */
#ifndef WL_CHECKSUM_H
#define WL_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

enum { CKS_NONE, CKS_CRC32, CKS_CRC32C, CKS_CRC64NVME, CKS_SHA1, CKS_SHA256 };

typedef struct {
    int algo;
    uint64_t crc;
    void *md; /* EVP_MD_CTX for SHA */
} cks_t;

/* Algorithm from a name, any case ("crc32", "CRC32C", "x-amz-checksum-sha256"...); CKS_NONE if
 * unknown. */
int cks_algo(const char *name);
/* Lower-case name of an algorithm ("crc32"). */
const char *cks_name(int algo);

int cks_init(cks_t *c, int algo);
void cks_update(cks_t *c, const void *buf, size_t len);
/* Finish and write the base64 value (at least 48 bytes); frees the state. */
void cks_final(cks_t *c, char *b64, size_t cap);
/* Release without a value (safe after cks_final or on a zeroed cks_t). */
void cks_free(cks_t *c);

#endif
