/*
 * s3_batch: batch GET, warmlake's extension (docs/batch-get.md): POST
 * /BUCKET?batch-get names up to S3_XML_BATCH_MAX keys (each with an
 * optional Range and VersionId) and gets them back as one chunked stream of
 * frames (s3/batch.h), in the order asked, each entry with its own status:
 * an entry the caller may not read is a 403 frame, a missing one a 404
 * frame, never a failed batch.
 *
 * Design. The handler's worker is the sender; the entries are fetched ahead
 * of it by fetchers, jobs on the batch pool (s3_cfg_t.batch; up to
 * BATCH_FETCHERS per batch), at most BATCH_AHEAD entries and
 * BATCH_AHEAD_BYTES of payload past the one being sent, so many small
 * entries are read from the drives at once while memory stays bounded
 * whatever the batch holds and however slowly the client reads. A fetcher
 * claims the next entry, fetches it, and claims another while the window
 * has room: a busy batch costs no thread wake-up per entry, and holds at
 * most BATCH_FETCHERS of the pool's threads, so concurrent batches all move
 * (one job per entry measured the same on 2 cores: server CPU per 1000
 * 16 KiB entries 106-118 ms against 87-117 ms here, within the noise).
 * Fetching opens the entry as a GET would (the version pinned, the
 * ACL of the version opened checked for a caller who is not the bucket's
 * owner) and reads the payload whole when it is at most BATCH_WHOLE_MAX and
 * fits what the window still has room for; otherwise the reader stays open
 * and the sender streams it stripe by stripe (obj_read_unit, one stripe
 * read ahead), held back by the socket (http_write blocks above
 * HTTP_HIGH_WATER). A fetcher never waits on the HTTP pool or on another
 * fetcher, and the object layer's pool is another pool: no job waits on a
 * thread its own kind holds.
 *
 * Errors. An entry that fails before any of its payload is out (not found,
 * refused, the first stripe unreadable) is an error frame. One that fails
 * after (a stripe lost mid-entry) aborts the response: the chunked body is
 * left unterminated and the connection closed, so the client sees a cut
 * frame, never wrong bytes presented as good. A client that goes away stops
 * the sender at its next write; fetchers then claim nothing more, and
 * nothing is freed before every fetcher has returned (the batch's latch).
 */
#include "server/s3_int.h"

#include "common/crc.h"
#include "common/pool.h"
#include "s3/batch.h"

#define BATCH_AHEAD       32           /* entries fetched ahead of the one being sent */
#define BATCH_FETCHERS    16           /* batch pool jobs fetching one batch's entries at once */
#define BATCH_AHEAD_BYTES (8u << 20)   /* payload bytes held ahead, read and not yet sent */
#define BATCH_WHOLE_MAX   (1u << 20)   /* an entry read whole by its fetcher: at most this */
#define BATCH_BODY_MAX    (4u << 20)   /* the request body */
#define BATCH_GATHER      (256u << 10) /* frames gathered into one chunk before a write */
#define BATCH_SMALL       (64u << 10)  /* payloads up to this in plain malloc'd memory */

typedef struct batch batch_t;

/* One entry being fetched or sent: its fetcher's until done (b->mu), the sender's after. */
typedef struct {
    int used;   /* an entry was claimed into it (what the end releases) */
    int i;      /* the entry's index in the request */
    int done;   /* fetched (b->mu) */
    int status; /* 200, 206, or err's status */
    s3_err_t err;
    obj_reader_t *rd; /* open, for the sender to stream [off, off+len); NULL when data holds it */
    uint8_t *data;    /* the payload read whole (len bytes), or NULL */
    uint64_t off, len, size;
    char etag[80];
    size_t held; /* bytes of b->held this slot accounts for */
} slot_t;

/* A fetcher: a batch pool job that opens and reads entries while the window has room. */
typedef struct {
    pool_job_t job; /* first: a job is its fetcher */
    batch_t *b;
    int busy; /* queued or running (b->mu): the sender may not submit it again */
} fetcher_t;

