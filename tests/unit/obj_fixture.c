/*
 * The object layer's test fixture (obj_fixture.h).
 */
#include "obj_fixture.h"

/* A head that is a tombstone (fail_tomb). */
static int is_tomb(const void *meta, size_t ml)
{
    if (!meta || !ml) return 0;
    obj_info_t *o = malloc(sizeof(*o));
    int tomb = obj_meta_decode(meta, ml, o) == 0 && o->deleted && !o->marker;
    free(o);
    return tomb;
}

static int f_put(void *ctx, const drive_id_t *id, const void *data, size_t len, const void *meta,
                 size_t ml)
{
    faulty_t *f = ctx;
    __atomic_fetch_add(&f->n_put, 1, __ATOMIC_RELAXED);
    if (f->fail_tomb && is_tomb(meta, ml)) return ERR_IO;
    return f->fail_write ? ERR_IO : f->in.ops->put(f->in.ctx, id, data, len, meta, ml);
}
static int f_read(void *ctx, const drive_id_t *id, uint64_t off, void *buf, size_t len)
{
    faulty_t *f = ctx;
    __atomic_fetch_add(&f->n_read, 1, __ATOMIC_RELAXED);
    if (f->fail_read) return ERR_IO;
    int rc = f->in.ops->read(f->in.ctx, id, off, buf, len);
    if (rc == 0 && f->corrupt_read && len > 0)
        ((uint8_t *)buf)[len / 2] ^= 0x01; /* bitrot below the drive's own checks */
    return rc;
}
/* The split read the gateway uses on real drives; odd stores go without it (the copy path). */
static int f_read_split(void *ctx, const drive_id_t *id, void *buf, size_t len, void *tail,
                        size_t tail_len, uint32_t *buf_crc)
{
    faulty_t *f = ctx;
    __atomic_fetch_add(&f->n_split, 1, __ATOMIC_RELAXED);
    if (f->fail_read) return ERR_IO;
    int rc = f->in.ops->read_split(f->in.ctx, id, buf, len, tail, tail_len, buf_crc);
    if (rc == 0 && f->corrupt_read && len > 0) {
        ((uint8_t *)buf)[len / 2] ^= 0x01;
        *buf_crc = crc32c(0, buf, len); /* what lies in buf now: the gateway must compare */
    }
    return rc;
}
/*
 * The split read in halves (the batch path's, local drives only): the faults as f_read_split's,
 * a read's corruption once its I/O is done. The op handed out is the fixture's own.
 */
typedef struct {
    faulty_t *f;
    drive_rd_t *in;
    uint8_t *buf;
    size_t len;
    uint32_t *buf_crc;
} f_rd_t;
static void f_rot(faulty_t *f, uint8_t *buf, size_t len, uint32_t *buf_crc)
{
    if (!f->corrupt_read || len == 0) return;
    buf[len / 2] ^= 0x01;
    *buf_crc = crc32c(0, buf, len); /* what lies in buf now: the gateway must compare */
}
static int f_read_begin(void *ctx, const drive_id_t *id, void *buf, size_t len, void *tail,
                        size_t tail_len, uint32_t *buf_crc, drive_rd_t **op, drive_rd_io_t *io)
{
    faulty_t *f = ctx;
    __atomic_fetch_add(&f->n_split, 1, __ATOMIC_RELAXED);
    *op = NULL;
    if (f->fail_read) return ERR_IO;
    if (f->begin_again) return ERR_AGAIN;
    drive_rd_t *in = NULL;
    int rc = f->in.ops->read_begin(f->in.ctx, id, buf, len, tail, tail_len, buf_crc, &in, io);
    if (rc == 0 && !in) f_rot(f, buf, len, buf_crc);
    if (rc == 0 && in) {
        f_rd_t *w = malloc(sizeof(*w));
        assert_non_null(w);
        *w = (f_rd_t){f, in, buf, len, buf_crc};
        *op = (drive_rd_t *)w;
    }
    return rc;
}
static int f_read_end(drive_rd_t *op, ssize_t res)
{
    f_rd_t *w = (f_rd_t *)op;
    int rc = w->f->in.ops->read_end(w->in, res);
    if (rc == 0) f_rot(w->f, w->buf, w->len, w->buf_crc);
    free(w);
    return rc;
}
static int f_stat(void *ctx, const drive_id_t *id, drive_stat_t *st, void *meta, size_t cap)
{
    faulty_t *f = ctx;
    __atomic_fetch_add(&f->n_stat, 1, __ATOMIC_RELAXED);
    return f->fail_read ? ERR_IO : f->in.ops->stat(f->in.ctx, id, st, meta, cap);
}
/* Asynchronous when the inner store is (remote), else answered at once: both paths of the set. */
static int f_stat_async(void *ctx, const drive_id_t *id, drive_stat_t *st, void *meta, size_t cap,
                        drive_done_fn done, void *arg)
{
    faulty_t *f = ctx;
    __atomic_fetch_add(&f->n_stat, 1, __ATOMIC_RELAXED);
    if (f->fail_read) return ERR_IO;
    if (f->in.ops->stat_async)
        return f->in.ops->stat_async(f->in.ctx, id, st, meta, cap, done, arg);
    done(arg, f->in.ops->stat(f->in.ctx, id, st, meta, cap));
    return 0;
}
void (*rf_del_hook)(const drive_id_t *id);

