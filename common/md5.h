/*
 * md5: the MD5 of a PUT's body (S3's ETag), many bodies at once.
 *
 * MD5 is serial within a stream: each 64-byte block needs the result of the
 * one before, so one core hashes one stream at 0.6-0.9 GB/s, and a 1 MiB
 * PUT's MD5 was a third of the node's CPU (design notes, session 39). The
 * streams of concurrent PUTs are independent, though, and a vector register
 * holds 8 (AVX2) or 16 (AVX-512) 32-bit lanes: one instruction stream then
 * advances 8 or 16 MD5s at about the speed one scalar stream runs.
 *
 * So md5_update hands a long update (its whole blocks) to a hub that the
 * updating threads share. The thread posts its blocks and waits; one of the
 * waiting threads, the combiner, hashes every posted stream's blocks
 * together, a round of at most 16 KiB a lane at a time, so that a stream
 * posted meanwhile joins at the next round. The combiner serves until its
 * own blocks are hashed, then hands the hub to another waiter. A stream
 * alone is hashed by the scalar kernel, which is then faster than a vector
 * of idle lanes; short updates never go to the hub.
 *
 * The digest is MD5's own (RFC 1321), whichever kernel ran: a stream's
 * state is four words, and each kernel is the same function of them.
 */
#ifndef WL_MD5_H
#define WL_MD5_H

#include <stddef.h>
#include <stdint.h>

typedef struct md5 {
    uint32_t h[4];    /* the chaining state: A, B, C, D */
    uint64_t len;     /* bytes taken so far */
    uint8_t tail[64]; /* the last len % 64 bytes, not yet a whole block */
} md5_t;

void md5_init(md5_t *m);

/*
 * Takes len bytes of the stream. May block while another thread hashes
 * (this update among others); returns once data is no longer read. Any
 * thread; one update at a time per stream.
 */
void md5_update(md5_t *m, const void *data, size_t len);

/*
 * md5_update in two halves, so that the caller works on the same bytes (the
 * encoder) while they wait in the hub for a round, where other streams join
 * them: begin posts the update; end returns once it is hashed, as
 * md5_update. Until end, data must stay as it is and m must not be used.
 * Every begin has its end, on the same thread or another; a second end of
 * the same update returns at once.
 */
typedef struct md5_pending {
    uint32_t *h;      /* the stream's state */
    const uint8_t *p; /* its blocks not yet hashed */
    size_t left;      /* how many */
    int width;        /* the kernel's lanes when posted; 0: nothing posted */
    int done;         /* (hub) hashed */
    struct md5_pending *next;
} md5_pending_t;

void md5_update_begin(md5_t *m, const void *data, size_t len, md5_pending_t *pend);
void md5_update_end(md5_pending_t *pend);

/* The digest of everything taken. m is spent: md5_init it to reuse it. */
void md5_final(md5_t *m, uint8_t digest[16]);

/* MD5 of one buffer. */
void md5_of(const void *data, size_t len, uint8_t digest[16]);

/* What the hub did since the start: rounds run and lane-blocks hashed in them. */
typedef struct md5_stats {
    uint64_t posts;         /* updates posted to the hub */
    uint64_t rounds;        /* vector rounds */
    uint64_t lane_blocks;   /* 64-byte blocks hashed in vector rounds, all lanes */
    uint64_t round_blocks;  /* blocks a lane per round, summed over rounds */
    uint64_t scalar_blocks; /* blocks of the hub's rounds with one stream (scalar kernel) */
    uint64_t short_blocks;  /* blocks of updates too short for the hub, on their own thread */
} md5_stats_t;

void md5_stats(md5_stats_t *out);

/*
 * Lanes of the kernel the hub runs: 16 (AVX-512), 8 (AVX2) or 1 (neither:
 * every update is hashed on its own thread).
 */
int md5_lanes(void);

/* Tests and benches: run the hub with this many lanes (1, 8, 16; 0: the CPU's best). */
void md5_force_lanes(int lanes);

#endif
