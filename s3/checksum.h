/*
 * checksum: the additional checksums of S3 (x-amz-checksum-ALGO) computed
 * over a streamed body: CRC32, CRC32C, CRC64NVME, SHA1, SHA256, and the ones
 * S3 added later: SHA512, MD5, XXHASH64, XXHASH3 (64-bit) and XXHASH128.
 * Values are base64 of the big-endian digest (xxHash's canonical form), as S3
 * sends and returns them. No I/O.
 */
#ifndef WL_CHECKSUM_H
#define WL_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

enum {
    CKS_NONE,
    CKS_CRC32,
    CKS_CRC32C,
    CKS_CRC64NVME,
    CKS_SHA1,
    CKS_SHA256,
    CKS_SHA512,
    CKS_MD5,
    CKS_XXHASH64,
    CKS_XXHASH3,
    CKS_XXHASH128,
    CKS_N /* one past the last: for (a = CKS_CRC32; a < CKS_N; a++) */
};
#define CKS_MAX_DIGEST 64 /* bytes (SHA512) */
#define CKS_MAX_B64    89 /* its base64, with the NUL */

typedef struct {
    int algo;
    uint64_t crc;
    void *md; /* EVP_MD_CTX for SHA and MD5 */
    void *xx; /* XXH64_state_t or XXH3_state_t */
} cks_t;

/* Algorithm from a name, any case ("crc32", "CRC32C", "x-amz-checksum-sha256"...); CKS_NONE if
 * unknown. */
int cks_algo(const char *name);
/* Lower-case name of an algorithm ("crc32"). */
const char *cks_name(int algo);

int cks_init(cks_t *c, int algo);
void cks_update(cks_t *c, const void *buf, size_t len);
/* Finish and write the base64 value (CKS_MAX_B64 bytes hold any); frees the state. */
void cks_final(cks_t *c, char *b64, size_t cap);
/* Release without a value (safe after cks_final or on a zeroed cks_t). */
void cks_free(cks_t *c);

/* Digest length in bytes of an algorithm (4 to 64; 0 for none). */
size_t cks_digest_len(int algo);
/* Base64 of n digest bytes into b64 (CKS_MAX_B64 bytes hold any). */
void cks_encode(const uint8_t *d, size_t n, char *b64, size_t cap);
/* A base64 value of algo's digest into d (cks_digest_len bytes): 0, or -1 when it is not one. */
int cks_decode(int algo, const char *b64, uint8_t *d);
/* Whether algo is a CRC (the checksums whose values combine: FULL_OBJECT multipart). */
int cks_is_crc(int algo);

/*
 * CRC combination: the CRC (CRC32, CRC32C or CRC64NVME, as final values) of
 * A followed by B from crc(A), crc(B) and B's length, without the bytes.
 * Init and xorout being all ones cancel out, so it is crc(A) carried through
 * len_b zero bytes of the bare register, xor crc(B); carrying is a product
 * by x^(8 len_b) modulo the polynomial (as zlib's crc32_combine).
 */
uint64_t cks_crc_combine(int algo, uint64_t crc_a, uint64_t crc_b, uint64_t len_b);
/* A CRC digest (big-endian bytes, as cks_final encodes it) as a number, and back. */
uint64_t cks_crc_from_digest(int algo, const uint8_t *d);
void cks_crc_to_digest(int algo, uint64_t crc, uint8_t *d);

#endif
