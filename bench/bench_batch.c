/*
 * bench_batch: batch GET (docs/batch-get.md) against per-object GETs of the
 * same objects from the same client: objects/s each way and their ratio.
 *
 *   bench_batch ENDPOINT OBJECTS SIZE CLIENTS SECONDS BATCH
 *
 * Credentials from WARMLAKE_ACCESS_KEY / WARMLAKE_SECRET_KEY. Writes OBJECTS
 * objects of SIZE bytes under bucket "bench-batch" (not measured), then for
 * SECONDS each: CLIENTS threads, each on its own keep-alive connection,
 * doing per-object GETs of random keys, then batch GETs of BATCH random keys.
 * Every byte is checked (wl-bench's generated content; each frame's crc32c
 * and order). Prints bench/report.py ROW lines: the GET rate, and the batch
 * rate with the GET row as its reference, so the ratio column is the
 * speedup. BENCH_BATCH_ONLY=1 skips the GET phase.
 */
#include "bench/wlbench/gen.h"
#include "client/s3c.h"
#include "common/crc.h"
#include "common/le.h"
#include "s3/batch.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BUCKET "bench-batch"
#define SEED   42

static const char *endpoint, *ak, *sk;
static uint64_t nobj, size;
static int batch;
static double seconds;
static atomic_int failed;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static s3c_t *client(void)
{
    s3c_cfg_t cfg = {
        .endpoint = endpoint, .access_key = ak, .secret = sk, .max_body_keep = 64 << 20};
    s3c_t *c = s3c_new(&cfg);
    if (!c) {
        fprintf(stderr, "bench_batch: bad endpoint %s\n", endpoint);
        exit(1);
    }
    return c;
}

static void key_of(uint64_t i, char *out, size_t cap)
{
    gen_key("bb/", i, out, cap);
}

static void fill(void *arg, uint64_t off, void *buf, size_t len)
{
    gen_fill(*(uint64_t *)arg, off, buf, len);
}

static void bad(const char *what, const char *key)
{
    if (atomic_fetch_add(&failed, 1) < 5) fprintf(stderr, "bench_batch: %s: %s\n", what, key);
}

typedef struct {
    pthread_t th;
    int batch_mode;
    uint64_t rng, objects;
    double until;
} worker_t;

static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void one_get(s3c_t *c, worker_t *w)
{
    char key[64], path[96];
    key_of(next_rand(&w->rng) % nobj, key, sizeof(key));
    snprintf(path, sizeof(path), "/%s/%s", BUCKET, key);
    s3c_req_t req = {.method = "GET", .path = path};
    s3c_resp_t r;
    if (s3c_do(c, &req, &r) != 0 || r.status != 200 || r.body_len != size ||
        gen_check(gen_seed(SEED, key, size), 0, r.body, r.body_len) != -1) {
        bad("GET", key);
        return;
    }
    w->objects++;
}

static void one_batch(s3c_t *c, worker_t *w)
{
    char path[64], (*keys)[64] = malloc((size_t)batch * 64);
    size_t cap = (size_t)batch * 96 + 64, len = 0;
    char *body = malloc(cap);
    len += (size_t)snprintf(body, cap, "<BatchGet>");
    for (int i = 0; i < batch; i++) {
        key_of(next_rand(&w->rng) % nobj, keys[i], 64);
        len += (size_t)snprintf(body + len, cap - len, "<Object><Key>%s</Key></Object>", keys[i]);
    }
    len += (size_t)snprintf(body + len, cap - len, "</BatchGet>");
    snprintf(path, sizeof(path), "/%s", BUCKET);
    const char *hdr[] = {"content-type", "application/xml", NULL};
    s3c_req_t req = {.method = "POST",
                     .path = path,
                     .query = "batch-get",
                     .headers = hdr,
                     .body = body,
                     .body_len = len};
    s3c_resp_t r;
    if (s3c_do(c, &req, &r) != 0 || r.status != 200) {
        bad("batch", "request failed");
        goto out;
    }
    /* The frames, in order, each checked; then the end frame and nothing after. */
    const uint8_t *p = (const uint8_t *)r.body;
    size_t off = 0;
    for (int i = 0; i <= batch; i++) {
        s3_batch_head_t h;
        if (r.body_len - off < S3_BATCH_HEAD || s3_batch_head_decode(p + off, &h) != 0 ||
            s3_batch_frame_len(&h) > r.body_len - off) {
            bad("batch", "bad frame");
            goto out;
        }
        const uint8_t *pl = p + off + S3_BATCH_HEAD + h.key_len + h.etag_len;
        if (le_get32(pl + h.payload_len) != crc32c(0, pl, (size_t)h.payload_len)) {
            bad("batch", "bad crc");
            goto out;
        }
        off += (size_t)s3_batch_frame_len(&h);
        if (i == batch) {
            if (h.index != S3_BATCH_END || off != r.body_len) bad("batch", "bad end");
            break;
        }
        if (h.index != (uint32_t)i || h.status != 200 || h.payload_len != size ||
            h.key_len != strlen(keys[i]) ||
            memcmp(p + off - s3_batch_frame_len(&h) + S3_BATCH_HEAD, keys[i], h.key_len) != 0 ||
            gen_check(gen_seed(SEED, keys[i], size), 0, pl, (size_t)h.payload_len) != -1) {
            bad("batch entry", keys[i]);
            goto out;
        }
        w->objects++;
    }
out:
    free(body);
    free(keys);
}

