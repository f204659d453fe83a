/*
 * s3: the door of the S3 API: the http handler of warmlaked. Each request
 * gets its id, is authenticated (s3_auth), named (path or virtual-host
 * style, keys checked) and routed to its handler family by method and
 * sub-resource; the node's own /_warmlake/stats lives here too.
 */

#include "server/s3.h"

#include "server/s3_int.h"

#include <ctype.h>
#include <openssl/evp.h>

#include "common/md5.h"
#include "proto/net.h"

/*
 * GET /_warmlake/stats (any authenticated user; "_" keeps the name out of
 * the bucket namespace): the engine counters of every drive and the node's
 * totals as JSON, so benchmarks and operators read write amplification,
 * space and group commit (records per flush) without stopping the node.
 */
/*
 * POST /_warmlake/heal?bucket=NAME (the bucket's owner): heal every current
 * object of the bucket (obj_heal: heads and blocks its stores miss, rebuilt
 * from the others), and the bucket's own record; answers the counts as
 * JSON. What a store still failing misses is counted and left for another
 * pass.
 */
static void node_heal(ctx_t *x)
{
    int present;
    char *name = s3_qparam(x->query, "bucket", &present);
    char iname[INAME_MAX];
    if (!name || !name[0]) {
        s3_err_msg(x, S3E_INVALID_ARGUMENT, "Name the bucket to heal: ?bucket=NAME.");
        free(name);
        return;
    }
    if (strlen(name) >= sizeof(x->bucket) || s3_bucket_access(x, name, iname) != 0) {
        if (strlen(name) >= sizeof(x->bucket)) s3_err(x, S3E_NO_SUCH_BUCKET);
        free(name);
        return;
    }
    obj_heal_report_t rep = {0};
    int rc = s3_heal_bucket(x->cfg, name, iname, &rep, NULL, NULL);
    free(name);
    if (rc) {
        s3_engine_error(x, rc);
        return;
    }
    log_info("event=heal bucket=%s objects=%u heads_fixed=%u blocks_fixed=%u failed=%u", x->bucket,
             rep.objects, rep.heads_fixed, rep.blocks_fixed, rep.failed);
    buf_t b = {0};
    buf_printf(&b,
               "{\"objects\":%u,\"heads_fixed\":%u,\"blocks_checked\":%u,\"blocks_fixed\":%u,"
               "\"failed\":%u}\n",
               rep.objects, rep.heads_fixed, rep.blocks_checked, rep.blocks_fixed, rep.failed);
    char h[160];
    snprintf(h, sizeof(h), "x-amz-request-id: %s\r\nContent-Type: application/json\r\n", x->id);
    (void)http_respond_full(x->r, 200, h, b.p, b.len);
    free(b.p);
}

/* ,"heal":{...} (the queue), ,"scrub":{...} (the scanner, when it runs) and ,"drain":{...}
 * (the mover of draining pools, on a cluster member) into b. */
