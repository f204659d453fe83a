/*
 * s3_bucket: buckets: names, owners, generations (where a bucket's objects
 * live, so a reused name starts empty), the bucket locks that order commits
 * against DeleteBucket, create / delete / head / location, ListBuckets.
 */

#include "server/s3_int.h"

#include "common/clock.h"

#include "s3/xmltree.h"

#include <time.h>
#include <unistd.h>

int s3_bucket_name_ok(const char *n)
{
    size_t l = strlen(n);
    if (l < 3 || l > 63) return 0;
    for (size_t i = 0; i < l; i++) {
        char c = n[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.')) return 0;
    }
    if (!((n[0] >= 'a' && n[0] <= 'z') || (n[0] >= '0' && n[0] <= '9')) || n[l - 1] == '-' ||
        n[l - 1] == '.' || strstr(n, "..") || strstr(n, ".-") || strstr(n, "-."))
        return 0; /* labels start and end with a letter or digit */
    /* Not an IP address, and none of the prefixes and suffixes S3 reserves. */
    unsigned a, b, c, d;
    char tail;
    if (sscanf(n, "%3u.%3u.%3u.%3u%c", &a, &b, &c, &d, &tail) == 4) return 0;
    static const char *const bad_prefix[] = {"xn--", "sthree-", "amzn-s3-demo-"};
    static const char *const bad_suffix[] = {"-s3alias", "--ol-s3", ".mrap", "--x-s3"};
    for (size_t i = 0; i < sizeof(bad_prefix) / sizeof(bad_prefix[0]); i++)
        if (strncmp(n, bad_prefix[i], strlen(bad_prefix[i])) == 0) return 0;
    for (size_t i = 0; i < sizeof(bad_suffix) / sizeof(bad_suffix[0]); i++) {
        size_t sl = strlen(bad_suffix[i]);
        if (l > sl && strcmp(n + l - sl, bad_suffix[i]) == 0) return 0;
    }
    return 1;
}

/*
 * The bucket record as it is now (for decisions under the bucket's lock);
 * refreshes the cache. standing: the version that stands, as the stores'
 * conditional commit sees it (CreateBucket), not the newest head of m+1
 * stores, which may be a racing create's that never stood.
 */
static int bucket_read_as(ctx_t *x, const char *name, obj_info_t *info, int standing)
{
    obj_info_t tmp, *dst = info ? info : &tmp;
    int rc = standing ? obj_stat_standing(x->cfg->set, BUCKETS, name, dst)
                      : obj_stat(x->cfg->set, BUCKETS, name, dst),
        found = rc == 0;
    if (rc && rc != ERR_NOT_FOUND) x->bucket_lookup_failed = 1;
    if (strcmp(name, x->bucket) == 0) {
        x->bucket_seen = found ? 1 : -1;
        if (found) obj_info_copy(&x->bucket_rec, dst);
    }
    return found;
}

static int bucket_read(ctx_t *x, const char *name, obj_info_t *info)
{
    return bucket_read_as(x, name, info, 0);
}

int s3_bucket_exists(ctx_t *x, const char *name, obj_info_t *info)
{
    if (strcmp(name, x->bucket) != 0 || !x->bucket_seen) return bucket_read(x, name, info);
    if (x->bucket_seen > 0 && info) obj_info_copy(info, &x->bucket_rec);
    return x->bucket_seen > 0;
}

int s3_bucket_walked(const s3_cfg_t *cfg, const char *who, const char *name, char iname[INAME_MAX])
{
    ctx_t x = {0};
    x.cfg = cfg;
    snprintf(x.id, sizeof(x.id), "%s", who);
    obj_info_t bi;
    if (!s3_bucket_exists(&x, name, &bi)) return 0;
    s3_bucket_iname(name, &bi, iname);
    return 1;
}

/* The owner recorded in a bucket record, or "" for none. */
const char *s3_bucket_owner(const obj_info_t *info)
{
    return s3_umeta_get(info, "owner");
}

const char *s3_request_bucket_owner(ctx_t *x)
{
    return s3_bucket_exists(x, x->bucket, NULL) ? s3_bucket_owner(&x->bucket_rec) : NULL;
}

int s3_bucket_acls_disabled(const obj_info_t *info)
{
    return strcmp(s3_umeta_get(info, "ownership"), "BucketOwnerEnforced") == 0;
}

/* Where the objects of the bucket described by bi live (see INAME_MAX). */
void s3_bucket_iname(const char *name, const obj_info_t *bi, char out[INAME_MAX])
{
    const char *id = s3_umeta_get(bi, "id");
    if (id[0])
        snprintf(out, INAME_MAX, "%s\x04%s", name, id);
    else
        snprintf(out, INAME_MAX, "%s", name);
}

/*
 * Bucket locks (striped by name): commits into a bucket hold one shared,
 * DeleteBucket and CreateBucket exclusive. So a PUT racing a DeleteBucket
 * either commits first (and the delete finds the bucket not empty) or finds
 * the bucket gone and fails; never an object in a deleted bucket.
 */
#define BUCKET_LOCKS 64
static pthread_rwlock_t bucket_locks[BUCKET_LOCKS];
static pthread_once_t bucket_locks_once = PTHREAD_ONCE_INIT;

static void bucket_locks_init(void)
{
    for (int i = 0; i < BUCKET_LOCKS; i++)
        pthread_rwlock_init(&bucket_locks[i], NULL);
}

pthread_rwlock_t *s3_bucket_lock(const char *name)
{
    uint32_t h = 2166136261u;
    pthread_once(&bucket_locks_once, bucket_locks_init);
    for (const char *p = name; *p; p++)
        h = (h ^ (uint8_t)*p) * 16777619u;
    return &bucket_locks[h % BUCKET_LOCKS];
}

/* Under the bucket's lock: the incarnation iname of bucket name still exists. */
int s3_bucket_current(ctx_t *x, const char *name, const char *iname)
{
    obj_info_t bi;
    char now[INAME_MAX];
    if (!bucket_read(x, name, &bi)) return 0;
    s3_bucket_iname(name, &bi, now);
    return strcmp(now, iname) == 0;
}

/*
 * The bucket exists and belongs to the caller: 0, with iname (if not NULL)
 * where its objects live. Otherwise the error has been sent (404
 * NoSuchBucket, 403 AccessDenied: each user sees only its own).
 */
int s3_bucket_access(ctx_t *x, const char *name, char iname[INAME_MAX])
{
    obj_info_t info;
    if (!s3_bucket_exists(x, name, &info)) {
        s3_err(x, S3E_NO_SUCH_BUCKET);
        return -1;
    }
    const char *owner = s3_bucket_owner(&info);
    if (owner[0] && strcmp(owner, x->auth.access_key) != 0) {
        s3_err(x, S3E_ACCESS_DENIED);
        return -1;
    }
    if (iname) s3_bucket_iname(name, &info, iname);
    return 0;
}

/*
 * DeleteBucket across nodes. The lock above orders one node's requests; a
 * PUT through another node could pass its bucket check, a DeleteBucket here
 * list the bucket empty and delete it, and the PUT commit after: an
 * acknowledged object in a deleted bucket (a probe: 30 rounds of 30). So a
 * DeleteBucket first marks the bucket record ("deleting": the wall time, ns)
 * and lists only then; a commit in a cluster reads the record again after
 * it. A commit that saw no mark came before the mark, so the listing sees
 * it (BucketNotEmpty). One that sees a mark waits for its outcome: taken
 * off (the listing saw an object), the commit stands; the bucket gone, the
 * commit is undone and the client told NoSuchBucket. A mark older than
 * DELETE_MARK_NS is a DeleteBucket that died: ignored, and one that took
 * half of that does not delete (503).
 */
#define DELETING_META  "deleting"
#define DELETE_MARK_NS (10ull * 1000000000)

/* A live mark on a bucket record (not one a dead DeleteBucket left). */
static int marked_deleting(const obj_info_t *bi)
{
    const char *d = s3_umeta_get(bi, DELETING_META);
    if (!d[0]) return 0;
    uint64_t t = strtoull(d, NULL, 10), now = clock_wall_ns();
    return t + DELETE_MARK_NS > now;
}

/* obj_umeta_fn: the record's pairs with the mark set to arg (NULL: taken off). */
static int set_mark(void *arg, const obj_info_t *cur, char *out, size_t *out_len)
{
    buf_t um = {0};
    if (arg) {
        s3_umeta_with(cur, DELETING_META, arg, &um);
    } else {
        buf_put(&um, cur->umeta, cur->umeta_len);
        s3_pairs_set(&um, DELETING_META, NULL);
    }
    int rc = um.len > sizeof(cur->umeta) ? ERR_TOO_LARGE : 0;
    if (!rc) {
        memcpy(out, um.p, um.len);
        *out_len = um.len;
    }
    free(um.p);
    return rc;
}

/*
 * After a write into the request's bucket (in a cluster): 0 when the bucket (this
 * incarnation) stays, S3_ERR_NO_BUCKET when a DeleteBucket through another node took it
 * (the write is the caller's to undo), ERR_THROTTLED when the outcome is open.
 */
int s3_bucket_stays(ctx_t *x)
{
    for (int i = 0; i < 400; i++) { /* a mark lives DELETE_MARK_NS at most: 400 x 25 ms */
        obj_info_t bi;
        char now[INAME_MAX];
        x->bucket_lookup_failed = 0;
        int found = bucket_read_as(x, x->bucket, &bi, 1);
        if (!found && !x->bucket_lookup_failed) break; /* gone */
        if (found) {
            s3_bucket_iname(x->bucket, &bi, now);
            if (strcmp(now, x->ibucket) != 0) break; /* gone, and made again */
            if (!marked_deleting(&bi)) return 0;
        }
        usleep(25 * 1000);
        if (i == 399) return ERR_THROTTLED;
    }
    return S3_ERR_NO_BUCKET;
}

/*
 * After a commit of ver into the request's bucket (in a cluster): 0 when the
 * bucket still holds it, else S3_ERR_NO_BUCKET with the version undone (or
 * ERR_THROTTLED when the record could not be read for as long as a mark may
 * stand: the outcome is open, as a 503 says).
 */
/* s3_commit_stays for a version written at (bucket, key) of the request's bucket incarnation:
 * the bucket's objects, or its configurations' (CORS rules keyed by the incarnation). */
static int commit_stays_at(ctx_t *x, const char *bucket, const char *key, const obj_info_t *ver)
{
    int stays = s3_bucket_stays(x);
    if (stays != S3_ERR_NO_BUCKET) return stays;
    /* Undone: the bucket's objects went with it (its incarnation is unreachable); the
     * version goes too, so that its space comes back. */
    obj_cond_t c = OBJ_COND_NONE;
    snprintf(c.if_upload, sizeof(c.if_upload), "%s", ver->upload_id);
    int rc = ver->vid[0] ? obj_delete_version(x->cfg->set, bucket, key, ver->vid, &c, NULL)
                         : obj_delete_if(x->cfg->set, bucket, key, &c);
    if (rc && rc != ERR_NOT_FOUND && rc != ERR_PRECOND)
        log_warn("event=commit_undo_after_delete_bucket bucket=%s key=%s err=%s", x->bucket, key,
                 err_name(rc));
    return S3_ERR_NO_BUCKET;
}

int s3_commit_stays(ctx_t *x, const obj_info_t *ver)
{
    return commit_stays_at(x, x->ibucket, x->key, ver);
}

/*
 * Commit w into the request's bucket, if the bucket (this incarnation) is
 * still there; otherwise w is aborted and S3_ERR_NO_BUCKET returned.
 */
int s3_commit_in_bucket(ctx_t *x, obj_writer_t *w, const char *ctype, const char *um, size_t ul,
                        obj_info_t *info)
{
    pthread_rwlock_t *lk = s3_bucket_lock(x->bucket);
    obj_info_t mine;
    int rc;
    if (!info) info = &mine;
    /* Where w writes, for the undo: not always the request's key (a bucket's CORS rules are
     * an object of their own; undone at the request's key, "", they stayed, a PutBucketCors
     * answered 404 and in force). */
    char *wbucket = xstrdup(obj_put_bucket(w)), *wkey = xstrdup(obj_put_key(w));
    pthread_rwlock_rdlock(lk);
    if (!s3_bucket_current(x, x->bucket, x->ibucket)) {
        obj_put_abort(w);
        rc = S3_ERR_NO_BUCKET;
    } else {
        /* The bucket record was read afresh: its versioning as of now. */
        obj_put_set_versioning(w, s3_versioning_of(&x->bucket_rec));
        rc = obj_put_commit(w, ctype, um, ul, info);
    }
    pthread_rwlock_unlock(lk);
    /* Other nodes' DeleteBucket (the lock orders this node's only): see above. */
    if (rc == 0 && x->cfg->fenced) rc = commit_stays_at(x, wbucket, wkey, info);
    free(wbucket);
    free(wkey);
    return rc;
}

typedef struct {
    buf_t *b;
    const char *owner;
    const char *region; /* said of each bucket: the request had a parameter (S3's rule) */
    int max, count, truncated;
    char *last;
} lb_t;

static int list_bucket_cb(void *arg, const char *key, const obj_info_t *info)
{
    lb_t *l = arg;
    buf_t *b = l->b;
    char t[32];
    const char *owner = s3_bucket_owner(info);
    if (owner[0] && strcmp(owner, l->owner) != 0) return 0;
    if (l->count == l->max) {
        l->truncated = 1;
        return 1;
    }
    s3_iso8601(info->mtime_ns, t);
    buf_printf(b, "<Bucket><Name>");
    buf_xml(b, key);
    buf_printf(b, "</Name><CreationDate>%s</CreationDate>", t);
    if (l->region) buf_printf(b, "<BucketRegion>%s</BucketRegion>", l->region);
    buf_printf(b, "</Bucket>");
    l->count++;
    free(l->last);
    l->last = xstrdup(key);
    return 0;
}

/*
 * ListBuckets, paginated as S3 now does when asked: max-buckets (1..10000),
 * an opaque continuation-token (the last name returned, base64), prefix.
 */
void s3_list_buckets(ctx_t *x)
{
    int p1, p2, p3, p4;
    char *maxb = s3_qparam(x->query, "max-buckets", &p1);
    /* Every bucket here is in the node's region: another region's listing is empty. */
    char *region = s3_qparam(x->query, "bucket-region", &p4);
    char *tok = s3_qparam(x->query, "continuation-token", &p2);
    char *prefix = s3_qparam(x->query, "prefix", &p3);
    buf_t b = {0};
    lb_t l = {&b,  x->auth.access_key, p1 || p2 || p3 || p4 ? x->cfg->region : NULL, 10000, 0, 0,
              NULL};
    char after[96] = "";
    if (tok && tok[0]) {
        char *name = s3_token_decode(tok, x->auth.access_key);
        if (!name || strlen(name) >= sizeof(after)) {
            free(name);
            s3_err_msg(x, S3E_INVALID_ARGUMENT, "The continuation token provided is incorrect");
            goto out;
        }
        snprintf(after, sizeof(after), "%s", name);
        free(name);
    }
    if (maxb && num_parse_int(maxb, 1, 10000, &l.max) != 0) {
        s3_err_msg(x, S3E_INVALID_ARGUMENT, "max-buckets must be an integer from 1 to 10000.");
        goto out;
    }
    if (prefix && !s3_xml_text_ok(prefix, strlen(prefix))) {
        s3_err_msg(x, S3E_INVALID_ARGUMENT, "Listing parameters must be valid UTF-8.");
        goto out;
    }
    buf_printf(&b,
               "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListAllMyBucketsResult "
               "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Owner><ID>%s</ID>"
               "<DisplayName>%s</DisplayName></Owner><Buckets>",
               x->auth.access_key, x->auth.access_key);
    int rc = p4 && strcmp(region ? region : "", x->cfg->region) != 0
                 ? 0
                 : obj_list(x->cfg->set, BUCKETS, prefix ? prefix : NULL, after[0] ? after : NULL,
                            list_bucket_cb, &l);
    if (rc < 0) {
        free(b.p);
        s3_engine_error(x, rc);
        goto out;
    }
    buf_printf(&b, "</Buckets>");
    if (l.truncated && l.last) {
        char *enc = s3_token_encode(l.last, x->auth.access_key);
        buf_printf(&b, "<ContinuationToken>%s</ContinuationToken>", enc);
        free(enc);
    }
    if (prefix) {
        buf_printf(&b, "<Prefix>");
        buf_xml(&b, prefix);
        buf_printf(&b, "</Prefix>");
    }
    buf_printf(&b, "</ListAllMyBucketsResult>");
    s3_respond_xml(x, 200, &b);
out:
    free(l.last);
    free(maxb);
    free(region);
    free(tok);
    free(prefix);
}

static int any_object(void *arg, const char *key, const obj_info_t *info)
{
    (void)key;
    (void)info;
    *(int *)arg = 1;
    return 1;
}

static int any_version(void *arg, const char *key, const obj_info_t *info, int latest)
{
    (void)latest;
    return any_object(arg, key, info);
}

/*
 * A bucket's unfinished uploads go with it, as in S3 (which deletes a bucket
 * that has some). They are aborted before its record goes: afterwards they
 * could not be reached (they are listed and completed by the bucket's
 * incarnation, which a bucket made again under the name does not share), so
 * a crash or a failed abort then would keep their parts' space for good.
 * Before, a DeleteBucket cut short leaves the bucket, its uploads aborted.
 * One that fails to abort is said in the log and does not keep the bucket.
 */
/*
 * The bucket's uploads aborted: 0, or ERR_THROTTLED when one is a Complete that a kill may
 * have cut short and whose closer may still run (obj_mpu.c): the DeleteBucket waits for it
 * (503), or the upload would outlive its bucket.
 */
static int abort_uploads(ctx_t *x, const char *ibucket, const s3_uploads_t *u)
{
    int busy = 0;
    for (int i = 0; i < u->n; i++) {
        int rc = obj_mpu_abort(x->cfg->set, ibucket, u->keys[i], u->ids[i]);
        busy |= rc == ERR_THROTTLED;
        if (rc && rc != ERR_NOT_FOUND)
            log_warn("event=delete_bucket_upload_left bucket=%s upload=%s err=%s", x->bucket,
                     u->ids[i], err_name(rc));
    }
    return busy ? ERR_THROTTLED : 0;
}

/* CreateBucket, exclusive under the bucket's lock: one of two racing creates wins. */
/*
 * CreateBucketConfiguration, when a body is sent: well-formed, and a
 * LocationConstraint (at most one) that names this node's region ("EU" is
 * eu-west-1; none or empty is us-east-1's default). A bucket asked for in
 * another region is refused, as S3 refuses it at a region's endpoint, not
 * created here and answered 200. "us-east-1" itself is no constraint S3
 * takes (400 InvalidLocationConstraint, at any endpoint: us-east-1 is
 * asked for by sending none; clients that send it fail against S3 too). 0,
 * or -1 with the error sent.
 */
static int create_config_ok(ctx_t *x, buf_t *tags)
{
    if (x->info->content_length == 0 ||
        (x->info->content_length < 0 && !s3_hdr(x->info, "transfer-encoding")))
        return 0; /* no body: the node's region */
    size_t len;
    char *body = s3_read_small_body(x, 64u << 10, &len);
    if (!body) return -1;
    if (len == 0) {
        free(body);
        return 0;
    }
    int nomem = 0, n = 0, rc = -1;
    xml_node_t *root = xmltree_read(body, len, 4, 256, &nomem);
    free(body);
    static const char *const kids[] = {"LocationConstraint", "Tags", NULL};
    const xml_node_t *lc = root ? xmltree_kid(root, "LocationConstraint", &n) : NULL;
    if (!root || strcmp(root->name, "CreateBucketConfiguration") != 0 ||
        !xmltree_kids_ok(root, kids, NULL) || (lc && lc->kids)) {
        s3_err(x, nomem ? S3E_INTERNAL : S3E_MALFORMED_XML);
        goto out;
    }
    const char *want = lc ? xmltree_text(lc) : "";
    if (!strcmp(want, "us-east-1")) {
        s3_err(x, S3E_INVALID_LOCATION);
        goto out;
    }
    if (!strcmp(want, "EU")) want = "eu-west-1";
    if (want[0] ? strcmp(want, x->cfg->region) != 0 : strcmp(x->cfg->region, "us-east-1") != 0) {
        char msg[200];
        snprintf(msg, sizeof(msg),
                 "The %.64s location constraint is incompatible for the region specific endpoint "
                 "this request was sent to.",
                 want[0] ? want : "unspecified");
        s3_err_msg(x, S3E_ILLEGAL_LOCATION, msg);
        goto out;
    }
    /* Tags the bucket is made with (the newest SDKs send them): its tagging from the start. */
    const xml_node_t *tn = xmltree_kid(root, "Tags", NULL);
    if (tn && s3_bucket_tags_from_xml(x, tn, tags) != 0) goto out;
    rc = 0;
out:
    xmltree_free(root);
    return rc;
}

static void create_bucket(ctx_t *x)
{
    char h[400];
    if (!s3_bucket_name_ok(x->bucket)) {
        s3_err(x, S3E_INVALID_BUCKET_NAME);
        return;
    }
    buf_t tags = {0};
    if (create_config_ok(x, &tags) != 0) {
        free(tags.p);
        return;
    }
    char *acl = xmalloc(S3_ACL_STORED_MAX);
    int given;
    if (s3_acl_from_headers(x, 1, acl, &given) != 0) goto out;
    /*
     * BucketOwnerEnforced (s3.c lets no other setting through but
     * BucketOwnerPreferred): ACLs disabled, as S3 does: the bucket is its
     * owner's alone, an ACL that says otherwise is refused now and any ACL
     * set later (AccessControlListNotSupported, s3_acl.c).
     */
    const char *own = s3_hdr(x->info, "x-amz-object-ownership");
    int enforced = own && !strcmp(own, "BucketOwnerEnforced");
    if (enforced && given && strcmp(acl, "private") != 0 &&
        strcmp(acl, "bucket-owner-full-control") != 0) {
        s3_err(x, S3E_INVALID_BUCKET_ACL_OWNERSHIP);
        goto out;
    }
    uint8_t rnd[8];
    char id[17];
    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
        s3_engine_error(x, ERR_IO);
        goto out;
    }
    for (int i = 0; i < 8; i++)
        snprintf(id + 2 * i, 3, "%02x", rnd[i]);
    pthread_rwlock_t *lk = s3_bucket_lock(x->bucket);
    pthread_rwlock_wrlock(lk);
    obj_info_t bi;
    int err = 0, raced = 0;
again:
    if (bucket_read_as(x, x->bucket, &bi, 1)) {
        pthread_rwlock_unlock(lk);
        int mine = !s3_bucket_owner(&bi)[0] || !strcmp(s3_bucket_owner(&bi), x->auth.access_key);
        if (mine && !strcmp(x->cfg->region, "us-east-1")) {
            /* S3 in us-east-1, for legacy clients: the owner's create again is 200, the
             * bucket and its objects untouched. */
            snprintf(
                h, sizeof(h),
                "x-amz-request-id: %s\r\nLocation: /%s\r\nx-amz-bucket-arn: arn:aws:s3:::%s\r\n",
                x->id, x->bucket, x->bucket);
            (void)http_respond_full(x->r, 200, h, NULL, 0);
        } else {
            s3_err(x, mine ? S3E_BUCKET_OWNED : S3E_BUCKET_EXISTS);
        }
        goto out;
    }
    buf_t rec = {0};
    buf_printf(&rec, "owner%c%s%cacl%c%s%cid%c%s%c", 0, x->auth.access_key, 0, 0,
               given && !enforced ? acl : "private", 0, 0, id, 0);
    if (own) buf_printf(&rec, "ownership%c%s%c", 0, own, 0); /* (s3.c checked it) */
    if (tags.len) buf_printf(&rec, "tags%c%s%c", 0, tags.p, 0);
    obj_writer_t *w = obj_put_begin(x->cfg->set, BUCKETS, x->bucket, &err);
    /*
     * Created only if no bucket of that name exists when the record commits:
     * the bucket lock is this node's, so of creates racing through other
     * nodes the set's stores pick one (obj.h's conditional commit); the
     * others find its record and answer as for any existing bucket.
     */
    obj_cond_t none = {.none_match = 1, .if_size = -1, .if_mtime_s = -1};
    if (w) {
        obj_put_set_cond(w, &none);
        err = obj_put_commit(w, NULL, rec.p, rec.len, NULL);
    }
    free(rec.p);
    rec = (buf_t){0};
    if (err == ERR_PRECOND && !raced++) goto again;
    pthread_rwlock_unlock(lk);
    if (err) {
        s3_engine_error(x, err);
        goto out;
    }
    /* With its ARN, as S3 answers now (CreateBucketOutput.BucketArn). */
    snprintf(h, sizeof(h),
             "x-amz-request-id: %s\r\nLocation: /%s\r\nx-amz-bucket-arn: arn:aws:s3:::%s\r\n",
             x->id, x->bucket, x->bucket);
    (void)http_respond_full(x->r, 200, h, NULL, 0);
out:
    free(acl);
    free(tags.p);
}

