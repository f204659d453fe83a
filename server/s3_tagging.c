/*
 * s3_tagging: object and bucket tags. Put/Get/DeleteObjectTagging,
 * Put/Get/DeleteBucketTagging, and the x-amz-tagging header of PUT, Copy and
 * CreateMultipartUpload. Tags are kept as one metadata entry in canonical
 * form ("k1=v1&k2=v2", URL-encoded, in the order given), under TAG_META in
 * an object's head and under "tags" in a bucket's record; rewritten in place
 * under the key's lock, like ACLs. S3's limits: 10 tags on an object, 50 on
 * a bucket, keys 1..128 and values 0..256 characters, no duplicate keys, no
 * "aws:" keys (400 InvalidTag).
 */
#include "server/s3_int.h"

#include "s3/xmltree.h"

#define OBJECT_TAGS_MAX 10
#define BUCKET_TAGS_MAX 50

/* Characters (code points) in valid UTF-8 text. */
static size_t chars(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

typedef struct {
    char **keys, **values;
    int n;
} tagset_t;

static void tagset_free(tagset_t *t)
{
    for (int i = 0; i < t->n; i++) {
        free(t->keys[i]);
        free(t->values[i]);
    }
    free(t->keys);
    free(t->values);
    *t = (tagset_t){0};
}

static void tagset_add(tagset_t *t, char *k, char *v)
{
    t->keys = xrealloc(t->keys, (size_t)(t->n + 1) * sizeof(char *));
    t->values = xrealloc(t->values, (size_t)(t->n + 1) * sizeof(char *));
    t->keys[t->n] = k;
    t->values[t->n] = v;
    t->n++;
}

/*
 * The canonical form escapes only what would break it ('%', '&', '=', '+',
 * control bytes): UTF-8 stays as it is, so ten tags of S3's longest fit the
 * head's metadata room (percent-encoding every byte would triple them).
 */
static void escape(buf_t *out, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c == 0x7f || c == '%' || c == '&' || c == '=' || c == '+')
            buf_printf(out, "%%%02X", c);
        else
            buf_printf(out, "%c", c);
    }
}

void s3_err_tags_too_large(ctx_t *x, int rc, int max)
{
    if (rc == ERR_RANGE)
        s3_err_msg(x, S3E_INVALID_TAG, "A TagKey or TagValue is longer than S3 allows.");
    else if (max == BUCKET_TAGS_MAX)
        s3_err_msg(x, S3E_BAD_REQUEST, "Bucket tag count cannot be greater than 50");
    else
        s3_err_msg(x, S3E_BAD_REQUEST, "Object tags cannot be greater than 10");
}

/*
 * S3's tag alphabet: letters, numbers and spaces representable in UTF-8 and
 * + - = . _ : / @ (its pattern: [\p{L}\p{Z}\p{N}_.:/=+\-@]*). ASCII is
 * checked exactly; a character beyond ASCII is taken (telling its Unicode
 * category would need the tables, and most such characters are letters).
 */
static int tag_chars_ok(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x80 && !(*p >= 'a' && *p <= 'z') && !(*p >= 'A' && *p <= 'Z') &&
            !(*p >= '0' && *p <= '9') && !strchr(" +-=._:/@", *p))
            return 0;
    return 1;
}

/* Check S3's rules and write the canonical form into out; -1 with InvalidTag sent. */
static int tagset_canon(ctx_t *x, const tagset_t *t, int max, buf_t *out)
{
    const char *why = NULL;
    for (int i = 0; i < t->n && !why; i++) {
        const char *k = t->keys[i], *v = t->values[i];
        if (!s3_xml_text_ok(k, strlen(k)) || !s3_xml_text_ok(v, strlen(v)))
            why = "Tags must be UTF-8 text.";
        else if (!k[0] || chars(k) > 128 || !tag_chars_ok(k))
            why = "The TagKey you have provided is invalid";
        else if (chars(v) > 256 || !tag_chars_ok(v))
            why = "The TagValue you have provided is invalid";
        else if (strncasecmp(k, "aws:", 4) == 0)
            why = "Your TagKey cannot be prefixed with aws:";
        for (int j = 0; j < i && !why; j++)
            if (strcmp(t->keys[j], k) == 0) why = "Cannot provide multiple Tags with the same key";
    }
    if (t->n > max) {
        s3_err_tags_too_large(x, ERR_TOO_LARGE, max);
        return -1;
    }
    if (why) {
        s3_err_msg(x, S3E_INVALID_TAG, why);
        return -1;
    }
    for (int i = 0; i < t->n; i++) {
        if (i) buf_printf(out, "&");
        escape(out, t->keys[i]);
        buf_printf(out, "=");
        escape(out, t->values[i]);
    }
    return 0;
}