static int f_del(void *ctx, const drive_id_t *id)
{
    faulty_t *f = ctx;
    __atomic_fetch_add(&f->n_del, 1, __ATOMIC_RELAXED);
    if (rf_del_hook) rf_del_hook(id);
    return f->fail_write ? ERR_IO : f->in.ops->del(f->in.ctx, id);
}
int (*rf_del_async_hook)(faulty_t *f, const drive_id_t *id, drive_done_fn done, void *arg);

static int f_del_async(void *ctx, const drive_id_t *id, drive_done_fn done, void *arg)
{
    faulty_t *f = ctx;
    __atomic_fetch_add(&f->n_del, 1, __ATOMIC_RELAXED);
    if (f->fail_write) return ERR_IO;
    if (rf_del_async_hook && rf_del_async_hook(f, id, done, arg)) return 0;
    return rf_del_async_inner(f, id, done, arg);
}

int rf_del_async_inner(faulty_t *f, const drive_id_t *id, drive_done_fn done, void *arg)
{
    if (f->in.ops->del_async) return f->in.ops->del_async(f->in.ctx, id, done, arg);
    int rc = f->in.ops->del(f->in.ctx, id); /* a remote store: none of its own */
    if (rc == ERR_NOT_FOUND) return rc;
    done(arg, rc);
    return 0;
}

static int f_del_head(void *ctx, const drive_id_t *id, const shard_cond_t *cond)
{
    faulty_t *f = ctx;
    __atomic_fetch_add(&f->n_del, 1, __ATOMIC_RELAXED);
    if (f->old_node && cond) return ERR_CORRUPT; /* bytes after the id: a corrupt DEL to it */
    return f->fail_write ? ERR_IO : f->in.ops->del_head(f->in.ctx, id, cond);
}
static int f_list(void *ctx, const char *b, const char *p, const char *a, drive_list_fn fn,
                  void *arg)
{
    faulty_t *f = ctx;
    return f->fail_read ? ERR_IO : f->in.ops->list(f->in.ctx, b, p, a, fn, arg);
}
/* A whole record (inline objects); odd stores go without it (stat + read + stat). */
static int f_get(void *ctx, const drive_id_t *id, drive_stat_t *st, void *meta, size_t cap,
                 void *buf, size_t bcap)
{
    faulty_t *f = ctx;
    __atomic_fetch_add(&f->n_get, 1, __ATOMIC_RELAXED);
    if (f->fail_read) return ERR_IO;
    int rc = f->in.ops->get(f->in.ctx, id, st, meta, cap, buf, bcap);
    if (rc == 0 && f->corrupt_read && st->len > 0) ((uint8_t *)buf)[st->len / 2] ^= 0x01;
    return rc;
}
static int f_health(void *ctx)
{
    int sick = ((faulty_t *)ctx)->sick;
    return sick == 3 ? SHARD_FAILED : sick == 2 ? SHARD_DOWN : sick ? SHARD_SUSPECT : SHARD_UP;
}
static int f_refilling(void *ctx)
{
    return ((faulty_t *)ctx)->refilling;
}
static void f_stats(void *ctx, drive_stats_t *st)
{
    faulty_t *f = ctx;
    f->in.ops->stats(f->in.ctx, st);
}
static int f_scan_cb(void *arg, const drive_id_t *id, const drive_stat_t *st, const void *meta)
{
    fscan_t *x = arg;
    x->f->scanned++;
    if (x->f->scan_left > 0 && --x->f->scan_left == 0) {
        x->died = 1;
        return 1;
    }
    return x->fn(x->arg, id, st, meta);
}
static int f_scan(void *ctx, const char *b, const char *p, const drive_from_t *from,
                  drive_scan_fn fn, void *arg)
{
    faulty_t *f = ctx;
    __atomic_fetch_add(&f->n_scan, 1, __ATOMIC_RELAXED);
    if (f->fail_read || f->scan_left < 0) return ERR_IO;
    fscan_t x = {f, fn, arg, 0};
    int rc = f->in.ops->scan(f->in.ctx, b, p, from, f_scan_cb, &x);
    if (x.died) {
        f->scan_left = -1; /* and dead from then on */
        return ERR_IO;
    }
    return rc;
}

