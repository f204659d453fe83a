/*
 * wl-bench: an S3 load generator. One thread per client, each with its own
 * keep-alive connection (client/s3c), SigV4-signed requests with
 * UNSIGNED-PAYLOAD (so the client spends no time hashing bodies), bodies
 * generated and verified from a per-key seed (bench/wlbench/gen), latencies
 * into per-thread histograms merged at the end (bench/wlbench/hist).
 *
 *   wl-bench WORKLOAD [options]      put get mixed stat delete list multipart
 *   wl-bench gen --dir DIR [options] write the objects as files (for nginx)
 *   wl-bench compare A.json B.json   change per figure between two runs
 */
#include "bench/wlbench/gen.h"
#include "bench/wlbench/hist.h"
#include "bench/wlbench/sizes.h"
#include "client/s3c.h"
#include "common/err.h"
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { OP_PUT, OP_GET, OP_DELETE, OP_STAT, OP_LIST, OP_MPU, OP_N };
static const char *const op_name[OP_N] = {"put", "get", "delete", "stat", "list", "multipart"};

#define MAX_CLIENTS  1024
#define MAX_ERRKINDS 32
#define MAX_PARTS    10000

typedef struct {
    const char *workload;
    const char *endpoint, *access_key, *secret, *region, *bucket, *prefix;
    const char *json_path, *size_spec;
    size_dist_t sizes;
    int clients;
    double duration; /* seconds; always set: every run is bounded in time */
    uint64_t ops;    /* 0: no op limit */
    uint64_t objects;
    int random_order;
    uint64_t mix[OP_N]; /* weights for mixed */
    uint64_t mix_total;
    uint64_t range_size, range_align;
    uint64_t part_size;
    int plain, prepare, verify, quiet, cleanup, quick;
    uint64_t seed;
    const char *dir; /* gen */
} cfg_t;

typedef struct {
    char name[96];
    uint64_t n;
} errkind_t;

typedef struct {
    pthread_t th;
    s3c_t *c;
    uint64_t rng;
    hist_t lat[OP_N], ttfb;
    uint64_t ops[OP_N], bytes[OP_N], errors[OP_N];
    uint64_t mismatches, slowdown, absent, list_keys, list_passes;
    errkind_t err[MAX_ERRKINDS];
    int nerr;
    char *scratch; /* multipart ETags, XML */
} client_t;

static cfg_t cfg;
static client_t *clients;
static atomic_int stop_flag;
static atomic_uint_fast64_t tickets;  /* ops started (bounded by --ops) */
static atomic_uint_fast64_t next_key; /* sequential key order, unique puts, deletes */
static atomic_uint_fast64_t prog_ops, prog_bytes, prog_errors;
static atomic_int running; /* client threads not yet finished */
/*
 * Mixed runs with deletes: which keys this run deleted, so a 404 can be told
 * from a lost object. A 404 is expected only when the key was deleted, or a
 * PUT/DELETE of it was in flight or finished while the GET ran; a key that
 * stayed present and untouched must read back.
 */
typedef struct {
    atomic_uchar absent;
    atomic_uint inflight, changes;
} keystate_t;
static keystate_t *kstate;

typedef struct {
    unsigned before, changes;
} mut_t;

static void mut_begin(uint64_t n, mut_t *m)
{
    if (!kstate) return;
    m->changes = atomic_load(&kstate[n].changes);
    m->before = atomic_fetch_add(&kstate[n].inflight, 1);
}

/*
 * absent: 0 present, 1 deleted, -1 unchanged (a failed PUT). Overlapping
 * mutations of a key leave its state unknown (2) until one runs alone:
 * the server's order among them is not the order the answers arrived in.
 */
static void mut_end(uint64_t n, mut_t *m, int absent)
{
    if (!kstate) return;
    keystate_t *k = &kstate[n];
    int alone =
        m->before == 0 && atomic_load(&k->inflight) == 1 && atomic_load(&k->changes) == m->changes;
    if (!alone)
        atomic_store(&k->absent, 2);
    else if (absent >= 0)
        atomic_store(&k->absent, (unsigned char)absent);
    atomic_fetch_add(&k->changes, 1);
    atomic_fetch_sub(&k->inflight, 1);
}
static atomic_uint_fast64_t mismatch_printed;
static int phase_prepare; /* the prepare phase runs the same loop, put only */
static uint64_t max_key_used;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The size of key n is fixed for the run, so GETs know what to expect. */
static uint64_t key_size(uint64_t n)
{
    uint64_t s = cfg.seed ^ (n * 0xA24BAED4963EE407ull);
    return size_dist_pick(&cfg.sizes, rnd(&s));
}

static void err_count(client_t *cl, int op, const s3c_resp_t *r, int rc)
{
    char name[96];
    if (r->status == 0)
        snprintf(name, sizeof(name), "connection: %s", err_str(rc));
    else
        snprintf(name, sizeof(name), "%d %s", r->status, r->code[0] ? r->code : "-");
    if (r->status == 503 && !strcmp(r->code, "SlowDown")) cl->slowdown++;
    cl->errors[op]++;
    atomic_fetch_add(&prog_errors, 1);
    for (int i = 0; i < cl->nerr; i++) {
        if (!strcmp(cl->err[i].name, name)) {
            cl->err[i].n++;
            return;
        }
    }
    if (cl->nerr < MAX_ERRKINDS) {
        snprintf(cl->err[cl->nerr].name, sizeof(cl->err[0].name), "%s", name);
        cl->err[cl->nerr++].n = 1;
    }
}

static void mismatch(client_t *cl, const char *key, const char *what, uint64_t a, uint64_t b)
{
    cl->mismatches++;
    if (atomic_fetch_add(&mismatch_printed, 1) < 10)
        fprintf(stderr, "wl-bench: CONTENT MISMATCH key=%s: %s (%llu vs %llu)\n", key, what,
                (unsigned long long)a, (unsigned long long)b);
}

/* ---- one operation of each kind ---- */

typedef struct {
    uint64_t seed, base; /* base: object offset of body offset 0 */
} fill_t;

static void fill_body(void *arg, uint64_t off, void *buf, size_t len)
{
    fill_t *f = arg;
    gen_fill(f->seed, f->base + off, buf, len);
}

typedef struct {
    uint64_t seed;
    const s3c_resp_t *resp;
    int64_t bad; /* object offset of the first wrong byte, or -1 */
    int verify;
} check_t;

