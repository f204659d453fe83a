#include "s3/chunked.h"

#include "common/err.h"
#include "common/mem.h"
#include "s3/sigv4.h"

#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum { ST_LINE, ST_DATA, ST_DATA_CR, ST_DATA_LF, ST_TRAILER, ST_END_CR, ST_END_LF, ST_DONE };

#define MAX_LINE     512
#define MAX_TRAILERS 8

struct s3_chunked {
    int signed_chunks, trailer, state;
    uint8_t key[32];
    char amz_date[17], scope[160], prev[65];
    EVP_MD_CTX *sha;
    char line[MAX_LINE + 1];
    size_t line_len;
    uint64_t left, decoded;
    char chunk_sig[65];
    int last;  /* the zero-size chunk was seen */
    int small; /* the chunk before was under S3_CHUNKED_MIN_CHUNK */
    char names[MAX_TRAILERS][64], values[MAX_TRAILERS][160];
    int ntrailers;
    EVP_MD_CTX *tsha; /* canonical trailer text, for the trailer signature */
    char trailer_sig[65];
};

s3_chunked_t *s3_chunked_new(int signed_chunks, int trailer, const uint8_t key[32],
                             const char *amz_date, const char *scope, const char *seed_sig)
{
    s3_chunked_t *c = xcalloc(1, sizeof(*c));
    c->signed_chunks = signed_chunks;
    c->trailer = trailer;
    if (signed_chunks) {
        memcpy(c->key, key, 32);
        strncpy(c->amz_date, amz_date, sizeof(c->amz_date) - 1);
        strncpy(c->scope, scope, sizeof(c->scope) - 1);
        strncpy(c->prev, seed_sig, sizeof(c->prev) - 1);
    }
    c->sha = EVP_MD_CTX_new();
    c->tsha = EVP_MD_CTX_new();
    if (!c->sha || !c->tsha) abort();
    EVP_DigestInit_ex(c->tsha, EVP_sha256(), NULL);
    return c;
}

void s3_chunked_free(s3_chunked_t *c)
{
    if (!c) return;
    EVP_MD_CTX_free(c->sha);
    EVP_MD_CTX_free(c->tsha);
    free(c);
}

uint64_t s3_chunked_decoded(const s3_chunked_t *c)
{
    return c->decoded;
}

const char *s3_chunked_trailer(const s3_chunked_t *c, const char *name)
{
    if (c->state != ST_DONE) return NULL;
    for (int i = 0; i < c->ntrailers; i++)
        if (strcasecmp(c->names[i], name) == 0) return c->values[i];
    return NULL;
}

const char *s3_chunked_trailer_name(const s3_chunked_t *c, int i)
{
    return c->state == ST_DONE && i >= 0 && i < c->ntrailers ? c->names[i] : NULL;
}

