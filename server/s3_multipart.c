/*
 * s3_multipart: multipart uploads: create, UploadPart (and UploadPartCopy),
 * Complete, Abort, ListParts, ListMultipartUploads.
 */

#include "server/s3_int.h"

void s3_mpu_create(ctx_t *x)
{
    buf_t um = {0}, b = {0};
    char upload[33], ckh[160];
    if (s3_build_umeta(x, &um) != 0 || s3_mpu_cks_create(x, &um, ckh) != 0) {
        free(um.p);
        return;
    }
    /* Who may abort it and list its parts, besides the bucket's owner (s3_foreign.c). */
    if (x->public_view)
        s3_pairs_set(&um, INITIATOR_META, x->anonymous ? ANON_INITIATOR : x->auth.access_key);
    if (um.len > sizeof(((obj_info_t *)0)->umeta)) {
        free(um.p);
        s3_err(x, S3E_METADATA_TOO_LARGE);
        return;
    }
    pthread_rwlock_t *lk = s3_bucket_lock(x->bucket);
    pthread_rwlock_rdlock(lk);
    int rc = !s3_bucket_current(x, x->bucket, x->ibucket)
                 ? S3_ERR_NO_BUCKET
                 : obj_mpu_create(x->cfg->set, x->ibucket, x->key, s3_hdr(x->info, "content-type"),
                                  um.p, um.len, upload);
    pthread_rwlock_unlock(lk);
    free(um.p);
    /*
     * Another node's DeleteBucket (the lock orders this node's only): it aborts the uploads
     * it listed, and this one may have come after its listing, so the create waits for a
     * mark's outcome as a commit does (s3_commit_stays), and goes with the bucket. Unfenced,
     * both were acknowledged (a 4-node probe: 16 rounds in 60), the upload id one of a
     * deleted bucket.
     */
    if (rc == 0 && x->cfg->fenced && (rc = s3_bucket_stays(x)) == S3_ERR_NO_BUCKET) {
        int arc = obj_mpu_abort(x->cfg->set, x->ibucket, x->key, upload);
        if (arc && arc != ERR_NOT_FOUND)
            log_warn("event=upload_undo_after_delete_bucket bucket=%s key=%s err=%s", x->bucket,
                     x->key, err_name(arc));
    }
    if (rc) {
        s3_engine_error(x, rc);
        return;
    }
    buf_printf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<InitiateMultipartUploadResult "
                   "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Bucket>");
    buf_xml(&b, x->bucket);
    buf_printf(&b, "</Bucket><Key>");
    buf_xml(&b, x->key);
    buf_printf(&b, "</Key><UploadId>%s</UploadId></InitiateMultipartUploadResult>", upload);
    if (ckh[0]) { /* the checksum headers too */
        char h[320];
        snprintf(h, sizeof(h), "x-amz-request-id: %s\r\nContent-Type: application/xml\r\n%s", x->id,
                 ckh);
        (void)http_respond_full(x->r, 200, h, b.p, b.len);
        free(b.p);
        return;
    }
    s3_respond_xml(x, 200, &b);
}