static void check_body(void *arg, uint64_t off, const void *buf, size_t len)
{
    check_t *k = arg;
    if (!k->verify || k->bad >= 0) return;
    uint64_t at = k->resp->range_start + off;
    int64_t i = gen_check(k->seed, at, buf, len);
    if (i >= 0) k->bad = (int64_t)at + i;
}

static void object_path(uint64_t n, char *key, size_t kcap, char *path, size_t pcap)
{
    char enc[1100];
    gen_key(cfg.prefix, n, key, kcap);
    if (s3c_encode_path(key, enc, sizeof(enc)) < 0) enc[0] = 0;
    snprintf(path, pcap, "/%s/%s", cfg.bucket, enc);
}

static int do_put(client_t *cl, uint64_t n, int64_t *lat)
{
    char key[512], path[1400];
    object_path(n, key, sizeof(key), path, sizeof(path));
    uint64_t size = key_size(n);
    fill_t f = {gen_seed(cfg.seed, key, size), 0};
    s3c_req_t req = {
        .method = "PUT", .path = path, .body_len = size, .fill = fill_body, .fill_arg = &f};
    s3c_resp_t r;
    mut_t mu;
    mut_begin(n, &mu);
    int64_t t0 = now_ns();
    int rc = s3c_do(cl->c, &req, &r);
    *lat = now_ns() - t0;
    int ok = rc == 0 && r.status == 200;
    mut_end(n, &mu, ok ? 0 : -1);
    if (!ok) {
        err_count(cl, OP_PUT, &r, rc);
        return -1;
    }
    cl->bytes[OP_PUT] += size;
    return 0;
}

static int do_get(client_t *cl, uint64_t n, int64_t *lat, int head)
{
    char key[512], path[1400], range[80];
    object_path(n, key, sizeof(key), path, sizeof(path));
    uint64_t size = key_size(n), want_off = 0, want_len = size;
    const char *hdr[3] = {NULL};
    if (!head && cfg.range_size && size > 0) {
        uint64_t align = cfg.range_align ? cfg.range_align : 1;
        uint64_t slots = size > cfg.range_size ? (size - cfg.range_size) / align + 1 : 1;
        want_off = (rnd(&cl->rng) % slots) * align;
        want_len = size - want_off < cfg.range_size ? size - want_off : cfg.range_size;
        snprintf(range, sizeof(range), "bytes=%llu-%llu", (unsigned long long)want_off,
                 (unsigned long long)(want_off + want_len - 1));
        hdr[0] = "range";
        hdr[1] = range;
    }
    keystate_t *ks = kstate ? &kstate[n] : NULL;
    int maybe_gone = ks && (atomic_load(&ks->absent) || atomic_load(&ks->inflight));
    unsigned changes = ks ? atomic_load(&ks->changes) : 0;
    s3c_resp_t r;
    check_t k = {gen_seed(cfg.seed, key, size), &r, -1, cfg.verify};
    s3c_req_t req = {.method = head ? "HEAD" : "GET",
                     .path = path,
                     .headers = hdr[0] ? hdr : NULL,
                     .sink = check_body,
                     .sink_arg = &k};
    int64_t t0 = now_ns();
    int rc = s3c_do(cl->c, &req, &r);
    *lat = now_ns() - t0;
    int op = head ? OP_STAT : OP_GET;
    if (ks && rc == 0 && r.status == 404 &&
        (maybe_gone || atomic_load(&ks->absent) || atomic_load(&ks->inflight) ||
         atomic_load(&ks->changes) != changes)) {
        cl->absent++; /* deleted by this run's own mixed deletes: expected */
        return 1;
    }
    if (rc != 0 || (r.status != 200 && r.status != 206)) {
        err_count(cl, op, &r, rc);
        return -1;
    }
    if (!head) hist_add(&cl->ttfb, (uint64_t)r.ttfb_ns);
    if (!cfg.verify) {
        cl->bytes[op] += r.body_bytes;
        return 0;
    }
    if (r.range_total != size)
        mismatch(cl, key, "object size", r.range_total, size);
    else if (!head && (r.body_bytes != want_len || r.range_start != want_off))
        mismatch(cl, key, "body length", r.body_bytes, want_len);
    else if (k.bad >= 0)
        mismatch(cl, key, "wrong byte at offset", (uint64_t)k.bad, 0);
    cl->bytes[op] += r.body_bytes;
    return 0;
}

static int do_delete(client_t *cl, uint64_t n, int64_t *lat)
{
    char key[512], path[1400];
    object_path(n, key, sizeof(key), path, sizeof(path));
    s3c_req_t req = {.method = "DELETE", .path = path};
    s3c_resp_t r;
    mut_t mu;
    mut_begin(n, &mu);
    int64_t t0 = now_ns();
    int rc = s3c_do(cl->c, &req, &r);
    *lat = now_ns() - t0;
    mut_end(n, &mu, 1); /* even a failed DELETE may have taken effect: 1 either way */
    if (rc != 0 || r.status != 204) {
        err_count(cl, OP_DELETE, &r, rc);
        return -1;
    }
    return 0;
}

typedef struct {
    char last[512];
    uint64_t n, out_of_order;
} keys_t;

static void on_key(void *arg, const char *text, size_t len)
{
    keys_t *k = arg;
    char cur[512];
    snprintf(cur, sizeof(cur), "%.*s", (int)len, text);
    if (k->n && strcmp(cur, k->last) <= 0) k->out_of_order++;
    memcpy(k->last, cur, sizeof(cur));
    k->n++;
}

/* One page of ListObjectsV2; a client walks the prefix page after page, over and over. */
typedef struct {
    char token[1024];
    uint64_t pass_keys;
    char last[512];
} list_state_t;