/* A canonical (or x-amz-tagging) "k=v&..." string into t; -1 when not decodable. */
static int tagset_parse(const char *q, tagset_t *t)
{
    for (const char *p = q; p && *p;) {
        const char *e = strchr(p, '&'), *end = e ? e : p + strlen(p);
        if (end == p) { /* "&&": nothing between (S3 takes "&" for no tags) */
            p = e ? e + 1 : NULL;
            continue;
        }
        const char *eq = memchr(p, '=', (size_t)(end - p));
        const char *ke = eq ? eq : end;
        char *k = s3_pdecode(p, (size_t)(ke - p), 1);
        char *v = eq ? s3_pdecode(eq + 1, (size_t)(end - eq - 1), 1) : xstrdup("");
        if (!k || !v) {
            free(k);
            free(v);
            tagset_free(t);
            return -1;
        }
        tagset_add(t, k, v);
        p = e ? e + 1 : NULL;
    }
    return 0;
}

int s3_tags_from_query(ctx_t *x, const char *q, buf_t *out)
{
    tagset_t t = {0};
    /* Not a query string of distinct, named tags: InvalidArgument, as S3 (InvalidTag is for
     * tags that are well-formed but break its rules, tagset_canon). */
    int bad = tagset_parse(q, &t) != 0;
    for (int i = 0; i < t.n && !bad; i++) {
        bad = !t.keys[i][0];
        for (int j = 0; j < i && !bad; j++)
            bad = strcmp(t.keys[j], t.keys[i]) == 0;
    }
    if (bad) {
        tagset_free(&t);
        s3_err_msg(x, S3E_INVALID_ARGUMENT,
                   "The header 'x-amz-tagging' shall be encoded as UTF-8 then URLEncoded URL query "
                   "parameters without tag name duplicates.");
        return -1;
    }
    int rc = tagset_canon(x, &t, OBJECT_TAGS_MAX, out);
    tagset_free(&t);
    return rc;
}

int s3_tag_count(const char *canon)
{
    if (!canon || !canon[0]) return 0;
    int n = 1;
    for (; *canon; canon++)
        n += *canon == '&';
    return n;
}

/* The name\0value\0 pairs in um with name set to value (NULL: removed). */
void s3_pairs_set(buf_t *um, const char *name, const char *value)
{
    buf_t out = {0};
    for (size_t p = 0; p < um->len;) {
        const char *n = um->p + p, *v = n + strlen(n) + 1;
        if (strcmp(n, name) != 0) buf_printf(&out, "%s%c%s%c", n, 0, v, 0);
        p = (size_t)(v - um->p) + strlen(v) + 1;
    }
    if (value) buf_printf(&out, "%s%c%s%c", name, 0, value, 0);
    free(um->p);
    *um = out;
}

/* obj_umeta_fn: the current version's pairs with one entry set or removed. */
typedef struct {
    const char *name, *value;
    char vid[OBJ_VID_LEN + 4]; /* the version rewritten ("": the null one) */
    ctx_t *x; /* an object's tags: the request's, whose requester must own the version */
} entry_t;

static int entry_set(void *arg, const obj_info_t *cur, char *out, size_t *out_len)
{
    entry_t *e = arg;
    /* Under the key's lock, on the very record rewritten (a version written since the
     * request was let in is not the writer's to tag). */
    if (e->x && !s3_object_mine(e->x, cur, s3_request_bucket_owner(e->x))) return ERR_DENIED;
    snprintf(e->vid, sizeof(e->vid), "%s", cur->vid);
    buf_t um = {xmalloc(cur->umeta_len + 1), cur->umeta_len, cur->umeta_len + 1};
    memcpy(um.p, cur->umeta, cur->umeta_len);
    s3_pairs_set(&um, e->name, e->value);
    int rc = um.len > sizeof(cur->umeta) ? ERR_TOO_LARGE : 0;
    if (!rc) {
        if (um.len) memcpy(out, um.p, um.len);
        *out_len = um.len;
    }
    free(um.p);
    return rc;
}