/* UploadPartCopy: a part from (a byte range of) an existing object. */
static void mpu_upload_part_copy(ctx_t *x, const char *upload, int part)
{
    obj_info_t si, info;
    int same, err;
    obj_reader_t *rd = s3_open_copy_source(x, &si, &same);
    if (!rd) return;
    if (s3_copy_source_cond(x, &si) != 0) {
        obj_close(rd);
        return;
    }
    uint64_t off = 0, len = si.size;
    const char *range = s3_hdr(x->info, "x-amz-copy-source-range");
    if (range) {
        uint64_t a = 0, b = 0;
        const char *dash = strncmp(range, "bytes=", 6) == 0 ? strchr(range + 6, '-') : NULL;
        if (dash && num_parse_u64n(range + 6, (size_t)(dash - range - 6), 0, UINT64_MAX, &a) == 0 &&
            num_parse_u64(dash + 1, 0, UINT64_MAX, &b) == 0 && a <= b && b >= si.size) {
            /* Well-formed, but not within the source: 400 InvalidArgument with the source's
             * size, as S3 answers (versitygw#610, s3fs#321 quote it), not GET's 416. */
            obj_close(rd);
            char msg[96];
            snprintf(msg, sizeof(msg),
                     "Range specified is not valid for source object of size: %llu",
                     (unsigned long long)si.size);
            s3_err_msg(x, S3E_INVALID_ARGUMENT, msg);
            return;
        }
        if (!dash ||
            num_parse_u64n(range + 6, (size_t)(dash - range - 6), 0, UINT64_MAX, &a) != 0 ||
            num_parse_u64(dash + 1, 0, UINT64_MAX, &b) != 0 || a > b || b >= si.size) {
            obj_close(rd);
            s3_err_msg(x, S3E_INVALID_ARGUMENT,
                       "The x-amz-copy-source-range value must be of the form bytes=first-last "
                       "where first and last are zero-based offsets within the source object.");
            return;
        }
        off = a;
        len = b - a + 1;
    }
    if (len > S3_MAX_PUT_BYTES) { /* a part is 5 GiB at most: as S3 */
        obj_close(rd);
        s3_err_msg(x, S3E_INVALID_REQUEST,
                   "The specified copy source is larger than the maximum allowable size for a "
                   "copy source: 5368709120");
        return;
    }
    obj_info_t rec;
    obj_writer_t *w =
        obj_mpu_part_begin_rec(x->cfg->set, x->ibucket, x->key, upload, part, &rec, &err);
    if (!w) {
        obj_close(rd);
        if (err == ERR_NOT_FOUND)
            s3_err(x, S3E_NO_SUCH_UPLOAD);
        else
            s3_engine_error(x, err);
        return;
    }
    if (!s3_initiated(x, &rec)) { /* S3: only the initiator uploads parts */
        obj_put_abort(w);
        obj_close(rd);
        s3_err(x, S3E_ACCESS_DENIED);
        return;
    }
    if (s3_mpu_cks_part_begin(x, &rec, 1) != 0) {
        obj_put_abort(w);
        obj_close(rd);
        return;
    }
    char cks[128];
    buf_t um = {0};
    obj_put_size_hint(w, len);
    err = s3_copy_range(x, rd, w, off, len, cks);
    obj_close(rd);
    if (cks[0]) buf_printf(&um, "%s%c%s%c", CKS_META, 0, cks, 0);
    if (err)
        obj_put_abort(w);
    else if ((err = obj_put_commit(w, NULL, um.p, um.len, &info)) == ERR_NOT_FOUND)
        err = ERR_CLOSED; /* the upload went while the part was copied */
    free(um.p);
    if (err == ERR_CLOSED) {
        s3_err(x, S3E_NO_SUCH_UPLOAD);
        return;
    }
    if (err) {
        s3_engine_error(x, err);
        return;
    }
    s3_respond_copy_result(x, "CopyPartResult", &info);
}

