/*
 * Erasure layer tests: exhaustive loss patterns for small k+m, randomized
 * large k+m, single-bit rot anywhere in a shard, m+1 losses, layouts.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "common/bufpool.h"
#include "common/crc.h"
#include "common/err.h"
#include "erasure/ers.h"

#include <stdlib.h>
#include <pthread.h>
#include <string.h>

typedef struct {
    uint8_t *stream[ERS_MAX_SHARDS];
    size_t len[ERS_MAX_SHARDS], cap[ERS_MAX_SHARDS];
    uint32_t lost;     /* shards whose reads fail */
    uint32_t computed; /* shards whose source reports the crc of what it delivered */
    unsigned calls[ERS_MAX_SHARDS];
    ers_layout_t l;
} store_t;

static uint64_t rng_state;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static int sink(void *arg, unsigned shard, uint64_t stripe, const uint8_t *block, uint32_t len,
                uint32_t crc)
{
    store_t *s = arg;
    size_t need = s->len[shard] + len + 4;
    (void)stripe;
    if (need > s->cap[shard]) {
        s->cap[shard] = need * 2;
        s->stream[shard] = realloc(s->stream[shard], s->cap[shard]);
    }
    memcpy(s->stream[shard] + s->len[shard], block, len);
    for (int i = 0; i < 4; i++)
        s->stream[shard][s->len[shard] + len + i] = (uint8_t)(crc >> (8 * i));
    s->len[shard] += len + 4;
    return 0;
}

static int source(void *arg, unsigned shard, uint64_t stripe, uint8_t *buf, uint32_t len,
                  ers_crc_t *crc)
{
    store_t *s = arg;
    uint64_t off = ers_shard_offset(&s->l, stripe);
    __atomic_fetch_add(&s->calls[shard], 1, __ATOMIC_RELAXED);
    if (s->lost & (1u << shard)) return ERR_NOT_FOUND;
    if (off + len + 4 > s->len[shard]) return ERR_IO;
    memcpy(buf, s->stream[shard] + off, len);
    const uint8_t *c = s->stream[shard] + off + len;
    crc->stored =
        (uint32_t)c[0] | (uint32_t)c[1] << 8 | (uint32_t)c[2] << 16 | (uint32_t)c[3] << 24;
    if (s->computed & (1u << shard)) {
        /* As a drive does: the crc of the delivered bytes; the decoder must compare it. */
        crc->actual = crc32c(0, buf, len);
        crc->computed = 1;
    }
    return 0;
}

static void store_free(store_t *s)
{
    for (int i = 0; i < ERS_MAX_SHARDS; i++)
        free(s->stream[i]);
    memset(s, 0, sizeof(*s));
}

/*
 * Placed blocks (ers_encoder_place): two sets of k+m buffers taken in turn per
 * stripe, as a PUT's two stripe slots, filled with stale bytes before each
 * stripe; the sink must get the placed buffers themselves.
 */
typedef struct {
    store_t *s;
    int n;
    uint32_t B;
    uint8_t *set[2][ERS_MAX_SHARDS];
    uint64_t next; /* the stripe place() expects next */
} placed_t;

static int place(void *arg, uint64_t stripe, uint8_t *blocks[])
{
    placed_t *pl = arg;
    assert_int_equal(stripe, pl->next);
    pl->next++;
    for (int i = 0; i < pl->n; i++) {
        blocks[i] = pl->set[stripe & 1][i];
        memset(blocks[i], 0xa5, pl->B);
    }
    return 0;
}

static int placed_sink(void *arg, unsigned shard, uint64_t stripe, const uint8_t *block,
                       uint32_t len, uint32_t crc)
{
    placed_t *pl = arg;
    assert_ptr_equal(block, pl->set[stripe & 1][shard]);
    return sink(pl->s, shard, stripe, block, len, crc);
}