static int do_list(client_t *cl, list_state_t *ls, int64_t *lat)
{
    char query[6000], pfx[1600], tok[1200 * 3];
    if (s3c_encode_query(cfg.prefix, pfx, sizeof(pfx)) < 0) pfx[0] = 0; /* main caps the prefix */
    if (s3c_encode_query(ls->token, tok, sizeof(tok)) < 0) tok[0] = 0;
    snprintf(query, sizeof(query), "list-type=2&max-keys=1000&prefix=%s%s%s", pfx,
             ls->token[0] ? "&continuation-token=" : "", ls->token[0] ? tok : "");
    char path[512];
    snprintf(path, sizeof(path), "/%s", cfg.bucket);
    s3c_req_t req = {.method = "GET", .path = path, .query = query};
    s3c_resp_t r;
    int64_t t0 = now_ns();
    int rc = s3c_do(cl->c, &req, &r);
    *lat = now_ns() - t0;
    if (rc != 0 || r.status != 200) {
        err_count(cl, OP_LIST, &r, rc);
        ls->token[0] = 0;
        ls->pass_keys = 0;
        return -1;
    }
    keys_t k = {{0}, 0, 0};
    memcpy(k.last, ls->last, sizeof(k.last));
    k.n = ls->pass_keys ? 1
                        : 0; /* compare the first key of this page with the last of the previous */
    if (s3c_xml_each(r.body, r.body_len, "Key", on_key, &k) < 0) {
        mismatch(cl, "(listing)", "malformed XML, bytes", r.body_len, 0);
        return -1;
    }
    uint64_t got = k.n - (ls->pass_keys ? 1 : 0);
    if (k.out_of_order) mismatch(cl, "(listing)", "keys out of order", k.out_of_order, 0);
    memcpy(ls->last, k.last, sizeof(ls->last));
    cl->list_keys += got;
    ls->pass_keys += got;
    cl->bytes[OP_LIST] += r.body_len;
    char trunc[16];
    s3c_xml_text(r.body, r.body_len, "IsTruncated", trunc, sizeof(trunc));
    s3c_xml_text(r.body, r.body_len, "NextContinuationToken", ls->token, sizeof(ls->token));
    if (strcmp(trunc, "true") != 0) {
        /* A whole pass: with nothing else writing, it must have seen every object. */
        if (cfg.objects && ls->pass_keys != cfg.objects)
            mismatch(cl, "(listing)", "keys in a full pass", ls->pass_keys, cfg.objects);
        cl->list_passes++;
        ls->token[0] = 0;
        ls->pass_keys = 0;
    } else if (!ls->token[0]) {
        mismatch(cl, "(listing)", "truncated page without a continuation token", 0, 0);
        ls->pass_keys = 0;
    }
    return 0;
}

static int do_multipart(client_t *cl, uint64_t n, int64_t *lat)
{
    char key[512], path[1400], query[2048], upload_id[512];
    object_path(n, key, sizeof(key), path, sizeof(path));
    uint64_t size = key_size(n);
    uint64_t psz = cfg.part_size;
    uint64_t parts = size ? (size + psz - 1) / psz : 1;
    s3c_resp_t r;
    int64_t t0 = now_ns();
    int rc;
    if (parts > MAX_PARTS) {
        fprintf(stderr, "wl-bench: %llu parts > %d: raise --part-size\n", (unsigned long long)parts,
                MAX_PARTS);
        atomic_store(&stop_flag, 1);
        return -1;
    }
    s3c_req_t create = {.method = "POST", .path = path, .query = "uploads"};
    if ((rc = s3c_do(cl->c, &create, &r)) != 0 || r.status != 200) {
        err_count(cl, OP_MPU, &r, rc);
        return -1;
    }
    s3c_xml_text(r.body, r.body_len, "UploadId", upload_id, sizeof(upload_id));
    char enc_id[1536];
    if (s3c_encode_query(upload_id, enc_id, sizeof(enc_id)) < 0) enc_id[0] = 0;
    size_t xcap = 128 + parts * 96, xo = 0;
    char *xml = malloc(xcap);
    xo += (size_t)snprintf(xml, xcap, "<CompleteMultipartUpload>");
    uint64_t seed = gen_seed(cfg.seed, key, size);
    for (uint64_t p = 0; p < parts; p++) {
        uint64_t off = p * psz, len = size - off < psz ? size - off : psz;
        fill_t f = {seed, off};
        snprintf(query, sizeof(query), "partNumber=%llu&uploadId=%s", (unsigned long long)p + 1,
                 enc_id);
        s3c_req_t up = {.method = "PUT",
                        .path = path,
                        .query = query,
                        .body_len = len,
                        .fill = fill_body,
                        .fill_arg = &f};
        if ((rc = s3c_do(cl->c, &up, &r)) != 0 || r.status != 200) {
            err_count(cl, OP_MPU, &r, rc);
            free(xml);
            snprintf(query, sizeof(query), "uploadId=%s", enc_id);
            s3c_req_t abort_req = {.method = "DELETE", .path = path, .query = query};
            if (s3c_do(cl->c, &abort_req, &r) != 0) s3c_close(cl->c);
            return -1;
        }
        xo += (size_t)snprintf(xml + xo, xcap - xo,
                               "<Part><PartNumber>%llu</PartNumber><ETag>\"%s\"</ETag></Part>",
                               (unsigned long long)p + 1, r.etag);
    }
    xo += (size_t)snprintf(xml + xo, xcap - xo, "</CompleteMultipartUpload>");
    snprintf(query, sizeof(query), "uploadId=%s", enc_id);
    s3c_req_t done = {.method = "POST", .path = path, .query = query, .body_len = xo, .body = xml};
    rc = s3c_do(cl->c, &done, &r);
    free(xml);
    *lat = now_ns() - t0;
    /* Complete can fail after a 200 (the error comes in the body). */
    if (rc == 0 && r.status == 200 && r.body_len && strstr(r.body, "<Error>")) {
        s3c_xml_text(r.body, r.body_len, "Code", r.code, sizeof(r.code));
        r.status = 500;
    }
    if (rc != 0 || r.status != 200) {
        err_count(cl, OP_MPU, &r, rc);
        return -1;
    }
    cl->bytes[OP_MPU] += size;
    return 0;
}

/* ---- the client loop ---- */

static int pick_op(client_t *cl)
{
    if (phase_prepare) return OP_PUT;
    const char *w = cfg.workload;
    if (!strcmp(w, "mixed")) {
        uint64_t x = rnd(&cl->rng) % cfg.mix_total;
        for (int i = 0; i < OP_N; i++) {
            if (x < cfg.mix[i]) return i;
            x -= cfg.mix[i];
        }
    }
    for (int i = 0; i < OP_N; i++)
        if (!strcmp(w, op_name[i])) return i;
    return OP_PUT;
}