void s3_mpu_upload_part(ctx_t *x, const char *upload, const char *partstr)
{
    int part, err;
    if (num_parse_int(partstr, 1, 10000, &part) != 0) {
        s3_err_msg(x, S3E_INVALID_ARGUMENT, "Part number must be an integer between 1 and 10000.");
        return;
    }
    if (s3_hdr(x->info, "x-amz-copy-source")) {
        mpu_upload_part_copy(x, upload, (int)part);
        return;
    }
    if (s3_body_announced_ok(x) != 0) return;
    if (s3_body_begin(x) != 0) {
        s3_err_msg(x, S3E_INVALID_ARGUMENT, "Bad x-amz-content-sha256.");
        return;
    }
    obj_info_t rec;
    obj_writer_t *w =
        obj_mpu_part_begin_rec(x->cfg->set, x->ibucket, x->key, upload, (int)part, &rec, &err);
    if (!w) {
        if (err == ERR_NOT_FOUND)
            s3_err(x, S3E_NO_SUCH_UPLOAD);
        else
            s3_engine_error(x, err);
        return;
    }
    if (!s3_initiated(x, &rec)) { /* S3: only the initiator uploads parts */
        obj_put_abort(w);
        s3_err(x, S3E_ACCESS_DENIED);
        return;
    }
    if (s3_mpu_cks_part_begin(x, &rec, 0) != 0) { /* before a byte of the body is stored */
        obj_put_abort(w);
        return;
    }
    char cks[128];
    if (s3_stream_body(x, w, cks) != 0) return;
    obj_info_t info;
    buf_t um = {0}; /* the part's checksum, for Complete and ListParts */
    if (cks[0]) buf_printf(&um, "%s%c%s%c", CKS_META, 0, cks, 0);
    if (x->cks_also_val[0]) buf_printf(&um, "%s%c%s%c", CKD_META, 0, x->cks_also_val, 0);
    err = obj_put_commit(w, NULL, um.p, um.len, &info);
    free(um.p);
    if (err != 0) {
        if (err == ERR_NOT_FOUND) /* aborted or completed while the part streamed */
            s3_err(x, S3E_NO_SUCH_UPLOAD);
        else
            s3_engine_error(x, err);
        return;
    }
    s3_respond_etag(x, info.etag, cks, 0);
}

void s3_mpu_complete(ctx_t *x, const char *upload)
{
    size_t len;
    char *body = s3_read_complete_body(x, 2u << 20, &len);
    if (!body) return;
    s3_xml_part_t *xp = NULL;
    int np = 0;
    int bad = s3_xml_complete(body, len, &xp, &np);
    free(body);
    if (bad) {
        s3_err_msg(x, S3E_MALFORMED_XML, "The XML you provided was not well-formed.");
        return;
    }
    obj_mpu_part_t *parts = xcalloc((size_t)np, sizeof(*parts));
    for (int i = 0; i < np; i++) {
        parts[i].part = xp[i].part;
        memcpy(parts[i].etag, xp[i].etag, sizeof(parts[i].etag));
    }
    obj_info_t info;
    int why = 0;
    obj_cond_t cond;
    s3_mpu_cks_t ck;
    obj_mpu_hooks_t hooks;
    if (s3_write_cond(x, &cond) != 0 || s3_mpu_cks_complete_begin(x, xp, np, &ck, &hooks) != 0) {
        free(parts);
        free(xp);
        return;
    }
    pthread_rwlock_t *lk = s3_bucket_lock(x->bucket);
    pthread_rwlock_rdlock(lk);
    int rc =
        !s3_bucket_current(x, x->bucket, x->ibucket)
            ? S3_ERR_NO_BUCKET
            : obj_mpu_complete_hooked(x->cfg->set, x->ibucket, x->key, upload, parts, np, 5u << 20,
                                      &cond, s3_versioning_of(&x->bucket_rec), &hooks, &info, &why);
    pthread_rwlock_unlock(lk);
    if (rc == 0 && x->cfg->fenced && (rc = s3_commit_stays(x, &info)) != 0) {
        free(parts);
        free(xp);
        s3_mpu_cks_complete_end(&ck);
        s3_engine_error(x, rc);
        return;
    }
    free(parts);
    free(xp);
    s3_mpu_cks_complete_end(&ck);
    if (rc && s3_mpu_cks_complete_error(x, &ck)) return;
    /*
     * A Complete done already (a retry) is answered from the object it made, without the
     * begin hook that checks the initiator (the record may be gone): the object keeps its
     * upload's initiator, so another writer who knows the upload's id and parts learns
     * nothing (a cluster probe), and the initiator's own retry is answered.
     */
    if (rc == 0 && !ck.began && !s3_initiated(x, &info)) {
        s3_err(x, S3E_ACCESS_DENIED);
        return;
    }
    if (rc) {
        switch (why) {
        case OBJ_MPU_NO_UPLOAD:
            s3_err(x, S3E_NO_SUCH_UPLOAD);
            break;
        case OBJ_MPU_BAD_PART:
            s3_err(x, S3E_INVALID_PART);
            break;
        case OBJ_MPU_BAD_ORDER:
            s3_err(x, S3E_INVALID_PART_ORDER);
            break;
        case OBJ_MPU_BAD_NUMBER:
            s3_err_msg(x, S3E_INVALID_ARGUMENT, "PartNumber must be >= 1");
            break;
        case OBJ_MPU_TOO_SMALL:
            s3_err(x, S3E_ENTITY_TOO_SMALL);
            break;
        default:
            s3_engine_error(x, rc);
        }
        return;
    }
    s3_written_headers(x, &info);
    buf_t b = {0};
    buf_printf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<CompleteMultipartUploadResult "
                   "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Location>");
    buf_t url = {0};
    s3_object_url(x, &url, x->key);
    buf_xml(&b, url.p);
    free(url.p);
    buf_printf(&b, "</Location><Bucket>");
    buf_xml(&b, x->bucket);
    buf_printf(&b, "</Bucket><Key>");
    buf_xml(&b, x->key);
    buf_printf(&b, "</Key><ETag>&quot;%s&quot;</ETag>", info.etag);
    s3_mpu_cks_object_xml(&b, &info);
    buf_printf(&b, "</CompleteMultipartUploadResult>");
    s3_respond_xml(x, 200, &b);
}

