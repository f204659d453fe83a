/*
 * obj_mpu.c: multipart uploads (room of the object layer; map in
 * obj_int.h).
 *
 * An upload is an object of its own in the internal bucket MPU_UPLOADS
 * (key: the upload id; body "bucket\nkey"; its content type and user
 * metadata are the final object's). Each upload of a part is an object in
 * MPU_PARTS, key "<upload>/<part>.<tag>" (obj__part_key), the tag fresh for
 * each: a part uploaded again is a second object, and the latest of them
 * (by commit stamp) is the part. No upload of a part ever replaces another,
 * so the one a Complete took stays what its manifest names, whatever lands
 * after it (an UploadPart through another node: the upload's lock orders one
 * node's calls only). Complete checks the listed parts, writes the
 * manifest (MPU_MANIFEST, key: the upload id, "part.tag size etag [note]"
 * lines, the note what the layer above keeps per part: obj_mpu_hooks_t) and
 * then the heads of the destination object, which name the upload: the
 * object is then the parts, read through the manifest (obj_get.c). Parts
 * not listed and the upload record go after the commit.
 *
 * The upload's lock (obj__mpu_lock) makes a part's commit, Complete and
 * Abort of one upload exclude each other, so that a part that finishes
 * after an abort or a complete is refused instead of left behind. One that
 * commits through another node after the close is named by no manifest and
 * no open upload: the reaper takes it (obj_reap.c, parts).
 *
 * A Complete closes the upload before it writes anything (close_upload), so
 * that of two racing Completes (or a Complete and an Abort) through two
 * nodes, one goes through. It closes it by rewriting the record as a
 * closing record, "bucket\nkey\0" and its manifest, keeping the content type
 * and metadata: the decision is durable with the close. A kill between the
 * close and the object's heads leaves that record, and the same Complete
 * sent again resumes it (its manifest must be the very same), once the
 * record is older than any live Complete takes (CLOSE_STALE_NS). An Abort
 * then ends it, unless the object stands. The reaper settles one that
 * nobody resumed (obj__mpu_settle): tidied if its object stands, else open
 * again. While it stands, the upload is closed to everything else: no part
 * commits, ListParts and the uploads' listing do not show it.
 */
#include "server/obj_int.h"

#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int (*obj__complete_cut_hook)(const char *upload, int stage);

/* Put a small internal object whole. */
static int put_small(obj_set_t *s, const char *bucket, const char *key, const void *body,
                     size_t len, const char *ctype, const char *umeta, size_t umeta_len,
                     obj_info_t *out)
{
    int err;
    obj_writer_t *w = obj_put_begin(s, bucket, key, &err);
    if (!w) return err;
    if ((err = obj_put_write(w, body, len)) != 0) {
        obj_put_abort(w);
        return err;
    }
    return obj_put_commit(w, ctype, umeta, umeta_len, out);
}

/*
 * A closing record this old has no live closer: a closer writes no head once its close is
 * older than CLOSE_FENCE_NS, and a commit of heads begun before that ends well within the
 * rest (its wait for another writer's head in flight, COMMIT_STALE_NS, and a store's
 * deadline, 10 s each).
 */
#define CLOSE_STALE_NS (45ull * 1000000000)
#define CLOSE_FENCE_NS (15ull * 1000000000)
#define MANIFEST_MAX   (64u << 20) /* far above 10,000 parts' lines */

/*
 * The upload record's body: "bucket\nkey"; while a Complete closes it (a closing record),
 * NUL and the manifest, padded with newlines past the longest open record of the bucket
 * (a node from before closing records lists none longer); an empty manifest: an Abort
 * took the close over (an aborting record).
 */
static char *record_body(const char *bucket, const char *key, const char *manifest, size_t mlen,
                         size_t *len)
{
    size_t bl = strlen(bucket), kl = strlen(key);
    *len = bl + 1 + kl + (manifest ? 1 + mlen : 0);
    /* At least one byte: an aborting record is never the bare "bucket\nkey\0". */
    size_t pad = !manifest ? 0 : *len < bl + 2 + SHARD_MAX_KEY ? bl + 2 + SHARD_MAX_KEY - *len : 1;
    char *b = xmalloc(*len + pad + 1);
    memcpy(b, bucket, bl);
    b[bl] = '\n';
    memcpy(b + bl + 1, key, kl);
    b[bl + 1 + kl] = 0;
    if (manifest) memcpy(b + bl + 2 + kl, manifest, mlen);
    memset(b + *len, '\n', pad);
    *len += pad;
    b[*len] = 0;
    return b;
}

/* A closing record's manifest without its padding: its lines, each ending in a newline. */
static size_t unpadded(const char *m, size_t mlen)
{
    while (mlen > 0 && m[mlen - 1] == '\n' && (mlen == 1 || m[mlen - 2] == '\n'))
        mlen--;
    return mlen;
}

/* The upload's record and its body (NUL after its rec->size bytes; the caller frees it). */
static int read_record(obj_set_t *s, const char *upload, obj_info_t *rec, char **body)
{
    int err;
    *body = NULL;
    if (strlen(upload) != 32) return ERR_NOT_FOUND;
    obj_reader_t *r = obj_open(s, MPU_UPLOADS, upload, rec, &err);
    if (!r) return err;
    if (rec->size < 2 || rec->size > 2 + SHARD_MAX_BUCKET + SHARD_MAX_KEY + MANIFEST_MAX) {
        obj_close(r);
        return ERR_NOT_FOUND;
    }
    char *b = xmalloc(rec->size + 1);
    err = obj_read(r, 0, b, rec->size);
    obj_close(r);
    b[rec->size] = 0;
    if (err) {
        free(b);
        return err;
    }
    *body = b;
    return 0;
}

#define UPLOAD_OPEN     0
#define UPLOAD_CLOSING  1 /* a Complete closed it, and a kill may have cut it short */
#define UPLOAD_ABORTING 2 /* an Abort took such a close over: the reaper ends it */

/*
 * The upload's record, for bucket/key: UPLOAD_OPEN, UPLOAD_CLOSING (a
 * Complete closed it: *manifest, when manifest is not NULL, its manifest,
 * NUL-terminated, *mlen bytes; the caller frees it), UPLOAD_ABORTING, else
 * ERR_NOT_FOUND or a store error.
 */