/* Key for an op; UINT64_MAX when the key space is used up (delete, prepare). */
static uint64_t pick_key(client_t *cl, int op)
{
    if (phase_prepare || (op == OP_DELETE && !strcmp(cfg.workload, "delete"))) {
        uint64_t n = atomic_fetch_add(&next_key, 1);
        return n < cfg.objects ? n : UINT64_MAX;
    }
    if ((op == OP_PUT || op == OP_MPU) && cfg.objects == 0) return atomic_fetch_add(&next_key, 1);
    if (!cfg.objects) return 0;
    if (cfg.random_order) return rnd(&cl->rng) % cfg.objects;
    return atomic_fetch_add(&next_key, 1) % cfg.objects;
}

static void *client_main(void *arg)
{
    client_t *cl = arg;
    list_state_t *ls = calloc(1, sizeof(*ls));
    while (!atomic_load(&stop_flag)) {
        if (cfg.ops && !phase_prepare && atomic_fetch_add(&tickets, 1) >= cfg.ops) break;
        int op = pick_op(cl);
        uint64_t n = op == OP_LIST ? 0 : pick_key(cl, op);
        if (n == UINT64_MAX) break;
        int64_t lat = 0;
        uint64_t before = cl->bytes[op];
        int rc;
        switch (op) {
        case OP_PUT:
            rc = do_put(cl, n, &lat);
            break;
        case OP_GET:
            rc = do_get(cl, n, &lat, 0);
            break;
        case OP_STAT:
            rc = do_get(cl, n, &lat, 1);
            break;
        case OP_DELETE:
            rc = do_delete(cl, n, &lat);
            break;
        case OP_LIST:
            rc = do_list(cl, ls, &lat);
            break;
        default:
            rc = do_multipart(cl, n, &lat);
            break;
        }
        if (rc == 0) {
            hist_add(&cl->lat[op], (uint64_t)lat);
            cl->ops[op]++;
            atomic_fetch_add(&prog_ops, 1);
            atomic_fetch_add(&prog_bytes, cl->bytes[op] - before);
        }
    }
    free(ls);
    atomic_fetch_sub(&running, 1);
    return NULL;
}

/* Run all clients until the time or op budget is spent; returns the measured seconds. */
static double run_clients(void)
{
    atomic_store(&stop_flag, 0);
    atomic_store(&tickets, 0);
    atomic_store(&prog_ops, 0);
    atomic_store(&prog_bytes, 0);
    atomic_store(&prog_errors, 0);
    int tty = isatty(2) && !cfg.quiet;
    double t0 = now_s(), last = t0;
    atomic_store(&running, cfg.clients);
    for (int i = 0; i < cfg.clients; i++)
        pthread_create(&clients[i].th, NULL, client_main, &clients[i]);
    /* The main thread watches the clock and reports progress; clients stop by themselves at --ops.
     */
    for (;;) {
        struct timespec ts = {0, 50 * 1000000};
        nanosleep(&ts, NULL);
        double t = now_s();
        if (!phase_prepare && t - t0 >= cfg.duration) atomic_store(&stop_flag, 1);
        if (phase_prepare && t - t0 >= 3600) atomic_store(&stop_flag, 1);
        uint64_t done = atomic_load(&prog_ops);
        if (tty && t - last >= 1.0) {
            last = t;
            fprintf(stderr, "\r%s %5.0fs  ops %llu  %.1f MB/s  errors %llu   ",
                    phase_prepare ? "prepare" : "run", t - t0, (unsigned long long)done,
                    (double)atomic_load(&prog_bytes) / 1e6 / (t - t0),
                    (unsigned long long)atomic_load(&prog_errors));
        }
        /* Clients end by themselves at --ops or when the keys run out (delete, prepare). */
        if (atomic_load(&stop_flag) || atomic_load(&running) == 0) break;
    }
    for (int i = 0; i < cfg.clients; i++)
        pthread_join(clients[i].th, NULL);
    double secs = now_s() - t0;
    if (tty) fprintf(stderr, "\n");
    return secs;
}

/* ---- results ---- */

typedef struct {
    hist_t lat[OP_N], ttfb;
    uint64_t ops[OP_N], bytes[OP_N], errors[OP_N];
    uint64_t mismatches, slowdown, absent, list_keys, list_passes;
    errkind_t err[MAX_ERRKINDS];
    int nerr;
    double secs;
} total_t;

static void merge(total_t *t)
{
    memset(t, 0, sizeof(*t));
    for (int o = 0; o < OP_N; o++)
        hist_init(&t->lat[o]);
    hist_init(&t->ttfb);
    for (int i = 0; i < cfg.clients; i++) {
        client_t *cl = &clients[i];
        for (int o = 0; o < OP_N; o++) {
            hist_merge(&t->lat[o], &cl->lat[o]);
            t->ops[o] += cl->ops[o];
            t->bytes[o] += cl->bytes[o];
            t->errors[o] += cl->errors[o];
        }
        hist_merge(&t->ttfb, &cl->ttfb);
        t->mismatches += cl->mismatches;
        t->slowdown += cl->slowdown;
        t->absent += cl->absent;
        t->list_keys += cl->list_keys;
        t->list_passes += cl->list_passes;
        for (int e = 0; e < cl->nerr; e++) {
            int j = 0;
            while (j < t->nerr && strcmp(t->err[j].name, cl->err[e].name))
                j++;
            if (j == t->nerr) {
                if (t->nerr == MAX_ERRKINDS) continue;
                t->err[t->nerr++] = cl->err[e];
            } else {
                t->err[j].n += cl->err[e].n;
            }
        }
    }
}

static void reset_clients(void)
{
    for (int i = 0; i < cfg.clients; i++) {
        client_t *cl = &clients[i];
        s3c_t *c = cl->c;
        uint64_t rng = cl->rng;
        memset(cl, 0, sizeof(*cl));
        cl->c = c;
        cl->rng = rng;
        for (int o = 0; o < OP_N; o++)
            hist_init(&cl->lat[o]);
        hist_init(&cl->ttfb);
    }
}

static double ms(uint64_t ns)
{
    return (double)ns / 1e6;
}

static void print_lat_row(const char *name, const hist_t *h, uint64_t ops, uint64_t bytes,
                          uint64_t errors, double secs)
{
    printf("%-10s %9llu %10.1f %9.1f %8.2f %8.2f %8.2f %8.2f %8.2f %7llu\n", name,
           (unsigned long long)ops, (double)ops / secs, (double)bytes / 1e6 / secs,
           ms(hist_quantile(h, 0.5)), ms(hist_quantile(h, 0.9)), ms(hist_quantile(h, 0.99)),
           ms(hist_quantile(h, 0.999)), ms(h->max), (unsigned long long)errors);
}