/*
 * x-amz-if-match-initiated-time: the upload goes only if it was initiated
 * then (to the second); another time is 412, and an upload that is not
 * there is 204, as S3 documents the header. 1 when answered.
 */
static int abort_precondition(ctx_t *x, const char *upload, const char *h)
{
    const char *want = s3_hdr(x->info, "x-amz-if-match-initiated-time");
    if (!want) return 0;
    time_t t = s3_parse_http_date(want);
    if (t == (time_t)-1) {
        s3_err_msg(x, S3E_INVALID_ARGUMENT, "Invalid x-amz-if-match-initiated-time header.");
        return 1;
    }
    obj_info_t rec;
    int rc = obj_mpu_upload_stat(x->cfg->set, x->ibucket, x->key, upload, &rec);
    if (rc == ERR_NOT_FOUND) {
        (void)http_respond(x->r, 204, h, 0);
        return 1;
    }
    if (rc) {
        s3_engine_error(x, rc);
        return 1;
    }
    if ((uint64_t)t != rec.mtime_ns / 1000000000ull) {
        s3_err(x, S3E_PRECONDITION_FAILED);
        return 1;
    }
    return 0;
}

void s3_mpu_abort(ctx_t *x, const char *upload)
{
    char h[128];
    snprintf(h, sizeof(h), "x-amz-request-id: %s\r\n", x->id);
    if (abort_precondition(x, upload, h)) return;
    int rc = obj_mpu_abort(x->cfg->set, x->ibucket, x->key, upload);
    if (rc == ERR_NOT_FOUND && s3_hdr(x->info, "x-amz-if-match-initiated-time")) {
        (void)http_respond(x->r, 204, h, 0); /* gone since its check: as if not there then */
        return;
    }
    if (rc == ERR_NOT_FOUND) {
        s3_err(x, S3E_NO_SUCH_UPLOAD);
        return;
    }
    if (rc) {
        s3_engine_error(x, rc);
        return;
    }
    (void)http_respond(x->r, 204, h, 0);
}

/* ListParts: the parts uploaded so far, after part-number-marker, at most max-parts. */
typedef struct {
    buf_t *b;
    int marker, max, count, truncated, last;
} lp_t;

static int list_part_cb(void *arg, int part, const obj_info_t *info)
{
    lp_t *l = arg;
    char t[32];
    if (part <= l->marker) return 0;
    if (l->count == l->max) {
        l->truncated = l->max > 0; /* max 0 asks for nothing: no page follows it (a client
                                      paging on IsTruncated with a marker that cannot move
                                      would loop) */
        return 1;
    }
    s3_iso8601(info->mtime_ns, t);
    buf_printf(l->b,
               "<Part><PartNumber>%d</PartNumber><LastModified>%s</LastModified><ETag>&quot;%s"
               "&quot;</ETag><Size>%llu</Size>",
               part, t, info->etag, (unsigned long long)info->size);
    s3_mpu_cks_part_xml(l->b, s3_umeta_get(info, CKS_META));
    buf_printf(l->b, "</Part>");
    l->count++;
    l->last = part;
    return 0;
}