struct batch {
    ctx_t *x;
    const s3_xml_batch_entry_t *e;
    int n;
    int foreign;       /* the caller is not the bucket's owner: each object's ACL decides */
    int bucket_read;   /* foreign: the bucket's ACL lets the caller list it (404 vs 403) */
    const char *owner; /* the bucket's (in the record s3_batch_get read, kept until the end) */
    /* Under mu: */
    pthread_mutex_t mu;
    pthread_cond_t cv; /* a slot is done */
    int next;          /* the first entry no fetcher has claimed */
    int limit;         /* claims stay below it: the sender's entry + BATCH_AHEAD */
    size_t held;       /* payload bytes read (or reserved) ahead and not yet sent */
    int cancel;        /* the sender stopped: fetchers claim nothing more */
    int fetchers;      /* fetchers queued or running */
    latch_t latch;     /* every fetcher submitted, counted down by the pool */
    fetcher_t f[BATCH_FETCHERS];
    slot_t slot[BATCH_AHEAD]; /* entry i's is slot[i % BATCH_AHEAD] */
};

static void slot_fail(slot_t *s, s3_err_t e)
{
    s->err = e;
    s->status = s3_err_info(e)->status;
}

/*
 * Open entry s->i as a GET of it would be, and find its payload's range.
 * On success s->rd is open and s->status 200 or 206; otherwise s->err says
 * why and nothing is held. Blocks (drive reads); runs on a fetcher.
 */
static void entry_open(batch_t *b, slot_t *s)
{
    ctx_t *x = b->x;
    const s3_xml_batch_entry_t *e = &b->e[s->i];
    const char *vid = e->has_vid ? e->vid : NULL;
    obj_info_t *info = xmalloc(sizeof(*info)); /* 16 KiB: not on a pool thread's stack */
    int err;
    if (vid && !obj_vid_valid(vid)) {
        slot_fail(s, S3E_INVALID_ARGUMENT); /* as GET ?versionId= with a malformed id */
        goto out;
    }
    s->rd = obj_open_version(x->cfg->set, x->ibucket, e->key, vid, info, &err);
    if (!s->rd) {
        if (err != ERR_NOT_FOUND)
            slot_fail(s, s3_engine_err_of(err));
        else if (b->foreign && !b->bucket_read)
            slot_fail(s, S3E_ACCESS_DENIED); /* whether a key exists is the lister's to know */
        else if (vid && info->marker && !b->foreign)
            slot_fail(s, S3E_METHOD_NOT_ALLOWED); /* a delete marker cannot be read */
        else
            slot_fail(s, vid ? S3E_NO_SUCH_VERSION : S3E_NO_SUCH_KEY);
        goto out;
    }
    /* The version opened must grant READ itself (another user's, or anonymous, read; the
     * bucket owner's of a writer's object). */
    if (!s3_may_read_object(x, info, b->owner)) {
        obj_close(s->rd);
        s->rd = NULL;
        slot_fail(s, S3E_ACCESS_DENIED);
        goto out;
    }
    s->size = info->size;
    s->off = 0;
    s->len = info->size;
    snprintf(s->etag, sizeof(s->etag), "%s", info->etag);
    int rr = s3_parse_range(e->range[0] ? e->range : NULL, info->size, &s->off, &s->len);
    if (rr < 0) {
        obj_close(s->rd);
        s->rd = NULL;
        slot_fail(s, S3E_INVALID_RANGE);
        goto out;
    }
    s->status = rr > 0 ? 206 : 200;
out:
    free(info);
}

/* Memory for a payload read whole: page-aligned past BATCH_SMALL, so drives read into it. */
static uint8_t *payload_alloc(size_t len)
{
    if (len <= BATCH_SMALL) return xmalloc(len ? len : 1);
    return xaligned_alloc(4096, align_up(len, 4096));
}

/* Open slot s's entry and, when it is small and the window has room, read it whole. */
static void fetch_one(batch_t *b, slot_t *s)
{
    entry_open(b, s);
    if (!s->rd || s->len > BATCH_WHOLE_MAX) return;
    /* Read whole only within the window's bytes; past them the sender streams it. */
    pthread_mutex_lock(&b->mu);
    int room = b->held + s->len <= BATCH_AHEAD_BYTES;
    if (room) {
        b->held += s->len;
        s->held = s->len;
    }
    pthread_mutex_unlock(&b->mu);
    if (!room) return;
    s->data = payload_alloc((size_t)s->len);
    int rc = obj_read(s->rd, s->off, s->data, (size_t)s->len);
    if (rc) {
        /* Nothing of it is out yet: an error frame, not a cut stream. */
        log_error("event=batch_get_failed key=%s err=%s missing=0x%x", b->e[s->i].key, err_name(rc),
                  obj_read_missing(s->rd));
        free(s->data);
        s->data = NULL;
        slot_fail(s, s3_engine_err_of(rc));
    }
    obj_close(s->rd);
    s->rd = NULL;
}

