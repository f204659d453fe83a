/*
 * s3_copy: CopyObject and what UploadPartCopy shares with it: the copy
 * source (x-amz-copy-source, the caller's right to read it, its
 * x-amz-copy-source-if-* conditions) and streaming a range of it into a
 * writer. Metadata and tags: copied or replaced by their directives; the
 * ACL and the owner never copied (the copy is its copier's, s3_foreign.c).
 */
#include "server/s3_int.h"

/* An error about the copy source: it names the source's bucket or key, not the request's. */
static void source_err(ctx_t *x, s3_err_t e, const char *bucket, const char *key, const char *vid)
{
    buf_t b = {0};
    if (bucket) {
        buf_printf(&b, "<BucketName>");
        buf_xml(&b, bucket);
        buf_printf(&b, "</BucketName>");
    }
    if (key) {
        buf_printf(&b, "<Key>");
        buf_xml(&b, key);
        buf_printf(&b, "</Key>");
    }
    if (vid) {
        buf_printf(&b, "<VersionId>");
        buf_xml(&b, vid);
        buf_printf(&b, "</VersionId>");
    }
    s3_err_detail(x, e, NULL, b.p ? b.p : "");
    free(b.p);
}

/*
 * Open the object named by x-amz-copy-source ("/bucket/key" or "bucket/key",
 * URL-encoded, optionally ?versionId=ID) after checking the caller may read
 * it. NULL with the error response sent. *same: it is the request's own key
 * (its current version).
 */
obj_reader_t *s3_open_copy_source(ctx_t *x, obj_info_t *si, int *same)
{
    const char *src = s3_hdr(x->info, "x-amz-copy-source");
    const char *q = strchr(src, '?');
    size_t sl = q ? (size_t)(q - src) : strlen(src);
    int err, has_vid = 0;
    char *vid = q ? s3_qparam(q + 1, "versionId", &has_vid) : NULL;
    if (q && (!has_vid || !vid || !obj_vid_valid(vid))) {
        free(vid);
        s3_err_msg(x, S3E_INVALID_ARGUMENT, "Invalid version id specified");
        return NULL;
    }
    if (sl && src[0] == '/') {
        src++;
        sl--;
    }
    /* A bad escape, a NUL, or bytes that are no UTF-8 text: S3's 400, not a key to look for. */
    char *path = s3_pdecode(src, sl, 0);
    if (!path || !s3_key_ok(path, strlen(path))) {
        free(path);
        free(vid);
        s3_err_msg(x, S3E_INVALID_ARGUMENT, "Invalid copy source encoding");
        return NULL;
    }
    char *slash = strchr(path, '/');
    if (!slash || slash == path || !slash[1]) {
        free(path);
        free(vid);
        s3_err_msg(x, S3E_INVALID_ARGUMENT, "Copy Source must mention the source bucket and key.");
        return NULL;
    }
    *slash = 0;
    const char *sbucket = path, *skey = slash + 1;
    *same = strcmp(sbucket, x->bucket) == 0 && strcmp(skey, x->key) == 0 && !vid;
    char siname[INAME_MAX];
    if (strlen(sbucket) >= sizeof(x->bucket) || strlen(skey) > MAX_KEY_LEN) {
        free(path);
        free(vid);
        s3_err_msg(x, S3E_INVALID_ARGUMENT, "Copy Source names no valid bucket and key.");
        return NULL;
    }
    /*
     * Another user's bucket is a source as far as its ACLs grant: the object's READ
     * lets it be copied (as GetObject of it, s3_foreign.c), and that a key is not
     * there is said only to whoever may list the bucket.
     */
    obj_info_t *sbi = xmalloc(sizeof(*sbi));
    if (!s3_bucket_exists(x, sbucket, sbi)) {
        free(sbi);
        source_err(x, S3E_NO_SUCH_BUCKET, sbucket, NULL, NULL);
        free(path);
        free(vid);
        return NULL;
    }
    const char *sowner = s3_bucket_owner(sbi);
    int foreign = sowner[0] && strcmp(sowner, x->auth.access_key) != 0;
    int may_list = !foreign || s3_foreign_may_read(x, s3_umeta_get(sbi, "acl"));
    const char *seo = s3_hdr(x->info, "x-amz-source-expected-bucket-owner");
    s3_bucket_iname(sbucket, sbi, siname);
    if (seo && strcmp(seo, sowner[0] ? sowner : x->auth.access_key) != 0) {
        free(sbi);
        free(path);
        free(vid);
        s3_err(x, S3E_ACCESS_DENIED);
        return NULL;
    }
    obj_reader_t *rd = obj_open_version(x->cfg->set, siname, skey, vid, si, &err);
    /* As a GET of it: the requester's own object, or its READ (a writer's object is not even
     * the bucket owner's to copy ungranted). */
    int may_read = rd && s3_may_read_object(x, si, sowner);
    x->copy_source_mine = rd && s3_object_mine(x, si, sowner);
    free(sbi); /* (sowner is in it) */
    if (rd && !may_read) {
        obj_close(rd);
        free(path);
        free(vid);
        s3_err(x, S3E_ACCESS_DENIED);
        return NULL;
    }
    if (!rd && err == ERR_NOT_FOUND && !may_list) {
        free(path);
        free(vid);
        s3_err(x, S3E_ACCESS_DENIED);
        return NULL;
    }
    if (!rd) {
        if (err == ERR_NOT_FOUND && vid && si->marker)
            s3_err_msg(x, S3E_INVALID_REQUEST,
                       "The source of a copy request may not "
                       "specifically refer to a delete marker by version id.");
        else if (err == ERR_NOT_FOUND && vid)
            source_err(x, S3E_NO_SUCH_VERSION, NULL, skey, vid);
        else if (err == ERR_NOT_FOUND)
            source_err(x, S3E_NO_SUCH_KEY, NULL, skey, NULL);
        else
            s3_engine_error(x, err);
    }
    free(path);
    if (rd && (si->vid[0] || vid)) {
        char h[96];
        snprintf(h, sizeof(h), "x-amz-copy-source-version-id: %s\r\n",
                 si->vid[0] ? si->vid : "null");
        http_add_headers(x->r, h);
    }
    free(vid);
    return rd;
}

