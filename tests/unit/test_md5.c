#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

/* The kernels and the hub are static: the module is compiled in here. */
#include "../../common/md5.c"
#include "testlib.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>

static void ref_md5(const uint8_t *p, size_t n, uint8_t d[16])
{
    unsigned dl = 0;
    assert_int_equal(EVP_Digest(p, n, d, &dl, EVP_md5(), NULL), 1);
    assert_int_equal(dl, 16);
}

static void hex(const uint8_t d[16], char out[33])
{
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* The widths this CPU can run, best last. */
static int widths(int out[3])
{
    int n = 0, best = cpu_width();
    out[n++] = 1;
    if (best >= 8) out[n++] = 8;
    if (best >= 16) out[n++] = 16;
    return n;
}

static void test_rfc1321_vectors(void **state)
{
    (void)state;
    static const char *const v[][2] = {
        {"", "d41d8cd98f00b204e9800998ecf8427e"},
        {"a", "0cc175b9c0f1b6a831c399e269772661"},
        {"abc", "900150983cd24fb0d6963f7d28e17f72"},
        {"message digest", "f96b697d7cb7938d525a2f31aaf161d0"},
        {"abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"},
        {"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
         "d174ab98d277d9f5a5611c2c9f419d9f"},
        {"1234567890123456789012345678901234567890"
         "1234567890123456789012345678901234567890",
         "57edf4a22be3c955ac49da2e2107b67a"},
    };
    /* No bytes at all, and no buffer (a client's empty PUT): OpenSSL's update took it. */
    md5_t m;
    uint8_t d0[16];
    char h0[33];
    md5_init(&m);
    md5_update(&m, NULL, 0);
    md5_final(&m, d0);
    hex(d0, h0);
    assert_string_equal(h0, "d41d8cd98f00b204e9800998ecf8427e");
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        uint8_t d[16];
        char h[33];
        md5_of(v[i][0], strlen(v[i][0]), d);
        hex(d, h);
        assert_string_equal(h, v[i][1]);
    }
}

/* Every lane count of each vector kernel gives each lane what the scalar kernel gives it. */
static void test_vector_kernels_match_scalar(void **state)
{
    (void)state;
    int w[3], nw = widths(w);
    if (nw == 1) skip();
    size_t nb = 37;
    uint8_t *data = malloc(LANES_MAX * nb * 64);
    tl_fill(data, LANES_MAX * nb * 64, 7);
    for (int wi = 1; wi < nw; wi++) {
        for (int nlanes = 2; nlanes <= w[wi]; nlanes++) {
            uint32_t hv[LANES_MAX][4], hs[LANES_MAX][4];
            uint32_t *hp[LANES_MAX];
            const uint8_t *pp[LANES_MAX];
            for (int l = 0; l < nlanes; l++) {
                for (int i = 0; i < 4; i++)
                    hv[l][i] = hs[l][i] = (uint32_t)tl_mix((uint64_t)(l * 4 + i));
                hp[l] = hv[l];
                /* Lanes overlap and start unaligned: inputs are any bytes. */
                pp[l] = data + l * (nb * 64 - 13) / 2 + (l & 3);
            }
            round_run(hp, pp, nlanes, nb, w[wi]);
            for (int l = 0; l < nlanes; l++) {
                blocks_x1(hs[l], pp[l], nb);
                assert_memory_equal(hv[l], hs[l], sizeof(hs[l]));
            }
        }
    }
    free(data);
}

/* Streams of every length around the block edges, split at random, on each kernel. */
static void test_streams_split_at_random(void **state)
{
    (void)state;
    int w[3], nw = widths(w);
    size_t max = 300 * 1024;
    uint8_t *data = malloc(max);
    tl_fill(data, max, 11);
    for (int wi = 0; wi < nw; wi++) {
        md5_force_lanes(w[wi]);
        assert_int_equal(md5_lanes(), w[wi]);
        for (int t = 0; t < 300; t++) {
            uint64_t r = tl_mix((uint64_t)t * 977 + (uint64_t)wi);
            size_t n = t < 140 ? (size_t)t : (size_t)(r % max);
            md5_t m;
            md5_init(&m);
            size_t off = 0;
            for (int s = 0; off < n; s++) {
                size_t step = (size_t)(tl_mix(r + (uint64_t)s) % (n < 64 ? 8 : n / 3 + 1)) + 1;
                if (step > n - off) step = n - off;
                md5_update(&m, data + off, step);
                off += step;
            }
            uint8_t got[16], want[16];
            md5_final(&m, got);
            ref_md5(data, n, want);
            assert_memory_equal(got, want, 16);
        }
    }
    md5_force_lanes(0);
    free(data);
}

typedef struct {
    int id;
    int streams;
    size_t max;
    const uint8_t *data;
    int bad;
} worker_t;

static void *hash_streams(void *arg)
{
    worker_t *wk = arg;
    for (int s = 0; s < wk->streams; s++) {
        uint64_t r = tl_mix((uint64_t)wk->id * 1000003 + (uint64_t)s);
        size_t n = (size_t)(r % wk->max), start = (size_t)(tl_mix(r) % 4096);
        const uint8_t *p = wk->data + start;
        md5_t m;
        md5_init(&m);
        for (size_t off = 0, i = 0; off < n; i++) {
            size_t step = (size_t)(tl_mix(r + i) % (256 * 1024)) + 1;
            if (step > n - off) step = n - off;
            md5_update(&m, p + off, step);
            off += step;
        }
        uint8_t got[16], want[16];
        unsigned dl = 0;
        md5_final(&m, got);
        EVP_Digest(p, n, want, &dl, EVP_md5(), NULL);
        if (memcmp(got, want, 16) != 0) wk->bad++;
    }
    return NULL;
}