/* Encode `data` in random-sized pieces into a fresh store. */
static void encode(store_t *s, int k, int m, uint32_t B, const uint8_t *data, size_t size)
{
    int err;
    /*
     * One encoder in three takes its buffers from a pool, which hands back
     * buffers still holding earlier objects' bytes: nothing may leak into
     * this object's blocks. One in three places its blocks in buffers of its
     * caller, told the object's size, none, or a wrong one.
     */
    static bufpool_t *pool;
    static unsigned calls;
    if (!pool) pool = bufpool_new(64u << 20);
    unsigned kind = calls++ % 3;
    memset(s, 0, sizeof(*s));
    placed_t pl = {.s = s, .n = k + m, .B = B};
    ers_encoder_t *e = kind == 1   ? ers_encoder_new_in(pool, k, m, B, sink, s, &err)
                       : kind == 2 ? ers_encoder_new(k, m, B, placed_sink, &pl, &err)
                                   : ers_encoder_new(k, m, B, sink, s, &err);
    assert_non_null(e);
    if (kind == 2) {
        for (int h = 0; h < 2; h++)
            for (int i = 0; i < k + m; i++)
                pl.set[h][i] = malloc(B);
        static const uint64_t hint_of[4][2] = {{1, 0}, {0, 0}, {1, 2}, {2, 1}}; /* x * a / b */
        const uint64_t *h = hint_of[(calls / 3) % 4];
        ers_encoder_place(e, place, h[1] ? size * h[0] / h[1] + 1 : h[0] ? size : 0);
    }
    size_t pos = 0;
    while (pos < size) {
        size_t n = 1 + rnd() % (3 * (size_t)B);
        if (n > size - pos) n = size - pos;
        assert_int_equal(ers_encoder_write(e, data + pos, n), 0);
        pos += n;
    }
    assert_int_equal(ers_encoder_finish(e, &s->l), 0);
    ers_encoder_free(e);
    if (kind == 2)
        for (int h = 0; h < 2; h++)
            for (int i = 0; i < k + m; i++)
                free(pl.set[h][i]);
    bufpool_stats_t st;
    bufpool_stats(pool, &st);
    assert_int_equal(st.out_bytes, 0); /* all given back */
    assert_int_equal(s->l.size, size);
    assert_int_equal(ers_layout_check(&s->l), 0);
    for (int i = 0; i < k + m; i++)
        assert_int_equal(s->len[i], ers_shard_size(&s->l, (unsigned)i));
}

static void fill_random(uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)rnd();
}

/* A parallel runner with real threads, one per block, started in reverse order. */
typedef struct {
    void (*fn)(void *, unsigned);
    void *ctx;
    unsigned i;
} par_job_t;

static void *par_thread(void *arg)
{
    par_job_t *j = arg;
    j->fn(j->ctx, j->i);
    return NULL;
}

static int par_calls;
static void par_run(void *arg, unsigned n, void (*fn)(void *ctx, unsigned i), void *ctx)
{
    pthread_t th[ERS_MAX_SHARDS];
    par_job_t jobs[ERS_MAX_SHARDS];
    (void)arg;
    par_calls++;
    for (unsigned i = n; i-- > 0;) {
        jobs[i] = (par_job_t){fn, ctx, i};
        assert_int_equal(pthread_create(&th[i], NULL, par_thread, &jobs[i]), 0);
    }
    for (unsigned i = 0; i < n; i++)
        pthread_join(th[i], NULL);
}

static int use_par;

static int read_all(store_t *s, uint8_t *out, uint64_t off, uint64_t len, uint32_t *missing)
{
    int err;
    ers_decoder_t *d = ers_decoder_new(&s->l, &err);
    assert_non_null(d);
    if (use_par) ers_decoder_set_parallel(d, par_run, NULL);
    int rc = ers_decoder_read(d, off, len, out, source, s);
    if (missing) *missing = ers_decoder_missing(d);
    ers_decoder_free(d);
    return rc;
}

static void test_exhaustive_small(void **state)
{
    const uint32_t B = 256;
    (void)state;
    rng_state = 0x1234567;
    for (int k = 1; k <= 6; k++) {
        for (int m = 0; m <= 3; m++) {
            int n = k + m;
            size_t sizes[] = {0, 1, B - 1, B, B + 1, (size_t)5 * k * B + 77};
            for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
                size_t size = sizes[si];
                uint8_t *data = malloc(size + 1), *out = malloc(size + 1);
                store_t s;
                fill_random(data, size);
                encode(&s, k, m, B, data, size);
                for (uint32_t lost = 0; lost < (1u << n); lost++) {
                    int nl = __builtin_popcount(lost);
                    if (nl > m + 1) continue;
                    s.lost = lost;
                    memset(out, 0xA5, size + 1);
                    int rc = read_all(&s, out, 0, size, NULL);
                    if (nl <= m) {
                        assert_int_equal(rc, 0);
                        assert_memory_equal(out, data, size);
                        /* A ranged read inside the object. */
                        if (size > 2) {
                            uint64_t a = rnd() % size, b = a + rnd() % (size - a);
                            assert_int_equal(read_all(&s, out, a, b - a, NULL), 0);
                            assert_memory_equal(out, data + a, b - a);
                        }
                    } else if (size >= (size_t)k * B) {
                        /* A full stripe has no empty blocks: m+1 losses are fatal. */
                        uint32_t missing = 0;
                        assert_int_equal(rc, ERR_UNRECOVERABLE);
                        assert_int_equal(read_all(&s, out, 0, size, &missing), ERR_UNRECOVERABLE);
                        assert_true((missing & lost) != 0);
                    }
                }
                store_free(&s);
                free(data);
                free(out);
            }
        }
    }
}

