/*
 * md5: MD5 over 1, 4, 8 or 16 streams at once, and the hub where concurrent
 * updates meet (md5.h says why).
 *
 * Kernels. One generic compression loop (KERNEL below) is built for a plain
 * word and, with GCC's vector extensions, for vectors of 4, 8 and 16 lanes
 * (AVX2; AVX-512 for 16, and AVX-512VL's rotate and ternary logic for 4 and
 * 8 where there is AVX-512). Each lane is one stream: its own state and its
 * own input pointer. A block's sixteen message words are transposed in
 * registers first (word j of every lane side by side). MD5 is one chain of
 * dependent steps, so a vector round costs about what one stream costs:
 * measured on this project's VM, a block of every lane in 85 ns for 1 lane,
 * 89 for 4, 97 for 8, 111 for 16 (OpenSSL: 80-85 ns for one stream). The
 * narrowest kernel that holds a round's streams runs it.
 *
 * The hub. Posters queue a job (their state, their blocks) under the hub's
 * mutex and wait on its condition variable. The combiner moves queued jobs
 * into free lanes, takes a round's worth of blocks (the fewest any lane has
 * left, at most HUB_ROUND_BLOCKS), and hashes it with the mutex released:
 * only the combiner touches jobs in lanes, and their posters are waiting.
 * Jobs that are done are told so (broadcast); the combiner returns when its
 * own is done, and leaves the rest in their lanes for the next waiter that
 * wakes to find no combiner. Nothing here allocates.
 */
#include "common/md5.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* The sine table and the shift amounts of RFC 1321, 3.4. */
static const uint32_t K[64] = {
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
    0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
    0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391,
};
static const int S[4][4] = {{7, 12, 17, 22}, {5, 9, 14, 20}, {4, 11, 16, 23}, {6, 10, 15, 21}};

#define LANES_MAX 16

/*
 * The sixteen message words of block `blk` of each lane, word j of every lane
 * side by side in m[j]: a transpose of the lanes' blocks. Scalar for one lane;
 * with the vector kernels a transpose in registers (below), which doubled the
 * 16-lane kernel's rate against gathering words lane by lane through memory.
 */