/* Odd stores take asynchronous puts as the gateway's local drives do; even ones go by the pool. */
static int f_put_async(void *ctx, const drive_id_t *id, const void *data, size_t len,
                       const void *meta, size_t ml, drive_done_fn done, void *arg)
{
    faulty_t *f = ctx;
    __atomic_fetch_add(&f->n_put, 1, __ATOMIC_RELAXED);
    if (f->fail_tomb && is_tomb(meta, ml)) return ERR_IO;
    if (!f->fail_write && f->hold_blocks && !ml) {
        held_put_t *h = calloc(1, sizeof(*h));
        *h = (held_put_t){.shard = id->shard, .data = data, .len = len, .done = done, .arg = arg};
        snprintf(h->bucket, sizeof(h->bucket), "%s", id->bucket);
        snprintf(h->key, sizeof(h->key), "%s", id->key);
        snprintf(h->version, sizeof(h->version), "%s", id->version);
        h->next = f->held;
        f->held = h;
        f->n_held++;
        return 0;
    }
    return f->fail_write ? ERR_IO
                         : f->in.ops->put_async(f->in.ctx, id, data, len, meta, ml, done, arg);
}

/* Unsynced block writes (a refill's): held or failed as put_async's, else through the store's
 * own put_unsynced (a local drive) or its put_async (a remote one: durable at once). */
static int f_put_unsynced(void *ctx, const drive_id_t *id, const void *data, size_t len,
                          drive_done_fn done, void *arg)
{
    faulty_t *f = ctx;
    if (f->hold_blocks || f->fail_write || !f->in.ops->put_unsynced)
        return f_put_async(ctx, id, data, len, NULL, 0, done, arg);
    __atomic_fetch_add(&f->n_put, 1, __ATOMIC_RELAXED);
    return f->in.ops->put_unsynced(f->in.ctx, id, data, len, done, arg);
}

static int f_sync(void *ctx)
{
    faulty_t *f = ctx;
    __atomic_fetch_add(&f->n_sync, 1, __ATOMIC_RELAXED);
    if (f->fail_sync) return ERR_IO;
    return f->in.ops->sync ? f->in.ops->sync(f->in.ctx) : 0;
}

void release_blocks(faulty_t *f, int rc)
{
    held_put_t *h = f->held;
    f->held = NULL;
    f->n_held = 0;
    f->hold_blocks = 0;
    while (h) {
        held_put_t *next = h->next;
        drive_id_t id = {h->bucket, h->key, h->version, h->shard};
        int prc =
            rc ? rc
               : f->in.ops->put_async(f->in.ctx, &id, h->data, h->len, NULL, 0, h->done, h->arg);
        if (prc) h->done(h->arg, prc);
        free(h);
        h = next;
    }
}

void (*rf_put_head_hook)(const drive_id_t *id, const void *meta, size_t ml);

static int f_put_head(void *ctx, const drive_id_t *id, const void *data, size_t len,
                      const void *meta, size_t ml, const shard_cond_t *cond, drive_done_fn done,
                      void *arg)
{
    faulty_t *f = ctx;
    __atomic_fetch_add(&f->n_put, 1, __ATOMIC_RELAXED);
    if (rf_put_head_hook && meta && ml && !id->version[0]) rf_put_head_hook(id, meta, ml);
    int left = f->cut_heads && !id->version[0] /* the current position's */
                   ? __atomic_fetch_sub(&f->heads_left, 1, __ATOMIC_RELAXED)
                   : -1;
    if (left == 0) f->fail_write = 1;
    if (left == 1 && !f->fail_write && !f->fail_head) {
        int rc = f->in.ops->put_head(f->in.ctx, id, data, len, meta, ml, cond, done, arg);
        f->fail_write = 1; /* the last to land here: nothing after it, not even an undo */
        return rc;
    }
    if (f->fail_tomb && is_tomb(meta, ml)) return ERR_IO;
    if (f->no_if_kept && cond && cond->mode == SHARD_IF_KEPT) return ERR_CORRUPT;
    return f->fail_write || f->fail_head
               ? ERR_IO
               : f->in.ops->put_head(f->in.ctx, id, data, len, meta, ml, cond, done, arg);
}

static const shard_ops_t faulty_ops = {.put = f_put,
                                       .read = f_read,
                                       .stat = f_stat,
                                       .del = f_del,
                                       .del_async = f_del_async,
                                       .del_head = f_del_head,
                                       .list = f_list,
                                       .read_split = f_read_split,
                                       .get = f_get,
                                       .stats = f_stats,
                                       .put_async = f_put_async,
                                       .scan = f_scan,
                                       .put_head = f_put_head,
                                       .health = f_health,
                                       .refilling = f_refilling,
                                       .stat_async = f_stat_async,
                                       .put_unsynced = f_put_unsynced,
                                       .sync = f_sync};
static const shard_ops_t faulty_ops_nosplit = {.put = f_put,
                                               .read = f_read,
                                               .stat = f_stat,
                                               .del = f_del,
                                               .del_head = f_del_head,
                                               .list = f_list,
                                               .stats = f_stats,
                                               .scan = f_scan,
                                               .put_head = f_put_head,
                                               .health = f_health,
                                               .refilling = f_refilling};

