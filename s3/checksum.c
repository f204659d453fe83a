#include "s3/checksum.h"

#include "common/crc.h"
#include "common/err.h"

#include <isa-l/crc.h>
#include <xxhash.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static const char *const names[] = {"",         "crc32",   "crc32c",   "crc64nvme",
                                    "sha1",     "sha256",  "sha512",   "md5",
                                    "xxhash64", "xxhash3", "xxhash128"};

int cks_algo(const char *name)
{
    if (!name) return CKS_NONE;
    if (!strncasecmp(name, "x-amz-checksum-", 15)) name += 15;
    for (int i = 1; i < (int)(sizeof(names) / sizeof(names[0])); i++)
        if (!strcasecmp(name, names[i])) return i;
    return CKS_NONE;
}

const char *cks_name(int algo)
{
    return algo > 0 && algo < (int)(sizeof(names) / sizeof(names[0])) ? names[algo] : "";
}

/*
 * CRC-64/NVME (reflected, polynomial 0x9A6C9329AC4BC9B5, init and xorout
 * all ones). ISA-L as packaged (2.30) has the ECMA, ISO and Jones CRC-64s but
 * not this one. Sliced by 8: eight tables, eight bytes a step (346 MB/s a
 * byte at a time, which capped a PUT that asked for it; 1.1 GB/s sliced), for
 * short pieces and CPUs without PCLMULQDQ; longer ones fold (below).
 * Table t[j][i] is the CRC register of byte i followed by j zero bytes.
 */
static uint64_t crc64nvme_table[8][256];
static void crc64nvme_init_table(void)
{
    for (int i = 0; i < 256; i++) {
        uint64_t c = (uint64_t)i;
        for (int b = 0; b < 8; b++)
            c = c & 1 ? (c >> 1) ^ 0x9A6C9329AC4BC9B5ull : c >> 1;
        crc64nvme_table[0][i] = c;
    }
    for (int j = 1; j < 8; j++)
        for (int i = 0; i < 256; i++) {
            uint64_t c = crc64nvme_table[j - 1][i];
            crc64nvme_table[j][i] = (c >> 8) ^ crc64nvme_table[0][c & 0xff];
        }
}