/* Under b->mu: an entry a fetcher may claim now (in the window, within its bytes). */
static int claimable(const batch_t *b)
{
    return !b->cancel && b->next < b->n && b->next < b->limit && b->held < BATCH_AHEAD_BYTES;
}

/*
 * A fetcher's run: claim the next entry, fetch it, mark it done, and go on
 * while there is one to claim; a thread that keeps finding work is not put
 * to sleep and woken once per entry. Returns when the window is full (the
 * sender starts fetchers again as it frees room).
 */
static void fetcher_run(pool_job_t *j)
{
    fetcher_t *f = (fetcher_t *)j;
    batch_t *b = f->b;
    pthread_mutex_lock(&b->mu);
    while (claimable(b)) {
        int i = b->next++;
        slot_t *s = &b->slot[i % BATCH_AHEAD];
        memset(s, 0, sizeof(*s));
        s->used = 1;
        s->i = i;
        pthread_mutex_unlock(&b->mu);
        fetch_one(b, s);
        pthread_mutex_lock(&b->mu);
        s->done = 1;
        pthread_cond_broadcast(&b->cv);
    }
    b->fetchers--;
    f->busy = 0; /* the sender may submit f again: nothing below touches it */
    pthread_mutex_unlock(&b->mu);
}

/* Under b->mu: start fetchers for what may be claimed now, up to one per entry and
 * BATCH_FETCHERS in all. */
static void start_fetchers(batch_t *b)
{
    pool_t *pool = b->x->cfg->batch;
    int want = b->limit - b->next;
    if (want > b->n - b->next) want = b->n - b->next;
    for (int k = 0; k < BATCH_FETCHERS && b->fetchers < want && claimable(b); k++) {
        fetcher_t *f = &b->f[k];
        if (f->busy) continue;
        f->b = b;
        f->busy = 1;
        f->job.run = fetcher_run;
        b->fetchers++;
        pool_job_t *q = &f->job;
        pool_submit(pool, &q, 1, &b->latch);
    }
}

/* Gathered frames out as one chunk: 0, or ERR_CLOSED when the client is gone. */
static int flush(batch_t *b, buf_t *out)
{
    int rc = out->len ? http_write(b->x->r, out->p, out->len) : 0;
    out->len = 0;
    return rc;
}

/* A frame's head, key and ETag into out. */
static void frame_start(buf_t *out, uint32_t index, int status, const char *key, const char *etag,
                        uint64_t size, uint64_t payload_len)
{
    s3_batch_head_t h = {index, (uint16_t)status, (uint16_t)strlen(key), (uint16_t)strlen(etag),
                         size,  payload_len};
    uint8_t head[S3_BATCH_HEAD];
    s3_batch_head_encode(&h, head);
    buf_put(out, head, sizeof(head));
    buf_put(out, key, h.key_len);
    buf_put(out, etag, h.etag_len);
}

static void put_crc(buf_t *out, uint32_t crc)
{
    uint8_t c[4] = {(uint8_t)crc, (uint8_t)(crc >> 8), (uint8_t)(crc >> 16), (uint8_t)(crc >> 24)};
    buf_put(out, c, 4);
}

/*
 * Stream slot s's payload from its open reader: the first stripe is read
 * before the frame starts (a failure there is still an error frame), the
 * rest as the socket takes it, one stripe read ahead. 0; 1 when the entry
 * became an error frame (nothing sent); ERR_CLOSED (client gone) or
 * ERR_IO after its payload began (the response is aborted).
 */
