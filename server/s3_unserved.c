/*
 * s3_unserved: the sub-resources and settings S3 has and warmlake does not
 * serve. A change of one is refused (501), never ignored: ignored, `DELETE
 * /b?policy` would delete the bucket and `PUT /b/k?retention` overwrite the
 * object with the XML body; an SSE or object-lock header would be dropped
 * while the client believes its data encrypted or locked. A read of one
 * answers what S3 answers for a bucket that never had it configured (no
 * policy, no website, ...), which is the truth here: tools that read every
 * setting of a bucket (Terraform's provider, SDK inventories) then work,
 * where a 501 stopped them.
 */
#include "server/s3_int.h"

#define S3_XMLNS "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\""

/* Sorted (bsearch). */
static const char *const unserved_subresources[] = {
    "abac",
    "accelerate",
    "analytics",
    "encryption",
    "intelligent-tiering",
    "inventory",
    "legal-hold",
    "logging",
    "metadataConfiguration",
    "metadataInventoryTable",
    "metadataJournalTable",
    "metadataTable",
    "metrics",
    "notification",
    "object-lock",
    "policy",
    "policyStatus",
    "publicAccessBlock",
    "renameObject",
    "replication",
    "requestPayment",
    "restore",
    "retention",
    "select",
    "session",
    "torrent",
    "website",
};

static int is_unserved(const char *name, const void *arg)
{
    size_t n = sizeof(unserved_subresources) / sizeof(unserved_subresources[0]);
    (void)arg;
    return bsearch(name, unserved_subresources, n, sizeof(unserved_subresources[0]), s3_cmp_name) !=
           NULL;
}

/* A setting never configured, as S3 answers its GET: an error, or an empty document. */
typedef struct {
    const char *name;
    s3_err_t err;    /* when no doc */
    const char *doc; /* the 200's document */
} unconfigured_t;

static const unconfigured_t unconfigured_gets[] = {
    {"accelerate", S3E_NOT_IMPLEMENTED, "<AccelerateConfiguration " S3_XMLNS "/>"},
    {"encryption", S3E_NO_SSE_CONFIGURATION, NULL},
    {"logging", S3E_NOT_IMPLEMENTED, "<BucketLoggingStatus " S3_XMLNS "/>"},
    {"notification", S3E_NOT_IMPLEMENTED, "<NotificationConfiguration " S3_XMLNS "/>"},
    {"object-lock", S3E_NO_OBJECT_LOCK_CONFIGURATION, NULL},
    {"policy", S3E_NO_SUCH_BUCKET_POLICY, NULL},
    {"policyStatus", S3E_NO_SUCH_BUCKET_POLICY, NULL},
    {"publicAccessBlock", S3E_NO_PUBLIC_ACCESS_BLOCK, NULL},
    {"replication", S3E_NO_REPLICATION_CONFIGURATION, NULL},
    {"requestPayment", S3E_NOT_IMPLEMENTED,
     "<RequestPaymentConfiguration " S3_XMLNS "><Payer>BucketOwner</Payer>"
     "</RequestPaymentConfiguration>"},
    {"website", S3E_NO_SUCH_WEBSITE_CONFIGURATION, NULL},
};

typedef struct {
    int n;            /* unserved names in the query */
    const char *last; /* the last one */
} names_t;

static int count_unserved(const char *name, const void *arg)
{
    names_t *c = (names_t *)arg;
    size_t n = sizeof(unserved_subresources) / sizeof(unserved_subresources[0]);
    const char *const *hit =
        bsearch(name, unserved_subresources, n, sizeof(unserved_subresources[0]), s3_cmp_name);
    if (hit) {
        c->n++;
        c->last = *hit;
    }
    return 0; /* all of them */
}

/*
 * The owner's GET of one setting never configured (nothing here configures it): S3's answer
 * for a bucket without it; an object's retention or legal hold: S3's answer in a bucket
 * without Object Lock. 1 when answered.
 */