static void heal_json(const s3_cfg_t *cfg, buf_t *b)
{
    obj_heal_stats_t hs;
    obj_heal_stats(cfg->set, &hs);
    buf_printf(b,
               ",\"heal\":{\"pending\":%llu,\"queued\":%llu,\"healed\":%llu,\"retries\":%llu,"
               "\"dropped\":%llu,\"heads_fixed\":%llu,\"blocks_fixed\":%llu,"
               "\"drops_pending\":%llu,\"drops_done\":%llu,\"drops_lost\":%llu}",
               (unsigned long long)hs.pending, (unsigned long long)hs.queued,
               (unsigned long long)hs.healed, (unsigned long long)hs.retries,
               (unsigned long long)hs.dropped, (unsigned long long)hs.heads_fixed,
               (unsigned long long)hs.blocks_fixed, (unsigned long long)hs.drops_pending,
               (unsigned long long)hs.drops_done, (unsigned long long)hs.drops_lost);
    if (cfg->scrub) {
        s3_scrub_stats_t ss;
        s3_scrub_stats(cfg->scrub, &ss);
        buf_printf(
            b,
            ",\"scrub\":{\"passes\":%llu,\"running\":%d,\"waiting\":%d,\"objects\":%llu,"
            "\"bytes\":%llu,\"total_est\":%llu,\"mb_s\":%.1f,\"eta_s\":%lld,"
            "\"last_pass_s\":%.1f,\"heads_fixed\":%llu,\"blocks_fixed\":%llu,\"failed\":%llu,"
            "\"reap_candidates\":%llu,\"reaped_groups\":%llu,\"reaped_records\":%llu,"
            "\"reaped_bytes\":%llu,\"reaped_parts\":%llu,\"settled_uploads\":%llu,"
            "\"purged_buckets\":%llu,\"purged_records\":%llu,\"purged_bytes\":%llu}",
            (unsigned long long)ss.passes, ss.running, ss.waiting, (unsigned long long)ss.objects,
            (unsigned long long)ss.bytes, (unsigned long long)ss.total_est, ss.mb_s,
            (long long)ss.eta_s, ss.last_pass_s, (unsigned long long)ss.heads_fixed,
            (unsigned long long)ss.blocks_fixed, (unsigned long long)ss.failed,
            (unsigned long long)ss.reap_candidates, (unsigned long long)ss.reaped_groups,
            (unsigned long long)ss.reaped_records, (unsigned long long)ss.reaped_bytes,
            (unsigned long long)ss.reaped_parts, (unsigned long long)ss.settled_uploads,
            (unsigned long long)ss.purged_buckets, (unsigned long long)ss.purged_records,
            (unsigned long long)ss.purged_bytes);
    }
    if (cfg->drain) {
        s3_drain_stats_t ds;
        s3_drain_stats(cfg->drain, &ds);
        buf_printf(b,
                   ",\"drain\":{\"draining\":%d,\"running\":%d,\"waiting\":%d,\"passes\":%llu,"
                   "\"keys\":%llu,\"versions\":%llu,\"bytes\":%llu,\"busy\":%llu,"
                   "\"failed\":%llu,\"left\":%llu,\"uploads_left\":%llu,\"done\":%d,"
                   "\"mb_s\":%.1f,\"last_pass_s\":%.1f}",
                   ds.draining, ds.running, ds.waiting, (unsigned long long)ds.passes,
                   (unsigned long long)ds.keys, (unsigned long long)ds.versions,
                   (unsigned long long)ds.bytes, (unsigned long long)ds.busy,
                   (unsigned long long)ds.failed, (unsigned long long)ds.left,
                   (unsigned long long)ds.uploads_left, ds.done, ds.mb_s, ds.last_pass_s);
    }
}

/* The node's memory by owner (server/node_memory.h): what grows with use, and its bounds. */
static void memory_json(const s3_cfg_t *cfg, buf_t *b)
{
    node_memory_t m = {0};
    node_memory_process(&m);
    if (cfg->memory) cfg->memory(cfg->memory_arg, &m);
    bufpool_stats_t bs;
    bufpool_stats(obj_set_buffers(cfg->set), &bs);
    m.stripe_buffers_kept = bs.kept_bytes;
    m.stripe_buffers_out = bs.out_bytes;
    buf_printf(b,
               ",\"memory\":{\"rss\":%llu,\"malloc_in_use\":%llu,\"malloc_held\":%llu,"
               "\"index_memtables\":%llu,\"index_readers\":%llu,\"index_cache\":%llu,"
               "\"index_cache_capacity\":%llu,\"drive_buffers\":%llu,\"writer_buffers\":%llu,"
               "\"stripe_buffers_kept\":%llu,\"stripe_buffers_out\":%llu}",
               (unsigned long long)m.rss, (unsigned long long)m.malloc_in_use,
               (unsigned long long)m.malloc_held, (unsigned long long)m.index_memtables,
               (unsigned long long)m.index_readers, (unsigned long long)m.index_cache,
               (unsigned long long)m.index_cache_capacity, (unsigned long long)m.drive_buffers,
               (unsigned long long)m.writer_buffers, (unsigned long long)m.stripe_buffers_kept,
               (unsigned long long)m.stripe_buffers_out);
}

char *s3_node_state(void *cfg)
{
    buf_t b = {0};
    buf_printf(&b, "{\"format\":1");
    heal_json(cfg, &b);
    memory_json(cfg, &b);
    buf_printf(&b, "}");
    return b.p;
}