int remote; /* "test_obj remote": the stores are behind proto/ */

/*
 * Store i's ops: odd ones split reads, even ones only read (the copy path). On local drives
 * every store also reads in halves, so where io_uring can be had (uring_usable) a stripe's
 * blocks go through the batch path; the suite runs again without it (unit_obj_threads).
 */
static shard_ops_t ops_halves[2];
static void ops_halves_init(void)
{
    ops_halves[0] = faulty_ops_nosplit;
    ops_halves[1] = faulty_ops;
    for (int i = 0; i < 2; i++) {
        ops_halves[i].read_begin = f_read_begin;
        ops_halves[i].read_end = f_read_end;
    }
}
static const shard_ops_t *ops_for(int i)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    if (remote) return i % 2 ? &faulty_ops : &faulty_ops_nosplit;
    pthread_once(&once, ops_halves_init);
    return &ops_halves[i % 2];
}

uint32_t client_timeout_ms;

static const char secret[] = "a test cluster secret";

pthread_mutex_t hold_mu = PTHREAD_MUTEX_INITIALIZER;

int hold_drive = -1;

proto_inbound_t *held;

int nheld;

int hold_put_drive = -1, hold_what;

static int held_write(const proto_inbound_t *in)
{
    if ((int)in->req.drive != hold_put_drive) return 0;
    if (in->req.type != PROTO_PUT) return (hold_what & HOLD_ALL) == HOLD_ALL;
    return (hold_what & (in->req.meta_len ? HOLD_HEADS : HOLD_BLOCKS)) != 0;
}

static void hold_handle(void *arg, proto_inbound_t *in)
{
    pthread_mutex_lock(&hold_mu);
    if ((in->req.type == PROTO_READ_SPLIT && (int)in->req.drive == hold_drive) || held_write(in)) {
        in->next = held;
        held = in;
        nheld++;
        pthread_mutex_unlock(&hold_mu);
        return;
    }
    pthread_mutex_unlock(&hold_mu);
    peer_serve_handle(arg, in);
}

void release_held(peer_serve_t *sv)
{
    pthread_mutex_lock(&hold_mu);
    proto_inbound_t *in = held;
    held = NULL;
    hold_drive = -1;
    hold_put_drive = -1;
    hold_what = 0;
    pthread_mutex_unlock(&hold_mu);
    while (in) {
        proto_inbound_t *next = in->next;
        peer_serve_handle(sv, in);
        in = next;
    }
}

/* Serve the drives over loopback and make each faulty store's inner store a remote one. */
static void go_remote(env_t *e)
{
    for (int i = 0; i < N; i++)
        e->drives[i] = e->f[i].d;
    assert_non_null(e->serve = peer_serve_new(e->drives, N, 8));
    proto_net_cfg_t c = {.listen = "127.0.0.1:0",
                         .cluster = "test",
                         .node = "srv",
                         .secret = secret,
                         .secret_len = sizeof(secret) - 1,
                         .epoch = 1,
                         .handle = hold_handle,
                         .arg = e->serve};
    assert_int_equal(proto_net_start(&c, &e->server), 0);
    proto_net_cfg_t cc = {.cluster = "test",
                          .node = "gw",
                          .secret = secret,
                          .secret_len = sizeof(secret) - 1,
                          .epoch = 1,
                          .timeout_ms = client_timeout_ms};
    assert_int_equal(proto_net_start(&cc, &e->client), 0);
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", proto_net_port(e->server));
    proto_peer_t *p = proto_net_peer(e->client, "srv", addr);
    assert_non_null(p);
    for (int i = 0; i < N; i++)
        e->f[i].in = peer_store_new(p, (uint32_t)i);
}

void open_drive(env_t *e, int i)
{
    char p[256];
    snprintf(p, sizeof(p), "%s/d%d", e->dir, i);
    drive_cfg_t c = {0};
    c.path = p;
    c.iu = 4096;
    c.segment_size = 8u << 20;
    c.capacity = 256u << 20;
    assert_int_equal(drive_open(&c, &e->f[i].d), 0);
    e->f[i].in = shard_store_local(e->f[i].d);
}

int setup(void **state)
{
    env_t *e = calloc(1, sizeof(*e));
    e->dir = strdup("/tmp/wl-obj-XXXXXX");
    assert_non_null(mkdtemp(e->dir));
    shard_store_t st[N];
    for (int i = 0; i < N; i++) {
        open_drive(e, i);
        st[i] = (shard_store_t){ops_for(i), &e->f[i]};
    }
    if (remote) go_remote(e);
    int err;
    e->set = obj_set_new(st, K, M, B, &err);
    assert_non_null(e->set);
    *state = e;
    return 0;
}