static void print_table(const total_t *t)
{
    char sz[600];
    if (cfg.sizes.n == 1)
        size_format(cfg.sizes.size[0], sz, sizeof(sz));
    else
        snprintf(sz, sizeof(sz), "%s (mean %.0f KiB)", cfg.size_spec,
                 size_dist_mean(&cfg.sizes) / 1024);
    char objs[64] = "a new key per op";
    if (cfg.objects) snprintf(objs, sizeof(objs), "%llu objects", (unsigned long long)cfg.objects);
    printf("wl-bench %s: %s, %d clients, size %s, %s, %.1f s%s\n", cfg.workload, cfg.endpoint,
           cfg.clients, sz, objs, t->secs, cfg.verify ? ", content verified" : "");
    printf("%-10s %9s %10s %9s %8s %8s %8s %8s %8s %7s\n", "op", "ops", "ops/s", "MB/s", "p50 ms",
           "p90 ms", "p99 ms", "p99.9 ms", "max ms", "errors");
    for (int o = 0; o < OP_N; o++) {
        if (!t->ops[o] && !t->errors[o]) continue;
        print_lat_row(op_name[o], &t->lat[o], t->ops[o], t->bytes[o], t->errors[o], t->secs);
        if (o == OP_GET && t->ttfb.count)
            print_lat_row("  ttfb", &t->ttfb, t->ttfb.count, 0, 0, t->secs);
    }
    if (t->list_keys)
        printf("list: %llu keys, %.0f keys/s, %llu full passes\n", (unsigned long long)t->list_keys,
               (double)t->list_keys / t->secs, (unsigned long long)t->list_passes);
    if (t->absent)
        printf("get/stat of keys this run had deleted: %llu (expected 404)\n",
               (unsigned long long)t->absent);
    for (int e = 0; e < t->nerr; e++)
        printf("error %s: %llu\n", t->err[e].name, (unsigned long long)t->err[e].n);
    printf("503 SlowDown: %llu\n", (unsigned long long)t->slowdown);
    printf("content mismatches: %llu%s\n", (unsigned long long)t->mismatches,
           t->mismatches ? "   <<<<<<<< DATA IS WRONG" : "");
}

static json_t *lat_json(const hist_t *h)
{
    return json_pack("{s:f,s:f,s:f,s:f,s:f,s:f,s:f}", "mean", hist_mean(h) / 1e6, "p50",
                     ms(hist_quantile(h, 0.5)), "p90", ms(hist_quantile(h, 0.9)), "p99",
                     ms(hist_quantile(h, 0.99)), "p99.9", ms(hist_quantile(h, 0.999)), "min",
                     h->count ? ms(h->min) : 0.0, "max", ms(h->max));
}

static int write_json(const total_t *t)
{
    json_t *root = json_object(), *ops = json_object(), *errs = json_object();
    json_object_set_new(root, "tool", json_string("wl-bench"));
    json_object_set_new(root, "format", json_integer(1));
    json_object_set_new(root, "workload", json_string(cfg.workload));
    json_object_set_new(root, "endpoint", json_string(cfg.endpoint));
    json_object_set_new(root, "time", json_integer((json_int_t)time(NULL)));
    json_object_set_new(
        root, "config",
        json_pack("{s:i,s:s,s:I,s:f,s:I,s:s,s:I,s:b,s:b}", "clients", cfg.clients, "size",
                  cfg.size_spec, "objects", (json_int_t)cfg.objects, "duration_limit_s",
                  cfg.duration, "ops_limit", (json_int_t)cfg.ops, "order",
                  cfg.random_order ? "random" : "sequential", "range_size",
                  (json_int_t)cfg.range_size, "verify", cfg.verify, "plain", cfg.plain));
    json_object_set_new(root, "duration_s", json_real(t->secs));
    for (int o = 0; o < OP_N; o++) {
        if (!t->ops[o] && !t->errors[o]) continue;
        json_t *j =
            json_pack("{s:I,s:I,s:I,s:f,s:f,s:o}", "ops", (json_int_t)t->ops[o], "bytes",
                      (json_int_t)t->bytes[o], "errors", (json_int_t)t->errors[o], "ops_per_s",
                      (double)t->ops[o] / t->secs, "mb_per_s", (double)t->bytes[o] / 1e6 / t->secs,
                      "latency_ms", lat_json(&t->lat[o]));
        if (o == OP_GET && t->ttfb.count) json_object_set_new(j, "ttfb_ms", lat_json(&t->ttfb));
        json_object_set_new(ops, op_name[o], j);
    }
    json_object_set_new(root, "ops", ops);
    for (int e = 0; e < t->nerr; e++)
        json_object_set_new(errs, t->err[e].name, json_integer((json_int_t)t->err[e].n));
    json_object_set_new(root, "errors", errs);
    json_object_set_new(root, "slowdown", json_integer((json_int_t)t->slowdown));
    json_object_set_new(root, "mismatches", json_integer((json_int_t)t->mismatches));
    json_object_set_new(root, "list_keys", json_integer((json_int_t)t->list_keys));
    json_object_set_new(root, "list_keys_per_s", json_real((double)t->list_keys / t->secs));
    int rc = json_dump_file(root, cfg.json_path, JSON_INDENT(1) | JSON_SORT_KEYS);
    json_decref(root);
    if (rc != 0) fprintf(stderr, "wl-bench: cannot write %s\n", cfg.json_path);
    return rc;
}

/* ---- compare ---- */