static int upload_state(obj_set_t *s, const char *bucket, const char *key, const char *upload,
                        obj_info_t *rec, char **manifest, size_t *mlen)
{
    char *body;
    if (manifest) *manifest = NULL;
    int err = read_record(s, upload, rec, &body);
    if (err) return err;
    size_t bl = strlen(bucket), kl = strlen(key), want = bl + 1 + kl;
    if (rec->size < want || rec->size == want + 1 || memcmp(body, bucket, bl) != 0 ||
        body[bl] != '\n' || memcmp(body + bl + 1, key, kl) != 0 ||
        (rec->size > want && body[want] != 0)) {
        free(body);
        return ERR_NOT_FOUND;
    }
    if (rec->size == want) {
        free(body);
        return UPLOAD_OPEN;
    }
    size_t ml = unpadded(body + want + 1, rec->size - want - 1);
    if (manifest && ml) {
        memmove(body, body + want + 1, ml);
        body[ml] = 0;
        *mlen = ml;
        *manifest = body;
    } else {
        free(body);
    }
    return ml ? UPLOAD_CLOSING : UPLOAD_ABORTING;
}

/*
 * After a close that lost its condition: whether the upload still reads as open or
 * closing. A close cut short by a kill leaves its head on some stores only: newer than
 * the record that stands, it fails the next close's condition until a commit covers it
 * as a crash's (COMMIT_STALE_NS), and a resume that loses its takeover to the reaper's
 * reopening finds it open. Not gone, so not NoSuchUpload (final to a client): 503, and
 * the client comes back.
 */
static int still_there(obj_set_t *s, const char *bucket, const char *key, const char *upload)
{
    obj_info_t *rec = xmalloc(sizeof(*rec));
    int st = upload_state(s, bucket, key, upload, rec, NULL, NULL);
    free(rec);
    return st == UPLOAD_OPEN || st == UPLOAD_CLOSING;
}

/* The upload record must exist, be for bucket/key, and be open. */
static int mpu_check(obj_set_t *s, const char *bucket, const char *key, const char *upload,
                     obj_info_t *rec)
{
    int rc = upload_state(s, bucket, key, upload, rec, NULL, NULL);
    return rc > 0 ? ERR_NOT_FOUND : rc;
}

/* Whether the upload's record reads as the version stamped stamp. */
static int reads_as(obj_set_t *s, const char *upload_id, uint64_t stamp)
{
    obj_info_t *now = xmalloc(sizeof(*now));
    int same = obj_stat(s, MPU_UPLOADS, upload_id, now) == 0 && now->stamp_ns == stamp;
    free(now);
    return same;
}

/*
 * An upload closes (is completed or aborted) once, whoever closes it through
 * whichever node. The upload lock orders one node's calls; across nodes two
 * Completes with different part lists were both acknowledged, each writing
 * its manifest and dropping the parts the other listed, and a Complete and
 * an Abort both went through: the object was unreadable (a probe: every
 * round). The closer replaces the upload record rec under a condition on
 * rec's stamp, committed as any version is (the stores decide): one
 * closer's stands, the others find the condition failing and answer as for
 * an upload that is gone. An Abort (body NULL) writes a marker; a Complete
 * the closing record body (blen bytes), with rec's content type and
 * metadata. *closed: what was written. 0, ERR_NOT_FOUND (closed by another),
 * or a store error.
 */
static int close_upload(obj_set_t *s, const char *upload_id, const obj_info_t *rec,
                        obj_info_t *closed, const char *body, size_t blen)
{
    obj_cond_t c = OBJ_COND_NONE;
    c.if_stamp = rec->stamp_ns;
    obj_info_clear(closed);
    closed->deleted = closed->marker = 1;
    int rc = obj__new_upload_id(closed->upload_id), first_err = 0;
    if (rc) return rc;
    for (int tries = 0;; tries++) {
        first_err = 0;
        if (body) {
            obj_writer_t *w = obj_put_begin(s, MPU_UPLOADS, upload_id, &first_err);
            if (w && (first_err = obj_put_write(w, body, blen)) != 0) obj_put_abort(w);
            if (w && !first_err) {
                obj_put_set_cond(w, &c);
                first_err =
                    obj_put_commit(w, rec->content_type, rec->umeta, rec->umeta_len, closed);
            }
            if (!first_err) return 0;
        } else {
            int heads = obj__commit_heads(s, MPU_UPLOADS, upload_id, &c, OBJ_UNVERSIONED, closed,
                                          NULL, 0, &first_err);
            if (heads >= 0 && obj__enough(s, closed, heads)) return 0;
        }
        /*
         * The record does not stand for a commit: a small one's copies lost with their
         * drives (one left is enough to read it, not to replace it: a commit takes it
         * for another writer's in flight), or a close a kill cut after its first copies
         * (read as the record, while commits judge by the one it was replacing: the
         * condition fails on it for good). Healed, it stands again; once.
         */
        if (tries == 0 && first_err == ERR_PRECOND && reads_as(s, upload_id, rec->stamp_ns)) {
            obj_heal_report_t rep = {0};
            log_info("event=upload_record_heal upload=%s: read, but it does not stand", upload_id);
            if (obj_heal(s, MPU_UPLOADS, upload_id, &rep) == 0) continue;
        }
        if (first_err == ERR_PRECOND || first_err == ERR_NOT_FOUND) return ERR_NOT_FOUND;
        if (tries == 0 && (first_err == ERR_THROTTLED || first_err == ERR_UNRECOVERABLE)) {
            obj_heal_report_t rep = {0};
            if (obj_heal(s, MPU_UPLOADS, upload_id, &rep) == 0) continue;
        }
        return first_err ? first_err : ERR_UNRECOVERABLE;
    }
}

/* A Complete that closed the upload and then failed (its condition, the stores): the upload
 * is open again, as it was, unless another call reopened or closed it meanwhile. */
static void reopen_upload(obj_set_t *s, const char *bucket, const char *key, const char *upload_id,
                          const obj_info_t *rec, const obj_info_t *closed)
{
    int err;
    obj_cond_t c = OBJ_COND_NONE;
    c.if_stamp = closed->stamp_ns;
    size_t len;
    char *body = record_body(bucket, key, NULL, 0, &len);
    obj_writer_t *w = obj_put_begin(s, MPU_UPLOADS, upload_id, &err);
    if (w && (err = obj_put_write(w, body, len)) != 0) obj_put_abort(w);
    if (w && !err) {
        obj_put_set_cond(w, &c);
        err = obj_put_commit(w, rec->content_type, rec->umeta, rec->umeta_len, NULL);
    }
    if (err) log_warn("event=upload_reopen_failed upload=%s err=%s", upload_id, err_name(err));
    free(body);
}