static void node_stats(ctx_t *x)
{
    buf_t b = {0};
    drive_stats_t t = {0};
    int n = obj_set_width(x->cfg->set);
    buf_printf(&b, "{\"drives\":[");
    static const char *const health[] = {"up", "suspect", "down", "failed"};
    int first = 1;
    for (int i = 0; i < n; i++) {
        drive_stats_t st;
        int h = obj_set_health(x->cfg->set, i);
        if (h != SHARD_UP) {
            /* Its node does not answer now: say so rather than wait for it. */
            buf_printf(&b, "%s{\"index\":%d,\"health\":\"%s\"}", first ? "" : ",", i,
                       health[h == SHARD_SUSPECT  ? 1
                              : h == SHARD_FAILED ? 3
                                                  : 2]);
            first = 0;
            continue;
        }
        if (obj_set_stats(x->cfg->set, i, &st) != 0) continue;
        buf_printf(
            &b,
            "%s{\"index\":%d,\"health\":\"up\",\"user_bytes\":%llu,\"host_bytes\":%llu,\"relocated_"
            "bytes\":%llu,"
            "\"padding_bytes\":%llu,\"index_bytes\":%llu,\"live_bytes\":%llu,\"used_bytes\":%llu,"
            "\"written_bytes\":%llu,"
            "\"capacity\":%llu,\"write_amp\":%.4f,\"compactions\":%llu,\"throttled\":%llu,"
            "\"budget_rate\":%.0f,\"projected_years\":%.2f,\"reads_direct\":%llu,"
            "\"reads_copied\":%llu,\"readonly\":%d,\"refilling\":%d,\"flushes\":%llu,\"flush_"
            "records\":%llu,"
            "\"flush_max_records\":%llu,\"commit_gathers\":%llu,\"unsynced_commits\":%llu,"
            "\"uncopied_bytes\":%llu,\"segments_released\":%llu,"
            "\"segments_recycled\":%llu,\"segments_pooled\":%u}",
            first ? "" : ",", i, (unsigned long long)st.user_bytes,
            (unsigned long long)st.host_bytes, (unsigned long long)st.relocated_bytes,
            (unsigned long long)st.padding_bytes, (unsigned long long)st.index_bytes,
            (unsigned long long)st.live_bytes, (unsigned long long)st.used_bytes,
            (unsigned long long)st.written_bytes, (unsigned long long)st.capacity, st.write_amp,
            (unsigned long long)st.compactions, (unsigned long long)st.throttled, st.budget_rate,
            st.projected_years, (unsigned long long)st.reads_direct,
            (unsigned long long)st.reads_copied, st.readonly, obj_set_refilling(x->cfg->set, i),
            (unsigned long long)st.flushes, (unsigned long long)st.flush_records,
            (unsigned long long)st.flush_max_records, (unsigned long long)st.commit_gathers,
            (unsigned long long)st.unsynced_commits, (unsigned long long)st.uncopied_bytes,
            (unsigned long long)st.segments_released, (unsigned long long)st.segments_recycled,
            st.segments_pooled);
        first = 0;
        t.user_bytes += st.user_bytes;
        t.host_bytes += st.host_bytes;
        t.relocated_bytes += st.relocated_bytes;
        t.live_bytes += st.live_bytes;
        t.capacity += st.capacity;
        t.throttled += st.throttled;
    }
    buf_printf(&b,
               "],\"total\":{\"user_bytes\":%llu,\"host_bytes\":%llu,\"relocated_bytes\":%llu,"
               "\"live_bytes\":%llu,\"capacity\":%llu,\"throttled\":%llu,\"write_amp\":%.4f}",
               (unsigned long long)t.user_bytes, (unsigned long long)t.host_bytes,
               (unsigned long long)t.relocated_bytes, (unsigned long long)t.live_bytes,
               (unsigned long long)t.capacity, (unsigned long long)t.throttled,
               t.user_bytes ? (double)t.host_bytes / (double)t.user_bytes : 0.0);
    heal_json(x->cfg, &b);
    memory_json(x->cfg, &b);
    /* The ETag's MD5 (common/md5.h): how wide its vector rounds ran. */
    md5_stats_t ms;
    md5_stats(&ms);
    buf_printf(&b,
               ",\"md5\":{\"lanes\":%d,\"posts\":%llu,\"rounds\":%llu,\"lane_blocks\":%llu,"
               "\"round_blocks\":%llu,\"scalar_blocks\":%llu,\"short_blocks\":%llu}",
               md5_lanes(), (unsigned long long)ms.posts, (unsigned long long)ms.rounds,
               (unsigned long long)ms.lane_blocks, (unsigned long long)ms.round_blocks,
               (unsigned long long)ms.scalar_blocks, (unsigned long long)ms.short_blocks);
    if (x->cfg->net) {
        proto_net_stats_t ps;
        proto_net_stats(x->cfg->net, &ps);
        buf_printf(&b,
                   ",\"proto\":{\"calls\":%llu,\"call_errors\":%llu,\"timeouts\":%llu,"
                   "\"probes\":%llu,\"probe_timeouts\":%llu,\"refused\":%llu,"
                   "\"hedged_reads\":%llu,\"hedged_writes\":%llu}",
                   (unsigned long long)ps.calls, (unsigned long long)ps.call_errors,
                   (unsigned long long)ps.timeouts, (unsigned long long)ps.probes,
                   (unsigned long long)ps.probe_timeouts, (unsigned long long)ps.refused,
                   (unsigned long long)obj_set_hedged(x->cfg->set),
                   (unsigned long long)obj_set_hedged_writes(x->cfg->set));
        proto_peer_info_t pi[64];
        int np = proto_net_peers(x->cfg->net, pi, 64);
        buf_printf(&b, ",\"peers\":[");
        for (int i = 0; i < np; i++)
            buf_printf(&b, "%s{\"node\":\"%s\",\"health\":\"%s\",\"calls\":%llu,\"timeouts\":%llu}",
                       i ? "," : "", pi[i].node,
                       health[pi[i].health == PROTO_PEER_UP        ? 0
                              : pi[i].health == PROTO_PEER_SUSPECT ? 1
                                                                   : 2],
                       (unsigned long long)pi[i].calls, (unsigned long long)pi[i].timeouts);
        buf_printf(&b, "]");
    }
    buf_printf(&b, "}\n");
    char h[256];
    snprintf(h, sizeof(h), "x-amz-request-id: %s\r\nContent-Type: application/json\r\n", x->id);
    (void)http_respond_full(x->r, 200, h, b.p, b.len);
    free(b.p);
}