static int compare(const char *a_path, const char *b_path)
{
    json_error_t je;
    json_t *a = json_load_file(a_path, 0, &je);
    if (!a) {
        fprintf(stderr, "wl-bench: %s: %s (line %d)\n", a_path, je.text, je.line);
        return 2;
    }
    json_t *b = json_load_file(b_path, 0, &je);
    if (!b) {
        fprintf(stderr, "wl-bench: %s: %s (line %d)\n", b_path, je.text, je.line);
        json_decref(a);
        return 2;
    }
    printf("A: %s (%s)\nB: %s (%s)\n", a_path, json_string_value(json_object_get(a, "workload")),
           b_path, json_string_value(json_object_get(b, "workload")));
    printf("%-22s %14s %14s %9s\n", "figure", "A", "B", "change");
    static const struct {
        const char *field, *lat, *label;
        int higher_better;
    } figs[] = {{"ops_per_s", NULL, "ops/s", 1}, {"mb_per_s", NULL, "MB/s", 1},
                {NULL, "p50", "p50 ms", 0},      {NULL, "p90", "p90 ms", 0},
                {NULL, "p99", "p99 ms", 0},      {NULL, "p99.9", "p99.9 ms", 0},
                {NULL, "max", "max ms", 0},      {"errors", NULL, "errors", 0}};
    json_t *aops = json_object_get(a, "ops"), *bops = json_object_get(b, "ops");
    for (int o = 0; o < OP_N; o++) {
        json_t *ao = json_object_get(aops, op_name[o]), *bo = json_object_get(bops, op_name[o]);
        if (!ao && !bo) continue;
        for (size_t f = 0; f < sizeof(figs) / sizeof(figs[0]); f++) {
            json_t *av, *bv;
            if (figs[f].field) {
                av = json_object_get(ao, figs[f].field);
                bv = json_object_get(bo, figs[f].field);
            } else {
                av = json_object_get(json_object_get(ao, "latency_ms"), figs[f].lat);
                bv = json_object_get(json_object_get(bo, "latency_ms"), figs[f].lat);
            }
            char label[64];
            snprintf(label, sizeof(label), "%s %s", op_name[o], figs[f].label);
            double x = json_number_value(av), y = json_number_value(bv);
            char change[32] = "-";
            const char *verdict = "";
            if (av && bv && x != 0) {
                double pct = (y - x) / x * 100;
                snprintf(change, sizeof(change), "%+.1f%%", pct);
                if (fabs(pct) >= 5)
                    verdict = (pct > 0) == figs[f].higher_better ? "  better" : "  worse";
            }
            printf("%-22s %14.6g %14.6g %9s%s\n", label, x, y, change, verdict);
        }
    }
    const char *totals[] = {"list_keys_per_s", "slowdown", "mismatches"};
    for (int i = 0; i < 3; i++) {
        double x = json_number_value(json_object_get(a, totals[i]));
        double y = json_number_value(json_object_get(b, totals[i]));
        if (x == 0 && y == 0) continue;
        printf("%-22s %14.6g %14.6g %9s\n", totals[i], x, y, "");
    }
    int bad = json_integer_value(json_object_get(b, "mismatches")) > 0;
    json_decref(a);
    json_decref(b);
    return bad ? 1 : 0;
}

/* ---- gen: the objects as files, for a plain HTTP server's document root ---- */

static int mkdirs(char *path)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        int rc = mkdir(path, 0755);
        *p = '/';
        if (rc != 0 && errno != EEXIST) return -1;
    }
    return 0;
}

static int gen_files(void)
{
    char *buf = malloc(1u << 20);
    for (uint64_t n = 0; n < cfg.objects; n++) {
        char key[512], file[2048];
        gen_key(cfg.prefix, n, key, sizeof(key));
        snprintf(file, sizeof(file), "%s/%s/%s", cfg.dir, cfg.bucket, key);
        if (mkdirs(file) != 0) goto fail;
        int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) goto fail;
        uint64_t size = key_size(n), seed = gen_seed(cfg.seed, key, size);
        for (uint64_t off = 0; off < size;) {
            size_t len = size - off < (1u << 20) ? (size_t)(size - off) : 1u << 20;
            gen_fill(seed, off, buf, len);
            if (write(fd, buf, len) != (ssize_t)len) {
                close(fd);
                goto fail;
            }
            off += len;
        }
        if (close(fd) != 0) goto fail;
    }
    free(buf);
    printf("wl-bench gen: %llu objects under %s/%s/%s\n", (unsigned long long)cfg.objects, cfg.dir,
           cfg.bucket, cfg.prefix);
    return 0;
fail:
    fprintf(stderr, "wl-bench gen: %s\n", strerror(errno));
    free(buf);
    return 1;
}

/* ---- setup ---- */

static int ensure_bucket(s3c_t *c)
{
    char path[512];
    snprintf(path, sizeof(path), "/%s", cfg.bucket);
    s3c_req_t req = {.method = "PUT", .path = path};
    s3c_resp_t r;
    int rc = s3c_do(c, &req, &r);
    if (rc == 0 && (r.status == 200 || !strcmp(r.code, "BucketAlreadyOwnedByYou"))) return 0;
    fprintf(stderr, "wl-bench: cannot create bucket %s: %s\n", cfg.bucket,
            rc          ? err_str(rc)
            : r.code[0] ? r.code
                        : "unexpected status");
    return -1;
}

static void cleanup_objects(void)
{
    uint64_t n = cfg.objects > max_key_used ? cfg.objects : max_key_used;
    for (uint64_t i = 0; i < n; i++) {
        char key[512], path[1400];
        object_path(i, key, sizeof(key), path, sizeof(path));
        s3c_req_t req = {.method = "DELETE", .path = path};
        s3c_resp_t r;
        if (s3c_do(clients[0].c, &req, &r) != 0) break;
    }
}