static void upload_owner_xml(ctx_t *x, buf_t *b, const char *initiator, const char *writer);

void s3_list_parts(ctx_t *x, const char *upload)
{
    int p1, p2;
    char *marker = s3_qparam(x->query, "part-number-marker", &p1);
    char *maxp = s3_qparam(x->query, "max-parts", &p2);
    buf_t parts = {0}, b = {0};
    lp_t l = {&parts, 0, 1000, 0, 0, 0};
    uint64_t mp = 1000;
    int bad = (marker && num_parse_int(marker, 0, INT32_MAX, &l.marker) != 0) ||
              (maxp && num_parse_u64(maxp, 0, INT32_MAX, &mp) != 0);
    free(marker);
    free(maxp);
    if (bad) {
        s3_err_msg(x, S3E_INVALID_ARGUMENT,
                   "part-number-marker and max-parts must be non-negative integers.");
        return;
    }
    if (mp < 1000) l.max = (int)mp;
    int rc = obj_mpu_list_parts(x->cfg->set, x->ibucket, x->key, upload, list_part_cb, &l);
    if (rc < 0) { /* > 0: the walk stopped at max-parts */
        free(parts.p);
        if (rc == ERR_NOT_FOUND)
            s3_err(x, S3E_NO_SUCH_UPLOAD);
        else
            s3_engine_error(x, rc);
        return;
    }
    buf_printf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListPartsResult "
                   "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Bucket>");
    buf_xml(&b, x->bucket);
    buf_printf(&b, "</Bucket><Key>");
    buf_xml(&b, x->key);
    buf_printf(&b,
               "</Key><UploadId>%s</UploadId><PartNumberMarker>%d</PartNumberMarker>"
               "<NextPartNumberMarker>%d</NextPartNumberMarker><MaxParts>%d</MaxParts>"
               "<IsTruncated>%s</IsTruncated><StorageClass>STANDARD</StorageClass>",
               upload, l.marker, l.last, l.max, l.truncated ? "true" : "false");
    obj_info_t rec;
    int has_rec = obj_mpu_upload_stat(x->cfg->set, x->ibucket, x->key, upload, &rec) == 0;
    upload_owner_xml(x, &b, has_rec ? s3_umeta_get(&rec, INITIATOR_META) : "",
                     has_rec ? s3_umeta_get(&rec, OWNER_META) : "");
    if (has_rec) s3_mpu_cks_upload_xml(&b, &rec);
    if (parts.len) buf_printf(&b, "%.*s", (int)parts.len, parts.p);
    buf_printf(&b, "</ListPartsResult>");
    free(parts.p);
    s3_respond_xml(x, 200, &b);
}

/* ListMultipartUploads: uploads in progress in this bucket, by key. */
typedef struct {
    char *key;
    char upload[33];
    uint64_t mtime_ns;
    char cks[112]; /* <ChecksumAlgorithm> and <ChecksumType> of the upload, "" if none */
    char owner[S3_ACL_ID_MAX + 1];     /* its writer, when not the bucket's owner ("") */
    char initiator[S3_ACL_ID_MAX + 1]; /* its initiator, when not the bucket's owner ("") */
} up_t;

/*
 * The uploads come in no useful order (by upload id, set by set), so the
 * page is picked from all of them: those up to the markers are dropped as
 * they come, and whenever many are held they are sorted and cut to what
 * the page can use (one upload for each common prefix, and max+1 page
 * entries), everything after the last one kept then dropped as it comes:
 * memory and each cut's sort stay a few pages however many uploads the
 * bucket (or one key) holds, and no upload is beyond reach.
 */
typedef struct {
    up_t *v;
    int n, cap;
    const char *prefix, *kmark, *umark, *delim;
    int max;
    char *bound; /* uploads of later keys cannot make this page (after a cut) */
} ups_t;

static int up_cmp(const void *a, const void *b);

