/*
 * obj_mpu_complete.c: CompleteMultipartUpload (room of the object layer; map
 * in obj_int.h), and the end of one a kill cut short.
 *
 * A Complete takes, for each part it lists, the upload of that part that
 * stands (the latest by commit stamp: obj_mpu.c), checks it, and closes the
 * upload by rewriting its record as a closing record that carries the
 * manifest (obj_mpu_record.c): the decision is durable from the close on.
 * Then it writes the manifest (MPU_MANIFEST, key: the upload id, "part.tag
 * size etag [note]" lines, the note what the layer above keeps per part:
 * obj_mpu_hooks_t) and the heads of the destination object, which name the
 * upload: the object is then the parts, read through the manifest
 * (obj_get.c). Parts not listed and the upload record go after the commit.
 *
 * A kill between the close and the object's heads leaves the closing
 * record, and the same Complete sent again resumes it (its manifest must be
 * the very same), once the record is older than any live Complete takes
 * (OBJ__CLOSE_STALE_NS). An Abort then ends it, unless the object stands
 * (obj_mpu.c). The reaper settles one that nobody resumed (obj__mpu_settle):
 * tidied if its object stands, else open again.
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

static int hexbyte(const char *p)
{
    int v = 0;
    for (int i = 0; i < 2; i++) {
        char c = p[i];
        v = v * 16 + (c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : 0);
    }
    return v;
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
        if (obj__later_part_upload(info->stamp_ns, tag, last->stamp, last->tag)) {
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
 * gets the same answer (0, *out the object), as S3 gives it. While its
 * record is closing (a Complete cut short, or one racing this), the version
 * that stands, read from every store, on heads of its own (obj__cut_short):
 * a head a kill left on fewer stores than a version stands on is not a
 * completed upload, though a reader that asks that store first finds it.
 * Once the record is gone the version stood: the current head found is
 * enough (a metadata rewrite in flight splits a version over two stamps,
 * and nothing "stands" by its exact heads meanwhile).
 */
static void version_naming(obj_set_t *s, const char *bucket, const char *key, const char *upload,
                           obj_info_t *out);