int obj_mpu_create(obj_set_t *s, const char *bucket, const char *key, const char *content_type,
                   const char *umeta, size_t umeta_len, char upload_id[33])
{
    s = obj__route(s, bucket, key);
    int rc = obj__new_upload_id(upload_id);
    if (rc) return rc;
    size_t len;
    char *body = record_body(bucket, key, NULL, 0, &len);
    rc = put_small(s, MPU_UPLOADS, upload_id, body, len, content_type, umeta, umeta_len, NULL);
    free(body);
    return rc;
}

obj_writer_t *obj_mpu_part_begin(obj_set_t *s, const char *bucket, const char *key,
                                 const char *upload_id, int part, int *err)
{
    obj_info_t rec;
    return obj_mpu_part_begin_rec(s, bucket, key, upload_id, part, &rec, err);
}

obj_writer_t *obj_mpu_part_begin_rec(obj_set_t *s, const char *bucket, const char *key,
                                     const char *upload_id, int part, obj_info_t *rec, int *err)
{
    s = obj__route_upload(s, bucket, key, upload_id);
    char pk[OBJ__PART_KEY_MAX], tag[OBJ__PART_TAG_LEN + 1];
    if (part < 1 || part > OBJ_MPU_MAX_PARTS) {
        *err = ERR_INVAL;
        return NULL;
    }
    if ((*err = mpu_check(s, bucket, key, upload_id, rec)) != 0) return NULL;
    if ((*err = obj__new_upload_id(tag)) != 0) return NULL;
    obj__part_key(pk, sizeof(pk), upload_id, part, tag);
    return obj__put_begin(s, MPU_PARTS, pk, upload_id, rec->size, err);
}

typedef int (*part_fn)(void *arg, int part, const char *tag, const char *key,
                       const obj_info_t *info);

typedef struct {
    part_fn fn;
    void *arg;
} each_t;

static int each_one(void *arg, const char *key, const obj_info_t *info)
{
    each_t *e = arg;
    char tag[OBJ__PART_TAG_LEN + 1];
    int part = obj__part_of_key(key, tag);
    return e->fn(e->arg, part, tag, key, info);
}

/*
 * Every upload of a part that committed, in part order (the uploads of one
 * part are next to each other): fn(arg, part, tag, key in MPU_PARTS, info);
 * part 0 for a key under the upload that is not a part's.
 */
static int each_part_of(obj_set_t *s, const char *upload, int wide, part_fn fn, void *arg)
{
    char prefix[40];
    each_t e = {fn, arg};
    snprintf(prefix, sizeof(prefix), "%s/", upload);
    return obj__list(s, MPU_PARTS, prefix, NULL, NULL, 0, wide, each_one, &e);
}

static int each_part(obj_set_t *s, const char *upload, part_fn fn, void *arg)
{
    return each_part_of(s, upload, 0, fn, arg);
}

static int hexbyte(const char *p)
{
    int v = 0;
    for (int i = 0; i < 2; i++) {
        char c = p[i];
        v = v * 16 + (c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : 0);
    }
    return v;
}

/* Of two uploads of one part, the later: the part (ListParts shows it, a Complete takes it). */
static int later_upload(uint64_t stamp, const char *tag, uint64_t than_stamp, const char *than_tag)
{
    return stamp > than_stamp || (stamp == than_stamp && strcmp(tag, than_tag) > 0);
}

static int latest_stamp(void *arg, const char *key, const obj_info_t *info)
{
    uint64_t *latest = arg;
    (void)key;
    if (info && info->stamp_ns > *latest) *latest = info->stamp_ns;
    return 0;
}

uint64_t obj__part_stamp_floor(obj_set_t *s, const char *part_key)
{
    char prefix[OBJ__PART_KEY_MAX], tag[OBJ__PART_TAG_LEN + 1];
    const char *slash = strrchr(part_key, '/');
    if (!slash || !obj__part_of_key(part_key, tag)) return 0;
    /* "<upload>/<5 digits>": that part's uploads, and no other part's. */
    snprintf(prefix, sizeof(prefix), "%.*s", (int)(slash - part_key) + 6, part_key);
    uint64_t latest = 0;
    if (obj__list(s, MPU_PARTS, prefix, NULL, NULL, 0, 0, latest_stamp, &latest) < 0) return 0;
    return latest;
}

/* The upload that stands for each part number, in part order. */
typedef struct {
    int part;
    uint64_t stamp;
    char tag[OBJ__PART_TAG_LEN + 1];
} standing_t;

typedef struct {
    standing_t *a;
    int n, cap;
} standings_t;

static int collect_standing(void *arg, int part, const char *tag, const char *key,
                            const obj_info_t *info)
{
    standings_t *t = arg;
    (void)key;
    if (!part) return 0;
    standing_t *last = t->n ? &t->a[t->n - 1] : NULL;
    if (last && last->part == part) {
        if (later_upload(info->stamp_ns, tag, last->stamp, last->tag)) {
            last->stamp = info->stamp_ns;
            snprintf(last->tag, sizeof(last->tag), "%s", tag);
        }
        return 0;
    }
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 64;
        t->a = xrealloc(t->a, sizeof(*t->a) * (size_t)t->cap);
    }
    last = &t->a[t->n++];
    last->part = part;
    last->stamp = info->stamp_ns;
    snprintf(last->tag, sizeof(last->tag), "%s", tag);
    return 0;
}

/* The uploads a recorded manifest (a closing record's) took, as standings: 0 or ERR_CORRUPT. */
static int recorded_standings(const char *m, standings_t *t)
{
    const char *p = m;
    while (*p) {
        int part;
        unsigned long long size;
        char tag[OBJ__PART_TAG_LEN + 1], et[80];
        const char *note;
        size_t nl;
        if (obj__manifest_line(&p, &part, &size, tag, et, &note, &nl) != 0 ||
            (t->n && part <= t->a[t->n - 1].part))
            return ERR_CORRUPT;
        obj_info_t info = {.stamp_ns = 0};
        collect_standing(t, part, tag, NULL, &info);
    }
    return 0;
}