/*
 * DeleteBucket, exclusive under the bucket's lock: only a bucket proven
 * empty (no objects, no versions, no delete markers; every store's answer
 * read) goes. Its unfinished uploads do not keep it, as in S3: they are
 * aborted on the way (abort_uploads).
 */
static void delete_bucket(ctx_t *x)
{
    char h[128];
    pthread_rwlock_t *lk = s3_bucket_lock(x->bucket);
    pthread_rwlock_wrlock(lk);
    int found = 0, rc = S3_ERR_NO_BUCKET;
    s3_uploads_t ups = {0};
    if (s3_bucket_current(x, x->bucket, x->ibucket)) {
        /* Marked before it is listed: commits through other nodes wait for the outcome. */
        uint64_t t0 = clock_wall_ns();
        char mark[24];
        snprintf(mark, sizeof(mark), "%llu", (unsigned long long)t0);
        rc = obj_update_umeta(x->cfg->set, BUCKETS, x->bucket, set_mark, mark);
        if (rc == ERR_NOT_FOUND) rc = S3_ERR_NO_BUCKET;
        /* Noncurrent versions and delete markers count: S3 refuses those buckets too. */
        if (rc >= 0)
            rc = obj_list_versions(x->cfg->set, x->ibucket, "", NULL, NULL, any_version, &found);
        if (rc >= 0 && !found)
            rc = obj_mpu_list_uploads_any(x->cfg->set, x->ibucket, s3_uploads_collect, &ups);
        if (rc >= 0 && !found) rc = abort_uploads(x, x->ibucket, &ups);
        /* Too slow: a commit waiting on the mark may have taken it for a dead one's. */
        if (rc >= 0 && !found && clock_wall_ns() - t0 > DELETE_MARK_NS / 2) rc = ERR_THROTTLED;
        if (rc != S3_ERR_NO_BUCKET && (rc < 0 || found) &&
            obj_update_umeta(x->cfg->set, BUCKETS, x->bucket, set_mark, NULL) != 0)
            log_warn("event=delete_bucket_unmark_failed bucket=%s", x->bucket); /* expires */
        if (rc >= 0 && !found) rc = obj_delete(x->cfg->set, BUCKETS, x->bucket);
        if (rc >= 0 && !found) s3_cors_forget(x);
        if (rc >= 0 && !found) s3_lifecycle_forget(x);
        if (rc >= 0 && !found) s3_gone_note(x, x->ibucket);
    }
    pthread_rwlock_unlock(lk);
    s3_uploads_free(&ups);
    if (found) {
        s3_err(x, S3E_BUCKET_NOT_EMPTY);
    } else if (rc < 0) {
        log_error("event=delete_bucket_failed bucket=%s err=%s", x->bucket, err_name(rc));
        s3_engine_error(x, rc);
    } else {
        snprintf(h, sizeof(h), "x-amz-request-id: %s\r\n", x->id);
        (void)http_respond(x->r, 204, h, 0);
    }
}