static int stream(batch_t *b, slot_t *s, buf_t *out)
{
    ctx_t *x = b->x;
    const char *key = b->e[s->i].key;
    bufpool_t *pool = obj_set_buffers(x->cfg->set);
    size_t unit = obj_read_unit(s->rd), bsz = s->len < unit ? (size_t)s->len : unit;
    uint8_t *buf[2] = {bufpool_get(pool, bsz ? bsz : 1), NULL};
    uint64_t off = s->off, left = s->len;
    size_t step = s3_next_piece(off, left, unit);
    int rc = step ? obj_read(s->rd, off, buf[0], step) : 0, turn = 0;
    if (rc) {
        log_error("event=batch_get_failed key=%s off=%llu err=%s missing=0x%x", key,
                  (unsigned long long)off, err_name(rc), obj_read_missing(s->rd));
        slot_fail(s, s3_engine_err_of(rc));
        bufpool_put(pool, buf[0]);
        return 1;
    }
    frame_start(out, (uint32_t)s->i, s->status, key, s->etag, s->size, s->len);
    uint32_t crc = 0;
    while (left > 0) {
        /* The next stripe is read while this one goes out. */
        size_t next = left > step ? s3_next_piece(off + step, left - step, unit) : 0;
        if (next) {
            if (!buf[!turn]) buf[!turn] = bufpool_get(pool, bsz);
            obj_read_ahead(s->rd, off + step, buf[!turn], next);
        }
        crc = crc32c(crc, buf[turn], step);
        if (out->len + step <= BATCH_GATHER) {
            buf_put(out, buf[turn], step);
        } else if ((rc = flush(b, out)) != 0 || (rc = http_write(x->r, buf[turn], step)) != 0) {
            break;
        }
        off += step;
        left -= step;
        if (!left) break;
        turn = !turn;
        step = next;
        if ((rc = obj_read(s->rd, off, buf[turn], step)) != 0) {
            /* Part of the payload is out: all we can do is cut the response short. */
            log_error("event=batch_get_failed key=%s off=%llu err=%s missing=0x%x", key,
                      (unsigned long long)off, err_name(rc), obj_read_missing(s->rd));
            http_abort(x->r);
            rc = ERR_IO;
            break;
        }
    }
    obj_close(s->rd); /* no read-ahead may still write into the buffers */
    s->rd = NULL;
    bufpool_put(pool, buf[0]);
    bufpool_put(pool, buf[1]);
    if (!rc) put_crc(out, crc);
    return rc;
}

/* Slot s (done) as its frame into out (flushed as it fills): 0, or < 0 to stop the batch. */
static int send_slot(batch_t *b, slot_t *s, buf_t *out)
{
    const char *key = b->e[s->i].key;
    int rc = 0;
    if (s->rd && (rc = stream(b, s, out)) <= 0) return rc;
    if (s->data) {
        frame_start(out, (uint32_t)s->i, s->status, key, s->etag, s->size, s->len);
        if (out->len + s->len <= BATCH_GATHER) {
            buf_put(out, s->data, (size_t)s->len);
        } else {
            if ((rc = flush(b, out)) != 0 || (rc = http_write(b->x->r, s->data, s->len)) != 0)
                return rc;
        }
        put_crc(out, crc32c(0, s->data, (size_t)s->len));
    } else {
        /* An error frame: the S3 error code as its payload. */
        const char *code = s3_err_info(s->err)->code;
        frame_start(out, (uint32_t)s->i, s->status, key, "", 0, strlen(code));
        buf_put(out, code, strlen(code));
        put_crc(out, crc32c(0, code, strlen(code)));
    }
    return out->len >= BATCH_GATHER ? flush(b, out) : 0;
}

/* What slot s holds goes (its payload, its share of the window, an open reader). */
static void slot_release(batch_t *b, slot_t *s)
{
    free(s->data);
    s->data = NULL;
    obj_close(s->rd);
    s->rd = NULL;
    pthread_mutex_lock(&b->mu);
    b->held -= s->held;
    s->held = 0;
    pthread_mutex_unlock(&b->mu);
}