/*
 * x-amz-copy-source-if-match / -if-none-match / -if-unmodified-since /
 * -if-modified-since against the source (RFC 7232 order, as GET): 0, or -1
 * with 412 sent.
 */
int s3_copy_source_cond(ctx_t *x, const obj_info_t *si)
{
    const char *im = s3_hdr(x->info, "x-amz-copy-source-if-match");
    const char *inm = s3_hdr(x->info, "x-amz-copy-source-if-none-match");
    time_t ius = s3_parse_http_date(s3_hdr(x->info, "x-amz-copy-source-if-unmodified-since"));
    time_t ims = s3_parse_http_date(s3_hdr(x->info, "x-amz-copy-source-if-modified-since"));
    time_t mt = (time_t)(si->mtime_ns / 1000000000ull);
    if (ims != (time_t)-1 && ims > time(NULL) && ims > mt) ims = (time_t)-1; /* as GET's */
    int ok = 1;
    if (im)
        ok = s3_etag_matches(im, si->etag, 0);
    else if (ius != (time_t)-1)
        ok = mt <= ius;
    if (ok && inm)
        ok = !s3_etag_matches(inm, si->etag, 1);
    else if (ok && ims != (time_t)-1)
        ok = mt > ims;
    if (!ok) s3_err(x, S3E_PRECONDITION_FAILED);
    return ok ? 0 : -1;
}

/* Stream [off, off+len) of rd into w, and its checksum when x->cks_default names one; 0 or an
 * ERR_*. */