/* HeadBucket's 200: with x-amz-bucket-region, which S3 always sends and clients read to find
 * a bucket's region. */
void s3_head_bucket_ok(ctx_t *x)
{
    char h[192];
    snprintf(h, sizeof(h), "x-amz-request-id: %s\r\nx-amz-bucket-region: %.64s\r\n", x->id,
             x->cfg->region ? x->cfg->region : "us-east-1");
    (void)http_respond(x->r, 200, h, 0);
}

void s3_bucket_op(ctx_t *x)
{
    const char *m = x->info->method;
    char h[256];
    int present;
    int tagging, cors, versioning, lifecycle;
    char *tq = s3_qparam(x->query, "tagging", &tagging);
    free(tq);
    tq = s3_qparam(x->query, "cors", &cors);
    free(tq);
    tq = s3_qparam(x->query, "versioning", &versioning);
    free(tq);
    tq = s3_qparam(x->query, "lifecycle", &lifecycle);
    free(tq);
    if (tagging || cors || versioning || lifecycle) {
        if (s3_bucket_access(x, x->bucket, x->ibucket) != 0) return;
        if (tagging)
            s3_tagging_op(x, 1);
        else if (cors)
            s3_cors_op(x);
        else if (versioning)
            s3_versioning_op(x);
        else
            s3_lifecycle_op(x);
        return;
    }
    char *acl_q = s3_qparam(x->query, "acl", &present);
    free(acl_q);
    if (strcmp(m, "PUT") == 0 && !present) {
        if (!s3_stray_subresource(x, NULL) && !s3_unknown_param(x, NULL)) create_bucket(x);
        return;
    }
    if (s3_bucket_access(x, x->bucket, x->ibucket) != 0) return;
    snprintf(h, sizeof(h), "x-amz-request-id: %s\r\n", x->id);
    if (strcmp(m, "PUT") == 0) {
        char *v = s3_qparam(x->query, "acl", &present);
        free(v);
        if (present) {
            /* A copy: s3_put_acl rereads the record (x->bucket_rec) under the bucket's lock. */
            const char *o = s3_bucket_owner(&x->bucket_rec);
            char *owner = xstrdup(o[0] ? o : x->auth.access_key);
            s3_put_acl(x, BUCKETS, x->bucket, "acl", owner);
            free(owner);
        } else
            s3_err(x, S3E_METHOD_NOT_ALLOWED);
    } else if (strcmp(m, "HEAD") == 0) {
        s3_head_bucket_ok(x);
    } else if (strcmp(m, "DELETE") == 0) {
        if (!s3_stray_subresource(x, NULL) && !s3_unknown_param(x, NULL))
            delete_bucket(x); /* DELETE ?acl is no DeleteBucket */
    } else if (strcmp(m, "POST") == 0) {
        char *v = s3_qparam(x->query, "delete", &present);
        free(v);
        if (present)
            s3_delete_objects(x);
        else
            s3_err(x, S3E_METHOD_NOT_ALLOWED);
    } else if (strcmp(m, "GET") == 0) {
        char *v = s3_qparam(x->query, "versions", &present);
        free(v);
        if (present) {
            s3_list_versions(x);
            return;
        }
        v = s3_qparam(x->query, "uploads", &present);
        free(v);
        if (present) {
            s3_list_uploads(x);
            return;
        }
        v = s3_qparam(x->query, "ownershipControls", &present);
        free(v);
        if (present) {
            obj_info_t bi;
            const char *o =
                s3_bucket_exists(x, x->bucket, &bi) ? s3_umeta_get(&bi, "ownership") : "";
            if (!o[0]) {
                /* A bucket created without the setting (its writers own what they write, as
                 * ObjectWriter says): S3's answer for a bucket with no controls set. */
                s3_err(x, S3E_NO_OWNERSHIP_CONTROLS);
            } else {
                buf_t b = {0};
                buf_printf(&b,
                           "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<OwnershipControls "
                           "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Rule>"
                           "<ObjectOwnership>%s</ObjectOwnership></Rule></OwnershipControls>",
                           o);
                s3_respond_xml(x, 200, &b);
            }
            return;
        }
        v = s3_qparam(x->query, "acl", &present);
        free(v);
        if (present) {
            obj_info_t bi;
            if (s3_bucket_exists(x, x->bucket, &bi)) {
                const char *o = s3_bucket_owner(&bi)[0] ? s3_bucket_owner(&bi) : x->auth.access_key;
                s3_respond_acl(x, o, o, s3_umeta_get(&bi, "acl"));
            }
            return;
        }
        v = s3_qparam(x->query, "location", &present);
        free(v);
        if (present) {
            buf_t b = {0};
            buf_printf(&b,
                       "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<LocationConstraint "
                       "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">%s</LocationConstraint>",
                       strcmp(x->cfg->region, "us-east-1") == 0 ? "" : x->cfg->region);
            s3_respond_xml(x, 200, &b);
            return;
        }
        s3_list_objects(x);
    } else {
        s3_err(x, S3E_METHOD_NOT_ALLOWED);
    }
}
