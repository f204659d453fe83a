/*
 * ers_int.h: what the erasure room's files share. Map:
 *   ers.c         the layout (shard sizes, the codec of ERS_LAYOUT_SIZE bytes) and the GF
 *                 tables: one codec per (k, m) and one table per erasure pattern, cached
 *   ers_encode.c  the streaming encoder, own buffers or placed
 *   ers_decode.c  the decoder: parallel reads, crc checks, reconstruction, hedging
 * Lock: the tables' cache lock only (ers.c), a leaf.
 */
#ifndef WL_ERS_INT_H
#define WL_ERS_INT_H

#include "erasure/ers.h"

#include <stdint.h>

typedef struct {
    uint8_t k, m;
    uint8_t *matrix; /* (k+m) x k encoding matrix */
    uint8_t *tables; /* 32*k*m parity tables */
} codec_t;

/* The codec of (k, m), made on first use and kept for the process. Any thread. */
const codec_t *ers__codec_get(int k, int m);
/*
 * Decode tables turning the k surviving shards `surv` into those of `want`: cached, or built
 * into `scratch` (32 * k * popcount(want) bytes) when the cache is full; NULL if singular.
 */
const uint8_t *ers__pattern_tables(const codec_t *c, uint32_t surv, uint32_t want,
                                   uint8_t *scratch);
/* Data bytes of stripe s. */
uint64_t ers__stripe_data_len(const ers_layout_t *l, uint64_t s);

#endif