#define LOAD_X1(m, p, off)                                                                         \
    do {                                                                                           \
        for (int j = 0; j < 16; j++) {                                                             \
            const uint8_t *q = p[0] + (off) + 4 * j;                                               \
            m[j] = (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 |                   \
                   (uint32_t)q[3] << 24;                                                           \
        }                                                                                          \
    } while (0)

/*
 * nb blocks of each of LANES streams: lane l's state is st[0..3][l], its
 * input p[l], read little-endian (x86 is). MD5 is one chain of dependent
 * steps, so each step is written to leave the fewest operations after b (the
 * previous step's result): a, K and m are summed first, F is d ^ (b & (c ^
 * d)), H b ^ (c ^ d), and G is split into two sums (below). The scalar kernel
 * went from 90 to 85 ns a block with G split, level with OpenSSL's assembly;
 * the vector ones do each function in one ternary-logic instruction anyway.
 */
#define KERNEL(NAME, LANES, VEC, LOAD, TARGET)                                                     \
    TARGET static void NAME(uint32_t st[4][LANES_MAX], const uint8_t *const *p, size_t nb)         \
    {                                                                                              \
        VEC a, b, c, d;                                                                            \
        memcpy(&a, st[0], sizeof(a));                                                              \
        memcpy(&b, st[1], sizeof(b));                                                              \
        memcpy(&c, st[2], sizeof(c));                                                              \
        memcpy(&d, st[3], sizeof(d));                                                              \
        for (size_t blk = 0; blk < nb; blk++) {                                                    \
            VEC m[16];                                                                             \
            LOAD(m, p, 64 * blk);                                                                  \
            VEC a0 = a, b0 = b, c0 = c, d0 = d;                                                    \
            _Pragma("GCC unroll 64") for (int i = 0; i < 64; i++)                                  \
            {                                                                                      \
                VEC f;                                                                             \
                int s = S[i >> 4][i & 3];                                                          \
                if (i < 16) {                                                                      \
                    f = a + K[i] + m[i] + (d ^ (b & (c ^ d)));                                     \
                } else if (i < 32) {                                                               \
                    /* (b & d) | (c & ~d) as a sum of its disjoint halves: one of them, and */     \
                    /* what it is added to, wait for no b. */                                      \
                    f = a + K[i] + m[(5 * i + 1) & 15] + (c & ~d);                                 \
                    f += b & d;                                                                    \
                } else if (i < 48) {                                                               \
                    f = a + K[i] + m[(3 * i + 5) & 15] + (b ^ (c ^ d));                            \
                } else {                                                                           \
                    f = a + K[i] + m[(7 * i) & 15] + (c ^ (b | ~d));                               \
                }                                                                                  \
                a = d;                                                                             \
                d = c;                                                                             \
                c = b;                                                                             \
                b = b + ((f << s) | (f >> (32 - s)));                                              \
            }                                                                                      \
            a += a0;                                                                               \
            b += b0;                                                                               \
            c += c0;                                                                               \
            d += d0;                                                                               \
        }                                                                                          \
        memcpy(st[0], &a, sizeof(a));                                                              \
        memcpy(st[1], &b, sizeof(b));                                                              \
        memcpy(st[2], &c, sizeof(c));                                                              \
        memcpy(st[3], &d, sizeof(d));                                                              \
    }

KERNEL(md5_x1, 1, uint32_t, LOAD_X1, )

#if defined(__x86_64__)
typedef uint32_t vec4_t __attribute__((vector_size(16)));
typedef uint32_t vec8_t __attribute__((vector_size(32)));
typedef uint32_t vec16_t __attribute__((vector_size(64)));

/* 4 x 4 words, four times: unpack pairs of rows, then pairs of pairs. */
__attribute__((target("avx2"), always_inline)) static inline void
load_x4(vec4_t m[16], const uint8_t *const *p, size_t off)
{
    _Pragma("GCC unroll 4") for (int q = 0; q < 4; q++)
    {
        __m128i r[4];
        for (int l = 0; l < 4; l++)
            r[l] = _mm_loadu_si128((const __m128i *)(p[l] + off + 16 * q));
        __m128i t0 = _mm_unpacklo_epi32(r[0], r[1]), t1 = _mm_unpackhi_epi32(r[0], r[1]);
        __m128i t2 = _mm_unpacklo_epi32(r[2], r[3]), t3 = _mm_unpackhi_epi32(r[2], r[3]);
        m[4 * q + 0] = (vec4_t)_mm_unpacklo_epi64(t0, t2);
        m[4 * q + 1] = (vec4_t)_mm_unpackhi_epi64(t0, t2);
        m[4 * q + 2] = (vec4_t)_mm_unpacklo_epi64(t1, t3);
        m[4 * q + 3] = (vec4_t)_mm_unpackhi_epi64(t1, t3);
    }
}
#define LOAD_X4(m, p, off) load_x4(m, p, off)

/* 8 x 8 words: unpack pairs of rows, then pairs of pairs, then swap 128-bit halves. */
__attribute__((target("avx2"), always_inline)) static inline void
load_x8(vec8_t m[16], const uint8_t *const *p, size_t off)
{
    _Pragma("GCC unroll 2") for (int half = 0; half < 2; half++)
    {
        __m256i r[8], t[8], u[8];
        for (int l = 0; l < 8; l++)
            r[l] = _mm256_loadu_si256((const __m256i *)(p[l] + off + 32 * half));
        for (int l = 0; l < 8; l += 2) {
            t[l] = _mm256_unpacklo_epi32(r[l], r[l + 1]);
            t[l + 1] = _mm256_unpackhi_epi32(r[l], r[l + 1]);
        }
        for (int l = 0; l < 8; l += 4) {
            u[l] = _mm256_unpacklo_epi64(t[l], t[l + 2]);
            u[l + 1] = _mm256_unpackhi_epi64(t[l], t[l + 2]);
            u[l + 2] = _mm256_unpacklo_epi64(t[l + 1], t[l + 3]);
            u[l + 3] = _mm256_unpackhi_epi64(t[l + 1], t[l + 3]);
        }
        for (int j = 0; j < 4; j++) {
            m[8 * half + j] = (vec8_t)_mm256_permute2x128_si256(u[j], u[j + 4], 0x20);
            m[8 * half + j + 4] = (vec8_t)_mm256_permute2x128_si256(u[j], u[j + 4], 0x31);
        }
    }
}
#define LOAD_X8(m, p, off) load_x8(m, p, off)

/*
 * 16 x 16 words by halving: at step b (8, 4, 2, 1) rows i and i + b (bit b of
 * i clear) trade the b x b blocks off the diagonal of their 2b x 2b block,
 * one two-source permute per row.
 */
static const uint32_t transpose_idx[4][2][16] __attribute__((aligned(64))) = {
#define IDX_LO(b, c) ((c) & (b) ? 16 + (c) - (b) : (c))
#define IDX_HI(b, c) ((c) & (b) ? 16 + (c) : (c) + (b))
#define IDX_ROW(F, b)                                                                              \
    {                                                                                              \
        F(b, 0), F(b, 1), F(b, 2), F(b, 3), F(b, 4), F(b, 5), F(b, 6), F(b, 7), F(b, 8), F(b, 9),  \
            F(b, 10), F(b, 11), F(b, 12), F(b, 13), F(b, 14), F(b, 15)                             \
    }
    {IDX_ROW(IDX_LO, 8), IDX_ROW(IDX_HI, 8)},
    {IDX_ROW(IDX_LO, 4), IDX_ROW(IDX_HI, 4)},
    {IDX_ROW(IDX_LO, 2), IDX_ROW(IDX_HI, 2)},
    {IDX_ROW(IDX_LO, 1), IDX_ROW(IDX_HI, 1)},
};

__attribute__((target("avx512f"), always_inline)) static inline void
load_x16(vec16_t m[16], const uint8_t *const *p, size_t off)
{
    __m512i r[16];
    _Pragma("GCC unroll 16") for (int l = 0; l < 16; l++) r[l] =
        _mm512_loadu_si512((const void *)(p[l] + off));
    _Pragma("GCC unroll 4") for (int step = 0; step < 4; step++)
    {
        int b = 8 >> step;
        __m512i lo = _mm512_load_si512((const void *)transpose_idx[step][0]);
        __m512i hi = _mm512_load_si512((const void *)transpose_idx[step][1]);
        _Pragma("GCC unroll 16") for (int i = 0; i < 16; i++)
        {
            if (i & b) continue;
            __m512i x = r[i], y = r[i + b];
            r[i] = _mm512_permutex2var_epi32(x, lo, y);
            r[i + b] = _mm512_permutex2var_epi32(x, hi, y);
        }
    }
    _Pragma("GCC unroll 16") for (int j = 0; j < 16; j++) m[j] = (vec16_t)r[j];
}
#define LOAD_X16(m, p, off) load_x16(m, p, off)

/*
 * A round costs about what its widest vector costs, whatever the lanes in
 * use: the kernel is picked by the lanes a round has (round_run). With
 * AVX-512VL the 4- and 8-lane kernels also get its rotate and ternary logic:
 * measured, a block a lane for 1, 4, 8 and 16 lanes 85, 89, 97, 111 ns with
 * AVX-512, and 126 and 147 ns for 4 and 8 with AVX2 alone.
 */
KERNEL(md5_x4, 4, vec4_t, LOAD_X4, __attribute__((target("avx2"))))
KERNEL(md5_x8, 8, vec8_t, LOAD_X8, __attribute__((target("avx2"))))
KERNEL(md5_x4vl, 4, vec4_t, LOAD_X4, __attribute__((target("avx2,avx512f,avx512vl"))))
KERNEL(md5_x8vl, 8, vec8_t, LOAD_X8, __attribute__((target("avx2,avx512f,avx512vl"))))
KERNEL(md5_x16, 16, vec16_t, LOAD_X16, __attribute__((target("avx512f"))))
#endif

/* One stream's blocks, hashed on the calling thread. */
static void blocks_x1(uint32_t h[4], const uint8_t *p, size_t nb)
{
    uint32_t st[4][LANES_MAX];
    for (int i = 0; i < 4; i++)
        st[i][0] = h[i];
    md5_x1(st, &p, nb);
    for (int i = 0; i < 4; i++)
        h[i] = st[i][0];
}

/* ------------------------------------------------------------------ the hub */

/* A lane's share of a round: 16 KiB, so that a new stream waits at most that long to join. */
#define HUB_ROUND_BLOCKS 256
/* Updates shorter than this are hashed on their own thread: the hand-off would cost more. */
#define HUB_MIN_BLOCKS   256

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    md5_pending_t *queue, *queue_last;
    md5_pending_t *lane[LANES_MAX]; /* the combiner's; kept for the next one when it hands over */
    int lanes;
    int combining;
    md5_stats_t stats;
} hub = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static _Atomic uint64_t own_thread_blocks;
static _Atomic int forced_width; /* md5_force_lanes */