static void test_randomized_large(void **state)
{
    (void)state;
    rng_state = 0xfeedbeefcafe;
    par_calls = 0;
    for (int iter = 0; iter < 3000; iter++) {
        use_par = iter & 1; /* every other read fetches its blocks on threads */
        int k = 1 + (int)(rnd() % 16), m = (int)(rnd() % 5);
        if (k + m > ERS_MAX_SHARDS) m = ERS_MAX_SHARDS - k;
        uint32_t B = (uint32_t)(64 * (1 + rnd() % 32));
        size_t size = rnd() % ((size_t)3 * k * B + 100);
        uint8_t *data = malloc(size + 1), *out = malloc(size + 1);
        store_t s;
        fill_random(data, size);
        encode(&s, k, m, B, data, size);
        /* Random erasure pattern of up to m shards. */
        int nl = m ? (int)(rnd() % (m + 1)) : 0;
        while (__builtin_popcount(s.lost) < nl)
            s.lost |= 1u << (rnd() % (k + m));
        uint64_t a = size ? rnd() % size : 0, b = a + (size - a ? rnd() % (size - a + 1) : 0);
        assert_int_equal(read_all(&s, out, a, b - a, NULL), 0);
        assert_memory_equal(out, data + a, b - a);
        store_free(&s);
        free(data);
        free(out);
    }
    use_par = 0;
    assert_true(par_calls > 100);
}

/* Flip every single bit of every shard stream (blocks and crcs): each is caught and repaired. */
static void test_bitrot_single_bit(void **state)
{
    const int k = 4, m = 2;
    const uint32_t B = 128;
    const size_t size = (size_t)2 * k * B - 50; /* one full stripe + a short one */
    uint8_t data[2 * 4 * 128], out[2 * 4 * 128];
    store_t s;
    (void)state;
    rng_state = 99;
    fill_random(data, size);
    encode(&s, k, m, B, data, size);
    s.computed = 0x15; /* half the shards report the crc of their bytes: both checks are hit */
    int err;
    ers_decoder_t *d = ers_decoder_new(&s.l, &err);
    for (int sh = 0; sh < k + m; sh++) {
        for (size_t bit = 0; bit < s.len[sh] * 8; bit++) {
            s.stream[sh][bit / 8] ^= (uint8_t)(1u << (bit % 8));
            memset(out, 0, sizeof(out));
            assert_int_equal(ers_decoder_read(d, 0, size, out, source, &s), 0);
            assert_memory_equal(out, data, size);
            /* verify_stripe names exactly the damaged shard and rebuilds it. */
            uint64_t stripe = (bit / 8) / (B + 4);
            uint32_t rebuilt = 0;
            assert_int_equal(ers_verify_stripe(d, stripe, source, &s, &rebuilt), 0);
            assert_int_equal(rebuilt, 1u << sh);
            uint32_t blen = ers_block_len(&s.l, stripe, (unsigned)sh);
            uint64_t off = ers_shard_offset(&s.l, stripe);
            s.stream[sh][bit / 8] ^= (uint8_t)(1u << (bit % 8)); /* heal */
            assert_memory_equal(ers_decoder_block(d, (unsigned)sh), s.stream[sh] + off, blen);
            assert_int_equal(ers_decoder_block_crc(d, (unsigned)sh),
                             crc32c(0, s.stream[sh] + off, blen));
        }
    }
    /* m+1 damaged blocks in the first stripe: unrecoverable, never wrong data. */
    for (int sh = 0; sh <= m; sh++)
        s.stream[sh][3] ^= 0x10;
    uint32_t rebuilt;
    assert_int_equal(ers_decoder_read(d, 0, size, out, source, &s), ERR_UNRECOVERABLE);
    assert_int_equal(ers_decoder_missing(d) & 0x7, 0x7);
    assert_int_equal(ers_verify_stripe(d, 0, source, &s, &rebuilt), ERR_UNRECOVERABLE);
    /* The second stripe is untouched and still reads. */
    assert_int_equal(ers_decoder_read(d, (size_t)k * B, size - (size_t)k * B, out, source, &s), 0);
    assert_memory_equal(out, data + (size_t)k * B, size - (size_t)k * B);
    ers_decoder_free(d);
    store_free(&s);
}