/*
 * S3's sub-resources warmlake serves (sorted). A request naming one that its
 * route does not handle is refused, never taken for the plain operation:
 * that way DELETE /b/k?acl deleted the object and PUT /b/k?uploads
 * overwrote it with the request body.
 */
static const char *const served_subresources[] = {
    "acl",        "attributes", "batch-get", "cors",    "delete",    "lifecycle",  "location",
    "partNumber", "tagging",    "uploadId",  "uploads", "versionId", "versioning", "versions",
};

static int is_served(const char *name)
{
    size_t n = sizeof(served_subresources) / sizeof(served_subresources[0]);
    return bsearch(name, served_subresources, n, sizeof(served_subresources[0]), s3_cmp_name) !=
           NULL;
}

/* match: a served sub-resource outside the allowed list (arg). */
static int stray(const char *name, const void *arg)
{
    if (!is_served(name)) return 0;
    for (const char *const *a = arg; a && *a; a++)
        if (!strcmp(name, *a)) return 0;
    return 1;
}

int s3_stray_subresource(ctx_t *x, const char *const *allowed)
{
    if (!s3_query_name(x->query, stray, allowed)) return 0;
    s3_err_msg(x, S3E_METHOD_NOT_ALLOWED,
               "The specified method is not allowed against this resource.");
    return 1;
}

/*
 * A presigned URL's parameters (X-Amz-*), and the operation name newer SDKs add (x-id). The
 * x-amz-* ones besides the signature's are headers an SDK hoisted into the query; they are
 * passed over, not taken as headers, as S3 does: the JS SDK v3 signs the CRC32 of an empty
 * body into every presigned PUT, and taken as a header it would refuse every upload.
 */
static int signing_param(const char *name, size_t len)
{
    return (len > 6 && strncasecmp(name, "X-Amz-", 6) == 0) ||
           (len == 4 && memcmp(name, "x-id", 4) == 0);
}

int s3_unknown_param(ctx_t *x, const char *const *allowed)
{
    for (const char *q = x->query ? x->query : ""; *q;) {
        size_t len = strcspn(q, "=&");
        int ok = !len || signing_param(q, len);
        for (const char *const *a = allowed; a && *a && !ok; a++)
            ok = strlen(*a) == len && memcmp(*a, q, len) == 0;
        if (!ok) {
            s3_err_msg(x, S3E_NOT_IMPLEMENTED, "This sub-resource is not served.");
            return 1;
        }
        q += strcspn(q, "&");
        if (*q) q++;
    }
    return 0;
}