int teardown(void **state)
{
    env_t *e = *state;
    obj__head_drop_delay_ns = (uint64_t)OBJ_HEAD_DROP_DELAY_S * 1000000000ull; /* a test's */
    obj__part_commit_hook = NULL;                                              /* a failed test's */
    if (remote) release_held(e->serve); /* a failed test's: the heal thread may wait on them */
    obj_set_free(e->set);
    if (remote) {
        proto_net_stop(e->client);
        proto_net_stop(e->server);
        peer_serve_free(e->serve);
        for (int i = 0; i < N; i++)
            peer_store_free(&e->f[i].in);
    }
    for (int i = 0; i < N; i++)
        drive_close(e->f[i].d);
    tl_rm_rf(e->dir);
    free(e->dir);
    free(e);
    return 0;
}

void fill(uint8_t *p, size_t n, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p[i] = (uint8_t)x;
    }
}

void put(env_t *e, const char *key, const uint8_t *data, size_t n, obj_info_t *info)
{
    int err;
    obj_writer_t *w = obj_put_begin(e->set, "bkt", key, &err);
    assert_non_null(w);
    /* Uneven pieces, as a socket delivers them. */
    for (size_t pos = 0; pos < n;) {
        size_t step = 1 + (pos * 7919) % 100000;
        if (step > n - pos) step = n - pos;
        assert_int_equal(obj_put_write(w, data + pos, step), 0);
        pos += step;
    }
    assert_int_equal(obj_put_commit(w, "application/x-test", "color\0blue\0", 11, info), 0);
}

void expect(env_t *e, const char *key, const uint8_t *data, size_t n)
{
    obj_info_t info;
    int err;
    obj_reader_t *r = obj_open(e->set, "bkt", key, &info, &err);
    assert_non_null(r);
    assert_int_equal(info.size, n);
    uint8_t *got = malloc(n + 1);
    assert_int_equal(obj_read(r, 0, got, n), 0);
    assert_memory_equal(got, data, n);
    if (n > 10) {
        uint64_t a = n / 3, len = n / 2;
        memset(got, 0, n);
        assert_int_equal(obj_read(r, a, got, len), 0);
        assert_memory_equal(got, data + a, len);
    }
    obj_close(r);
    free(got);
}

void md5hex(const uint8_t *p, size_t n, char out[33])
{
    uint8_t d[16];
    unsigned int dl;
    EVP_Digest(p, n, d, &dl, EVP_md5(), NULL);
    for (int i = 0; i < 16; i++)
        sprintf(out + 2 * i, "%02x", d[i]);
}

int count_cb(void *arg, const drive_id_t *id, const drive_stat_t *st)
{
    (void)id;
    (void)st;
    (*(int *)arg)++;
    return 0;
}

obj_set_t *gateway_with_blocks(env_t *e, uint32_t block)
{
    shard_store_t st[N];
    for (int i = 0; i < N; i++)
        st[i] = (shard_store_t){ops_for(i), &e->f[i]};
    int err;
    obj_set_t *other = obj_set_new(st, K, M, block, &err);
    assert_non_null(other);
    return other;
}

obj_set_t *other_gateway(env_t *e)
{
    return gateway_with_blocks(e, B);
}

int live_head(env_t *e, int i, const char *key)
{
    drive_id_t id = {"bkt", key, "", (uint32_t)i};
    drive_stat_t st;
    uint8_t meta[HEAD_MAX];
    obj_info_t o;
    return e->f[i].in.ops->stat(e->f[i].in.ctx, &id, &st, meta, sizeof(meta)) == 0 &&
           obj_meta_decode(meta, st.meta_len, &o) == 0 && !o.deleted;
}

int head_kind_at(env_t *e, int i, const char *key, const char *pos)
{
    drive_id_t id = {"bkt", key, pos, (uint32_t)i};
    drive_stat_t st;
    uint8_t meta[HEAD_MAX];
    obj_info_t o;
    if (e->f[i].in.ops->stat(e->f[i].in.ctx, &id, &st, meta, sizeof(meta)) != 0) return 0;
    if (obj_meta_decode(meta, st.meta_len, &o) != 0) return '?';
    return !o.deleted ? 'L' : o.marker ? 'M' : 'T';
}

void vput(env_t *e, const char *key, const char *body, obj_versioning_t v, obj_info_t *out)
{
    int err;
    obj_writer_t *w = obj_put_begin(e->set, "bkt", key, &err);
    assert_non_null(w);
    assert_int_equal(obj_put_write(w, body, strlen(body)), 0);
    obj_put_set_versioning(w, v);
    assert_int_equal(obj_put_commit(w, NULL, NULL, 0, out), 0);
}

void vread(env_t *e, const char *key, const char *vid, char *out, size_t cap)
{
    obj_info_t info;
    int err;
    out[0] = 0;
    obj_reader_t *r = obj_open_version(e->set, "bkt", key, vid, &info, &err);
    if (!r) return;
    assert_true(info.size < cap);
    assert_int_equal(obj_read(r, 0, out, info.size), 0);
    out[info.size] = 0;
    obj_close(r);
}