/*
 * A refill reads the replaced shard's block and k others, not all k+m: the
 * replaced block comes back exact, with its crc; a bad block among the k
 * read makes it read one more; a replaced block already in place is left.
 */
static void test_rebuild_reads_k_and_the_target(void **state)
{
    const int k = 4, m = 2, n = 6;
    const uint32_t B = 256;
    const size_t size = (size_t)3 * k * B - 77; /* two full stripes and a short one */
    static uint8_t data[3 * 4 * 256];
    store_t s;
    int err;
    (void)state;
    rng_state = 17;
    fill_random(data, size);
    encode(&s, k, m, B, data, size);
    ers_decoder_t *d = ers_decoder_new(&s.l, &err);
    assert_non_null(d);
    uint64_t stripes = ers_stripe_count(&s.l);
    for (int t = 0; t < n; t++) {
        for (uint64_t st = 0; st < stripes; st++) {
            uint32_t blen = ers_block_len(&s.l, st, (unsigned)t), rebuilt = 0;
            uint64_t off = ers_shard_offset(&s.l, st);
            /* In place and intact: nothing to write. */
            memset(s.calls, 0, sizeof(s.calls));
            assert_int_equal(ers_rebuild_stripe(d, st, 1u << t, source, &s, &rebuilt), 0);
            assert_int_equal(rebuilt, 0);
            /* Lost: rebuilt from exactly k others. */
            s.lost = 1u << t;
            memset(s.calls, 0, sizeof(s.calls));
            assert_int_equal(ers_rebuild_stripe(d, st, 1u << t, source, &s, &rebuilt), 0);
            assert_int_equal(rebuilt, 1u << t);
            unsigned asked = 0;
            for (int i = 0; i < n; i++)
                asked += s.calls[i] ? 1 : 0;
            assert_int_equal(asked, k + 1);
            assert_memory_equal(ers_decoder_block(d, (unsigned)t), s.stream[t] + off, blen);
            assert_int_equal(ers_decoder_block_crc(d, (unsigned)t),
                             crc32c(0, s.stream[t] + off, blen));
            /* One of the others rots too: one more is read, the block is still exact. */
            int o = (t + 1) % n;
            if (ers_block_len(&s.l, st, (unsigned)o) > 0) {
                s.stream[o][off] ^= 0x40;
                assert_int_equal(ers_rebuild_stripe(d, st, 1u << t, source, &s, &rebuilt), 0);
                assert_int_equal(rebuilt, 1u << t);
                assert_memory_equal(ers_decoder_block(d, (unsigned)t), s.stream[t] + off, blen);
                s.stream[o][off] ^= 0x40;
            }
            s.lost = 0;
        }
        ers_decoder_free(d); /* (a fresh decoder: no suspects carried to the next target) */
        d = ers_decoder_new(&s.l, &err);
    }
    /* Two replaced drives (m): both rebuilt. m+1 lost: unrecoverable, never wrong bytes. */
    uint32_t rebuilt = 0;
    s.lost = 0x3;
    assert_int_equal(ers_rebuild_stripe(d, 0, 0x3, source, &s, &rebuilt), 0);
    assert_int_equal(rebuilt, 0x3);
    assert_memory_equal(ers_decoder_block(d, 1), s.stream[1], B);
    s.lost = 0x7;
    assert_int_equal(ers_rebuild_stripe(d, 0, 0x3, source, &s, &rebuilt), ERR_UNRECOVERABLE);
    ers_decoder_free(d);
    store_free(&s);
}

/*
 * A rebuilt block's buffer handed over for another (ers_decoder_swap_block): the caller gets
 * the block, with room for a trailer after it; the decoder goes on with the buffer it was
 * given, and rebuilds the next stripes right; without a pool nothing is swapped.
 */