static const standing_t *standing_of(const standings_t *t, int part)
{
    int lo = 0, hi = t->n;
    while (lo < hi) { /* ascending */
        int mid = (lo + hi) / 2;
        if (t->a[mid].part == part) return &t->a[mid];
        if (t->a[mid].part < part)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* What a completed upload keeps: the upload of each listed part that its manifest names. */
typedef struct {
    obj_set_t *s;
    const obj_mpu_part_t *parts;
    char (*tags)[OBJ__PART_TAG_LEN + 1];
    int n;
} unused_t;

static int drop_unused_part(void *arg, int p, const char *tag, const char *key,
                            const obj_info_t *info)
{
    unused_t *u = arg;
    int lo = 0, hi = u->n;
    (void)info;
    if (!p) return 0; /* not a part */
    while (lo < hi) { /* parts are ascending */
        int mid = (lo + hi) / 2;
        if (u->parts[mid].part == p) {
            if (strcmp(u->tags[mid], tag) == 0) return 0;
            break; /* an upload of a listed part that is not the one taken */
        }
        if (u->parts[mid].part < p)
            lo = mid + 1;
        else
            hi = mid;
    }
    obj__drop_object(u->s, MPU_PARTS, key);
    return 0;
}

static int mpu_complete_locked(obj_set_t *s, const char *bucket, const char *key,
                               const char *upload_id, const obj_mpu_part_t *parts, int n,
                               uint64_t min_part, const obj_cond_t *cond, obj_versioning_t v,
                               const obj_mpu_hooks_t *hooks, obj_info_t *out, int *why);

int obj_mpu_complete(obj_set_t *s, const char *bucket, const char *key, const char *upload_id,
                     const obj_mpu_part_t *parts, int n, uint64_t min_part, const obj_cond_t *cond,
                     obj_versioning_t v, obj_info_t *out, int *why)
{
    return obj_mpu_complete_hooked(s, bucket, key, upload_id, parts, n, min_part, cond, v, NULL,
                                   out, why);
}

int obj_mpu_upload_stat(obj_set_t *s, const char *bucket, const char *key, const char *upload_id,
                        obj_info_t *rec)
{
    s = obj__route_upload(s, bucket, key, upload_id);
    return mpu_check(s, bucket, key, upload_id, rec);
}

int obj_mpu_complete_hooked(obj_set_t *s, const char *bucket, const char *key,
                            const char *upload_id, const obj_mpu_part_t *parts, int n,
                            uint64_t min_part, const obj_cond_t *cond, obj_versioning_t v,
                            const obj_mpu_hooks_t *hooks, obj_info_t *out, int *why)
{
    s = obj__route_upload(s, bucket, key, upload_id);
    *why = OBJ_MPU_OK;
    if (strlen(upload_id) != 32) {
        *why = OBJ_MPU_NO_UPLOAD;
        return ERR_NOT_FOUND;
    }
    pthread_mutex_t *ul = obj__mpu_lock(s, upload_id);
    pthread_mutex_lock(ul);
    int rc = mpu_complete_locked(s, bucket, key, upload_id, parts, n, min_part, cond, v, hooks, out,
                                 why);
    pthread_mutex_unlock(ul);
    return rc;
}

/* A part's ETag as the client sent it (quotes allowed), as 32 hex digits; -1 if it is not. */
static int part_etag(const char *e, char out[33])
{
    size_t el = strlen(e);
    if (el >= 2 && e[0] == '"' && e[el - 1] == '"') {
        e++;
        el -= 2;
    }
    if (el != 32 || strspn(e, "0123456789abcdef") < 32) return -1;
    memcpy(out, e, 32);
    out[32] = 0;
    return 0;
}

/*
 * The upload was completed already, with these very parts, into what is
 * still bucket/key's current version: a Complete retried after a timeout
 * gets the same answer (0, *out the object), as S3 gives it.
 */
static int completed_already(obj_set_t *s, const char *bucket, const char *key,
                             const char *upload_id, const obj_mpu_part_t *parts, int n,
                             obj_info_t *out)
{
    obj_info_t cur;
    int *pno = NULL, rc = ERR_NOT_FOUND;
    uint64_t *sizes = NULL;
    if (obj_stat(s, bucket, key, &cur) != 0 || !cur.multipart ||
        strcmp(cur.upload_id, upload_id) != 0 || cur.nparts != n ||
        obj__read_manifest(s, upload_id, n, &pno, &sizes, NULL) != 0)
        return ERR_NOT_FOUND;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    EVP_DigestInit_ex(md, EVP_md5(), NULL);
    int same = 1;
    for (int i = 0; i < n && same; i++) {
        char hex[33];
        uint8_t bin[16];
        same = parts[i].part == pno[i] && part_etag(parts[i].etag, hex) == 0;
        for (int b = 0; same && b < 16; b++)
            bin[b] = (uint8_t)hexbyte(hex + 2 * b);
        if (same) EVP_DigestUpdate(md, bin, 16);
    }
    uint8_t d[16];
    char etag[80];
    EVP_DigestFinal_ex(md, d, NULL);
    EVP_MD_CTX_free(md);
    for (int b = 0; b < 16; b++)
        snprintf(etag + 2 * b, 3, "%02x", d[b]);
    snprintf(etag + 32, sizeof(etag) - 32, "-%d", n);
    if (same && strcmp(etag, cur.etag) == 0) {
        *out = cur;
        rc = 0;
    }
    free(pno);
    free(sizes);
    return rc;
}

typedef struct {
    const char *key, *upload;
    obj_info_t *out;
    int found;
} naming_t;

static int naming_version(void *arg, const char *key, const obj_info_t *info, int latest)
{
    naming_t *n = arg;
    (void)latest;
    if (strcmp(key, n->key) != 0) return 1; /* past the key's versions */
    if (!info || !info->multipart || strcmp(info->upload_id, n->upload) != 0) return 0;
    obj_info_copy(n->out, info);
    n->found = 1;
    return 1;
}

/* *out the version of bucket/key that names upload, when one can be found (else unchanged). */
static void version_naming(obj_set_t *s, const char *bucket, const char *key, const char *upload,
                           obj_info_t *out)
{
    obj_info_t *v = xmalloc(sizeof(*v));
    naming_t n = {key, upload, v, 0};
    if (obj_list_versions(s, bucket, key, NULL, NULL, naming_version, &n) >= 0 && n.found)
        obj_info_copy(out, v);
    free(v);
}

/* The object a Complete makes of n parts, total bytes, d the md5 of their md5s; rec the
 * upload's record (content type, metadata). */
static void object_info(obj_info_t *info, const char *upload_id, int n, uint64_t total,
                        const uint8_t d[16], const obj_info_t *rec)
{
    memset(info, 0, sizeof(*info));
    info->multipart = 1;
    info->nparts = n;
    info->size = total;
    memcpy(info->upload_id, upload_id, 32);
    for (int b = 0; b < 16; b++)
        snprintf(info->etag + 2 * b, 3, "%02x", d[b]);
    snprintf(info->etag + 32, sizeof(info->etag) - 32, "-%d", n);
    snprintf(info->content_type, sizeof(info->content_type), "%s", rec->content_type);
    memcpy(info->umeta, rec->umeta, rec->umeta_len);
    info->umeta_len = rec->umeta_len;
}

/* Complete with the upload's lock held: no part commits, and no abort runs, meanwhile. */
static int mpu_complete_locked(obj_set_t *s, const char *bucket, const char *key,
                               const char *upload_id, const obj_mpu_part_t *parts, int n,
                               uint64_t min_part, const obj_cond_t *cond, obj_versioning_t v,
                               const obj_mpu_hooks_t *hooks, obj_info_t *out, int *why)
{
    obj_info_t rec, info;
    char *closing = NULL; /* a closing record's manifest: a Complete cut short */
    size_t closing_len = 0;
    int rc, first_err = 0;
    int state = upload_state(s, bucket, key, upload_id, &rec, &closing, &closing_len);
    if (state == UPLOAD_ABORTING) state = ERR_NOT_FOUND; /* as good as aborted */
    if (state < 0 || (state == UPLOAD_CLOSING && out &&
                      completed_already(s, bucket, key, upload_id, parts, n, out) == 0)) {
        /* Completed (its closer's tidying, cut short, is the reaper's: obj__mpu_settle). */
        free(closing);
        if (state == UPLOAD_CLOSING) return 0;
        if (state == ERR_NOT_FOUND && out &&
            completed_already(s, bucket, key, upload_id, parts, n, out) == 0)
            return 0;
        if (state == ERR_NOT_FOUND) *why = OBJ_MPU_NO_UPLOAD; /* else the stores' error */
        return state;
    }
    if (n < 1 || n > OBJ_MPU_MAX_PARTS ||
        (hooks && hooks->begin && hooks->begin(hooks->arg, &rec) != 0)) {
        free(closing);
        *why = n < 1 || n > OBJ_MPU_MAX_PARTS ? OBJ_MPU_BAD_PART : OBJ_MPU_REFUSED;
        return ERR_INVAL;
    }
    /* The order first, as S3: a descending list is InvalidPartOrder, whatever the sizes. */
    for (int i = 1; i < n; i++)
        if (parts[i].part <= parts[i - 1].part) {
            free(closing);
            *why = OBJ_MPU_BAD_ORDER;
            return ERR_INVAL;
        }
    /*
     * Which upload of each part stands: one listing of the upload's parts; resuming a
     * Complete cut short, those its close recorded (a part that passed its check before
     * the close and landed after it is not one of them).
     */
    standings_t st = {0};
    rc = state == UPLOAD_CLOSING ? recorded_standings(closing, &st)
                                 : each_part(s, upload_id, collect_standing, &st);
    if (rc < 0) {
        free(st.a);
        free(closing);
        return rc;
    }
    rc = 0;
    char(*tags)[OBJ__PART_TAG_LEN + 1] = xcalloc((size_t)n, sizeof(*tags));
    size_t cap = (size_t)n * (OBJ__PART_KEY_MAX + 64 + OBJ_MPU_NOTE_MAX) + 16, len = 0;
    char *manifest = xmalloc(cap);
    uint8_t md5s[16];
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    EVP_DigestInit_ex(md, EVP_md5(), NULL);
    uint64_t total = 0;
    for (int i = 0; i < n && !rc; i++) {
        obj_info_t pi;
        char pk[OBJ__PART_KEY_MAX], want[80];
        if (i > 0 && parts[i].part <= parts[i - 1].part) {
            *why = OBJ_MPU_BAD_ORDER;
            rc = ERR_INVAL;
            break;
        }
        const standing_t *up = standing_of(&st, parts[i].part);
        if (!up) {
            /* (Not listed: dropped by an Abort through another node, as below?) */
            obj_info_t *now = xmalloc(sizeof(*now));
            int open = state != UPLOAD_OPEN ||
                       upload_state(s, bucket, key, upload_id, now, NULL, NULL) == UPLOAD_OPEN;
            free(now);
            *why = open ? OBJ_MPU_BAD_PART : OBJ_MPU_NO_UPLOAD;
            rc = open ? ERR_INVAL : ERR_NOT_FOUND;
            break;
        }
        snprintf(tags[i], sizeof(tags[i]), "%s", up->tag);
        obj__part_key(pk, sizeof(pk), upload_id, parts[i].part, up->tag);
        /* The client's ETag may carry quotes. */
        const char *e = parts[i].etag;
        size_t el = strlen(e);
        if (el >= 2 && e[0] == '"' && e[el - 1] == '"') {
            e++;
            el -= 2;
        }
        snprintf(want, sizeof(want), "%.*s", (int)el, e);
        int found = obj_stat(s, MPU_PARTS, pk, &pi);
        /*
         * A part its close recorded is gone (completed, and replaced since); or one listed
         * is gone since, the upload no longer open: an Abort through another node closed
         * it and is dropping its parts (the upload lock orders one node's calls only).
         */
        if (found == ERR_NOT_FOUND &&
            (state == UPLOAD_CLOSING ||
             upload_state(s, bucket, key, upload_id, &pi, NULL, NULL) != UPLOAD_OPEN)) {
            *why = OBJ_MPU_NO_UPLOAD;
            rc = ERR_NOT_FOUND;
            break;
        }
        if (found != 0 || strcmp(pi.etag, want) != 0 || strlen(pi.etag) != 32) {
            *why = OBJ_MPU_BAD_PART;
            rc = ERR_INVAL;
            break;
        }
        if (i < n - 1 && pi.size < min_part) {
            *why = OBJ_MPU_TOO_SMALL;
            rc = ERR_INVAL;
            break;
        }
        char note[OBJ_MPU_NOTE_MAX] = "";
        if (hooks && hooks->part && hooks->part(hooks->arg, i, &pi, note) != 0) {
            *why = OBJ_MPU_BAD_PART;
            rc = ERR_INVAL;
            break;
        }
        note[strcspn(note, " \t\r\n")] = 0; /* one token: the manifest is lines of them */
        for (int b = 0; b < 16; b++)
            md5s[b] = (uint8_t)hexbyte(pi.etag + 2 * b);
        EVP_DigestUpdate(md, md5s, 16);
        len += (size_t)snprintf(manifest + len, cap - len, "%d%s%s %llu %s%s%s\n", parts[i].part,
                                tags[i][0] ? "." : "", tags[i], (unsigned long long)pi.size,
                                pi.etag, note[0] ? " " : "", note);
        total += pi.size;
    }
    uint8_t d[16];
    EVP_DigestFinal_ex(md, d, NULL);
    EVP_MD_CTX_free(md);
    /* Resuming, a list that is not the recorded one is another Complete: the upload is gone. */
    if (state == UPLOAD_CLOSING && rc == ERR_INVAL &&
        (*why == OBJ_MPU_BAD_PART || *why == OBJ_MPU_TOO_SMALL)) {
        *why = OBJ_MPU_NO_UPLOAD;
        rc = ERR_NOT_FOUND;
    }
    obj_info_t orig, closed;
    obj_info_copy(&orig, &rec);
    if (!rc && hooks && hooks->finish &&
        hooks->finish(hooks->arg, rec.umeta, &rec.umeta_len, sizeof(rec.umeta)) != 0) {
        *why = OBJ_MPU_REFUSED;
        rc = ERR_INVAL;
    }
    free(st.a);
    /*
     * A Complete cut short (a kill after its close): this one resumes it when it is the
     * same (the very manifest its close recorded), and once its closer is surely gone: a
     * Complete sent again while the first still runs, through another node, waits (503).
     * Taking the close over (below, on the closing record's stamp) lets one resumer on.
     */
    object_info(&info, upload_id, n, total, d, &rec);
    int named = 0;
    if (!rc && state == UPLOAD_CLOSING) {
        if (len != closing_len || memcmp(manifest, closing, len) != 0) {
            *why = OBJ_MPU_NO_UPLOAD;
            rc = ERR_NOT_FOUND;
        } else if (rec.stamp_ns + CLOSE_STALE_NS > obj__wall_ns()) {
            rc = ERR_THROTTLED;
        } else if ((named = obj__upload_named(s, bucket, key, upload_id)) != 0) {
            /* Its heads were written (another version is current now): completed. A store
             * that cannot say: later. */
            rc = named > 0 ? 0 : ERR_THROTTLED;
        } else {
            log_info("event=complete_resumed upload=%s key=%s", upload_id, key);
        }
    }
    free(closing);
    if (named > 0 && !rc) {
        free(manifest);
        free(tags);
        if (out) {
            obj_info_copy(out, &info);
            version_naming(s, bucket, key, upload_id, out); /* its version id, found */
        }
        return 0;
    }
    /* Closed before its manifest is written: a racing Complete's would replace it. The
     * closing record keeps the manifest: a Complete cut short can be resumed or undone. */
    size_t blen = 0;
    char *body = rc ? NULL : record_body(bucket, key, manifest, len, &blen);
    if (!rc && obj__complete_cut_hook) (void)obj__complete_cut_hook(upload_id, 0);
    if (!rc && (rc = close_upload(s, upload_id, &orig, &closed, body, blen)) == ERR_NOT_FOUND) {
        free(body);
        free(manifest);
        free(tags);
        if (out && completed_already(s, bucket, key, upload_id, parts, n, out) == 0) return 0;
        if (still_there(s, bucket, key, upload_id)) return ERR_THROTTLED;
        *why = OBJ_MPU_NO_UPLOAD;
        return rc;
    }
    free(body);
    obj_info_t mf = {0}; /* the manifest as written: dropped on its stamp only */
    if (!rc && obj__complete_cut_hook && obj__complete_cut_hook(upload_id, 1))
        rc = ERR_IO;
    else if (!rc) {
        rc = put_small(s, MPU_MANIFEST, upload_id, manifest, len, NULL, NULL, 0, &mf);
        if (rc) reopen_upload(s, bucket, key, upload_id, &orig, &closed);
        if (!rc && obj__complete_cut_hook && obj__complete_cut_hook(upload_id, 2)) rc = ERR_IO;
    }
    free(manifest);
    if (rc) {
        free(tags);
        return rc;
    }

    /*
     * The fence: no head once the close is older than CLOSE_FENCE_NS (a node stalled, or
     * its clock stepped), since a resumer may take it over at CLOSE_STALE_NS. The closing
     * record and the manifest stay: the same Complete sent again resumes it.
     */
    if (obj__wall_ns() > closed.stamp_ns + CLOSE_FENCE_NS) {
        log_warn("event=complete_fenced upload=%s key=%s", upload_id, key);
        free(tags);
        return ERR_THROTTLED;
    }
    int heads = obj__commit_heads(s, bucket, key, cond, v, &info, NULL, 0, &first_err);
    if (heads < 0 || !obj__enough(s, &info, heads)) {
        /* In doubt: heads of it stayed on failing stores, and they name the manifest. */
        if (heads != OBJ__COMMIT_IN_DOUBT) {
            /* Its own manifest only: past every bound, a resumer's may stand there now. */
            obj_cond_t mc = OBJ_COND_NONE;
            mc.if_stamp = mf.stamp_ns;
            if (obj_delete_if(s, MPU_MANIFEST, upload_id, &mc) != 0)
                log_warn("event=manifest_kept upload=%s", upload_id);
            reopen_upload(s, bucket, key, upload_id, &orig, &closed); /* e.g. 412: still open */
        }
        free(tags);
        return first_err ? first_err : ERR_UNRECOVERABLE;
    }
    if (obj__complete_cut_hook && obj__complete_cut_hook(upload_id, 3)) {
        free(tags);
        return ERR_IO;
    }
    /* Parts uploaded but not taken are garbage now; so is the upload record. */
    unused_t u = {s, parts, tags, n};
    if ((rc = each_part(s, upload_id, drop_unused_part, &u)) < 0)
        log_warn("event=unused_parts_kept upload=%s err=%s", upload_id, err_name(rc));
    free(tags);
    obj__drop_object(s, MPU_UPLOADS, upload_id);
    if (out) obj_info_copy(out, &info);
    return 0;
}

static int drop_part(void *arg, int part, const char *tag, const char *key, const obj_info_t *info)
{
    (void)part;
    (void)tag;
    (void)info;
    obj__drop_object(arg, MPU_PARTS, key);
    return 0;
}

/*
 * Abort of an upload a Complete closed and a kill cut short (upload_state's
 * UPLOAD_CLOSING, rec its record): once its closer is surely gone, and when
 * no head names the upload (then it was completed: NoSuchUpload, as for any
 * completed upload), the close is taken over by an aborting record (a
 * Complete resuming meanwhile makes it fail). Nothing is dropped here: the
 * reaper ends it after its grace, when still no head names the upload
 * (obj__mpu_settle), so that even a closer that outlived every bound cannot
 * have its parts taken from under its object. 0: aborted, ERR_NOT_FOUND,
 * ERR_THROTTLED (wait: its closer may still run, or a store cannot say).
 */
static int abort_closing(obj_set_t *s, const char *bucket, const char *key, const char *upload_id,
                         const obj_info_t *rec)
{
    if (rec->stamp_ns + CLOSE_STALE_NS > obj__wall_ns()) return ERR_THROTTLED;
    int named = obj__upload_named(s, bucket, key, upload_id);
    if (named) return named > 0 ? ERR_NOT_FOUND : ERR_THROTTLED;
    obj_info_t closed;
    size_t blen;
    char *body = record_body(bucket, key, "", 0, &blen);
    int rc = close_upload(s, upload_id, rec, &closed, body, blen);
    free(body);
    if (rc == 0) log_info("event=complete_aborted upload=%s key=%s", upload_id, key);
    return rc;
}

int obj_mpu_abort(obj_set_t *s, const char *bucket, const char *key, const char *upload_id)
{
    s = obj__route_upload(s, bucket, key, upload_id);
    obj_info_t rec;
    if (strlen(upload_id) != 32) return ERR_NOT_FOUND;
    /*
     * The upload closes first, under its lock: a part still streaming finds
     * it gone at its commit and drops its own blocks. Then every part that
     * did commit is dropped.
     */
    pthread_mutex_t *ul = obj__mpu_lock(s, upload_id);
    pthread_mutex_lock(ul);
    obj_info_t closed;
    int rc = upload_state(s, bucket, key, upload_id, &rec, NULL, NULL), state = rc;
    if (rc == UPLOAD_OPEN)
        rc = close_upload(s, upload_id, &rec, &closed, NULL, 0); /* one closer, across nodes */
    else if (rc == UPLOAD_CLOSING)
        rc = abort_closing(s, bucket, key, upload_id, &rec);
    else if (rc == UPLOAD_ABORTING)
        rc = ERR_NOT_FOUND;
    if (rc == ERR_NOT_FOUND && state >= 0 && still_there(s, bucket, key, upload_id))
        rc = ERR_THROTTLED;
    pthread_mutex_unlock(ul);
    if (rc || state != UPLOAD_OPEN) return rc;
    rc = each_part(s, upload_id, drop_part, s);
    if (rc < 0) log_warn("event=abort_parts_incomplete upload=%s err=%s", upload_id, err_name(rc));
    obj__drop_object(s, MPU_UPLOADS, upload_id); /* the marker */
    return 0;
}

int obj__upload_closing(obj_set_t *s, const char *upload_id, uint64_t *stamp)
{
    obj_info_t rec;
    char *body;
    int rc = read_record(s, upload_id, &rec, &body);
    if (rc) return rc;
    size_t head = strlen(body); /* "bucket\nkey" */
    rc = rec.size > head + 1 && memchr(body, '\n', head) != NULL;
    *stamp = rec.stamp_ns;
    free(body);
    return rc;
}

/*
 * Whether a part a closing record's manifest m recorded is gone (its object
 * completed, then replaced: the parts went with it): 1, 0, or -1 when that
 * cannot be told.
 */
static int recorded_part_gone(obj_set_t *s, const char *upload_id, const char *m)
{
    standings_t st = {0};
    int rc = recorded_standings(m, &st) == 0 ? 0 : -1;
    for (int i = 0; i < st.n && rc == 0; i++) {
        obj_info_t pi;
        char pk[OBJ__PART_KEY_MAX];
        obj__part_key(pk, sizeof(pk), upload_id, st.a[i].part, st.a[i].tag);
        int sr = obj_stat(s, MPU_PARTS, pk, &pi);
        rc = sr == ERR_NOT_FOUND ? 1 : sr ? -1 : 0;
    }
    free(st.a);
    return rc;
}

/*
 * The reaper's end of a Complete cut short that nobody resumed (a closing
 * record of upload_id at stamp), or that an Abort took over (an aborting
 * record), seen so for the reaper's grace. If a head names the upload, the
 * Complete went through: the parts its manifest does not name go, then the
 * record (its closer's tidying). Else a closing record's close is taken
 * over, the manifest dropped, and the upload opened again as it was (the
 * client, never answered, can complete or abort it); an aborting record's
 * parts, manifest and record go. Any doubt (a store that cannot say, the
 * record changed) leaves it for a later pass. 1 when settled.
 */
int obj__mpu_settle(obj_set_t *s, const char *upload_id, uint64_t stamp)
{
    obj_info_t rec, closed;
    char *body = NULL;
    int settled = 0, named = 0, gone = 0;
    pthread_mutex_t *ul = obj__mpu_lock(s, upload_id);
    pthread_mutex_lock(ul);
    if (read_record(s, upload_id, &rec, &body) != 0 || rec.stamp_ns != stamp ||
        rec.stamp_ns + CLOSE_STALE_NS > obj__wall_ns())
        goto out;
    char *nl = strchr(body, '\n');
    size_t want = nl ? (size_t)(nl - body) + 1 + strlen(nl + 1) : 0;
    if (!nl || rec.size <= want + 1) goto out; /* open, or not a record */
    int aborting = unpadded(body + want + 1, rec.size - want - 1) == 0;
    *nl = 0;
    const char *bucket = body, *key = nl + 1;
    if ((named = obj__upload_named(s, bucket, key, upload_id)) < 0) goto out;
    if (named) {
        int np = 0, *pno = NULL;
        uint64_t *sizes = NULL;
        char(*tags)[OBJ__PART_TAG_LEN + 1] = NULL;
        if (obj__read_manifest_all(s, upload_id, -1, &np, &pno, &sizes, &tags, NULL, NULL) == 0) {
            obj_mpu_part_t *parts = xcalloc((size_t)np, sizeof(*parts));
            for (int i = 0; i < np; i++)
                parts[i].part = pno[i];
            unused_t u = {s, parts, tags, np};
            if (each_part(s, upload_id, drop_unused_part, &u) >= 0) {
                obj__drop_object(s, MPU_UPLOADS, upload_id);
                settled = 1;
            }
            free(parts);
        }
        free(pno);
        free(sizes);
        free(tags);
    } else if (aborting) {
        if (each_part(s, upload_id, drop_part, s) >= 0) {
            obj__drop_object(s, MPU_MANIFEST, upload_id);
            obj__drop_object(s, MPU_UPLOADS, upload_id);
            settled = 1;
        }
    } else if ((gone = recorded_part_gone(s, upload_id, body + want + 1)) != 0) {
        /* Completed, then replaced (the parts went with its version): ended, as aborted. */
        if (gone > 0 && each_part(s, upload_id, drop_part, s) >= 0) {
            obj__drop_object(s, MPU_MANIFEST, upload_id);
            obj__drop_object(s, MPU_UPLOADS, upload_id);
            settled = 1;
            aborting = 1;
        }
    } else {
        *nl = '\n';
        if (close_upload(s, upload_id, &rec, &closed, body, rec.size) == 0) {
            *nl = 0;
            obj__drop_object(s, MPU_MANIFEST, upload_id);
            reopen_upload(s, bucket, key, upload_id, &rec, &closed);
            settled = 1;
        }
        *nl = 0;
    }
    if (settled)
        log_info("event=upload_settled upload=%s key=%s how=%s", upload_id, key,
                 named      ? "completed"
                 : gone     ? "replaced"
                 : aborting ? "aborted"
                            : "reopened");
out:
    pthread_mutex_unlock(ul);
    free(body);
    return settled;
}

/* The upload that stands for each part, given once its part's uploads are all seen. */
typedef struct {
    obj_part_fn fn;
    void *arg;
    int held; /* part number of best, 0 for none */
    char tag[OBJ__PART_TAG_LEN + 1];
    obj_info_t *best;
} parts_t;

static int list_part(void *arg, int part, const char *tag, const char *key, const obj_info_t *info)
{
    parts_t *p = arg;
    (void)key;
    if (!part) return 0;
    if (p->held == part) {
        if (later_upload(info->stamp_ns, tag, p->best->stamp_ns, p->tag)) {
            obj_info_copy(p->best, info);
            snprintf(p->tag, sizeof(p->tag), "%s", tag);
        }
        return 0;
    }
    int rc = p->held ? p->fn(p->arg, p->held, p->best) : 0;
    p->held = part;
    obj_info_copy(p->best, info);
    snprintf(p->tag, sizeof(p->tag), "%s", tag);
    if (rc) p->held = 0; /* stopped: nothing more is given */
    return rc;
}

int obj_mpu_list_parts(obj_set_t *s, const char *bucket, const char *key, const char *upload_id,
                       obj_part_fn fn, void *arg)
{
    s = obj__route_upload(s, bucket, key, upload_id);
    obj_info_t rec;
    int rc = mpu_check(s, bucket, key, upload_id, &rec);
    if (rc) return rc;
    parts_t p = {fn, arg, 0, "", xmalloc(sizeof(obj_info_t))};
    rc = each_part(s, upload_id, list_part, &p);
    if (rc >= 0 && p.held) rc = p.fn(p.arg, p.held, p.best);
    free(p.best);
    return rc;
}

typedef struct {
    char **keys;
    int n, cap;
} part_keys_t;

static int collect_part(void *arg, int part, const char *tag, const char *key,
                        const obj_info_t *info)
{
    part_keys_t *p = arg;
    (void)info;
    (void)tag;
    if (!part) return 0;
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 64;
        p->keys = xrealloc(p->keys, sizeof(*p->keys) * (size_t)p->cap);
    }
    p->keys[p->n++] = xstrdup(key);
    return 0;
}

int obj_heal_upload(obj_set_t *s, const char *bucket, const char *key, const char *upload_id,
                    obj_heal_report_t *rep)
{
    s = obj__route_upload(s, bucket, key, upload_id);
    obj_info_t rec;
    int rc = mpu_check(s, bucket, key, upload_id, &rec);
    if (rc) return rc;
    if ((rc = obj_heal(s, MPU_UPLOADS, upload_id, rep)) != 0) return rc;
    /* The parts' keys first, healed after the walk (a heal never runs inside a store's walk). */
    part_keys_t p = {0};
    rc = each_part_of(s, upload_id, 1, collect_part, &p); /* every store: a healer's walk */
    for (int i = 0; i < p.n; i++) {
        int hr = rc < 0 ? 0 : obj_heal(s, MPU_PARTS, p.keys[i], rep);
        if (hr && rc >= 0) rc = hr;
        free(p.keys[i]);
    }
    free(p.keys);
    return rc < 0 ? rc : 0;
}

typedef struct {
    obj_set_t *s;
    const char *bucket;
    obj_upload_fn fn;
    void *arg;
    int closing; /* closing and aborting records too (a Complete cut short) */
} uploads_t;

static int list_upload(void *arg, const char *upload, const obj_info_t *info)
{
    uploads_t *u = arg;
    size_t bl = strlen(u->bucket);
    int err, rc = 0;
    if (info->size <= bl || (info->size > bl + 1 + SHARD_MAX_KEY && !u->closing))
        return 0; /* or closing */
    obj_reader_t *r = obj_open(u->s, MPU_UPLOADS, upload, NULL, &err);
    if (!r) return 0;
    char *body = xmalloc(info->size + 1);
    if (obj_read(r, 0, body, info->size) == 0) {
        body[info->size] = 0;
        if (strncmp(body, u->bucket, bl) == 0 && body[bl] == '\n' &&
            (u->closing || strlen(body) == info->size)) /* (a closing record) */
            rc = u->fn(u->arg, body + bl + 1, upload, info);
    }
    free(body);
    obj_close(r);
    return rc;
}

static int list_uploads(obj_set_t *s, const char *bucket, int wide, int closing, obj_upload_fn fn,
                        void *arg)
{
    for (int j = 0; j < s->nsub; j++) { /* set by set: callers sort (no order promised) */
        if (obj__sub_removed(s, j)) continue;
        int rc = list_uploads(s->sub[j], bucket, wide, closing, fn, arg);
        if (rc) return rc;
    }
    if (s->nsub) return 0;
    uploads_t u = {s, bucket, fn, arg, closing};
    return obj__list(s, MPU_UPLOADS, NULL, NULL, NULL, 0, wide, list_upload, &u);
}

int obj_mpu_list_uploads(obj_set_t *s, const char *bucket, obj_upload_fn fn, void *arg)
{
    return list_uploads(s, bucket, 0, 0, fn, arg);
}

int obj_mpu_list_uploads_all(obj_set_t *s, const char *bucket, obj_upload_fn fn, void *arg)
{
    return list_uploads(s, bucket, 1, 0, fn, arg);
}

int obj_mpu_list_uploads_any(obj_set_t *s, const char *bucket, obj_upload_fn fn, void *arg)
{
    return list_uploads(s, bucket, 0, 1, fn, arg);
}