/* Idle lanes hash zeros into a state nobody reads. */
static const uint8_t idle_blocks[HUB_ROUND_BLOCKS * 64];

static int cpu_width(void)
{
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl")) return 16;
    if (__builtin_cpu_supports("avx2")) return 8;
#endif
    return 1;
}

int md5_lanes(void)
{
    static _Atomic int width;
    int forced = atomic_load(&forced_width);
    if (forced) return forced;
    int w = atomic_load_explicit(&width, memory_order_relaxed);
    if (!w) atomic_store_explicit(&width, w = cpu_width(), memory_order_relaxed);
    return w;
}

void md5_force_lanes(int lanes)
{
    int best = cpu_width();
    atomic_store(&forced_width, lanes > best ? best : lanes);
}

/* One round over the lanes in use (nlanes of them), n blocks each; no lock held. */
static void round_run(uint32_t *const h[], const uint8_t *const p[], int nlanes, size_t n,
                      int width)
{
    if (nlanes == 1 || width == 1) {
        /* One stream: the scalar kernel beats a vector of idle lanes. */
        for (int l = 0; l < nlanes; l++)
            blocks_x1(h[l], p[l], n);
        return;
    }
    int lanes = nlanes <= 4 ? 4 : nlanes <= 8 ? 8 : 16;
    uint32_t st[4][LANES_MAX], idle_state[4] = {0};
    const uint8_t *in[LANES_MAX];
    for (int l = 0; l < lanes; l++) {
        const uint32_t *src = l < nlanes ? h[l] : idle_state;
        for (int i = 0; i < 4; i++)
            st[i][l] = src[i];
        in[l] = l < nlanes ? p[l] : idle_blocks;
    }
#if defined(__x86_64__)
    if (lanes == 16)
        md5_x16(st, in, n);
    else if (lanes == 8)
        (width == 16 ? md5_x8vl : md5_x8)(st, in, n);
    else
        (width == 16 ? md5_x4vl : md5_x4)(st, in, n);
#endif
    for (int l = 0; l < nlanes; l++)
        for (int i = 0; i < 4; i++)
            h[l][i] = st[i][l];
}