static int unconfigured(ctx_t *x)
{
    names_t c = {0, NULL};
    (void)s3_query_name(x->query, count_unserved, &c);
    if (strcmp(x->info->method, "GET") != 0 || c.n != 1 || !x->bucket[0]) return 0;
    if (x->key[0]) {
        if (strcmp(c.last, "retention") != 0 && strcmp(c.last, "legal-hold") != 0) return 0;
        s3_err_msg(x, S3E_INVALID_REQUEST, "Bucket is missing Object Lock Configuration");
        return 1;
    }
    for (size_t i = 0; i < sizeof(unconfigured_gets) / sizeof(unconfigured_gets[0]); i++) {
        const unconfigured_t *u = &unconfigured_gets[i];
        if (strcmp(u->name, c.last) != 0) continue;
        if (!u->doc) {
            s3_err(x, u->err);
        } else {
            buf_t b = {0};
            buf_printf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n%s", u->doc);
            s3_respond_xml(x, 200, &b);
        }
        return 1;
    }
    return 0;
}

int s3_unserved(ctx_t *x)
{
    /* GetBucketOwnershipControls is served (s3_bucket.c); ownership cannot be changed here. */
    int own_ctl;
    free(s3_qparam(x->query, "ownershipControls", &own_ctl));
    int get_own_ctl = own_ctl && !x->key[0] && !strcmp(x->info->method, "GET");
    int other = s3_query_name(x->query, is_unserved, NULL) || (own_ctl && !get_own_ctl);
    if (get_own_ctl || other) {
        /* Whose bucket it is, and whether there is one, is said first, as S3 says it: a
         * stranger learns no more from ?policy than from any other request. */
        obj_info_t bi;
        if (x->bucket[0] && !s3_bucket_exists(x, x->bucket, &bi)) {
            s3_err(x, S3E_NO_SUCH_BUCKET);
            return 1;
        }
        const char *owner = x->bucket[0] ? s3_bucket_owner(&bi) : "";
        if (x->anonymous || (owner[0] && strcmp(owner, x->auth.access_key) != 0)) {
            s3_err(x, S3E_ACCESS_DENIED);
            return 1;
        }
        if (other) {
            if (!unconfigured(x))
                s3_err_msg(x, S3E_NOT_IMPLEMENTED, "This sub-resource is not served.");
            return 1;
        }
    }
    for (int i = 0; i < x->info->nheaders; i++) {
        const char *h = x->info->headers[i].name;
        const char *v = x->info->headers[i].value;
        if (!strncasecmp(h, "x-amz-object-lock-", 18) && x->key[0]) {
            /* An object's lock asks for its bucket's Object Lock configuration, which no
             * bucket here has: S3's answer to the same in such a bucket (not stored unlocked). */
            obj_info_t bi;
            if (x->bucket[0] && !s3_bucket_exists(x, x->bucket, &bi))
                s3_err(x, S3E_NO_SUCH_BUCKET);
            else
                s3_err_msg(x, S3E_INVALID_REQUEST, "Bucket is missing Object Lock Configuration");
            return 1;
        }
        if (!strncasecmp(h, "x-amz-server-side-encryption", 28) ||
            !strncasecmp(h, "x-amz-copy-source-server-side-encryption", 40) ||
            !strncasecmp(h, "x-amz-object-lock-", 18) ||
            (!strncasecmp(h, "x-amz-grant-", 12) && !s3_grant_header(h)) ||
            (!strcasecmp(h, "x-amz-bucket-object-lock-enabled") && !strcasecmp(v, "true"))) {
            s3_err_msg(x, S3E_NOT_IMPLEMENTED,
                       "Server-side encryption and object lock are not served.");
            return 1;
        }
        /* An append (S3 Express One Zone's): taken as a PUT, it replaced the object with
         * the appended bytes alone (a sweep). */
        if (!strcasecmp(h, "x-amz-write-offset-bytes")) {
            s3_err_msg(x, S3E_NOT_IMPLEMENTED,
                       "A header you provided implies functionality that is not implemented");
            return 1;
        }
        /* The three settings S3 has (s3_acl.c: who owns what a writer writes). */
        if (!strcasecmp(h, "x-amz-object-ownership") && strcmp(v, "BucketOwnerEnforced") &&
            strcmp(v, "BucketOwnerPreferred") && strcmp(v, "ObjectWriter")) {
            s3_err_msg(x, S3E_INVALID_ARGUMENT, "Invalid x-amz-object-ownership header");
            return 1;
        }
    }
    return 0;
}