int vlist_cb(void *arg, const char *key, const obj_info_t *info, int latest)
{
    char *out = arg;
    sprintf(out + strlen(out), "%s:%s%s%s,", key, info->vid[0] ? info->vid : "null",
            info->marker ? "M" : "", latest ? "*" : "");
    return 0;
}

int live_heads_of(env_t *e, const char *key, const obj_info_t *v)
{
    char pos[OBJ_VID_LEN + 1];
    int n = 0;
    obj__vid_of(pos, v->mtime_ns);
    for (int i = 0; i < N; i++) {
        drive_id_t id = {"bkt", key, pos, (uint32_t)i};
        drive_stat_t ds;
        uint8_t meta[HEAD_MAX];
        obj_info_t h;
        if (e->f[i].in.ops->stat(e->f[i].in.ctx, &id, &ds, meta, sizeof(meta)) == 0 &&
            obj_meta_decode(meta, ds.meta_len, &h) == 0 && !h.deleted &&
            strcmp(h.upload_id, v->upload_id) == 0)
            n++;
    }
    return n;
}

int umeta_tagged(void *arg, const obj_info_t *cur, char *out, size_t *out_len)
{
    (void)arg;
    (void)cur;
    memcpy(out, "tag\0yes\0", 8); /* name and value pairs, each NUL-terminated */
    *out_len = 8;
    return 0;
}

int has_block(env_t *e, const char *key, const char *upload, uint32_t stripe, int i)
{
    char bb[SHARD_MAX_BUCKET + 2];
    obj__blk_bucket(bb, "bkt");
    drive_id_t id = {bb, key, upload, (stripe << SHARD_BITS) | (uint32_t)i};
    drive_stat_t st;
    return e->set->st[i].ops->stat(e->set->st[i].ctx, &id, &st, NULL, 0) == 0;
}

/* The keys under MPU_PARTS of one upload (every store's). */
static int count_part_keys_cb(void *arg, const char *key, const obj_info_t *info)
{
    (void)key;
    *(int *)arg += info != NULL;
    return 0;
}

int part_keys(env_t *e, const char *upload)
{
    char prefix[40];
    int n = 0;
    snprintf(prefix, sizeof(prefix), "%s/", upload);
    assert_true(obj__list(e->set, MPU_PARTS, prefix, NULL, NULL, 0, 1, count_part_keys_cb, &n) >=
                0);
    return n;
}

obj_reap_report_t reap_internal_pass(env_t *e, obj_reaper_t *r, uint64_t now)
{
    obj_reap_report_t rep = {0};
    obj_reap_internal(e->set, r, now, &rep);
    obj_reaper_sweep(r, now);
    return rep;
}

int list_parts_cb(void *arg, int part, const obj_info_t *info)
{
    listed_parts_t *l = arg;
    if (l->n < 8) {
        l->part[l->n] = part;
        snprintf(l->etag[l->n], sizeof(l->etag[0]), "%s", info->etag);
    }
    l->n++;
    return 0;
}

int cut_stage, stall_stage;

obj_versioning_t cut_versioning;

int rewrite_before_close; /* stage 0: the record rewritten, still open (a heal) */

const char *rewrite_key;

env_t *rewrite_env;

int cut_at(const char *upload, int stage)
{
    if (stage == 0 && rewrite_before_close) {
        int err;
        char body[128];
        snprintf(body, sizeof(body), "bkt\n%s", rewrite_key);
        obj_writer_t *w = obj_put_begin(rewrite_env->set, MPU_UPLOADS, upload, &err);
        assert_non_null(w);
        assert_int_equal(obj_put_write(w, body, strlen(body)), 0);
        assert_int_equal(obj_put_commit(w, "text/x-cut", NULL, 0, NULL), 0);
        rewrite_before_close = 0;
    }
    /* A closer that stalls there for 16 s (past OBJ__CLOSE_FENCE_NS), then goes on. */
    if (stall_stage && stage == stall_stage) obj__wall_skew_ns = 16 * 1000000000ll;
    return stage == cut_stage;
}

void cut_upload_new(env_t *e, const char *key, uint32_t seed, cut_upload_t *u)
{
    int err;
    obj_info_t pi;
    u->psz = 40000;
    u->data = malloc(2 * u->psz);
    fill(u->data, 2 * u->psz, seed);
    assert_int_equal(obj_mpu_create(e->set, "bkt", key, "text/x-cut", NULL, 0, u->upload), 0);
    for (int i = 0; i < 2; i++) {
        obj_writer_t *w = obj_mpu_part_begin(e->set, "bkt", key, u->upload, i + 1, &err);
        assert_non_null(w);
        assert_int_equal(obj_put_write(w, u->data + (size_t)i * u->psz, u->psz), 0);
        assert_int_equal(obj_put_commit(w, NULL, NULL, 0, &pi), 0);
        u->parts[i].part = i + 1;
        snprintf(u->parts[i].etag, sizeof(u->parts[i].etag), "\"%.32s\"", pi.etag);
    }
}