static void object_op(ctx_t *x)
{
    const char *m = x->info->method;
    if (strlen(x->key) > MAX_KEY_LEN) {
        s3_err(x, S3E_KEY_TOO_LONG);
        return;
    }
    if (s3_bucket_access(x, x->bucket, x->ibucket) != 0) return;
    if (s3_version_param(x) != 0) return;
    /* One storage class is served; asking for another is refused, not ignored. */
    const char *sc = s3_hdr(x->info, "x-amz-storage-class");
    if (sc && strcmp(sc, "STANDARD") != 0) {
        s3_err(x, S3E_INVALID_STORAGE_CLASS);
        return;
    }
    int has_upload, has_part, has_uploads;
    char *upload = s3_qparam(x->query, "uploadId", &has_upload);
    char *part = s3_qparam(x->query, "partNumber", &has_part);
    char *ups = s3_qparam(x->query, "uploads", &has_uploads);
    free(ups);
    int has_acl, has_tagging;
    ups = s3_qparam(x->query, "acl", &has_acl);
    free(ups);
    ups = s3_qparam(x->query, "tagging", &has_tagging);
    free(ups);
    int has_attributes, has_versions;
    ups = s3_qparam(x->query, "attributes", &has_attributes);
    free(ups);
    ups = s3_qparam(x->query, "versions", &has_versions);
    free(ups);
    if (strcmp(m, "GET") == 0 && !has_upload && (has_uploads || has_versions)) {
        /* A bucket's listings asked of a key: S3's own words for each. */
        s3_err_msg(x, S3E_INVALID_REQUEST,
                   has_uploads ? "Key is not expected for the GET method ?uploads subresource"
                               : "There is no such thing as the ?versions sub-resource for a key");
    } else if (has_upload && (!upload || strlen(upload) != 32)) {
        /* The request's own arguments before what it names, as S3: a part number that is
         * none is refused as such whatever the upload. */
        int pn;
        if (strcmp(m, "PUT") == 0 && has_part && (!part || num_parse_int(part, 1, 10000, &pn)))
            s3_err_msg(x, S3E_INVALID_ARGUMENT,
                       "Part number must be an integer between 1 and 10000.");
        else
            s3_err(x, S3E_NO_SUCH_UPLOAD);
    } else if (strcmp(m, "POST") == 0 && has_uploads) {
        s3_mpu_create(x);
    } else if (strcmp(m, "POST") == 0 && has_upload) {
        s3_mpu_complete(x, upload);
    } else if (strcmp(m, "PUT") == 0 && has_upload && has_part && part) {
        s3_mpu_upload_part(x, upload, part);
    } else if (strcmp(m, "DELETE") == 0 && has_upload) {
        s3_mpu_abort(x, upload);
    } else if (strcmp(m, "GET") == 0 && has_upload) {
        s3_list_parts(x, upload);
    } else if (has_upload) {
        s3_err(x, S3E_METHOD_NOT_ALLOWED);
    } else if (has_tagging) {
        s3_tagging_op(x, 0);
    } else if (strcmp(m, "GET") == 0 && has_attributes) {
        s3_get_object_attributes(x);
    } else if ((strcmp(m, "GET") == 0 || strcmp(m, "PUT") == 0) && has_acl) {
        obj_info_t bi;
        if (!s3_bucket_exists(x, x->bucket, &bi)) {
            s3_err(x, S3E_NO_SUCH_BUCKET);
        } else {
            const char *owner = s3_bucket_owner(&bi)[0] ? s3_bucket_owner(&bi) : x->auth.access_key;
            if (m[0] == 'G')
                s3_get_object_acl(x, owner);
            else
                s3_put_acl(x, x->ibucket, x->key, ACL_META, owner);
        }
    } else if (s3_stray_subresource(x, !strcmp(m, "GET") || !strcmp(m, "HEAD")
                                           ? (const char *const[]){"versionId", "partNumber", NULL}
                                       : !strcmp(m, "DELETE")
                                           ? (const char *const[]){"versionId", NULL}
                                           : NULL)) {
        ; /* answered */
    } else if (strcmp(m, "PUT") == 0 && s3_hdr(x->info, "x-amz-copy-source")) {
        s3_copy_object(x);
    } else if (strcmp(m, "PUT") == 0) {
        s3_put_object(x);
    } else if (strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0) {
        s3_get_object(x, m[0] == 'H');
    } else if (strcmp(m, "DELETE") == 0) {
        s3_delete_object(x);
    } else {
        s3_err(x, S3E_METHOD_NOT_ALLOWED);
    }
    free(upload);
    free(part);
}