/* Called with hub.mu held and hub.combining taken; returns once `mine` is done. */
static void combine(md5_pending_t *mine, int width)
{
    while (!mine->done) {
        while (hub.lanes < width && hub.queue) {
            md5_pending_t *j = hub.queue;
            hub.queue = j->next;
            if (!hub.queue) hub.queue_last = NULL;
            hub.lane[hub.lanes++] = j;
        }
        size_t n = HUB_ROUND_BLOCKS;
        uint32_t *h[LANES_MAX];
        const uint8_t *p[LANES_MAX];
        int nlanes = hub.lanes;
        for (int l = 0; l < nlanes; l++) {
            if (hub.lane[l]->left < n) n = hub.lane[l]->left;
            h[l] = hub.lane[l]->h;
            p[l] = hub.lane[l]->p;
        }
        pthread_mutex_unlock(&hub.mu);
        round_run(h, p, nlanes, n, width);
        pthread_mutex_lock(&hub.mu);
        if (nlanes > 1 && width > 1) {
            hub.stats.rounds++;
            hub.stats.lane_blocks += (uint64_t)nlanes * n;
            hub.stats.round_blocks += n;
        } else {
            hub.stats.scalar_blocks += (uint64_t)nlanes * n;
        }
        int finished = 0, keep = 0;
        for (int l = 0; l < nlanes; l++) {
            md5_pending_t *j = hub.lane[l];
            j->p += n * 64;
            j->left -= n;
            if (j->left) {
                hub.lane[keep++] = j;
            } else {
                j->done = 1;
                finished = 1;
            }
        }
        /* Jobs posted during the round sit in the queue, not in lanes past nlanes. */
        hub.lanes = keep;
        if (finished) pthread_cond_broadcast(&hub.cv);
    }
}