static void *run(void *arg)
{
    worker_t *w = arg;
    s3c_t *c = client();
    while (now_s() < w->until && !atomic_load(&failed)) {
        if (w->batch_mode)
            one_batch(c, w);
        else
            one_get(c, w);
    }
    s3c_free(c);
    return NULL;
}

/* Objects per second of clients threads for seconds. */
static double measure(int clients, int batch_mode)
{
    worker_t *w = calloc((size_t)clients, sizeof(*w));
    double t0 = now_s();
    for (int i = 0; i < clients; i++) {
        w[i] = (worker_t){.batch_mode = batch_mode,
                          .rng = 0x9E3779B97F4A7C15ull * (i + 1),
                          .until = t0 + seconds};
        pthread_create(&w[i].th, NULL, run, &w[i]);
    }
    uint64_t total = 0;
    for (int i = 0; i < clients; i++) {
        pthread_join(w[i].th, NULL);
        total += w[i].objects;
    }
    double dt = now_s() - t0;
    free(w);
    return (double)total / dt;
}

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: bench_batch ENDPOINT OBJECTS SIZE CLIENTS SECONDS BATCH\n");
        return 2;
    }
    endpoint = argv[1];
    nobj = strtoull(argv[2], NULL, 10);
    size = strtoull(argv[3], NULL, 10);
    int clients = atoi(argv[4]);
    seconds = atof(argv[5]);
    batch = atoi(argv[6]);
    ak = getenv("WARMLAKE_ACCESS_KEY");
    sk = getenv("WARMLAKE_SECRET_KEY");
    if (!nobj || !size || clients < 1 || seconds <= 0 || batch < 1 || batch > 10000 || !ak || !sk) {
        fprintf(stderr, "bench_batch: bad arguments or no credentials\n");
        return 2;
    }
    s3c_t *c = client();
    s3c_resp_t r;
    s3c_req_t mb = {.method = "PUT", .path = "/" BUCKET};
    if (s3c_do(c, &mb, &r) != 0 || (r.status != 200 && r.status != 409)) {
        fprintf(stderr, "bench_batch: cannot create bucket (%d)\n", r.status);
        return 1;
    }
    for (uint64_t i = 0; i < nobj; i++) {
        char key[64], path[96];
        key_of(i, key, sizeof(key));
        snprintf(path, sizeof(path), "/%s/%s", BUCKET, key);
        uint64_t seed = gen_seed(SEED, key, size);
        s3c_req_t put = {
            .method = "PUT", .path = path, .body_len = size, .fill = fill, .fill_arg = &seed};
        if (s3c_do(c, &put, &r) != 0 || r.status != 200) {
            fprintf(stderr, "bench_batch: PUT %s failed (%d)\n", key, r.status);
            return 1;
        }
    }
    s3c_free(c);
    /* BENCH_BATCH_ONLY=1: the batch phase alone (to profile the server under it). */
    const char *only = getenv("BENCH_BATCH_ONLY");
    double get = only && only[0] == '1' ? 0 : measure(clients, 0), bat = measure(clients, 1);
    if (atomic_load(&failed)) {
        fprintf(stderr, "bench_batch: %d failures\n", atomic_load(&failed));
        return 1;
    }
    char tag[64];
    snprintf(tag, sizeof(tag), "%lluB_c%d", (unsigned long long)size, clients);
    printf("ROW\tbatch_ref_get_%s\t%.0f\tobj/s\t-\n", tag, get);
    printf("ROW\tbatch_get_%s_b%d\t%.0f\tobj/s\tbatch_ref_get_%s\n", tag, batch, bat, tag);
    return 0;
}