/*
 * Set (value) or remove (NULL) the tag entry of an object or of the bucket
 * record, under the bucket's lock against the same incarnation (exclusive
 * for the bucket record), as ACL changes are.
 */
static int set_entry(ctx_t *x, int whole_bucket, const char *name, const char *value)
{
    pthread_rwlock_t *lk = s3_bucket_lock(x->bucket);
    int rc;
    if (whole_bucket)
        pthread_rwlock_wrlock(lk);
    else
        pthread_rwlock_rdlock(lk);
    entry_t e = {name, value, "", whole_bucket ? NULL : x};
    int marker = 0;
    if (!s3_bucket_current(x, x->bucket, x->ibucket))
        rc = S3_ERR_NO_BUCKET;
    else if (whole_bucket)
        rc = obj_update_umeta(x->cfg->set, BUCKETS, x->bucket, entry_set, &e);
    else
        rc = obj_update_umeta_version(x->cfg->set, x->ibucket, x->key, x->vid, entry_set, &e,
                                      &marker);
    pthread_rwlock_unlock(lk);
    if (rc == ERR_NOT_FOUND && whole_bucket) rc = S3_ERR_NO_BUCKET;
    if (rc == ERR_NOT_FOUND && marker && x->vid) rc = ERR_MARKER_VERSION;
    /*
     * The version whose tags these are, also when the request named none (S3 answers with
     * the current version's id; "null" once the bucket has had versioning; none before).
     */
    if (rc == 0 && !whole_bucket && !x->vid &&
        (e.vid[0] || s3_bucket_versioning(x) != OBJ_UNVERSIONED)) {
        char h[64];
        snprintf(h, sizeof(h), "x-amz-version-id: %s\r\n", e.vid[0] ? e.vid : "null");
        http_add_headers(x->r, h);
    }
    return rc;
}

static void respond_tagset(ctx_t *x, const char *canon)
{
    tagset_t t = {0};
    buf_t b = {0};
    if (tagset_parse(canon, &t) != 0) {
        s3_engine_error(x, ERR_CORRUPT);
        return;
    }
    buf_printf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Tagging "
                   "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><TagSet>");
    for (int i = 0; i < t.n; i++) {
        buf_printf(&b, "<Tag><Key>");
        buf_xml(&b, t.keys[i]);
        buf_printf(&b, "</Key><Value>");
        buf_xml(&b, t.values[i]);
        buf_printf(&b, "</Value></Tag>");
    }
    buf_printf(&b, "</TagSet></Tagging>");
    tagset_free(&t);
    s3_respond_xml(x, 200, &b);
}

/* PUT ?tagging: a TagSet body into canonical form; -1 with the error sent. */
static int tagset_from_body(ctx_t *x, int max, buf_t *out)
{
    size_t len;
    char *body = s3_read_small_body(x, 256u << 10, &len);
    if (!body) return -1;
    s3_xml_tag_t *tags = NULL;
    int n = 0, rc = s3_xml_tagging(body, len, &tags, &n);
    free(body);
    if (rc == ERR_TOO_LARGE || rc == ERR_RANGE) {
        s3_err_tags_too_large(x, rc, max);
        return -1;
    }
    if (rc) {
        s3_err(x, S3E_MALFORMED_XML);
        return -1;
    }
    tagset_t t = {0};
    for (int i = 0; i < n; i++)
        tagset_add(&t, xstrdup(tags[i].key), xstrdup(tags[i].value));
    free(tags);
    rc = tagset_canon(x, &t, max, out);
    tagset_free(&t);
    return rc;
}