/* Queue a stream's blocks for the hub's rounds. */
static void hub_post(md5_pending_t *job)
{
    pthread_mutex_lock(&hub.mu);
    if (hub.queue_last)
        hub.queue_last->next = job;
    else
        hub.queue = job;
    hub.queue_last = job;
    hub.stats.posts++;
    pthread_mutex_unlock(&hub.mu);
}

/* Until the job is hashed: combine while nobody else does, else wait. */
static void hub_wait(md5_pending_t *job, int width)
{
    pthread_mutex_lock(&hub.mu);
    while (!job->done) {
        if (!hub.combining) {
            hub.combining = 1;
            combine(job, width);
            hub.combining = 0;
            /* Others' blocks are left: wake their posters, one of which takes over. */
            if (hub.lanes || hub.queue) pthread_cond_broadcast(&hub.cv);
            break;
        }
        pthread_cond_wait(&hub.cv, &hub.mu);
    }
    pthread_mutex_unlock(&hub.mu);
}

/* ------------------------------------------------------------------ streams */

void md5_init(md5_t *m)
{
    m->h[0] = 0x67452301;
    m->h[1] = 0xefcdab89;
    m->h[2] = 0x98badcfe;
    m->h[3] = 0x10325476;
    m->len = 0;
}

void md5_update_begin(md5_t *m, const void *data, size_t len, md5_pending_t *pend)
{
    const uint8_t *p = data;
    size_t have = (size_t)(m->len % 64);
    memset(pend, 0, sizeof(*pend));
    if (!len) return; /* data may be NULL then */
    m->len += len;
    if (have) {
        size_t take = 64 - have < len ? 64 - have : len;
        memcpy(m->tail + have, p, take);
        p += take;
        len -= take;
        if (have + take < 64) return;
        blocks_x1(m->h, m->tail, 1);
    }
    size_t nb = len / 64;
    int width = md5_lanes();
    if (width > 1 && nb >= HUB_MIN_BLOCKS) {
        *pend = (md5_pending_t){.h = m->h, .p = p, .left = nb, .width = width};
        hub_post(pend);
    } else if (nb) {
        blocks_x1(m->h, p, nb);
        atomic_fetch_add_explicit(&own_thread_blocks, nb, memory_order_relaxed);
    }
    /* The tail is bytes, not state: it may be kept while the blocks before it are hashed. */
    memcpy(m->tail, p + nb * 64, len % 64);
}

void md5_update_end(md5_pending_t *pend)
{
    if (pend->width) hub_wait(pend, pend->width);
    pend->width = 0; /* ended: a second end has nothing to wait for */
}

void md5_update(md5_t *m, const void *data, size_t len)
{
    md5_pending_t pend;
    md5_update_begin(m, data, len, &pend);
    md5_update_end(&pend);
}

void md5_final(md5_t *m, uint8_t digest[16])
{
    uint64_t bits = m->len * 8;
    size_t have = (size_t)(m->len % 64);
    uint8_t pad[128] = {0};
    memcpy(pad, m->tail, have);
    pad[have] = 0x80;
    size_t total = have < 56 ? 64 : 128;
    for (int i = 0; i < 8; i++)
        pad[total - 8 + i] = (uint8_t)(bits >> (8 * i));
    blocks_x1(m->h, pad, total / 64);
    for (int i = 0; i < 4; i++)
        for (int b = 0; b < 4; b++)
            digest[4 * i + b] = (uint8_t)(m->h[i] >> (8 * b));
}

void md5_of(const void *data, size_t len, uint8_t digest[16])
{
    md5_t m;
    md5_init(&m);
    md5_update(&m, data, len);
    md5_final(&m, digest);
}

void md5_stats(md5_stats_t *out)
{
    pthread_mutex_lock(&hub.mu);
    *out = hub.stats;
    pthread_mutex_unlock(&hub.mu);
    out->short_blocks = atomic_load_explicit(&own_thread_blocks, memory_order_relaxed);
}