static int completed_already(obj_set_t *s, const char *bucket, const char *key,
                             const char *upload_id, const obj_mpu_part_t *parts, int n,
                             obj_info_t *out, int closing)
{
    obj_info_t cur;
    int *pno = NULL, rc = ERR_NOT_FOUND;
    uint64_t *sizes = NULL;
    int found = (closing ? obj_stat_standing : obj_stat)(s, bucket, key, &cur) == 0 &&
                cur.multipart && strcmp(cur.upload_id, upload_id) == 0;
    if (!found && !closing) {
        /* Replaced since, in a versioned bucket: it is a noncurrent version now (answered
         * NoSuchUpload, a client took it for never made while it was listed: a probe). */
        obj_info_clear(&cur);
        version_naming(s, bucket, key, upload_id, &cur);
        found = cur.multipart && strcmp(cur.upload_id, upload_id) == 0 && !cur.deleted;
    }
    if (!found || cur.nparts != n || (closing && obj__cut_short(s, bucket, key, upload_id) != 0) ||
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
    int state = obj__upload_state(s, bucket, key, upload_id, &rec, &closing, &closing_len);
    if (state == OBJ__UPLOAD_ABORTING) state = ERR_NOT_FOUND; /* as good as aborted */
    if (state < 0 || (state == OBJ__UPLOAD_CLOSING && out &&
                      completed_already(s, bucket, key, upload_id, parts, n, out, 1) == 0)) {
        /* Completed (its closer's tidying, cut short, is the reaper's: obj__mpu_settle). */
        free(closing);
        if (state == OBJ__UPLOAD_CLOSING) return 0;
        if (state == ERR_NOT_FOUND && out &&
            completed_already(s, bucket, key, upload_id, parts, n, out, 0) == 0)
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
    /* The numbers and their order first, part by part, as S3: a number below 1 is refused
     * as such, a descending list is InvalidPartOrder, whatever the sizes. */
    for (int i = 0; i < n; i++)
        if (parts[i].part < 1 || (i && parts[i].part <= parts[i - 1].part)) {
            free(closing);
            *why = parts[i].part < 1 ? OBJ_MPU_BAD_NUMBER : OBJ_MPU_BAD_ORDER;
            return ERR_INVAL;
        }
    /*
     * Which upload of each part stands: one listing of the upload's parts; resuming a
     * Complete cut short, those its close recorded (a part that passed its check before
     * the close and landed after it is not one of them).
     */
    standings_t st = {0};
    rc = state == OBJ__UPLOAD_CLOSING ? recorded_standings(closing, &st)
                                      : obj__each_part_of(s, upload_id, 0, collect_standing, &st);
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
    int missing = 0; /* a listed part is not there: not listed, or gone since */
    for (int i = 0; i < n && !rc; i++) {
        obj_info_t pi;
        char pk[OBJ__PART_KEY_MAX], want[80];
        const standing_t *up = standing_of(&st, parts[i].part);
        int found = ERR_NOT_FOUND;
        if (up) {
            snprintf(tags[i], sizeof(tags[i]), "%s", up->tag);
            obj__part_key(pk, sizeof(pk), upload_id, parts[i].part, up->tag);
            found = obj_stat(s, MPU_PARTS, pk, &pi);
        }
        if (found != 0 && found != ERR_NOT_FOUND) {
            rc = found; /* the stores cannot say: not the client's mistake */
            break;
        }
        /* The client's ETag may carry quotes. */
        const char *e = parts[i].etag;
        size_t el = strlen(e);
        if (el >= 2 && e[0] == '"' && e[el - 1] == '"') {
            e++;
            el -= 2;
        }
        snprintf(want, sizeof(want), "%.*s", (int)el, e);
        if (found != 0 || strcmp(pi.etag, want) != 0 || strlen(pi.etag) != 32) {
            missing = found != 0;
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
    /*
     * A part that fails its check is the client's mistake while the upload is open. Not
     * otherwise: resuming, a list that is not the recorded one is another Complete's (or
     * a part the close recorded went with its version, completed and replaced since); and
     * a listed part missing while the upload no longer reads as open went with an Abort
     * through another node (the upload lock orders one node's calls only). The upload is
     * gone to this Complete either way. Stores that cannot say: their error, not a final
     * answer.
     */
    if (rc == ERR_INVAL && (*why == OBJ_MPU_BAD_PART || *why == OBJ_MPU_TOO_SMALL)) {
        int now = state == OBJ__UPLOAD_CLOSING ? ERR_NOT_FOUND
                  : missing ? obj__upload_state(s, bucket, key, upload_id, &info, NULL, NULL)
                            : OBJ__UPLOAD_OPEN;
        if (now != OBJ__UPLOAD_OPEN) {
            *why = now < 0 && now != ERR_NOT_FOUND ? OBJ_MPU_OK : OBJ_MPU_NO_UPLOAD;
            rc = now < 0 ? now : ERR_NOT_FOUND;
        }
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
    int named = 0, cut = 0;
    if (!rc && state == OBJ__UPLOAD_CLOSING) {
        if (len != closing_len || memcmp(manifest, closing, len) != 0) {
            *why = OBJ_MPU_NO_UPLOAD;
            rc = ERR_NOT_FOUND;
        } else if (rec.stamp_ns + OBJ__CLOSE_STALE_NS > obj__wall_ns()) {
            rc = ERR_THROTTLED;
        } else {
            /*
             * Its heads were written (another version is current now): completed. Not when
             * the newest head anywhere is one of them and does not stand: the kill came in
             * the middle of the heads, and a 200 here answered for an object no read found.
             * A store that cannot say: later. A commit cut short is carried through as it is
             * (below), its version id the one readers may have met already.
             */
            named = obj__upload_named(s, bucket, key, upload_id);
            cut = named > 0 ? obj__cut_short(s, bucket, key, upload_id) : 0;
            if (cut) named = cut > 0 ? 0 : -1;
            if (named)
                rc = named > 0 ? 0 : ERR_THROTTLED;
            else
                log_info("event=complete_resumed upload=%s key=%s heads_cut=%d", upload_id, key,
                         cut);
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
    char *body = rc ? NULL : obj__upload_record(bucket, key, manifest, len, &blen);
    if (!rc && obj__complete_cut_hook) (void)obj__complete_cut_hook(upload_id, 0);
    if (!rc &&
        (rc = obj__upload_close(s, upload_id, &orig, &closed, body, blen)) == ERR_NOT_FOUND) {
        free(body);
        free(manifest);
        free(tags);
        if (out && completed_already(s, bucket, key, upload_id, parts, n, out,
                                     obj__upload_still_there(s, bucket, key, upload_id)) == 0)
            return 0;
        if (obj__upload_still_there(s, bucket, key, upload_id)) return ERR_THROTTLED;
        *why = OBJ_MPU_NO_UPLOAD;
        return rc;
    }
    free(body);
    obj_info_t mf = {0}; /* the manifest as written: dropped on its stamp only */
    if (!rc && obj__complete_cut_hook && obj__complete_cut_hook(upload_id, 1))
        rc = ERR_IO;
    else if (!rc) {
        /* The object it completes, in the manifest's metadata: the reaper tells by it a
         * manifest whose object went without its parts (obj_reap.c, OBJ__MANIFEST_OWNER). */
        size_t ol = sizeof(OBJ__MANIFEST_OWNER) + strlen(bucket) + 1 + strlen(key) + 1;
        char *owner = xmalloc(ol);
        snprintf(owner, ol, "%s%c%s\n%s", OBJ__MANIFEST_OWNER, 0, bucket, key);
        rc = obj__put_small(s, MPU_MANIFEST, upload_id, manifest, len, NULL, owner, ol, &mf);
        free(owner);
        if (rc) obj__upload_reopen(s, bucket, key, upload_id, &orig, &closed);
        if (!rc && obj__complete_cut_hook && obj__complete_cut_hook(upload_id, 2)) rc = ERR_IO;
    }
    free(manifest);
    if (rc) {
        free(tags);
        return rc;
    }

    /*
     * The fence: no head once the close is older than OBJ__CLOSE_FENCE_NS (a node stalled, or
     * its clock stepped), since a resumer may take it over at OBJ__CLOSE_STALE_NS. The closing
     * record and the manifest stay: the same Complete sent again resumes it.
     */
    if (obj__wall_ns() > closed.stamp_ns + OBJ__CLOSE_FENCE_NS) {
        log_warn("event=complete_fenced upload=%s key=%s", upload_id, key);
        free(tags);
        return ERR_THROTTLED;
    }
    int heads =
        cut > 0 ? obj__roll_forward(s, bucket, key, upload_id, cond, v, &info, &first_err) : -1;
    if (cut > 0 && heads < 0 && first_err != ERR_NOT_FOUND) {
        /* Its cut heads stay where they landed, naming the manifest: sent again, later. */
        heads = OBJ__COMMIT_IN_DOUBT;
    } else if (heads == -1) {
        first_err = 0; /* (nothing of it left above what stands: a commit of its own) */
        heads = obj__commit_heads(s, bucket, key, cond, v, &info, NULL, 0, &first_err);
    }
    if (heads < 0 || !obj__enough(s, &info, heads)) {
        /* In doubt: heads of it stayed on failing stores, and they name the manifest. */
        if (heads != OBJ__COMMIT_IN_DOUBT) {
            /* Its own manifest only: past every bound, a resumer's may stand there now. */
            obj_cond_t mc = OBJ_COND_NONE;
            mc.if_stamp = mf.stamp_ns;
            if (obj_delete_if(s, MPU_MANIFEST, upload_id, &mc) != 0)
                log_warn("event=manifest_kept upload=%s", upload_id);
            obj__upload_reopen(s, bucket, key, upload_id, &orig,
                               &closed); /* e.g. 412: still open */
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
    if ((rc = obj__each_part_of(s, upload_id, 0, drop_unused_part, &u)) < 0)
        log_warn("event=unused_parts_kept upload=%s err=%s", upload_id, err_name(rc));
    free(tags);
    obj__drop_object(s, MPU_UPLOADS, upload_id);
    if (out) obj_info_copy(out, &info);
    return 0;
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
    obj_upload_view_t v;
    char *body = NULL, bucket[SHARD_MAX_BUCKET + 1], key[SHARD_MAX_KEY + 1];
    int settled = 0, named = 0, gone = 0;
    pthread_mutex_t *ul = obj__mpu_lock(s, upload_id);
    pthread_mutex_lock(ul);
    int state = obj__upload_read(s, upload_id, &rec, &body, &v);
    if (state <= OBJ__UPLOAD_OPEN || rec.stamp_ns != stamp ||
        rec.stamp_ns + OBJ__CLOSE_STALE_NS > obj__wall_ns() || v.bucket_len > SHARD_MAX_BUCKET ||
        v.key_len > SHARD_MAX_KEY)
        goto out;
    int aborting = state == OBJ__UPLOAD_ABORTING;
    snprintf(bucket, sizeof(bucket), "%.*s", (int)v.bucket_len, v.bucket);
    snprintf(key, sizeof(key), "%.*s", (int)v.key_len, v.key);
    if ((named = obj__upload_named(s, bucket, key, upload_id)) < 0) goto out;
    /* A head of it that a kill left in the middle of its heads is no completion: the heads
     * it left go (they name the manifest and parts dropped here) once nothing else can take
     * the upload on (an aborting record; a close taken over; recorded parts gone, which no
     * resume gets past). */
    int cut = named ? obj__cut_short(s, bucket, key, upload_id) : 0;
    if (cut < 0) goto out;
    if (cut) named = 0;
    if (named) {
        int np = 0, *pno = NULL;
        uint64_t *sizes = NULL;
        char(*tags)[OBJ__PART_TAG_LEN + 1] = NULL;
        if (obj__read_manifest_all(s, upload_id, -1, &np, &pno, &sizes, &tags, NULL, NULL) == 0) {
            obj_mpu_part_t *parts = xcalloc((size_t)np, sizeof(*parts));
            for (int i = 0; i < np; i++)
                parts[i].part = pno[i];
            unused_t u = {s, parts, tags, np};
            if (obj__each_part_of(s, upload_id, 0, drop_unused_part, &u) >= 0) {
                obj__drop_object(s, MPU_UPLOADS, upload_id);
                settled = 1;
            }
            free(parts);
        }
        free(pno);
        free(sizes);
        free(tags);
    } else if (aborting) {
        if ((!cut || obj__drop_cut_heads(s, bucket, key, upload_id) == 0) &&
            obj__drop_parts(s, upload_id) >= 0) {
            obj__drop_object(s, MPU_MANIFEST, upload_id);
            obj__drop_object(s, MPU_UPLOADS, upload_id);
            settled = 1;
        }
    } else if ((gone = recorded_part_gone(s, upload_id, v.manifest)) != 0) {
        /* Completed, then replaced (the parts went with its version): ended, as aborted. */
        if (gone > 0 && (!cut || obj__drop_cut_heads(s, bucket, key, upload_id) == 0) &&
            obj__drop_parts(s, upload_id) >= 0) {
            obj__drop_object(s, MPU_MANIFEST, upload_id);
            obj__drop_object(s, MPU_UPLOADS, upload_id);
            settled = 1;
            aborting = 1;
        }
    } else if (obj__upload_close(s, upload_id, &rec, &closed, body, rec.size) == 0) {
        /* Taken over (a resume meanwhile makes this fail), then open again. Heads it left
         * that cannot be dropped now: the record stays closed (under the new stamp) for a
         * later pass. */
        if (!cut || obj__drop_cut_heads(s, bucket, key, upload_id) == 0) {
            obj__drop_object(s, MPU_MANIFEST, upload_id);
            obj__upload_reopen(s, bucket, key, upload_id, &rec, &closed);
            settled = 1;
        }
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
