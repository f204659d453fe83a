/*
 * load.c: wl-bench's client threads (map in wlb.h): one operation of each
 * kind, the client loop, the run against the clock, merging the counters.
 */
#include "bench/wlbench/gen.h"
#include "bench/wlbench/wlb.h"
#include "common/err.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const char *const op_name[OP_N] = {"put", "get", "delete", "stat", "list", "multipart"};
cfg_t cfg;
client_t *clients;
keystate_t *kstate;
atomic_uint_fast64_t next_key;
int phase_prepare;
uint64_t max_key_used;
static atomic_int stop_flag;
static atomic_uint_fast64_t tickets; /* ops started (bounded by --ops) */
static atomic_uint_fast64_t prog_ops, prog_bytes, prog_errors;
static atomic_int running; /* client threads not yet finished */

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
uint64_t key_size(uint64_t n)
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

void object_path(uint64_t n, char *key, size_t kcap, char *path, size_t pcap)
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

/* What one pass over a ListObjectsV2 page collects (scan_page: the client's parsing must
 * cost less than the node's listing, or keys/s measures the client). */
typedef struct {
    char last[512];
    size_t last_len;
    uint64_t n, out_of_order;
    char trunc[16];
    char *token;
    size_t token_cap;
} keys_t;

enum { LIST_KEY, LIST_TRUNCATED, LIST_TOKEN };

static void on_list_el(void *arg, int which, const char *text, size_t len)
{
    keys_t *k = arg;
    if (which == LIST_TRUNCATED) {
        snprintf(k->trunc, sizeof(k->trunc), "%.*s", (int)len, text);
        return;
    }
    if (which == LIST_TOKEN) {
        snprintf(k->token, k->token_cap, "%.*s", (int)len, text);
        return;
    }
    /* Order as S3 lists (bytes, unsigned); keys past the buffer compare by their start. */
    size_t n = len < sizeof(k->last) - 1 ? len : sizeof(k->last) - 1;
    if (k->n) {
        int c = memcmp(text, k->last, n < k->last_len ? n : k->last_len);
        if (c < 0 || (c == 0 && n <= k->last_len)) k->out_of_order++;
    }
    memcpy(k->last, text, n);
    k->last[n] = 0;
    k->last_len = n;
    k->n++;
}

/*
 * A page scanned for what on_list_el takes, without an XML parser: each <Key>, <IsTruncated>
 * and <NextContinuationToken>, their text up to the next '<'. expat was 85% of this client's
 * CPU (1.2 us a key: on a machine whose cores the node shares, keys/s measured the client).
 * -1 when the page holds what this scan does not read (an entity, a key with markup): the
 * caller parses it with expat. Every 64th page is parsed by both and must agree (do_list).
 */
static int scan_page(const char *b, size_t len, keys_t *k)
{
    static const struct {
        const char *tag;
        size_t len;
        int which;
    } tags[] = {{"<Key>", 5, LIST_KEY},
                {"<IsTruncated>", 13, LIST_TRUNCATED},
                {"<NextContinuationToken>", 23, LIST_TOKEN}};
    const char *p = b, *end = b + len;
    int n = 0;
    while ((p = memchr(p, '<', (size_t)(end - p))) != NULL) {
        int t = p[1] == 'K' ? 0 : p[1] == 'I' ? 1 : p[1] == 'N' ? 2 : -1;
        if (t < 0 || (size_t)(end - p) < tags[t].len || memcmp(p, tags[t].tag, tags[t].len) != 0) {
            p++;
            continue;
        }
        const char *text = p + tags[t].len, *stop = memchr(text, '<', (size_t)(end - text));
        if (!stop || stop[1] != '/' || memchr(text, '&', (size_t)(stop - text))) return -1;
        on_list_el(k, tags[t].which, text, (size_t)(stop - text));
        n++;
        p = stop;
    }
    return n;
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
    keys_t k = {.token = ls->token, .token_cap = sizeof(ls->token)};
    memcpy(k.last, ls->last, sizeof(k.last));
    k.last_len = strlen(k.last);
    k.n = ls->pass_keys ? 1
                        : 0; /* compare the first key of this page with the last of the previous */
    static const char *const names[] = {[LIST_KEY] = "Key",
                                        [LIST_TRUNCATED] = "IsTruncated",
                                        [LIST_TOKEN] = "NextContinuationToken"};
    ls->token[0] = 0;
    keys_t k0 = k;
    char token0[sizeof(ls->token)];
    int scanned = scan_page(r.body, r.body_len, &k);
    if (scanned >= 0 && ++cl->list_pages % 64 == 0) {
        /* The scan checked against the XML parser: same keys, same end, same token. */
        keys_t kx = k0;
        kx.token = token0;
        kx.token_cap = sizeof(token0);
        token0[0] = 0;
        if (s3c_xml_each_of(r.body, r.body_len, names, 3, on_list_el, &kx) < 0 || kx.n != k.n ||
            kx.out_of_order != k.out_of_order || strcmp(kx.last, k.last) != 0 ||
            strcmp(kx.trunc, k.trunc) != 0 || strcmp(token0, ls->token) != 0)
            mismatch(cl, "(listing)", "page scan and XML parser disagree, bytes", r.body_len, 0);
    }
    if (scanned < 0) {
        k = k0;
        ls->token[0] = 0;
        if (s3c_xml_each_of(r.body, r.body_len, names, 3, on_list_el, &k) < 0) {
            mismatch(cl, "(listing)", "malformed XML, bytes", r.body_len, 0);
            ls->pass_keys = 0;
            return -1;
        }
    }
    uint64_t got = k.n - (ls->pass_keys ? 1 : 0);
    if (k.out_of_order) mismatch(cl, "(listing)", "keys out of order", k.out_of_order, 0);
    memcpy(ls->last, k.last, sizeof(ls->last));
    cl->list_keys += got;
    ls->pass_keys += got;
    cl->bytes[OP_LIST] += r.body_len;
    const char *trunc = k.trunc;
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
double run_clients(void)
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

void totals_merge(total_t *t)
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

void clients_reset(void)
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