static void up_free(up_t *v)
{
    free(v->key);
    v->key = NULL;
}

/* The common prefix key rolls up into under delim (its length), 0 for none. */
static size_t up_cp(const ups_t *u, const char *key)
{
    size_t pl = u->prefix ? strlen(u->prefix) : 0;
    const char *d = u->delim && u->delim[0] ? strstr(key + pl, u->delim) : NULL;
    return d ? (size_t)(d - key) + strlen(u->delim) : 0;
}

static void ups_cut(ups_t *u)
{
    qsort(u->v, (size_t)u->n, sizeof(*u->v), up_cmp);
    int w = 0, items = 0, full = 0;
    const char *last_cp = NULL;
    size_t last_cl = 0;
    for (int i = 0; i < u->n; i++) {
        up_t *v = &u->v[i];
        size_t cl = up_cp(u, v->key);
        if (cl && last_cp && cl == last_cl && !strncmp(last_cp, v->key, cl)) {
            up_free(v); /* its common prefix is held already */
            continue;
        }
        if (full) {
            up_free(v);
            continue;
        }
        if (cl) {
            last_cp = v->key;
            last_cl = cl;
        }
        if (++items == u->max + 1) full = 1;
        u->v[w++] = *v;
    }
    u->n = w;
    if (full) {
        free(u->bound);
        u->bound = xstrdup(u->v[w - 1].key);
    }
}

static int list_upload_cb(void *arg, const char *key, const char *upload, const obj_info_t *info)
{
    ups_t *u = arg;
    if (u->prefix && strncmp(key, u->prefix, strlen(u->prefix)) != 0) return 0;
    if (u->kmark) {
        /*
         * Nothing up to the markers is held: keys before key-marker, its own uploads up
         * to upload-id-marker (all of them without one), and the keys under it when it is
         * a common prefix (rolled up on the page before). Held, they were never cut: a
         * key with 20,000 uploads made each upload's arrival a sort of them all.
         */
        int c = strcmp(key, u->kmark);
        if (c < 0 || (c == 0 && (!u->umark || strcmp(upload, u->umark) <= 0))) return 0;
        size_t cl = up_cp(u, key);
        if (cl && strlen(u->kmark) == cl && !strncmp(u->kmark, key, cl)) return 0;
    }
    if (u->bound && strcmp(key, u->bound) > 0) return 0;
    if (u->n >= 4 * (u->max + 1) + 64) ups_cut(u);
    if (u->n == u->cap)
        u->v = xrealloc(u->v, (size_t)(u->cap = u->cap ? u->cap * 2 : 16) * sizeof(*u->v));
    u->v[u->n].key = xstrdup(key);
    snprintf(u->v[u->n].upload, sizeof(u->v[u->n].upload), "%s", upload);
    u->v[u->n].mtime_ns = info->mtime_ns;
    buf_t ck = {0};
    s3_mpu_cks_upload_xml(&ck, info);
    snprintf(u->v[u->n].cks, sizeof(u->v[u->n].cks), "%s", ck.p ? ck.p : "");
    snprintf(u->v[u->n].owner, sizeof(u->v[u->n].owner), "%s", s3_umeta_get(info, OWNER_META));
    snprintf(u->v[u->n].initiator, sizeof(u->v[u->n].initiator), "%s",
             s3_umeta_get(info, INITIATOR_META));
    free(ck.p);
    u->n++;
    return 0;
}

/* Key order, then upload id: the order uploads began in (their ids start with the time). */
static int up_cmp(const void *a, const void *b)
{
    const up_t *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : strcmp(x->upload, y->upload);
}

/* <Initiator> and <Owner> of an upload: its initiator (INITIATOR_META: another user, or
 * anonymous) and its writer (OWNER_META: another user with WRITE on the bucket, who will own
 * the object); each absent: the bucket's owner (an upload from before INITIATOR_META: its
 * writer initiated it). */