/*
 * A checksum header of an algorithm not served (S3 has added SHA512, MD5 and
 * the XXHASHes): refused, 1 with 400 sent. Ignored, the bytes were stored
 * unchecked while the client believed them checked (a sweep).
 */
static int unsupported_checksum(ctx_t *x)
{
    for (int i = 0; i < x->info->nheaders; i++)
        if (s3_cks_value_name(x->info->headers[i].name) < 0) {
            s3_err_msg(x, S3E_INVALID_REQUEST, S3_CKS_UNSUPPORTED);
            return 1;
        }
    return 0;
}

/*
 * x-amz-sdk-checksum-algorithm says which checksum the SDK sent, in a header
 * or a trailer: without either the body would go unchecked while its client
 * believes it checked. S3 refuses that (400 InvalidRequest); 1 when refused.
 */
static int sdk_checksum_missing(ctx_t *x)
{
    char name[40];
    if (!s3_hdr(x->info, "x-amz-sdk-checksum-algorithm") || s3_hdr(x->info, "x-amz-trailer"))
        return 0;
    for (int a = CKS_CRC32; a < CKS_N; a++) {
        (void)snprintf(name, sizeof(name), "x-amz-checksum-%s", cks_name(a));
        if (s3_hdr(x->info, name)) return 0;
    }
    s3_err_msg(x, S3E_INVALID_REQUEST,
               "x-amz-sdk-checksum-algorithm specified, but no corresponding x-amz-checksum-* or "
               "x-amz-trailer headers were found.");
    return 1;
}

/*
 * A request by a signed-in user of a bucket someone else owns that the ACLs
 * may grant (s3_foreign.c): GET, HEAD, PUT, DELETE and POST (a multipart
 * upload's) of an object, GET and HEAD of the bucket, PUT ?acl, POST ?delete. The rest (a PUT of
 * the bucket itself is CreateBucket: BucketAlreadyExists) goes the owner's way and is refused
 * there.
 */
static int has_delete(ctx_t *x)
{
    int present;
    free(s3_qparam(x->query, "delete", &present));
    return present;
}

static int foreign_read(ctx_t *x)
{
    obj_info_t bi;
    const char *m = x->info->method;
    int present;
    char *acl = s3_qparam(x->query, "acl", &present);
    free(acl);
    if (!x->bucket[0] ||
        (strcmp(m, "GET") != 0 && strcmp(m, "HEAD") != 0 &&
         (strcmp(m, "PUT") || (!x->key[0] && !present)) && (strcmp(m, "DELETE") || !x->key[0]) &&
         (strcmp(m, "POST") || (!x->key[0] && !has_delete(x)))) ||
        !s3_bucket_exists(x, x->bucket, &bi))
        return 0;
    const char *owner = s3_bucket_owner(&bi);
    return owner[0] && strcmp(owner, x->auth.access_key) != 0;
}

/*
 * Whether every query parameter decodes: no bad escape, no NUL. s3_qparam
 * reads such a value as absent, so prefix=zzz%00 listed the whole bucket:
 * the request is refused instead (400, as a listing parameter that is not
 * UTF-8 is).
 */
static int query_decodes(const char *q)
{
    while (*q) {
        size_t len = strcspn(q, "&");
        char *d = s3_pdecode(q, len, 1);
        if (!d) return 0;
        free(d);
        q += len;
        if (*q) q++;
    }
    return 1;
}

/*
 * The bucket named by a Host of the form BUCKET.DOMAIN[:port], or NULL (malloc'd). Lowercased:
 * a host name is case-insensitive (RFC 4343), resolvers and proxies may change its case, and
 * S3 reads the bucket of a Host so (its VirtualHosting guide: a Host outside its endpoints
 * names "the lowercase value of the Host header"). Bucket names have no uppercase letter,
 * so none is lost; "MyBucket.DOMAIN" answered NoSuchBucket for mybucket.
 */