static void test_swap_rebuilt_block(void **state)
{
    const int k = 4, m = 2;
    const uint32_t B = 4096;
    const size_t size = (size_t)3 * k * B - 1000;
    static uint8_t data[3 * 4 * 4096];
    store_t s;
    int err;
    (void)state;
    rng_state = 23;
    fill_random(data, size);
    encode(&s, k, m, B, data, size);
    bufpool_t *pool = bufpool_new(1u << 20);
    ers_decoder_t *d = ers_decoder_new(&s.l, &err);
    assert_non_null(d);
    ers_decoder_set_bufpool(d, pool);
    assert_ptr_equal(ers_decoder_bufpool(d), pool);
    assert_int_equal(ers_decoder_buf_len(d), B); /* no slack unless asked */
    uint32_t rebuilt0;
    s.lost = 1u << 2;
    assert_int_equal(ers_rebuild_stripe(d, 0, 1u << 2, source, &s, &rebuilt0), 0);
    ers_decoder_set_slack(d, 4); /* between stripes: the short buffers are let go */
    assert_null(ers_decoder_block(d, 2));
    size_t cap = ers_decoder_buf_len(d);
    assert_true(cap >= B + 4);
    uint8_t *held[3];
    s.lost = 1u << 2;
    for (uint64_t st = 0; st < ers_stripe_count(&s.l); st++) {
        uint32_t rebuilt = 0, blen = ers_block_len(&s.l, st, 2);
        uint64_t off = ers_shard_offset(&s.l, st);
        assert_int_equal(ers_rebuild_stripe(d, st, 1u << 2, source, &s, &rebuilt), 0);
        assert_int_equal(rebuilt, 1u << 2);
        uint8_t *fresh = bufpool_get(pool, cap);
        memset(fresh, 0xee, cap); /* what the decoder reads next must overwrite this */
        held[st] = ers_decoder_swap_block(d, 2, fresh);
        assert_non_null(held[st]);
        assert_ptr_not_equal(held[st], fresh);
        assert_ptr_equal(ers_decoder_block(d, 2), fresh);
        assert_memory_equal(held[st], s.stream[2] + off, blen);
        memset(held[st] + blen, 0x5a, 4); /* a trailer fits (ASan: inside the buffer) */
    }
    /* Each swap handed over a different buffer, still holding its own stripe's block. */
    assert_ptr_not_equal(held[0], held[1]);
    assert_memory_equal(held[0], s.stream[2], B);
    for (int i = 0; i < 3; i++)
        bufpool_put(pool, held[i]);
    /* Nothing there, or no pool: nothing swapped, fresh not taken. */
    uint8_t *fresh = bufpool_get(pool, cap);
    assert_null(ers_decoder_swap_block(d, 5, fresh));
    ers_decoder_free(d);
    d = ers_decoder_new(&s.l, &err);
    ers_decoder_set_slack(d, 4);
    uint32_t rebuilt;
    assert_int_equal(ers_rebuild_stripe(d, 0, 1u << 2, source, &s, &rebuilt), 0);
    assert_null(ers_decoder_swap_block(d, 2, fresh));
    assert_memory_equal(ers_decoder_block(d, 2), s.stream[2], B);
    bufpool_put(pool, fresh);
    ers_decoder_free(d);
    bufpool_free(pool);
    store_free(&s);
}

/*
 * A lost drive is asked once, then every 16th stripe; the stripes between read
 * parity in the same round as the data, and the bytes are right.
 */
static void test_lost_shard_not_asked_again(void **state)
{
    const int k = 4, m = 2;
    const uint32_t B = 64;
    const size_t size = (size_t)40 * k * B; /* 40 full stripes */
    static uint8_t data[40 * 4 * 64], out[40 * 4 * 64];
    store_t s;
    int err;
    (void)state;
    rng_state = 5;
    fill_random(data, size);
    encode(&s, k, m, B, data, size);
    s.lost = 1u << 1;
    memset(s.calls, 0, sizeof(s.calls));
    ers_decoder_t *d = ers_decoder_new(&s.l, &err);
    assert_int_equal(ers_decoder_read(d, 0, size, out, source, &s), 0);
    assert_memory_equal(out, data, size);
    assert_int_equal(s.calls[1], 3); /* stripes 0, 16 and 32 */
    /* Every other shard once per stripe: k reads a stripe, the lost one's stand-in included. */
    unsigned total = 0;
    for (int i = 0; i < k + m; i++)
        total += s.calls[i];
    assert_int_equal(total, 40 * k + 3);
    /* With the drive back, the next probe finds it and reads go straight again. */
    s.lost = 0;
    memset(s.calls, 0, sizeof(s.calls));
    assert_int_equal(ers_decoder_read(d, 0, size, out, source, &s), 0);
    assert_memory_equal(out, data, size);
    assert_true(s.calls[4] + s.calls[5] <= 16); /* parity only until stripe 16's probe */
    ers_decoder_free(d);
    store_free(&s);
}