static void upload_owner_xml(ctx_t *x, buf_t *b, const char *initiator, const char *writer)
{
    obj_info_t bi;
    const char *bo = s3_bucket_exists(x, x->bucket, &bi) && s3_bucket_owner(&bi)[0]
                         ? s3_bucket_owner(&bi)
                         : x->auth.access_key;
    const char *o = writer[0] ? writer : bo;
    const char *i = !initiator[0]                        ? o
                    : !strcmp(initiator, ANON_INITIATOR) ? "anonymous"
                                                         : initiator;
    for (int k = 0; k < 2; k++) {
        const char *who = k ? o : i;
        buf_printf(b, "<%s><ID>", k ? "Owner" : "Initiator");
        buf_xml(b, who);
        buf_printf(b, "</ID><DisplayName>");
        buf_xml(b, who);
        buf_printf(b, "</DisplayName></%s>", k ? "Owner" : "Initiator");
    }
}

/*
 * ListMultipartUploads: uploads in key order, then initiation order;
 * prefix, delimiter (common prefixes), key-marker / upload-id-marker,
 * max-uploads (at most 1000) and encoding-type, as S3 pages them.
 */
void s3_list_uploads(ctx_t *x)
{
    int p1, p2, p3, p4, p5, p6;
    char *prefix = s3_qparam(x->query, "prefix", &p1);
    char *delim = s3_qparam(x->query, "delimiter", &p2);
    char *kmark = s3_qparam(x->query, "key-marker", &p3);
    char *umark = s3_qparam(x->query, "upload-id-marker", &p4);
    char *maxs = s3_qparam(x->query, "max-uploads", &p5);
    char *enc = s3_qparam(x->query, "encoding-type", &p6);
    ups_t u = {.prefix = prefix,
               .kmark = kmark && kmark[0] ? kmark : NULL,
               .umark = umark && umark[0] ? umark : NULL,
               .delim = delim};
    int max = 1000, rc = 0;
    const char *in[] = {prefix, delim, kmark};
    for (size_t i = 0; !rc && i < sizeof(in) / sizeof(in[0]); i++)
        if (in[i] && !s3_key_ok(in[i], strlen(in[i]))) rc = ERR_INVAL;
    if (rc || (maxs && num_parse_int(maxs, 0, INT32_MAX, &max) != 0) ||
        (enc && strcmp(enc, "url") != 0)) {
        s3_err_msg(x, S3E_INVALID_ARGUMENT, "A listing parameter is not valid.");
        goto out;
    }
    /*
     * An upload-id-marker counts only with a key-marker (S3); then one that is no upload id
     * at all is refused, as versitygw's suite expects. One that is an id but names no
     * upload is taken: the upload a page ended on may have finished before the next page.
     */
    if (u.kmark && u.umark &&
        (strlen(u.umark) != 32 || strspn(u.umark, "0123456789abcdef") != 32)) {
        s3_err_msg(x, S3E_INVALID_ARGUMENT, "Invalid uploadId marker");
        goto out;
    }
    if (max > 1000) max = 1000;
    u.max = max;
    rc = obj_mpu_list_uploads(x->cfg->set, x->ibucket, list_upload_cb, &u);
    if (rc < 0) {
        s3_engine_error(x, rc);
        goto out;
    }
    if (u.n) qsort(u.v, (size_t)u.n, sizeof(*u.v), up_cmp);
    void (*text)(buf_t *, const char *) = enc ? buf_url : buf_xml;
    const char *dl = delim && delim[0] ? delim : NULL;
    size_t pl = prefix ? strlen(prefix) : 0;
    buf_t b = {0}, items = {0}, cps = {0};
    char *last_cp = NULL;
    const char *next_key = NULL, *next_up = NULL;
    int count = 0, truncated = 0;
    for (int i = 0; i < u.n; i++) {
        const up_t *v = &u.v[i];
        /* After the markers: keys past key-marker, or its uploads with an id past
         * upload-id-marker (which counts only with a key-marker, and need not be an id that
         * exists: the upload it named may have ended since the page before). */
        if (kmark && kmark[0]) {
            int c = strcmp(v->key, kmark);
            if (c < 0 || (c == 0 && (!(umark && umark[0]) || strcmp(v->upload, umark) <= 0)))
                continue;
        }
        const char *d = dl ? strstr(v->key + pl, dl) : NULL;
        if (d) {
            size_t cl = (size_t)(d - v->key) + strlen(dl);
            if (last_cp && strlen(last_cp) == cl && !strncmp(last_cp, v->key, cl)) continue;
            if (kmark && strlen(kmark) == cl && !strncmp(kmark, v->key, cl)) continue;
            if (count == max) {
                truncated = max > 0;
                break;
            }
            free(last_cp);
            last_cp = xmalloc(cl + 1);
            memcpy(last_cp, v->key, cl);
            last_cp[cl] = 0;
            buf_printf(&cps, "<CommonPrefixes><Prefix>");
            text(&cps, last_cp);
            buf_printf(&cps, "</Prefix></CommonPrefixes>");
            next_key = last_cp;
            next_up = NULL;
            count++;
            continue;
        }
        if (count == max) {
            truncated = max > 0;
            break;
        }
        char t[32];
        s3_iso8601(v->mtime_ns, t);
        buf_printf(&items, "<Upload><Key>");
        text(&items, v->key);
        buf_printf(&items, "</Key><UploadId>%s</UploadId>", v->upload);
        upload_owner_xml(x, &items, v->initiator, v->owner);
        buf_printf(&items,
                   "<Initiated>%s</Initiated><StorageClass>STANDARD</StorageClass>%s</Upload>", t,
                   v->cks);
        next_key = v->key;
        next_up = v->upload;
        count++;
    }
    buf_printf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListMultipartUploadsResult "
                   "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Bucket>");
    buf_xml(&b, x->bucket);
    buf_printf(&b, "</Bucket><KeyMarker>");
    text(&b, kmark ? kmark : "");
    buf_printf(&b, "</KeyMarker><UploadIdMarker>");
    buf_xml(&b, umark ? umark : "");
    buf_printf(&b, "</UploadIdMarker>");
    if (truncated && next_key) {
        buf_printf(&b, "<NextKeyMarker>");
        text(&b, next_key);
        buf_printf(&b, "</NextKeyMarker><NextUploadIdMarker>%s</NextUploadIdMarker>",
                   next_up ? next_up : "");
    }
    buf_printf(&b, "<Prefix>");
    text(&b, prefix ? prefix : "");
    buf_printf(&b, "</Prefix>");
    if (dl) {
        buf_printf(&b, "<Delimiter>");
        text(&b, dl);
        buf_printf(&b, "</Delimiter>");
    }
    if (enc) buf_printf(&b, "<EncodingType>url</EncodingType>");
    buf_printf(&b,
               "<MaxUploads>%d</MaxUploads><IsTruncated>%s</IsTruncated>%s%s"
               "</ListMultipartUploadsResult>",
               max, truncated ? "true" : "false", items.p ? items.p : "", cps.p ? cps.p : "");
    free(items.p);
    free(cps.p);
    free(last_cp);
    s3_respond_xml(x, 200, &b);
out:
    for (int i = 0; i < u.n; i++)
        free(u.v[i].key);
    free(u.v);
    free(u.bound);
    free(prefix);
    free(delim);
    free(kmark);
    free(umark);
    free(maxs);
    free(enc);
}

int s3_uploads_collect(void *arg, const char *key, const char *upload_id, const obj_info_t *info)
{
    s3_uploads_t *u = arg;
    (void)info;
    if (u->n == u->cap) {
        u->cap = u->cap ? 2 * u->cap : 16;
        u->keys = xrealloc(u->keys, sizeof(*u->keys) * (size_t)u->cap);
        u->ids = xrealloc(u->ids, sizeof(*u->ids) * (size_t)u->cap);
    }
    u->keys[u->n] = xstrdup(key);
    u->ids[u->n++] = xstrdup(upload_id);
    return 0;
}

void s3_uploads_free(s3_uploads_t *u)
{
    for (int i = 0; i < u->n; i++) {
        free(u->keys[i]);
        free(u->ids[i]);
    }
    free(u->keys);
    free(u->ids);
    *u = (s3_uploads_t){0};
}