static char *vhost_bucket(ctx_t *x)
{
    const char *d = x->cfg->domain, *host = s3_hdr(x->info, "host");
    if (!d || !*d || !host) return NULL;
    size_t hl = strlen(host), dl = strlen(d);
    const char *colon = strrchr(host, ':');
    if (colon && host[0] != '[') hl = (size_t)(colon - host);
    if (hl <= dl + 1 || host[hl - dl - 1] != '.' || strncasecmp(host + hl - dl, d, dl) != 0)
        return NULL;
    char *b = xmalloc(hl - dl);
    for (size_t i = 0; i < hl - dl - 1; i++)
        b[i] = (char)tolower((unsigned char)host[i]);
    b[hl - dl - 1] = 0;
    return b;
}

/*
 * x-amz-expected-bucket-owner, when sent, names the bucket's owner (its
 * access key, the Owner/ID of the listings), else 403 AccessDenied, as S3's
 * bucket owner condition: a client that guards a write against a bucket
 * someone else owns is not written into it. A missing bucket is left to the
 * operation (NoSuchBucket). 0, or -1 with the error sent.
 */
static int expected_owner_ok(ctx_t *x)
{
    const char *want = s3_hdr(x->info, "x-amz-expected-bucket-owner");
    obj_info_t bi;
    if (!want || !x->bucket[0] || !strcmp(x->bucket, "_warmlake") ||
        !s3_bucket_exists(x, x->bucket, &bi))
        return 0;
    const char *owner = s3_bucket_owner(&bi);
    if (strcmp(want, owner[0] ? owner : x->auth.access_key) == 0) return 0;
    s3_err(x, S3E_ACCESS_DENIED);
    return -1;
}

/*
 * x-amz-id-2 on every response, as S3 sends it beside x-amz-request-id (an
 * error's HostId is the same): the node's name and the request id, base64,
 * so a client's report names the node and the log line both.
 */
static void set_host_id(ctx_t *x)
{
    char raw[97], line[sizeof(x->host_id) + 20];
    snprintf(raw, sizeof(raw), "%.63s/%.32s", x->cfg->host_id ? x->cfg->host_id : "warmlake",
             x->id);
    EVP_EncodeBlock((unsigned char *)x->host_id, (const unsigned char *)raw, (int)strlen(raw));
    snprintf(line, sizeof(line), "x-amz-id-2: %s\r\n", x->host_id);
    http_add_headers(x->r, line);
}

