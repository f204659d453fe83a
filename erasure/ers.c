/*
 * ers: Reed-Solomon erasure coding over ISA-L (see ers.h for the layout).
 *
 * Design. The encoding matrix for (k, m) is ISA-L's Cauchy matrix, whose
 * every k x k submatrix is invertible; its first k rows are the identity, so
 * data blocks are stored as they are and a healthy read needs no math. The
 * expanded GF tables (32*k*rows bytes) are built once per (k, m) and once per
 * erasure pattern (which k shards survive, which shards are wanted) and kept
 * in a process-wide table that only grows (at most TABLE_SLOTS patterns,
 * each at most 32*16*4 = 2 KiB). Past that, a decoder computes tables into
 * its own buffer instead of caching them.
 *
 * This file: the layout and the GF tables; the encoder is in ers_encode.c,
 * the decoder in ers_decode.c (ers_int.h is what they share).
 */
#include "erasure/ers_int.h"

#include "common/crc.h"
#include "common/err.h"
#include "common/le.h"
#include "common/mem.h"

#include <isa-l/erasure_code.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- layout ---- */

uint64_t ers_stripe_count(const ers_layout_t *l)
{
    uint64_t sdata = (uint64_t)l->k * l->block_size;
    return sdata ? (l->size + sdata - 1) / sdata : 0;
}

/* Data bytes of stripe s (k*B except for the last stripe). */
uint64_t ers__stripe_data_len(const ers_layout_t *l, uint64_t s)
{
    uint64_t sdata = (uint64_t)l->k * l->block_size;
    uint64_t start = s * sdata;
    if (start >= l->size) return 0;
    return l->size - start < sdata ? l->size - start : sdata;
}

uint32_t ers_block_len(const ers_layout_t *l, uint64_t stripe, unsigned shard)
{
    uint64_t r = ers__stripe_data_len(l, stripe);
    uint64_t b = l->block_size;
    if (shard >= l->k) /* parity: as long as block 0 */
        return (uint32_t)(r < b ? r : b);
    if (r <= (uint64_t)shard * b) return 0;
    r -= (uint64_t)shard * b;
    return (uint32_t)(r < b ? r : b);
}

uint64_t ers_shard_size(const ers_layout_t *l, unsigned shard)
{
    uint64_t n = ers_stripe_count(l);
    if (n == 0) return 0;
    return ers_shard_offset(l, n - 1) + ers_block_len(l, n - 1, shard) + ERS_CRC_SIZE;
}

int ers_layout_check(const ers_layout_t *l)
{
    if (l->k < 1 || l->k > ERS_MAX_K || l->m > ERS_MAX_M || l->k + l->m > ERS_MAX_SHARDS)
        return ERR_INVAL;
    if (l->size == 0) return l->block_size == 0 ? 0 : ERR_INVAL;
    if (l->block_size == 0 || l->block_size > ERS_MAX_BLOCK || l->block_size % ERS_BLOCK_ALIGN)
        return ERR_INVAL;
    if (l->size > (1ull << 50)) /* 1 PiB: far beyond any S3 object */
        return ERR_INVAL;
    return 0;
}

#define LAYOUT_MAGIC   0x4c45574cu /* "WLEL" */
#define LAYOUT_VERSION 1

/*
 * Encoded layout, little endian:
 *   0  magic "WLEL"     4  version     5  k     6  m     7  reserved (0)
 *   8  block_size (u32) 12 reserved (0)
 *   16 size (u64)       24 reserved (0) 28 crc32c of bytes 0..27
 */
void ers_layout_encode(const ers_layout_t *l, uint8_t out[ERS_LAYOUT_SIZE])
{
    memset(out, 0, ERS_LAYOUT_SIZE);
    le_put32(out, LAYOUT_MAGIC);
    out[4] = LAYOUT_VERSION;
    out[5] = l->k;
    out[6] = l->m;
    le_put32(out + 8, l->block_size);
    le_put64(out + 16, l->size);
    le_put32(out + 28, crc32c(0, out, 28));
}

int ers_layout_decode(const void *buf, size_t len, ers_layout_t *out)
{
    const uint8_t *p = buf;
    if (len < ERS_LAYOUT_SIZE || le_get32(p) != LAYOUT_MAGIC ||
        le_get32(p + 28) != crc32c(0, p, 28))
        return ERR_CORRUPT;
    if (p[4] != LAYOUT_VERSION) return ERR_INVAL;
    out->k = p[5];
    out->m = p[6];
    out->block_size = le_get32(p + 8);
    out->size = le_get64(p + 16);
    return ers_layout_check(out);
}