/* A place() that fails ends the object: that write, every later one and the finish say so. */
static int place_fails_second(void *arg, uint64_t stripe, uint8_t *blocks[])
{
    if (stripe == 1) return ERR_NOSPC;
    return place(arg, stripe, blocks);
}

static void test_placed_failure_ends_the_object(void **state)
{
    (void)state;
    int err, k = 4, m = 2;
    uint32_t B = 4096;
    store_t s;
    memset(&s, 0, sizeof(s));
    placed_t pl = {.s = &s, .n = k + m, .B = B};
    for (int h = 0; h < 2; h++)
        for (int i = 0; i < k + m; i++)
            pl.set[h][i] = malloc(B);
    ers_encoder_t *e = ers_encoder_new(k, m, B, placed_sink, &pl, &err);
    assert_non_null(e);
    ers_encoder_place(e, place_fails_second, 0);
    uint8_t *data = malloc(3 * (size_t)k * B);
    fill_random(data, 3 * (size_t)k * B);
    assert_int_equal(ers_encoder_write(e, data, (size_t)k * B), 0); /* stripe 0, sunk */
    assert_int_equal(ers_encoder_write(e, data, 10), ERR_NOSPC);    /* stripe 1 has no place */
    assert_int_equal(ers_encoder_write(e, data, 10), ERR_NOSPC);
    ers_layout_t l;
    assert_int_equal(ers_encoder_finish(e, &l), ERR_NOSPC);
    for (int i = 0; i < k + m; i++)
        assert_int_equal(s.len[i], B + 4); /* only stripe 0 reached the sink */
    ers_encoder_free(e);
    store_free(&s);
    for (int h = 0; h < 2; h++)
        for (int i = 0; i < k + m; i++)
            free(pl.set[h][i]);
    free(data);
}

static void test_layout_codec(void **state)
{
    ers_layout_t l = {8, 3, 1 << 20, 123456789}, r;
    uint8_t buf[ERS_LAYOUT_SIZE];
    (void)state;
    ers_layout_encode(&l, buf);
    assert_int_equal(ers_layout_decode(buf, sizeof(buf), &r), 0);
    assert_int_equal(r.k, 8);
    assert_int_equal(r.m, 3);
    assert_int_equal(r.block_size, 1 << 20);
    assert_int_equal(r.size, 123456789);
    assert_int_equal(ers_layout_decode(buf, sizeof(buf) - 1, &r), ERR_CORRUPT);
    buf[9] ^= 1;
    assert_int_equal(ers_layout_decode(buf, sizeof(buf), &r), ERR_CORRUPT);
    /* Bad values with a valid crc are refused too. */
    l.k = 17;
    ers_layout_encode(&l, buf);
    assert_int_equal(ers_layout_decode(buf, sizeof(buf), &r), ERR_INVAL);
    l.k = 4;
    l.block_size = 100;
    ers_layout_encode(&l, buf);
    assert_int_equal(ers_layout_decode(buf, sizeof(buf), &r), ERR_INVAL);
    /* Small objects get small blocks: 10 KiB over 4 data shards. */
    store_t s;
    static uint8_t data[10240];
    encode(&s, 4, 2, 1 << 20, data, sizeof(data));
    assert_int_equal(s.l.block_size, 2560);
    assert_int_equal(ers_stripe_count(&s.l), 1);
    assert_int_equal(s.len[0], 2560 + 4);
    store_free(&s);
    /* Out-of-range reads are refused. */
    int err;
    l.block_size = 4096;
    ers_decoder_t *d = ers_decoder_new(&l, &err);
    assert_non_null(d);
    uint8_t o[4];
    assert_int_equal(ers_decoder_read(d, l.size - 1, 2, o, source, &s), ERR_RANGE);
    ers_decoder_free(d);
    assert_null(ers_encoder_new(0, 2, 4096, sink, NULL, &err));
    assert_int_equal(err, ERR_INVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_codec),
        cmocka_unit_test(test_exhaustive_small),
        cmocka_unit_test(test_randomized_large),
        cmocka_unit_test(test_bitrot_single_bit),
        cmocka_unit_test(test_lost_shard_not_asked_again),
        cmocka_unit_test(test_rebuild_reads_k_and_the_target),
        cmocka_unit_test(test_swap_rebuilt_block),
        cmocka_unit_test(test_placed_failure_ends_the_object),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