void s3_handle(void *arg, http_req_t *r, const struct http_req_info *info)
{
    ctx_t x = {0};
    x.cfg = arg;
    x.r = r;
    x.info = info;
    snprintf(x.id, sizeof(x.id), "%s", info->id);
    log_set_request(x.id);
    set_host_id(&x);
    const char *t = info->target;
    const char *q = strchr(t, '?');
    x.query = q ? xstrdup(q + 1) : xstrdup("");
    if (t[0] != '/') {
        s3_err_msg(&x, S3E_INVALID_REQUEST, "Bad request target.");
        goto out;
    }
    int hosts = 0;
    for (int i = 0; i < info->nheaders; i++)
        hosts += !strcasecmp(info->headers[i].name, "host");
    if (hosts != 1) {
        /* RFC 9112 3.2: none, or two that may disagree on the bucket (virtual hosts). */
        s3_err_msg(&x, S3E_INVALID_REQUEST, "A request must carry exactly one Host header.");
        goto out;
    }
    const char *te = s3_hdr(info, "transfer-encoding");
    if (te && (strncasecmp(te, "chunked", 7) != 0 || te[7 + strspn(te + 7, " \t")] != 0)) {
        /* gzip, chunked: stored as sent it would be the compressed bytes (RFC 9112 6.1). */
        s3_err_msg(&x, S3E_NOT_IMPLEMENTED, "Only the chunked transfer coding is served.");
        goto out;
    }
    if (x.cfg->fenced && atomic_load(x.cfg->fenced)) {
        /* A map change this node cannot apply: answering from the old layout could be wrong. */
        s3_err_msg(
            &x, S3E_SERVICE_UNAVAILABLE,
            "This node is fenced: the cluster map changed its layout; a restart applies it.");
        goto out;
    }
    /* Virtual-host style (Host: bucket.domain) when a domain is set, else path style. */
    const char *p = t + 1, *pe = q ? q : t + strlen(t);
    char *b = vhost_bucket(&x);
    int no_bucket = 0;
    if (b) {
        x.vhost = 1;
        x.key = s3_pdecode(p, (size_t)(pe - p), 0);
    } else {
        const char *slash = memchr(p, '/', (size_t)(pe - p));
        size_t bl = slash ? (size_t)(slash - p) : (size_t)(pe - p);
        b = s3_pdecode(p, bl, 0);
        x.key = slash ? s3_pdecode(slash + 1, (size_t)(pe - slash - 1), 0) : xstrdup("");
        /* "//b/k" names an empty bucket, not the service: it listed every bucket, whatever
         * the rest asked. No bucket is called "": refused as any invalid name is. */
        no_bucket = bl == 0 && slash;
    }
    if (!b || !x.key || strlen(b) >= sizeof(x.bucket) || no_bucket) {
        s3_err(&x, b && x.key ? S3E_INVALID_BUCKET_NAME : S3E_INVALID_URI);
        free(b);
        goto out;
    }
    strcpy(x.bucket, b);
    free(b);
    /* Any UTF-8 but NUL, control characters too, as S3 (listings write them as
     * character references, or exactly with encoding-type=url). */
    if (!s3_key_ok(x.key, strlen(x.key))) {
        s3_err_msg(&x, S3E_INVALID_ARGUMENT, "Object key must be valid UTF-8 text.");
        goto out;
    }
    if (!query_decodes(x.query)) {
        s3_err_msg(&x, S3E_INVALID_ARGUMENT,
                   "Query parameters must be percent-encoded text without NUL.");
        goto out;
    }
    /* CORS: a preflight is answered from the bucket's rules, unauthenticated (browsers send
     * no credentials with it); an actual request from an allowed origin gets the headers. */
    if (strcmp(info->method, "OPTIONS") == 0) {
        s3_cors_preflight(&x);
        goto out;
    }
    s3_cors_actual(&x);
    /* A browser's form upload: authenticated by its signed policy, not a signed request. */
    const char *ct = s3_hdr(info, "content-type");
    if (!strcmp(info->method, "POST") && x.bucket[0] && !x.key[0] && ct &&
        !strncasecmp(ct, "multipart/form-data", 19)) {
        if (!s3_unserved(&x)) s3_post_object(&x);
        goto out;
    }
    if (s3_authenticate(&x) != 0) goto out;
    if (!x.anonymous) http_req_set_principal(r, x.auth.access_key);
    log_debug("event=request id=%s method=%s bucket=%s key=%s peer=%s", x.id, info->method,
              x.bucket, x.key, info->peer);
    if (s3_unserved(&x) || unsupported_checksum(&x) || sdk_checksum_missing(&x) ||
        expected_owner_ok(&x) != 0)
        goto out;
    /* A partial PUT (RFC 9110: an origin server MUST answer 400), whoever sends it: taken as a
     * whole one, it replaced the object with the range's bytes alone (a sweep). */
    if (!strcmp(info->method, "PUT") && x.key[0] && s3_hdr(info, "content-range")) {
        s3_err_msg(&x, S3E_INVALID_REQUEST, "A PUT cannot carry Content-Range.");
        goto out;
    }
    int batch_get;
    free(s3_qparam(x.query, "batch-get", &batch_get));
    if (batch_get && x.bucket[0] && !x.key[0]) {
        /* Anyone's, the owner's or not: each entry is decided as a GET of it would be. */
        if (strcmp(info->method, "POST") == 0)
            s3_batch_get(&x);
        else
            s3_err(&x, S3E_METHOD_NOT_ALLOWED);
    } else if (x.anonymous || foreign_read(&x)) {
        s3_anonymous_op(&x);
    } else if (!strcmp(x.bucket, "_warmlake") && !strcmp(x.key, "stats") &&
               !strcmp(info->method, "GET")) {
        node_stats(&x);
    } else if (!strcmp(x.bucket, "_warmlake") && !strcmp(x.key, "heal") &&
               !strcmp(info->method, "POST")) {
        node_heal(&x);
    } else if (!x.bucket[0]) {
        if (strcmp(info->method, "GET") == 0)
            s3_list_buckets(&x);
        else
            s3_err(&x, S3E_METHOD_NOT_ALLOWED);
    } else if (!x.key[0]) {
        s3_bucket_op(&x);
    } else {
        object_op(&x);
    }
out:
    s3_chunked_free(x.chunked);
    EVP_MD_CTX_free(x.sha);
    bufpool_put(obj_set_buffers(x.cfg->set), x.raw);
    free(x.key);
    free(x.vid);
    free(x.query);
    log_set_request(NULL);
}