obj_info_t cut_done; /* what the last cut_complete answered */

int cut_complete(env_t *e, const char *key, cut_upload_t *u, int n, int stage, int *why)
{
    obj_info_t done;
    cut_stage = stage;
    obj__complete_cut_hook = stage || stall_stage || rewrite_before_close ? cut_at : NULL;
    int rc = obj_mpu_complete(e->set, "bkt", key, u->upload, u->parts, n, 1, NULL, cut_versioning,
                              &done, why);
    obj__complete_cut_hook = NULL;
    if (rc == 0) cut_done = done;
    return rc;
}

void assert_cut_object(env_t *e, const char *key, const cut_upload_t *u)
{
    int err;
    obj_info_t info;
    uint8_t *got = malloc(2 * u->psz);
    obj_reader_t *r = obj_open(e->set, "bkt", key, &info, &err);
    assert_non_null(r);
    assert_int_equal(info.size, 2 * u->psz);
    assert_string_equal(info.content_type, "text/x-cut");
    assert_int_equal(obj_read(r, 0, got, 2 * u->psz), 0);
    assert_memory_equal(got, u->data, 2 * u->psz);
    obj_close(r);
    free(got);
}

static int count_upload_cb(void *arg, const char *key, const char *upload, const obj_info_t *info)
{
    (void)key;
    (void)info;
    if (strcmp(upload, ((cut_upload_t *)((void **)arg)[0])->upload) == 0)
        ++*(int *)((void **)arg)[1];
    return 0;
}

int uploads_listed(env_t *e, cut_upload_t *u)
{
    int n = 0;
    void *arg[2] = {u, &n};
    assert_int_equal(obj_mpu_list_uploads(e->set, "bkt", count_upload_cb, arg), 0);
    return n;
}

env_t *cut_env;

int cut_lone;

int cut_in_heads(const char *upload, int stage)
{
    (void)upload;
    if (stage == 2)
        for (int i = 0; i < N; i++) {
            cut_env->f[i].heads_left = i == cut_lone;
            cut_env->f[i].cut_heads = 1;
        }
    return 0;
}

int heads_naming(env_t *e, const char *key, const char *upload)
{
    int n = 0;
    for (int i = 0; i < N; i++) {
        drive_id_t id = {"bkt", key, "", (uint32_t)i};
        drive_stat_t ds;
        uint8_t meta[HEAD_MAX];
        obj_info_t h;
        if (e->f[i].in.ops->stat(e->f[i].in.ctx, &id, &ds, meta, sizeof(meta)) == 0 &&
            obj_meta_decode(meta, ds.meta_len, &h) == 0 && strcmp(h.upload_id, upload) == 0)
            n++;
    }
    return n;
}

int count_versions_of(void *arg, const char *key, const obj_info_t *info, int latest)
{
    (void)latest;
    if (info && strcmp(key, ((const char **)arg)[0]) == 0) ++*(int *)((void **)arg)[1];
    return 0;
}

void cut_lone_head(env_t *e, const char *key, int lone, cut_upload_t *u)
{
    int why = 0;
    cut_env = e;
    cut_lone = lone;
    obj__complete_cut_hook = cut_in_heads;
    int rc = obj_mpu_complete(e->set, "bkt", key, u->upload, u->parts, 2, 1, NULL, cut_versioning,
                              &cut_done, &why);
    obj__complete_cut_hook = NULL;
    for (int i = 0; i < N; i++)
        e->f[i].cut_heads = e->f[i].fail_write = 0;
    assert_int_not_equal(rc, 0);
    assert_int_equal(heads_naming(e, key, u->upload), 1);
}

void cut_heads_on(env_t *e, uint32_t on)
{
    for (int i = 0; i < N; i++) {
        e->f[i].heads_left = (on >> i) & 1;
        e->f[i].cut_heads = 1;
    }
}

void cut_heads_clear(env_t *e)
{
    for (int i = 0; i < N; i++)
        e->f[i].cut_heads = e->f[i].fail_write = e->f[i].fail_read = 0;
}

void key_on_012(env_t *e, const char *prefix, char *key, size_t cap)
{
    for (int i = 0;; i++) {
        snprintf(key, cap, "%s-%d", prefix, i);
        if (obj__inline_stores(e->set, "bkt", key) == 0x7) break;
    }
}

int put_create_only(obj_set_t *set, const char *key)
{
    int err;
    obj_writer_t *w = obj_put_begin(set, "bkt", key, &err);
    assert_non_null(w);
    assert_int_equal(obj_put_write(w, "create", 6), 0);
    obj_cond_t c = OBJ_COND_NONE;
    c.none_match = 1;
    obj_put_set_cond(w, &c);
    obj_info_t info;
    return obj_put_commit(w, NULL, NULL, 0, &info);
}