/* ---- GF tables ---- */

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static codec_t *codecs[ERS_MAX_K + 1][ERS_MAX_M + 1];

const codec_t *ers__codec_get(int k, int m)
{
    codec_t *c;

    pthread_mutex_lock(&cache_lock);
    c = codecs[k][m];
    if (!c) {
        c = xcalloc(1, sizeof(*c));
        c->k = (uint8_t)k;
        c->m = (uint8_t)m;
        c->matrix = xmalloc((size_t)(k + m) * k);
        c->tables = xmalloc((size_t)32 * k * (m ? m : 1));
        gf_gen_cauchy1_matrix(c->matrix, k + m, k);
        if (m) ec_init_tables(k, m, c->matrix + (size_t)k * k, c->tables);
        codecs[k][m] = c;
    }
    pthread_mutex_unlock(&cache_lock);
    return c;
}

#define TABLE_SLOTS 4096

typedef struct {
    uint8_t used, k, m;
    uint32_t surv, want;
    uint8_t *tables;
} pattern_t;

static pattern_t patterns[TABLE_SLOTS];
static unsigned pattern_count;

/*
 * Build decode tables that turn the k surviving shards `surv` (ascending)
 * into the shards of `want` (ascending). Returns 0 or ERR_UNRECOVERABLE if
 * the submatrix is singular (impossible for a Cauchy matrix; kept as a guard).
 */
static int build_tables(const codec_t *c, uint32_t surv, uint32_t want, uint8_t *tables)
{
    uint8_t b[ERS_MAX_K * ERS_MAX_K], inv[ERS_MAX_K * ERS_MAX_K];
    uint8_t rows[ERS_MAX_SHARDS * ERS_MAX_K];
    int k = c->k, r = 0, nw = 0;

    for (int s = 0; s < k + c->m; s++)
        if (surv & (1u << s)) memcpy(b + (size_t)k * r++, c->matrix + (size_t)k * s, (size_t)k);
    if (gf_invert_matrix(b, inv, k) != 0) return ERR_UNRECOVERABLE;
    for (int w = 0; w < k + c->m; w++) {
        if (!(want & (1u << w))) continue;
        uint8_t *row = rows + (size_t)k * nw++;
        if (w < k) {
            memcpy(row, inv + (size_t)k * w, (size_t)k);
            continue;
        }
        /* Parity row: its encoding row times the inverse. */
        for (int j = 0; j < k; j++) {
            uint8_t acc = 0;
            for (int i = 0; i < k; i++)
                acc ^= gf_mul(c->matrix[(size_t)k * w + i], inv[(size_t)k * i + j]);
            row[j] = acc;
        }
    }
    ec_init_tables(k, nw, rows, tables);
    return 0;
}

/* Tables for a pattern: cached, or built into `scratch` when the cache is full. */
const uint8_t *ers__pattern_tables(const codec_t *c, uint32_t surv, uint32_t want, uint8_t *scratch)
{
    uint32_t h = (surv * 2654435761u) ^ (want * 40503u) ^ ((uint32_t)c->k << 20) ^ c->m;
    const uint8_t *found = NULL;

    pthread_mutex_lock(&cache_lock);
    for (unsigned i = 0; i < TABLE_SLOTS; i++) {
        pattern_t *p = &patterns[(h + i) % TABLE_SLOTS];
        if (!p->used) {
            if (pattern_count >= TABLE_SLOTS * 3 / 4) break;
            uint8_t *t = xmalloc((size_t)32 * c->k * (size_t)__builtin_popcount(want));
            if (build_tables(c, surv, want, t) != 0) {
                free(t);
                break;
            }
            *p = (pattern_t){1, c->k, c->m, surv, want, t};
            pattern_count++;
            found = t;
            break;
        }
        if (p->k == c->k && p->m == c->m && p->surv == surv && p->want == want) {
            found = p->tables;
            break;
        }
    }
    pthread_mutex_unlock(&cache_lock);
    if (found) return found;
    return build_tables(c, surv, want, scratch) == 0 ? scratch : NULL;
}