int s3_copy_range(ctx_t *x, obj_reader_t *rd, obj_writer_t *w, uint64_t off, uint64_t len,
                  char cks_out[128])
{
    size_t unit = obj_read_unit(rd);
    bufpool_t *pool = obj_set_buffers(x->cfg->set);
    uint8_t *buf = bufpool_get(pool, unit); /* page-aligned: blocks land in it directly */
    cks_t ck;
    int have = x->cks_default && cks_init(&ck, x->cks_default) == 0;
    int err = x->cks_default && !have ? ERR_NOMEM : 0;
    cks_out[0] = 0;
    while (!err && len > 0) {
        size_t n = s3_next_piece(off, len, unit);
        if ((err = obj_read(rd, off, buf, n)) == 0) {
            if (have) cks_update(&ck, buf, n);
            err = obj_put_write(w, buf, n);
        }
        off += n;
        len -= n;
    }
    bufpool_put(pool, buf);
    if (have) {
        char v[CKS_MAX_B64];
        cks_final(&ck, v, sizeof(v));
        if (!err) snprintf(cks_out, 128, "%s:%s", cks_name(x->cks_default), v);
    }
    return err;
}

void s3_copy_object(ctx_t *x)
{
    if (s3_unknown_param(x, NULL)) return;
    const char *dir = s3_hdr(x->info, "x-amz-metadata-directive");
    int replace = dir && strcasecmp(dir, "REPLACE") == 0, err, same;
    if (dir && !replace && strcasecmp(dir, "COPY") != 0) {
        s3_err_msg(x, S3E_INVALID_ARGUMENT, "Unknown metadata directive.");
        return;
    }
    /* Both directives are checked first, as S3 does (a copy onto itself included). */
    const char *tdir = s3_hdr(x->info, "x-amz-tagging-directive");
    if (tdir && strcasecmp(tdir, "COPY") != 0 && strcasecmp(tdir, "REPLACE") != 0) {
        s3_err_msg(x, S3E_INVALID_ARGUMENT, "Unknown tagging directive.");
        return;
    }
    /* The copy's checksum: x-amz-checksum-algorithm's, computed over the bytes copied. */
    const char *an = s3_hdr(x->info, "x-amz-checksum-algorithm");
    int want = an ? cks_algo(an) : CKS_NONE;
    if (an && (!want || strncasecmp(an, "x-amz-", 6) == 0)) {
        s3_err_msg(x, S3E_INVALID_REQUEST, S3_CKS_UNSUPPORTED);
        return;
    }
    obj_info_t si;
    obj_cond_t cond;
    if (s3_write_cond(x, &cond) != 0) return;
    obj_reader_t *rd = s3_open_copy_source(x, &si, &same);
    if (!rd) return;
    if (s3_copy_source_cond(x, &si) != 0) {
        obj_close(rd);
        return;
    }
    if (si.size > S3_MAX_PUT_BYTES) { /* as S3: larger ones are copied in parts */
        obj_close(rd);
        s3_err_msg(x, S3E_INVALID_REQUEST,
                   "The specified copy source is larger than the maximum allowable size for a "
                   "copy source: 5368709120");
        return;
    }
    /* The redirect is not copied (S3): a copy has the request's, if any; a copy onto itself
     * that only sets one is a change. */
    const char *redirect;
    if (s3_redirect_header(x, &redirect) != 0) {
        obj_close(rd);
        return;
    }
    /* Naming a storage class is a change too, even the one the object has: S3 takes such a
     * copy (`aws s3 cp s3://b/k s3://b/k --storage-class STANDARD` rewrites an object in
     * place, and tools set a class this way), and its message lists what counts. */
    if (!replace && same && !redirect && !s3_hdr(x->info, "x-amz-storage-class")) {
        obj_close(rd);
        s3_err_msg(x, S3E_INVALID_REQUEST,
                   "This copy request is illegal because it is trying to copy an object to itself "
                   "without changing the object's metadata, storage class, website redirect "
                   "location or encryption attributes.");
        return;
    }
    buf_t um = {0};
    if (replace && s3_build_umeta(x, &um) != 0) {
        obj_close(rd);
        free(um.p);
        return;
    }
    /* Tags: the source's (x-amz-tagging-directive COPY, the default) or x-amz-tagging's. */
    int copy_tags = !tdir || strcasecmp(tdir, "COPY") == 0;
    /* The source's tags are its owner's to read (no ACL grants them): copied by anyone else
     * they would be read through the copy (a hostile pass). S3 asks s3:GetObjectTagging of
     * the source for a copy that takes its tags. */
    if (copy_tags && s3_umeta_get(&si, TAG_META)[0] && !x->copy_source_mine) {
        obj_close(rd);
        free(um.p);
        s3_err_msg(x, S3E_ACCESS_DENIED,
                   "Copying the source's tags needs its owner's permission; "
                   "x-amz-tagging-directive: REPLACE copies without them.");
        return;
    }
    if (!replace) {
        /* The source's metadata, but never its ACL: the copy gets the headers' ACL, or
         * private. */
        char *acl = xmalloc(S3_ACL_STORED_MAX);
        int given;
        if (s3_acl_from_headers(x, 0, acl, &given) != 0) {
            free(acl);
            obj_close(rd);
            return;
        }
        s3_umeta_with(&si, ACL_META, given ? acl : "private", &um);
        /* The copy is its copier's: the bucket owner's, or a writer's that keeps it. */
        s3_pairs_set(&um, OWNER_META, s3_writer_keeps(x, given, acl) ? x->auth.access_key : NULL);
        s3_pairs_set(&um, INITIATOR_META, NULL); /* the source's upload's, not the copy's */
        free(acl);
        s3_pairs_set(&um, REDIRECT_META, redirect && redirect[0] ? redirect : NULL);
        if (!copy_tags) { /* x-amz-tagging's tags, or none */
            const char *tagging = s3_hdr(x->info, "x-amz-tagging");
            buf_t tags = {0};
            if (tagging && s3_tags_from_query(x, tagging, &tags) != 0) {
                obj_close(rd);
                free(um.p);
                return;
            }
            s3_pairs_set(&um, TAG_META, tags.len ? tags.p : NULL);
            free(tags.p);
        }
    } else if (copy_tags) { /* new metadata, the source's tags */
        const char *st = s3_umeta_get(&si, TAG_META);
        s3_pairs_set(&um, TAG_META, st[0] ? st : NULL);
    }
    /* Metadata, tags, ACL and checksum share a version's room (a probe: new metadata and
     * the source's tags were answered EntityTooLarge, about the object's size). */
    if (um.len > sizeof(si.umeta)) {
        obj_close(rd);
        free(um.p);
        s3_err(x, S3E_METADATA_TOO_LARGE);
        return;
    }
    obj_writer_t *w = obj_put_begin(x->cfg->set, x->ibucket, x->key, &err);
    if (w) obj_put_set_cond(w, &cond);
    /*
     * Else the source's algorithm, whatever the metadata directive (a checksum is of the
     * bytes, not metadata): a full-object value kept as it is, a composite one (over the
     * source's parts) computed for the copy, one part.
     */
    const char *scks = s3_umeta_get(&si, CKS_META);
    char cks[128] = "";
    x->cks_default = want ? want : s3_cks_composite_algo(scks);
    /* A source without one: the copy gets S3's default (kept, inline or not: the copy result
     * names it from the record). */
    if (!x->cks_default && !scks[0]) x->cks_default = S3_CKS_DEFAULT;
    if (!x->cks_default) s3_pairs_set(&um, CKS_META, scks[0] ? scks : NULL);
    if (w) obj_put_size_hint(w, si.size);
    if (w) err = s3_copy_range(x, rd, w, 0, si.size, cks);
    if (cks[0]) s3_pairs_set(&um, CKS_META, cks);
    obj_close(rd);
    obj_info_t info;
    if (w && err)
        obj_put_abort(w);
    else if (w)
        err = s3_commit_in_bucket(x, w, replace ? s3_hdr(x->info, "content-type") : si.content_type,
                                  um.p, um.len, &info);
    int too_large = um.len > sizeof(si.umeta); /* with the copy's checksum */
    free(um.p);
    if (err == ERR_TOO_LARGE && too_large) {
        s3_err(x, S3E_METADATA_TOO_LARGE);
        return;
    }
    if (err) {
        s3_engine_error(x, err);
        return;
    }
    s3_written_headers(x, &info);
    s3_respond_copy_result(x, "CopyObjectResult", &info);
}