void wait_flag(int *flag)
{
    /* A minute: a loaded machine under ASan may be slow; the flag always comes. */
    for (int t = 0; t < 60000 && !__atomic_load_n(flag, __ATOMIC_SEQ_CST); t++)
        usleep(1000);
}

int put_cut(env_t *e, const char *key, uint32_t on)
{
    int err;
    static uint8_t big[100000];
    obj_writer_t *w = obj_put_begin(e->set, "bkt", key, &err);
    assert_non_null(w);
    assert_int_equal(obj_put_write(w, big, sizeof(big)), 0);
    obj_put_set_versioning(w, cut_versioning);
    cut_heads_on(e, on);
    obj_info_t info;
    int rc = obj_put_commit(w, NULL, NULL, 0, &info);
    cut_heads_clear(e);
    return rc;
}

static int count_naming_cb(void *arg, const char *key, const obj_info_t *info, int latest)
{
    (void)latest;
    const char **a = arg;
    if (info && strcmp(key, a[0]) == 0 && strcmp(info->upload_id, a[1]) == 0) ++*(int *)a[2];
    return 0;
}

int versions_of(env_t *e, const char *key)
{
    int versions = 0;
    void *arg[2] = {(void *)key, &versions};
    assert_int_equal(obj_list_versions(e->set, "bkt", key, NULL, NULL, count_versions_of, arg), 0);
    return versions;
}

int versions_naming(env_t *e, const char *key, const char *upload)
{
    int n = 0;
    const char *a[3] = {key, upload, (const char *)&n};
    assert_int_equal(obj_list_versions(e->set, "bkt", key, NULL, NULL, count_naming_cb, a), 0);
    return n;
}

void put_big(env_t *e, const char *key, obj_versioning_t v, obj_info_t *out)
{
    int err;
    static uint8_t big[100000];
    obj_writer_t *w = obj_put_begin(e->set, "bkt", key, &err);
    assert_non_null(w);
    assert_int_equal(obj_put_write(w, big, sizeof(big)), 0);
    obj_put_set_versioning(w, v);
    assert_int_equal(obj_put_commit(w, NULL, NULL, 0, out), 0);
}

/* Stage 2 hook: the Complete's heads land on the stores of cut_mask only, then a kill. */
static uint32_t cut_mask;
static int cut_on_mask(const char *upload, int stage)
{
    (void)upload;
    if (stage == 2) cut_heads_on(cut_env, cut_mask);
    return 0;
}

void cut_complete_on(env_t *e, const char *key, uint32_t mask, cut_upload_t *u)
{
    int why = 0;
    cut_env = e;
    cut_mask = mask;
    obj__complete_cut_hook = cut_on_mask;
    int rc = obj_mpu_complete(e->set, "bkt", key, u->upload, u->parts, 2, 1, NULL, cut_versioning,
                              &cut_done, &why);
    obj__complete_cut_hook = NULL;
    cut_heads_clear(e);
    assert_int_not_equal(rc, 0);
    assert_int_equal(heads_naming(e, key, u->upload), __builtin_popcount(mask));
}

int head_on(env_t *e, const char *key, int store, obj_info_t *out)
{
    drive_id_t id = {"bkt", key, "", (uint32_t)store};
    drive_stat_t ds;
    uint8_t meta[HEAD_MAX];
    int rc = e->f[store].in.ops->stat(e->f[store].in.ctx, &id, &ds, meta, sizeof(meta));
    return rc ? rc : obj_meta_decode(meta, ds.meta_len, out);
}

void put_cut_in_half(env_t *e, const char *key, const obj_info_t *w, obj_info_t *x)
{
    assert_int_not_equal(put_cut(e, key, 0x7), 0);
    assert_int_equal(head_on(e, key, 0, x), 0);
    assert_string_not_equal(x->upload_id, w->upload_id);
    assert_int_equal(heads_naming(e, key, x->upload_id), 3);
    assert_int_equal(heads_naming(e, key, w->upload_id), 3);
}

env_t *stall_env;

const char *stall_key, *stall_before;

uint32_t heads_at(env_t *e, const char *key, const char *pos)
{
    uint32_t mask = 0;
    for (int j = 0; j < N; j++) {
        drive_id_t id = {"bkt", key, pos, (uint32_t)j};
        drive_stat_t st;
        if (drive_stat(e->f[j].d, &id, &st, NULL, 0) == 0) mask |= 1u << j;
    }
    return mask;
}

long scanned(env_t *e)
{
    long n = 0;
    for (int i = 0; i < N; i++)
        n += e->f[i].scanned;
    return n;
}

void obj_fixture_args(int argc, char **argv)
{
    log_level = getenv("WL_TEST_LOG") ? LOG_LVL_INFO : LOG_LVL_ERROR;
    remote = argc > 1 && strcmp(argv[1], "remote") == 0;
    if (argc > 1 + remote) cmocka_set_test_filter(argv[1 + remote]);
}