/* wl-bench stats: a warmlake node's engine counters (GET /_warmlake/stats) to stdout. */
static int node_stats(void)
{
    s3c_cfg_t cc = {.endpoint = cfg.endpoint,
                    .access_key = cfg.access_key,
                    .secret = cfg.secret,
                    .region = cfg.region};
    s3c_t *c = s3c_new(&cc);
    if (!c) return 2;
    s3c_req_t req = {.method = "GET", .path = "/_warmlake/stats"};
    s3c_resp_t r;
    int rc = s3c_do(c, &req, &r);
    if (rc == 0 && r.status == 200)
        fwrite(r.body, 1, r.body_len, stdout);
    else
        fprintf(stderr, "wl-bench stats: %s\n", rc ? err_str(rc) : r.code[0] ? r.code : "failed");
    int ok = rc == 0 && r.status == 200;
    s3c_free(c);
    return ok ? 0 : 3;
}

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: wl-bench WORKLOAD [options]   WORKLOAD: put get mixed stat delete list multipart\n"
        "       wl-bench gen --dir DIR [--bucket B --prefix P --objects N --size DIST --seed S]\n"
        "       wl-bench compare A.json B.json\n"
        "       wl-bench stats [--endpoint URL ...]   a warmlake node's drive counters as JSON\n"
        "\n"
        "  --endpoint URL        http://host:port (default http://127.0.0.1:9000)\n"
        "  --access-key K        default $WARMLAKE_ACCESS_KEY or $AWS_ACCESS_KEY_ID\n"
        "  --secret-key S        default $WARMLAKE_SECRET_KEY or $AWS_SECRET_ACCESS_KEY\n"
        "  --region R            SigV4 region (default us-east-1)\n"
        "  --plain               unsigned GETs of /BUCKET/KEY from any HTTP server (files from "
        "'gen')\n"
        "  --bucket B            default wl-bench (created when missing)\n"
        "  --prefix P            key prefix (default wlb/)\n"
        "  --size DIST           object size or distribution, e.g. 1MiB or "
        "4KiB:70,1MiB:25,64MiB:5\n"
        "  --clients N           concurrent clients, one connection each (default 8)\n"
        "  --duration SECS       measured time (default 10; always bounded)\n"
        "  --ops N               stop after N operations (within --duration)\n"
        "  --objects N           key space; put: 0 = a new key per PUT (default 1000, list 10000)\n"
        "  --order random|seq    key order (default random)\n"
        "  --mix OP:W,...        mixed ratios over get put stat delete (default get:90,put:10)\n"
        "  --range SIZE[@ALIGN]  ranged GETs of SIZE bytes at ALIGN-aligned offsets\n"
        "  --part-size SIZE      multipart part size (default 5MiB)\n"
        "  --no-prepare          GET/list/delete objects already there (same seed, prefix, sizes)\n"
        "  --no-verify           do not check GET bodies\n"
        "  --seed N              content seed (default 1)\n"
        "  --cleanup             delete the objects afterwards\n"
        "  --json FILE           write the results as JSON\n"
        "  --quiet               no progress line (also off when stderr is not a terminal)\n"
        "  --quick               a smoke run: 1 s unless --duration, at most 100 objects\n"
        "Exit status: 0 ok, 1 content mismatches, 2 usage, 3 no operation succeeded.\n");
}