static int hexval(int ch)
{
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* A chunk header line: "<hex>[;chunk-signature=<sig>]". */
static int chunk_line(s3_chunked_t *c)
{
    const char *p = c->line, *end = c->line + c->line_len;
    uint64_t size = 0;
    int digits = 0;
    for (; p < end && hexval(*p) >= 0; p++, digits++) {
        if (digits >= 16) return ERR_INVAL;
        size = size << 4 | (uint64_t)hexval(*p);
    }
    if (!digits || size > S3_CHUNKED_MAX_CHUNK) return ERR_INVAL;
    c->chunk_sig[0] = 0;
    if (p < end) {
        static const char ext[] = ";chunk-signature=";
        if ((size_t)(end - p) != sizeof(ext) - 1 + 64 || memcmp(p, ext, sizeof(ext) - 1) != 0)
            return ERR_INVAL;
        memcpy(c->chunk_sig, p + sizeof(ext) - 1, 64);
        c->chunk_sig[64] = 0;
    }
    if (c->signed_chunks && !c->chunk_sig[0]) return ERR_INVAL;
    if (!c->signed_chunks && c->chunk_sig[0]) return ERR_INVAL;
    /* Signed chunks of a few bytes each would cost an HMAC and a SHA-256 apiece: S3 takes a
     * small one only last. Unsigned ones (trailer checksums) come in any size SDKs pick. */
    if (c->signed_chunks && size && c->small) return ERR_RANGE;
    c->small = size < S3_CHUNKED_MIN_CHUNK;
    c->left = size;
    c->last = size == 0;
    EVP_DigestInit_ex(c->sha, EVP_sha256(), NULL);
    return 0;
}

static int check_chunk(s3_chunked_t *c)
{
    uint8_t h[32];
    char want[65];
    if (!c->signed_chunks) return 0;
    EVP_DigestFinal_ex(c->sha, h, NULL);
    sigv4_chunk_signature(c->key, c->amz_date, c->scope, c->prev, h, want);
    if (!sigv4_sig_equal(want, c->chunk_sig)) return ERR_DENIED;
    memcpy(c->prev, want, sizeof(c->prev));
    return 0;
}

/* A trailer line "name:value"; the empty line ends the trailers. */
static int trailer_line(s3_chunked_t *c)
{
    if (c->line_len == 0) {
        if (c->signed_chunks) {
            uint8_t h[32];
            char want[65];
            if (!c->trailer_sig[0]) return ERR_DENIED;
            EVP_DigestFinal_ex(c->tsha, h, NULL);
            sigv4_trailer_signature(c->key, c->amz_date, c->scope, c->prev, h, want);
            if (!sigv4_sig_equal(want, c->trailer_sig)) return ERR_DENIED;
        }
        c->state = ST_DONE;
        return 0;
    }
    char *colon = memchr(c->line, ':', c->line_len);
    if (!colon || colon == c->line) return ERR_INVAL;
    size_t nl = (size_t)(colon - c->line);
    const char *v = colon + 1, *e = c->line + c->line_len;
    while (v < e && *v == ' ')
        v++;
    size_t vl = (size_t)(e - v);
    if (nl == 23 && strncasecmp(c->line, "x-amz-trailer-signature", 23) == 0) {
        if (vl != 64 || c->trailer_sig[0]) return ERR_INVAL;
        memcpy(c->trailer_sig, v, 64);
        c->trailer_sig[64] = 0;
        return 0;
    }
    if (c->ntrailers == MAX_TRAILERS || nl >= sizeof(c->names[0]) || vl >= sizeof(c->values[0]))
        return ERR_INVAL;
    memcpy(c->names[c->ntrailers], c->line, nl);
    c->names[c->ntrailers][nl] = 0;
    memcpy(c->values[c->ntrailers], v, vl);
    c->values[c->ntrailers][vl] = 0;
    for (size_t i = 0; i < nl; i++)
        if (c->names[c->ntrailers][i] >= 'A' && c->names[c->ntrailers][i] <= 'Z')
            c->names[c->ntrailers][i] += 32;
    /* Each trailer once: of two checksums, which would the body be checked against? */
    for (int i = 0; i < c->ntrailers; i++)
        if (strcmp(c->names[i], c->names[c->ntrailers]) == 0) return ERR_INVAL;
    /* The signed form of a trailer is "name:value\n". */
    EVP_DigestUpdate(c->tsha, c->names[c->ntrailers], nl);
    EVP_DigestUpdate(c->tsha, ":", 1);
    EVP_DigestUpdate(c->tsha, v, vl);
    EVP_DigestUpdate(c->tsha, "\n", 1);
    c->ntrailers++;
    return 0;
}

int s3_chunked_feed(s3_chunked_t *c, const uint8_t *in, size_t len, size_t *used,
                    s3_chunk_sink_fn sink, void *arg)
{
    size_t i = 0;
    int rc;

    while (i < len && c->state != ST_DONE) {
        switch (c->state) {
        case ST_LINE:
        case ST_TRAILER: {
            uint8_t ch = in[i++];
            if (ch == '\n') {
                if (c->line_len == 0 || c->line[c->line_len - 1] != '\r') return ERR_INVAL;
                c->line_len--;
                c->line[c->line_len] = 0;
                if (c->state == ST_TRAILER) {
                    if ((rc = trailer_line(c)) != 0) return rc;
                } else {
                    if ((rc = chunk_line(c)) != 0) return rc;
                    c->state = c->left ? ST_DATA : ST_DATA_CR;
                    if (c->last) {
                        /* The last chunk carries no data and no CRLF of its own. */
                        if ((rc = check_chunk(c)) != 0) return rc;
                        c->state = c->trailer ? ST_TRAILER : ST_END_CR;
                    }
                }
                c->line_len = 0;
            } else {
                if (c->line_len >= MAX_LINE) return ERR_INVAL;
                c->line[c->line_len++] = (char)ch;
            }
            break;
        }
        case ST_DATA: {
            size_t n = len - i < c->left ? len - i : (size_t)c->left;
            if (c->signed_chunks) EVP_DigestUpdate(c->sha, in + i, n);
            if (sink && (rc = sink(arg, in + i, n)) != 0) return rc;
            c->decoded += n;
            c->left -= n;
            i += n;
            if (!c->left) c->state = ST_DATA_CR;
            break;
        }
        case ST_DATA_CR:
            if (in[i++] != '\r') return ERR_INVAL;
            c->state = ST_DATA_LF;
            break;
        case ST_DATA_LF:
            if (in[i++] != '\n') return ERR_INVAL;
            if ((rc = check_chunk(c)) != 0) return rc;
            c->state = ST_LINE;
            break;
        case ST_END_CR:
            if (in[i++] != '\r') return ERR_INVAL;
            c->state = ST_END_LF;
            break;
        case ST_END_LF:
            if (in[i++] != '\n') return ERR_INVAL;
            c->state = ST_DONE;
            break;
        }
    }
    *used = i;
    return c->state == ST_DONE ? 1 : 0;
}