int s3_bucket_tags_from_xml(ctx_t *x, const xml_node_t *tags, buf_t *out)
{
    static const char *const tag[] = {"Tag", NULL}, *const kv[] = {"Key", "Value", NULL};
    tagset_t t = {0};
    int bad = !xmltree_kids_ok(tags, tag, tag);
    for (const xml_node_t *k = tags->kids; k && !bad; k = k->next) {
        const xml_node_t *key = xmltree_kid(k, "Key", NULL), *val = xmltree_kid(k, "Value", NULL);
        bad = !xmltree_kids_ok(k, kv, NULL) || !key || !val || key->kids || val->kids;
        if (!bad) tagset_add(&t, xstrdup(xmltree_text(key)), xstrdup(xmltree_text(val)));
    }
    if (bad) {
        tagset_free(&t);
        s3_err(x, S3E_MALFORMED_XML);
        return -1;
    }
    int rc = tagset_canon(x, &t, BUCKET_TAGS_MAX, out);
    tagset_free(&t);
    return rc;
}

void s3_tagging_op(ctx_t *x, int bucket_level)
{
    const char *m = x->info->method;
    const char *name = bucket_level ? "tags" : TAG_META;
    char h[192];
    int rc;
    /* The version whose tags these are, when the request named it (S3 answers with it). */
    if (!bucket_level && x->vid)
        snprintf(h, sizeof(h), "x-amz-request-id: %s\r\nx-amz-version-id: %.40s\r\n", x->id,
                 x->vid);
    else
        snprintf(h, sizeof(h), "x-amz-request-id: %s\r\n", x->id);
    if (strcmp(m, "GET") == 0) {
        obj_info_t info;
        rc = bucket_level ? (s3_bucket_exists(x, x->bucket, &info) ? 0 : S3_ERR_NO_BUCKET)
                          : obj_stat_version(x->cfg->set, x->ibucket, x->key, x->vid, &info);
        if (rc == 0 && !bucket_level && info.deleted) rc = ERR_NOT_FOUND;
        if (rc) {
            if (bucket_level || !s3_version_missing(x, rc, &info)) s3_engine_error(x, rc);
            return;
        }
        if (!bucket_level && !s3_object_mine(x, &info, s3_request_bucket_owner(x))) {
            s3_err(x, S3E_ACCESS_DENIED);
            return;
        }
        if (!bucket_level) s3_version_headers(x, &info);
        const char *canon = s3_umeta_get(&info, name);
        if (bucket_level && !canon[0]) {
            s3_err(x, S3E_NO_SUCH_TAG_SET);
            return;
        }
        respond_tagset(x, canon);
    } else if (strcmp(m, "PUT") == 0) {
        buf_t canon = {0};
        if (tagset_from_body(x, bucket_level ? BUCKET_TAGS_MAX : OBJECT_TAGS_MAX, &canon) != 0)
            return;
        rc = set_entry(x, bucket_level, name, canon.len ? canon.p : NULL);
        free(canon.p);
        if (rc == ERR_MARKER_VERSION)
            s3_err(x, S3E_METHOD_NOT_ALLOWED);
        else if (rc == ERR_DENIED)
            s3_err(x, S3E_ACCESS_DENIED);
        else if (rc == ERR_NOT_FOUND && x->vid && !bucket_level)
            s3_err(x, S3E_NO_SUCH_VERSION);
        else if (rc == ERR_TOO_LARGE)
            s3_err_msg(x, S3E_INVALID_TAG, "The tag set is larger than this object can keep.");
        else if (rc)
            s3_engine_error(x, rc);
        else
            (void)http_respond(x->r, bucket_level ? 204 : 200, h, 0);
    } else if (strcmp(m, "DELETE") == 0) {
        if ((rc = set_entry(x, bucket_level, name, NULL)) == ERR_MARKER_VERSION)
            s3_err(x, S3E_METHOD_NOT_ALLOWED);
        else if (rc == ERR_DENIED)
            s3_err(x, S3E_ACCESS_DENIED);
        else if (rc == ERR_NOT_FOUND && x->vid && !bucket_level)
            s3_err(x, S3E_NO_SUCH_VERSION);
        else if (rc)
            s3_engine_error(x, rc);
        else
            (void)http_respond(x->r, 204, h, 0);
    } else {
        s3_err(x, S3E_METHOD_NOT_ALLOWED);
    }
}