/* Many threads at once: streams meet in the hub, combiners hand over; every digest is right. */
static void test_concurrent_streams(void **state)
{
    (void)state;
    enum { THREADS = 12 };
    size_t max = 3 << 20;
    uint8_t *data = malloc(max + 4096);
    tl_fill(data, max + 4096, 3);
    int w[3], nw = widths(w);
    for (int wi = 0; wi < nw; wi++) {
        md5_force_lanes(w[wi]);
        pthread_t th[THREADS];
        worker_t wk[THREADS];
        for (int i = 0; i < THREADS; i++) {
            wk[i] = (worker_t){.id = i + 100 * wi, .streams = 6, .max = max, .data = data};
            assert_int_equal(pthread_create(&th[i], NULL, hash_streams, &wk[i]), 0);
        }
        for (int i = 0; i < THREADS; i++) {
            pthread_join(th[i], NULL);
            assert_int_equal(wk[i].bad, 0);
        }
        pthread_mutex_lock(&hub.mu);
        assert_int_equal(hub.lanes, 0);
        assert_null(hub.queue);
        assert_int_equal(hub.combining, 0);
        pthread_mutex_unlock(&hub.mu);
    }
    md5_force_lanes(0);
    free(data);
}

typedef struct {
    const uint8_t *p;
    size_t n;
    uint8_t digest[16];
} one_t;

static void *hash_one(void *arg)
{
    one_t *o = arg;
    md5_of(o->p, o->n, o->digest);
    return NULL;
}

/*
 * Streams posted while a combiner is busy are hashed together in vector
 * rounds: hold the hub as if combining, let five updates queue up, then let
 * go (no timing: the test waits until all five are queued).
 */
static void test_queued_streams_share_rounds(void **state)
{
    (void)state;
    int w[3], nw = widths(w);
    if (nw == 1) skip();
    md5_force_lanes(w[nw - 1]);
    enum { N = 5 };
    size_t len[N] = {1 << 20, 700 * 1024 + 5, 1 << 20, 64 * 1024, 2 << 20};
    uint8_t *data = malloc(2 << 20);
    tl_fill(data, 2 << 20, 5);
    md5_stats_t before, after;
    md5_stats(&before);

    pthread_mutex_lock(&hub.mu);
    hub.combining = 1;
    pthread_mutex_unlock(&hub.mu);
    pthread_t th[N];
    one_t o[N];
    for (int i = 0; i < N; i++) {
        o[i] = (one_t){.p = data + i, .n = len[i] - (size_t)i};
        assert_int_equal(pthread_create(&th[i], NULL, hash_one, &o[i]), 0);
    }
    for (;;) {
        pthread_mutex_lock(&hub.mu);
        int queued = 0;
        for (md5_pending_t *j = hub.queue; j; j = j->next)
            queued++;
        if (queued == N) {
            hub.combining = 0;
            pthread_cond_broadcast(&hub.cv);
            pthread_mutex_unlock(&hub.mu);
            break;
        }
        pthread_mutex_unlock(&hub.mu);
        sched_yield();
    }
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        uint8_t want[16];
        ref_md5(o[i].p, o[i].n, want);
        assert_memory_equal(o[i].digest, want, 16);
    }
    md5_stats(&after);
    uint64_t rounds = after.rounds - before.rounds;
    uint64_t lane_blocks = after.lane_blocks - before.lane_blocks;
    uint64_t round_blocks = after.round_blocks - before.round_blocks;
    assert_true(rounds > 0);
    /* The first 64 KiB went five lanes wide, at least. */
    assert_true(lane_blocks >= 5 * 1000);
    assert_true(lane_blocks >= 3 * round_blocks);
    md5_force_lanes(0);
    free(data);
}

/* Updates begun on one thread and ended later share rounds: no other thread, no timing. */
static void test_begun_updates_share_rounds(void **state)
{
    (void)state;
    int w[3], nw = widths(w);
    if (nw == 1) skip();
    md5_force_lanes(w[nw - 1]);
    enum { N = 4 };
    size_t len[N] = {300 * 1024 + 7, 1 << 20, 64 * 1024 + 63, 777 * 1024};
    uint8_t *data = malloc(1 << 20);
    tl_fill(data, 1 << 20, 9);
    md5_stats_t before, after;
    md5_stats(&before);
    md5_t m[N];
    md5_pending_t pend[N];
    for (int i = 0; i < N; i++) {
        md5_init(&m[i]);
        md5_update(&m[i], data, (size_t)i + 1); /* the next update starts mid-block */
        md5_update_begin(&m[i], data + i + 1, len[i] - (size_t)i - 1, &pend[i]);
    }
    static const int order[N] = {2, 0, 3, 1};
    for (int i = 0; i < N; i++)
        md5_update_end(&pend[order[i]]);
    for (int i = 0; i < N; i++)
        md5_update_end(&pend[i]); /* a second end returns at once */
    for (int i = 0; i < N; i++) {
        uint8_t got[16], want[16];
        md5_final(&m[i], got);
        ref_md5(data, len[i], want);
        assert_memory_equal(got, want, 16);
    }
    md5_stats(&after);
    /* The shortest (64 KiB) went four lanes wide all along. */
    assert_true(after.lane_blocks - before.lane_blocks >= 4 * 1000);
    assert_true(after.rounds > before.rounds);
    md5_force_lanes(0);
    free(data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc1321_vectors),
        cmocka_unit_test(test_vector_kernels_match_scalar),
        cmocka_unit_test(test_streams_split_at_random),
        cmocka_unit_test(test_concurrent_streams),
        cmocka_unit_test(test_queued_streams_share_rounds),
        cmocka_unit_test(test_begun_updates_share_rounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