static uint64_t crc64nvme_sliced(uint64_t crc, const uint8_t *p, size_t len)
{
    const uint64_t(*t)[256] = crc64nvme_table;
    for (; len >= 8; len -= 8, p += 8) {
        crc ^= (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24 |
               (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48 |
               (uint64_t)p[7] << 56;
        crc = t[7][crc & 0xff] ^ t[6][(crc >> 8) & 0xff] ^ t[5][(crc >> 16) & 0xff] ^
              t[4][(crc >> 24) & 0xff] ^ t[3][(crc >> 32) & 0xff] ^ t[2][(crc >> 40) & 0xff] ^
              t[1][(crc >> 48) & 0xff] ^ t[0][crc >> 56];
    }
    for (; len; len--, p++)
        crc = t[0][(crc ^ *p) & 0xff] ^ (crc >> 8);
    return crc;
}

#if defined(__x86_64__)
/*
 * Folding with carry-less multiplies (PCLMULQDQ), four 16-byte lanes 64
 * bytes apart, then one lane; the 16 bytes left are a message congruent to
 * all that came before, which the tables finish (register 0), with the tail.
 * A lane [lo, hi] (lo: the first 8 bytes, the higher degrees in the
 * reflected order) moved d bytes on is lo * x^(8d+63) + hi * x^(8d-1) mod P,
 * the constants bit-reflected as the register is; the exponents were found,
 * and are checked, against the bitwise definition (test_checksum.c). About
 * 10x the tables' rate: cheap beside the MD5 a PUT pays anyway.
 */
#include <immintrin.h>

#define K(d_lo, d_hi) _mm_set_epi64x((long long)(d_hi), (long long)(d_lo))
__attribute__((target("pclmul,sse2"))) static inline __m128i fold(__m128i x, __m128i k)
{
    return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

__attribute__((target("pclmul,sse2"))) static uint64_t crc64nvme_clmul(uint64_t crc,
                                                                       const uint8_t *p, size_t len)
{
    const __m128i k64 = K(0x0c32cdb31e18a84aull, 0x62242240ace5045aull), /* x^575, x^511 */
        k48 = K(0xbdd7ac0ee1a4a0f0ull, 0xa3ffdc1fe8e82a8bull),           /* x^447, x^383 */
        k32 = K(0xb0bc2e589204f500ull, 0xe1e0bb9d45d7a44cull),           /* x^319, x^255 */
        k16 = K(0xeadc41fd2ba3d420ull, 0x21e9761e252621acull);           /* x^191, x^127 */
    /* (len >= 64) */
    __m128i x0 = _mm_loadu_si128((const __m128i *)p), x1 = _mm_loadu_si128((const __m128i *)p + 1),
            x2 = _mm_loadu_si128((const __m128i *)p + 2),
            x3 = _mm_loadu_si128((const __m128i *)p + 3);
    x0 = _mm_xor_si128(x0, _mm_cvtsi64_si128((long long)crc)); /* the register joins the message */
    for (p += 64, len -= 64; len >= 64; p += 64, len -= 64) {
        x0 = _mm_xor_si128(fold(x0, k64), _mm_loadu_si128((const __m128i *)p));
        x1 = _mm_xor_si128(fold(x1, k64), _mm_loadu_si128((const __m128i *)p + 1));
        x2 = _mm_xor_si128(fold(x2, k64), _mm_loadu_si128((const __m128i *)p + 2));
        x3 = _mm_xor_si128(fold(x3, k64), _mm_loadu_si128((const __m128i *)p + 3));
    }
    __m128i x = _mm_xor_si128(_mm_xor_si128(x3, fold(x0, k48)),
                              _mm_xor_si128(fold(x1, k32), fold(x2, k16)));
    for (; len >= 16; p += 16, len -= 16)
        x = _mm_xor_si128(fold(x, k16), _mm_loadu_si128((const __m128i *)p));
    uint8_t rest[16];
    _mm_storeu_si128((__m128i *)rest, x);
    return crc64nvme_sliced(crc64nvme_sliced(0, rest, 16), p, len);
}
#undef K
#endif

static uint64_t crc64nvme_update(uint64_t crc, const uint8_t *p, size_t len)
{
#if defined(__x86_64__)
    static int clmul = -1;
    if (clmul < 0)
        __atomic_store_n(&clmul, __builtin_cpu_supports("pclmul") != 0, __ATOMIC_RELAXED);
    if (len >= 64 && __atomic_load_n(&clmul, __ATOMIC_RELAXED)) return crc64nvme_clmul(crc, p, len);
#endif
    return crc64nvme_sliced(crc, p, len);
}

int cks_init(cks_t *c, int algo)
{
    memset(c, 0, sizeof(*c));
    c->algo = algo;
    if (algo == CKS_CRC64NVME) {
        static int ready;
        if (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) {
            crc64nvme_init_table(); /* idempotent: racing threads write the same values */
            __atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
        }
        c->crc = ~0ull;
    } else if (algo == CKS_SHA1 || algo == CKS_SHA256 || algo == CKS_SHA512 || algo == CKS_MD5) {
        const EVP_MD *md = algo == CKS_SHA1     ? EVP_sha1()
                           : algo == CKS_SHA256 ? EVP_sha256()
                           : algo == CKS_SHA512 ? EVP_sha512()
                                                : EVP_md5();
        c->md = EVP_MD_CTX_new();
        if (!c->md || !EVP_DigestInit_ex(c->md, md, NULL)) {
            cks_free(c);
            return ERR_NOMEM;
        }
    } else if (algo == CKS_XXHASH64) {
        if (!(c->xx = XXH64_createState()) || XXH64_reset(c->xx, 0) != XXH_OK) {
            cks_free(c);
            return ERR_NOMEM;
        }
    } else if (algo == CKS_XXHASH3 || algo == CKS_XXHASH128) {
        if (!(c->xx = XXH3_createState()) ||
            (algo == CKS_XXHASH3 ? XXH3_64bits_reset(c->xx) : XXH3_128bits_reset(c->xx)) !=
                XXH_OK) {
            cks_free(c);
            return ERR_NOMEM;
        }
    } else if (algo != CKS_CRC32 && algo != CKS_CRC32C) {
        return ERR_INVAL;
    }
    return 0;
}

void cks_update(cks_t *c, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    switch (c->algo) {
    case CKS_CRC32:
        c->crc = crc32_gzip_refl((uint32_t)c->crc, p, len);
        break;
    case CKS_CRC32C:
        c->crc = crc32c((uint32_t)c->crc, p, len);
        break;
    case CKS_CRC64NVME:
        c->crc = crc64nvme_update(c->crc, p, len);
        break;
    case CKS_SHA1:
    case CKS_SHA256:
    case CKS_SHA512:
    case CKS_MD5:
        EVP_DigestUpdate(c->md, p, len);
        break;
    case CKS_XXHASH64:
        (void)XXH64_update(c->xx, p, len);
        break;
    case CKS_XXHASH3:
        (void)XXH3_64bits_update(c->xx, p, len);
        break;
    case CKS_XXHASH128:
        (void)XXH3_128bits_update(c->xx, p, len);
        break;
    default:
        break;
    }
}

void cks_final(cks_t *c, char *b64, size_t cap)
{
    uint8_t d[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    switch (c->algo) {
    case CKS_CRC32:
    case CKS_CRC32C:
        for (int i = 0; i < 4; i++)
            d[i] = (uint8_t)(c->crc >> (24 - 8 * i));
        n = 4;
        break;
    case CKS_CRC64NVME: {
        uint64_t v = ~c->crc;
        for (int i = 0; i < 8; i++)
            d[i] = (uint8_t)(v >> (56 - 8 * i));
        n = 8;
        break;
    }
    case CKS_SHA1:
    case CKS_SHA256:
    case CKS_SHA512:
    case CKS_MD5:
        EVP_DigestFinal_ex(c->md, d, &n);
        break;
    case CKS_XXHASH64:
    case CKS_XXHASH3: {
        XXH64_canonical_t cn;
        XXH64_canonicalFromHash(&cn, c->algo == CKS_XXHASH64 ? XXH64_digest(c->xx)
                                                             : XXH3_64bits_digest(c->xx));
        memcpy(d, cn.digest, 8);
        n = 8;
        break;
    }
    case CKS_XXHASH128: {
        XXH128_canonical_t cn;
        XXH128_canonicalFromHash(&cn, XXH3_128bits_digest(c->xx));
        memcpy(d, cn.digest, 16);
        n = 16;
        break;
    }
    default:
        break;
    }
    char tmp[EVP_ENCODE_LENGTH(EVP_MAX_MD_SIZE) + 1];
    EVP_EncodeBlock((unsigned char *)tmp, d, (int)n);
    snprintf(b64, cap, "%s", n ? tmp : "");
    cks_free(c);
}

void cks_free(cks_t *c)
{
    EVP_MD_CTX_free(c->md);
    c->md = NULL;
    if (c->xx) {
        if (c->algo == CKS_XXHASH64)
            XXH64_freeState(c->xx);
        else
            XXH3_freeState(c->xx);
    }
    c->xx = NULL;
}

size_t cks_digest_len(int algo)
{
    switch (algo) {
    case CKS_CRC32:
    case CKS_CRC32C:
        return 4;
    case CKS_CRC64NVME:
        return 8;
    case CKS_SHA1:
        return 20;
    case CKS_SHA256:
        return 32;
    case CKS_SHA512:
        return 64;
    case CKS_MD5:
    case CKS_XXHASH128:
        return 16;
    case CKS_XXHASH64:
    case CKS_XXHASH3:
        return 8;
    default:
        return 0;
    }
}

int cks_is_crc(int algo)
{
    return algo == CKS_CRC32 || algo == CKS_CRC32C || algo == CKS_CRC64NVME;
}

void cks_encode(const uint8_t *d, size_t n, char *b64, size_t cap)
{
    char tmp[EVP_ENCODE_LENGTH(EVP_MAX_MD_SIZE) + 1];
    if (n > EVP_MAX_MD_SIZE) n = 0;
    EVP_EncodeBlock((unsigned char *)tmp, d, (int)n);
    snprintf(b64, cap, "%s", n ? tmp : "");
}

int cks_decode(int algo, const char *b64, uint8_t *d)
{
    size_t n = cks_digest_len(algo), len = b64 ? strlen(b64) : 0;
    uint8_t tmp[EVP_MAX_MD_SIZE + 3];
    /* Exactly the canonical encoding of n bytes: 4 characters per 3 bytes, padded. */
    if (!n || len != (n + 2) / 3 * 4 ||
        strspn(b64, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                    "0123456789+/=") != len)
        return -1;
    int pad = (int)((3 - n % 3) % 3);
    for (int i = 0; i < (int)len; i++)
        if ((b64[i] == '=') != (i >= (int)len - pad)) return -1;
    if (EVP_DecodeBlock(tmp, (const unsigned char *)b64, (int)len) != (int)(len / 4 * 3)) return -1;
    memcpy(d, tmp, n);
    /* The bits padding leaves over must be zero, or two strings would name one value. */
    char again[EVP_ENCODE_LENGTH(EVP_MAX_MD_SIZE) + 1];
    cks_encode(d, n, again, sizeof(again));
    return strcmp(again, b64) == 0 ? 0 : -1;
}

uint64_t cks_crc_from_digest(int algo, const uint8_t *d)
{
    uint64_t v = 0;
    for (size_t i = 0; i < cks_digest_len(algo) && i < 8; i++)
        v = v << 8 | d[i];
    return v;
}

void cks_crc_to_digest(int algo, uint64_t crc, uint8_t *d)
{
    size_t n = cks_digest_len(algo);
    for (size_t i = 0; i < n && i < 8; i++)
        d[i] = (uint8_t)(crc >> (8 * (n - 1 - i)));
}

/*
 * Polynomials in the reflected representation of the CRCs' own loops:
 * bit (width - 1) is x^0, bit 0 is x^(width - 1).
 */
static uint64_t gf2_mulmod(uint64_t a, uint64_t b, uint64_t poly, int width)
{
    uint64_t m = 1ull << (width - 1), p = 0;
    for (;;) {
        if (a & m) {
            p ^= b;
            if ((a & (m - 1)) == 0) break;
        }
        m >>= 1;
        if (!m) break;
        b = b & 1 ? (b >> 1) ^ poly : b >> 1;
    }
    return p;
}

uint64_t cks_crc_combine(int algo, uint64_t crc_a, uint64_t crc_b, uint64_t len_b)
{
    uint64_t poly;
    int width;
    switch (algo) {
    case CKS_CRC32:
        poly = 0xEDB88320u;
        width = 32;
        break;
    case CKS_CRC32C:
        poly = 0x82F63B78u;
        width = 32;
        break;
    case CKS_CRC64NVME:
        poly = 0x9A6C9329AC4BC9B5ull;
        width = 64;
        break;
    default:
        return 0;
    }
    /* x^(8 len_b) by squaring: start at x^8, multiply in x^(8 * 2^i) for each bit i of len_b. */
    uint64_t one = 1ull << (width - 1), power = one >> 1; /* x^1 */
    for (int i = 0; i < 3; i++)
        power = gf2_mulmod(power, power, poly, width);
    uint64_t shift = one;
    for (uint64_t n = len_b; n; n >>= 1) {
        if (n & 1) shift = gf2_mulmod(power, shift, poly, width);
        if (n > 1) power = gf2_mulmod(power, power, poly, width);
    }
    uint64_t mask = width == 64 ? ~0ull : (1ull << width) - 1;
    return (gf2_mulmod(shift, crc_a & mask, poly, width) ^ crc_b) & mask;
}