/* The frames of every entry, in order, then the end frame. 0, or < 0 when cut short. */
static int send_all(batch_t *b)
{
    buf_t out = {0};
    int rc = 0;
    for (int i = 0; i < b->n && !rc; i++) {
        slot_t *s = &b->slot[i % BATCH_AHEAD];
        pthread_mutex_lock(&b->mu);
        b->limit = i + BATCH_AHEAD;
        /* Keep the window full; but a fetcher started for every freed slot would be a wake per
         * entry again: wait until a quarter of it is free, unless the fetchers fell behind. */
        if (b->next - i <= BATCH_AHEAD - BATCH_AHEAD / 4 || b->next == i) start_fetchers(b);
        if (!(b->next > i && s->done)) {
            /* What is gathered goes out before waiting: the client reads while we fetch. */
            pthread_mutex_unlock(&b->mu);
            rc = flush(b, &out);
            pthread_mutex_lock(&b->mu);
            while (!(b->next > i && s->done)) {
                start_fetchers(b); /* the entry's bytes may have been all the window held */
                if (b->next > i && s->done) break;
                pthread_cond_wait(&b->cv, &b->mu);
            }
        }
        pthread_mutex_unlock(&b->mu);
        if (!rc) rc = send_slot(b, s, &out);
        slot_release(b, s);
    }
    if (!rc) {
        frame_start(&out, S3_BATCH_END, 200, "", "", 0, 0);
        put_crc(&out, 0);
        rc = flush(b, &out);
    }
    free(out.p);
    /* Cut short: entries fetched ahead are dropped; fetchers claim nothing more. */
    pthread_mutex_lock(&b->mu);
    b->cancel = 1;
    pthread_mutex_unlock(&b->mu);
    latch_wait(&b->latch);
    for (int i = 0; i < BATCH_AHEAD; i++)
        if (b->slot[i].used) slot_release(b, &b->slot[i]);
    return rc;
}

void s3_batch_get(ctx_t *x)
{
    obj_info_t *bi = xmalloc(sizeof(*bi));
    s3_xml_batch_entry_t *e = NULL;
    int n = 0;
    char *body = NULL;
    if (!x->cfg->batch) {
        /* 4xx, as a server without the extension answers: clients fall back to GETs. */
        s3_err_msg(x, S3E_METHOD_NOT_ALLOWED, "Batch GET is not served by this node.");
        goto out;
    }
    if (!s3_bucket_exists(x, x->bucket, bi)) {
        s3_err(x, S3E_NO_SUCH_BUCKET);
        goto out;
    }
    s3_bucket_iname(x->bucket, bi, x->ibucket);
    const char *owner = s3_bucket_owner(bi);
    int foreign = x->anonymous || (owner[0] && strcmp(owner, x->auth.access_key) != 0);
    int bucket_read = s3_foreign_may_read(x, s3_umeta_get(bi, "acl"));
    size_t len;
    /* One byte past the limit: a body that reaches it is too large (s3_read_small_body). */
    if (!(body = s3_read_small_body(x, BATCH_BODY_MAX + 1, &len))) goto out;
    int rc = s3_xml_batch_get(body, len, &e, &n);
    if (rc == ERR_TOO_LARGE) {
        s3_err_msg(x, S3E_INVALID_REQUEST, "A batch names at most 10000 objects.");
        goto out;
    }
    if (rc) {
        s3_err_msg(x, S3E_MALFORMED_XML, "The XML you provided was not well-formed.");
        goto out;
    }
    free(body);
    body = NULL;
    char h[160];
    snprintf(h, sizeof(h), "x-amz-request-id: %s\r\nContent-Type: application/x-warmlake-batch\r\n",
             x->id);
    if (http_respond(x->r, 200, h, -1) != 0) goto out;
    batch_t *b = xcalloc(1, sizeof(*b));
    b->x = x;
    b->e = e;
    b->n = n;
    b->foreign = foreign;
    b->bucket_read = bucket_read;
    b->owner = owner;
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    latch_init(&b->latch);
    rc = send_all(b);
    if (rc) {
        /* Whatever cut it, the body must not look ended (http_abort: no last chunk). */
        http_abort(x->r);
        log_info("event=batch_get_cut entries=%d err=%s", n, err_name(rc));
    }
    latch_destroy(&b->latch);
    pthread_cond_destroy(&b->cv);
    pthread_mutex_destroy(&b->mu);
    free(b);
out:
    s3_xml_batch_free(e, n);
    free(body);
    free(bi);
}