static int parse_mix(const char *s)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", s);
    memset(cfg.mix, 0, sizeof(cfg.mix));
    cfg.mix_total = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *c = strchr(t, ':');
        if (!c) return -1;
        *c = 0;
        int op = -1;
        for (int i = 0; i < OP_N; i++)
            if (!strcmp(t, op_name[i])) op = i;
        if (op != OP_GET && op != OP_PUT && op != OP_STAT && op != OP_DELETE) return -1;
        char *end;
        unsigned long w = strtoul(c + 1, &end, 10);
        if (*end || end == c + 1) return -1;
        cfg.mix[op] = w;
        cfg.mix_total += w;
    }
    return cfg.mix_total ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "compare")) {
        if (argc != 4) {
            usage(stderr);
            return 2;
        }
        return compare(argv[2], argv[3]);
    }
    cfg.workload = argv[1];
    static const char *const workloads[] = {"put",  "get",       "mixed", "stat", "delete",
                                            "list", "multipart", "gen",   "stats"};
    int known = 0;
    for (size_t i = 0; i < sizeof(workloads) / sizeof(workloads[0]); i++)
        known |= !strcmp(cfg.workload, workloads[i]);
    if (!known) {
        fprintf(stderr, "wl-bench: unknown workload %s\n", cfg.workload);
        usage(stderr);
        return 2;
    }
    cfg.endpoint = "http://127.0.0.1:9000";
    cfg.access_key =
        getenv("WARMLAKE_ACCESS_KEY") ? getenv("WARMLAKE_ACCESS_KEY") : getenv("AWS_ACCESS_KEY_ID");
    cfg.secret = getenv("WARMLAKE_SECRET_KEY") ? getenv("WARMLAKE_SECRET_KEY")
                                               : getenv("AWS_SECRET_ACCESS_KEY");
    cfg.region = "us-east-1";
    cfg.bucket = "wl-bench";
    cfg.prefix = "wlb/";
    cfg.size_spec = "1MiB";
    cfg.clients = 8;
    cfg.duration = -1;
    cfg.objects = UINT64_MAX;
    cfg.random_order = 1;
    cfg.part_size = 5u << 20;
    cfg.prepare = 1;
    cfg.verify = 1;
    cfg.seed = 1;
    parse_mix("get:90,put:10");
    enum {
        O_EP = 256,
        O_AK,
        O_SK,
        O_REGION,
        O_PLAIN,
        O_BUCKET,
        O_PREFIX,
        O_SIZE,
        O_CLIENTS,
        O_DUR,
        O_OPS,
        O_OBJ,
        O_ORDER,
        O_MIX,
        O_RANGE,
        O_PART,
        O_NOPREP,
        O_NOVER,
        O_SEED,
        O_CLEAN,
        O_JSON,
        O_QUIET,
        O_DIR,
        O_QUICK
    };
    static const struct option opts[] = {{"endpoint", 1, 0, O_EP},
                                         {"access-key", 1, 0, O_AK},
                                         {"secret-key", 1, 0, O_SK},
                                         {"region", 1, 0, O_REGION},
                                         {"plain", 0, 0, O_PLAIN},
                                         {"bucket", 1, 0, O_BUCKET},
                                         {"prefix", 1, 0, O_PREFIX},
                                         {"size", 1, 0, O_SIZE},
                                         {"clients", 1, 0, O_CLIENTS},
                                         {"duration", 1, 0, O_DUR},
                                         {"ops", 1, 0, O_OPS},
                                         {"objects", 1, 0, O_OBJ},
                                         {"order", 1, 0, O_ORDER},
                                         {"mix", 1, 0, O_MIX},
                                         {"range", 1, 0, O_RANGE},
                                         {"part-size", 1, 0, O_PART},
                                         {"no-prepare", 0, 0, O_NOPREP},
                                         {"no-verify", 0, 0, O_NOVER},
                                         {"seed", 1, 0, O_SEED},
                                         {"cleanup", 0, 0, O_CLEAN},
                                         {"json", 1, 0, O_JSON},
                                         {"quiet", 0, 0, O_QUIET},
                                         {"dir", 1, 0, O_DIR},
                                         {"quick", 0, 0, O_QUICK},
                                         {"help", 0, 0, 'h'},
                                         {0, 0, 0, 0}};
    optind = 2;
    int o;
    while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        char *end = NULL;
        switch (o) {
        case O_EP:
            cfg.endpoint = optarg;
            break;
        case O_AK:
            cfg.access_key = optarg;
            break;
        case O_SK:
            cfg.secret = optarg;
            break;
        case O_REGION:
            cfg.region = optarg;
            break;
        case O_PLAIN:
            cfg.plain = 1;
            break;
        case O_BUCKET:
            cfg.bucket = optarg;
            break;
        case O_PREFIX:
            cfg.prefix = optarg;
            break;
        case O_SIZE:
            cfg.size_spec = optarg;
            break;
        case O_CLIENTS:
            cfg.clients = atoi(optarg);
            break;
        case O_DUR:
            cfg.duration = strtod(optarg, &end);
            break;
        case O_OPS:
            cfg.ops = strtoull(optarg, &end, 10);
            break;
        case O_OBJ:
            cfg.objects = strtoull(optarg, &end, 10);
            break;
        case O_ORDER:
            if (strcmp(optarg, "random") && strcmp(optarg, "seq")) goto bad;
            cfg.random_order = !strcmp(optarg, "random");
            break;
        case O_MIX:
            if (parse_mix(optarg) != 0) goto bad;
            break;
        case O_RANGE: {
            char tmp[128];
            snprintf(tmp, sizeof(tmp), "%s", optarg);
            char *at = strchr(tmp, '@');
            if (at) *at++ = 0;
            if (size_parse(tmp, &cfg.range_size) != 0 || cfg.range_size == 0) goto bad;
            if (at && (size_parse(at, &cfg.range_align) != 0 || cfg.range_align == 0)) goto bad;
            break;
        }
        case O_PART:
            if (size_parse(optarg, &cfg.part_size) != 0 || cfg.part_size == 0) goto bad;
            break;
        case O_NOPREP:
            cfg.prepare = 0;
            break;
        case O_NOVER:
            cfg.verify = 0;
            break;
        case O_SEED:
            cfg.seed = strtoull(optarg, &end, 10);
            break;
        case O_CLEAN:
            cfg.cleanup = 1;
            break;
        case O_JSON:
            cfg.json_path = optarg;
            break;
        case O_QUIET:
            cfg.quiet = 1;
            break;
        case O_QUICK:
            cfg.quick = 1;
            break;
        case O_DIR:
            cfg.dir = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            goto bad;
        }
        if (end && *end) goto bad;
    }
    if (optind != argc || size_dist_parse(cfg.size_spec, &cfg.sizes) != 0 || cfg.clients < 1 ||
        strlen(cfg.prefix) > 400 || strlen(cfg.bucket) > 63 || cfg.clients > MAX_CLIENTS)
        goto bad;
    const char *w = cfg.workload;
    if (cfg.objects == UINT64_MAX)
        cfg.objects = !strcmp(w, "put") || !strcmp(w, "multipart") ? 0
                      : !strcmp(w, "list")                         ? 10000
                                                                   : 1000;
    if (!strcmp(w, "stats")) return node_stats();
    if (!strcmp(w, "gen")) {
        if (!cfg.dir) goto bad;
        return gen_files();
    }
    if (cfg.quick && cfg.objects > 100) cfg.objects = 100; /* a smoke run: small and short */
    if (cfg.duration < 0) cfg.duration = cfg.quick ? 1 : cfg.ops ? 3600 : 10;
    if (cfg.duration <= 0 || cfg.duration > 86400) goto bad;
    int reads = !strcmp(w, "get") || !strcmp(w, "stat") || !strcmp(w, "list") ||
                !strcmp(w, "delete") || !strcmp(w, "mixed");
    if (reads && cfg.objects == 0) goto bad;
    if (cfg.plain && strcmp(w, "get") && strcmp(w, "stat")) {
        fprintf(stderr, "wl-bench: --plain serves get and stat only\n");
        return 2;
    }
    if (!cfg.plain && (!cfg.access_key || !cfg.secret)) {
        fprintf(stderr,
                "wl-bench: no credentials (--access-key/--secret-key or WARMLAKE_ACCESS_KEY/"
                "WARMLAKE_SECRET_KEY), or --plain for an unsigned HTTP server\n");
        return 2;
    }
    if (!strcmp(w, "mixed") && cfg.mix[OP_DELETE]) kstate = calloc(cfg.objects, sizeof(*kstate));

    clients = calloc((size_t)cfg.clients, sizeof(client_t));
    s3c_cfg_t cc = {.endpoint = cfg.endpoint, .region = cfg.region, .max_body_keep = 64u << 20};
    if (!cfg.plain) {
        cc.access_key = cfg.access_key;
        cc.secret = cfg.secret;
    }
    for (int i = 0; i < cfg.clients; i++) {
        if (!(clients[i].c = s3c_new(&cc))) return 2;
        clients[i].rng = cfg.seed * 1000003 + (uint64_t)i * 7919;
    }
    if (!cfg.plain && ensure_bucket(clients[0].c) != 0) return 3;

    if (reads && cfg.prepare && !cfg.plain) {
        phase_prepare = 1;
        reset_clients();
        atomic_store(&next_key, 0);
        double s = run_clients();
        total_t t;
        merge(&t);
        if (t.errors[OP_PUT]) {
            fprintf(stderr, "wl-bench: prepare: %llu of %llu PUTs failed (%s)\n",
                    (unsigned long long)t.errors[OP_PUT], (unsigned long long)cfg.objects,
                    t.nerr ? t.err[0].name : "?");
            return 3;
        }
        if (!cfg.quiet)
            printf("prepared %llu objects in %.1f s\n", (unsigned long long)cfg.objects, s);
        phase_prepare = 0;
    }

    reset_clients();
    atomic_store(&next_key, 0);
    total_t t;
    double secs = run_clients();
    merge(&t);
    t.secs = secs;
    max_key_used = atomic_load(&next_key);
    print_table(&t);
    if (cfg.json_path && write_json(&t) != 0) return 2;
    if (cfg.cleanup && !cfg.plain) cleanup_objects();
    uint64_t good = 0;
    for (int i = 0; i < OP_N; i++)
        good += t.ops[i];
    for (int i = 0; i < cfg.clients; i++)
        s3c_free(clients[i].c);
    free(clients);
    free(kstate);
    if (t.mismatches) return 1;
    return good ? 0 : 3;
bad:
    fprintf(stderr, "wl-bench: bad arguments (see wl-bench --help)\n");
    return 2;
}
