/*
 * lifecycle: a bucket's lifecycle configuration (S3's LifecycleConfiguration
 * XML, expiration actions only), parsed with expat (DTDs refused) and checked
 * as S3 checks it, written back in one canonical form for GET, and the
 * questions the gateway and the lifecycle worker ask of it. No I/O, no clock:
 * "now" and the length of a day are parameters.
 *
 * A rule selects objects by its filter: the legacy <Prefix> of the rule, or
 * a <Filter> holding one of Prefix, Tag, ObjectSizeGreaterThan,
 * ObjectSizeLessThan, or an And of several (every predicate must hold; an
 * empty Filter selects everything). Its actions: Expiration (Days, Date, or
 * ExpiredObjectDeleteMarker), NoncurrentVersionExpiration (NoncurrentDays,
 * NewerNoncurrentVersions) and AbortIncompleteMultipartUpload. Transitions
 * are refused: warmlake has one storage class, and a rule that never runs is
 * worse than one refused.
 *
 * Days are counted as S3 counts them: an action due "N days after t" is due
 * at the first midnight (UTC) after t + N days, midnight being a multiple of
 * the day length since the epoch. A node run for tests may shorten the day
 * (--lifecycle-day-seconds, as Ceph's rgw_lc_debug_interval); every function
 * here takes the day length, LC_DAY_SECONDS normally.
 */
#ifndef WL_LIFECYCLE_H
#define WL_LIFECYCLE_H

#include <stddef.h>
#include <stdint.h>

#define LC_MAX_RULES   1000       /* S3's limit, not adjustable */
#define LC_ID_MAX      255        /* characters of a rule ID */
#define LC_NEWER_MAX   100        /* NewerNoncurrentVersions, as S3 */
#define LC_MAX_TAGS    50         /* tags in a rule's filter (an object has at most 10) */
#define LC_DAY_SECONDS 86400      /* a real day */
#define LC_BODY_MAX    (1u << 20) /* a configuration's XML (S3 publishes no figure) */

typedef struct {
    char *key, *value;
} lc_tag_t;

/* How the rule's filter was written (kept so that GET gives it back the same way). */
enum {
    LC_FILTER_LEGACY, /* <Prefix> directly in the Rule */
    LC_FILTER_EMPTY,  /* <Filter/>: everything */
    LC_FILTER_PREFIX,
    LC_FILTER_TAG,
    LC_FILTER_GT,
    LC_FILTER_LT,
    LC_FILTER_AND,
};

typedef struct {
    char *id; /* never NULL: one is made up when the rule has none, as S3 does */
    int enabled;
    /* Filter: every present predicate must hold. */
    int filter_form; /* LC_FILTER_* */
    char *prefix;    /* "" selects every key */
    lc_tag_t *tags;  /* each must be among the object's tags */
    int ntags;
    int64_t size_gt; /* object size > size_gt; -1: none */
    int64_t size_lt; /* object size < size_lt; -1: none */
    /* Actions; 0 / -1 where absent. */
    int64_t exp_days;   /* Expiration/Days */
    int64_t exp_date;   /* Expiration/Date: seconds since the epoch, midnight UTC; -1 none */
    int exp_marker;     /* Expiration/ExpiredObjectDeleteMarker: -1 absent, 0 false, 1 true */
    int64_t nc_days;    /* NoncurrentVersionExpiration/NoncurrentDays */
    int nc_newer;       /* NoncurrentVersionExpiration/NewerNoncurrentVersions; -1 absent */
    int64_t abort_days; /* AbortIncompleteMultipartUpload/DaysAfterInitiation */
} lc_rule_t;

typedef struct {
    lc_rule_t *rules;
    int n;
} lc_config_t;

/* Which S3 error a refused configuration gets (the caller maps it to its table). */
typedef enum {
    LC_ERR_MALFORMED_XML,    /* 400 MalformedXML */
    LC_ERR_INVALID_ARGUMENT, /* 400 InvalidArgument */
    LC_ERR_INVALID_REQUEST,  /* 400 InvalidRequest */
    LC_ERR_NOT_IMPLEMENTED,  /* 501 NotImplemented (transitions) */
} lc_err_kind_t;

typedef struct {
    lc_err_kind_t kind;
    const char *message; /* static text, S3's wording where S3 has one */
} lc_error_t;

/*
 * Parse and check a LifecycleConfiguration of len bytes (at most
 * LC_BODY_MAX). 0 with *out filled (free with lc_free); ERR_INVAL with *err
 * saying which S3 error and why, *out empty; ERR_NOMEM when expat cannot
 * start. Rules without an ID get one ("rule-N", N their position, made
 * unique). Thread-safe; no I/O.
 */
int lc_parse(const char *body, size_t len, lc_config_t *out, lc_error_t *err)
    __attribute__((warn_unused_result));
void lc_free(lc_config_t *c); /* NULL-safe; c is left empty */

/*
 * The configuration as XML, in one canonical form (what GET answers and what
 * is stored): malloc'd, NUL-terminated, *len its length. lc_parse of it
 * gives back the same configuration.
 */
char *lc_serialize(const lc_config_t *c, size_t *len);

/*
 * Whether rule r's filter selects an object: key, tags (the object's tags
 * in the canonical "k=v&..." form the tagging code keeps: '%', '&', '=',
 * '+' and control bytes %XX-escaped; NULL or "" for none) and size.
 */
int lc_rule_matches(const lc_rule_t *r, const char *key, const char *tags, uint64_t size);

/* The first midnight after t + days days (day_s seconds a day): when such an action is due. */
int64_t lc_due(int64_t t, int64_t days, int64_t day_s);

/*
 * The Expiration that applies to the current version of an object (mtime
 * in seconds): the enabled rule with Days or Date whose filter selects it
 * and whose date comes first (the first such rule on a tie), with *expiry
 * the time it expires; NULL when none does. For x-amz-expiration.
 */
const lc_rule_t *lc_expiry(const lc_config_t *c, const char *key, const char *tags, uint64_t size,
                           int64_t mtime, int64_t day_s, int64_t *expiry);

/*
 * The x-amz-expiration value for rule r and expiry:
 *   expiry-date="Fri, 23 Dec 2012 00:00:00 GMT", rule-id="picture-deletion-rule"
 * the rule ID URL-encoded (RFC 3986 unreserved characters kept), as S3 does.
 * Returns the length written, or 0 when cap is too small or the date is not
 * one an HTTP date can say (before 1970, after 9999; out then "").
 */
size_t lc_expiration_header(const lc_rule_t *r, int64_t expiry, char *out, size_t cap);

/* ---- for the lifecycle worker ---- */

/* What a version of an object is, to the worker. */
typedef enum {
    LC_VER_CURRENT,     /* the current version, not a delete marker */
    LC_VER_NONCURRENT,  /* an older version (a delete marker among them too) */
    LC_VER_LONE_MARKER, /* a current delete marker with no other version left */
    LC_VER_UPLOAD,      /* an incomplete multipart upload */
} lc_ver_kind_t;

typedef struct {
    lc_ver_kind_t kind;
    const char *key;
    const char *tags; /* canonical "k=v&..." or NULL (markers and uploads have none) */
    uint64_t size;
    int64_t mtime;        /* seconds: when this version was written */
    int64_t since;        /* NONCURRENT: when it stopped being current (its successor's mtime);
                             UPLOAD: when it was initiated; otherwise unused */
    int newer_noncurrent; /* NONCURRENT: how many noncurrent versions of the key are newer */
} lc_version_t;

typedef enum {
    LC_ACT_NONE,
    LC_ACT_EXPIRE_CURRENT,    /* delete it (versioned buckets: add a delete marker) */
    LC_ACT_DELETE_NONCURRENT, /* delete this version for good */
    LC_ACT_DELETE_MARKER,     /* remove the expired object delete marker */
    LC_ACT_ABORT_UPLOAD,      /* abort the upload */
} lc_action_t;

/*
 * What the enabled rules of c say to do with version v at time now (day_s
 * seconds a day): the action due now (the one due first, when several are;
 * *rule the rule asking for it), or LC_ACT_NONE. *due (may be NULL) gets
 * when the first applicable action is or was due, -1 when none ever will
 * be (as things stand: a noncurrent version kept by NewerNoncurrentVersions
 * may fall due once more versions are written), so a worker can come back.
 *
 *   current       Expiration Days/Date of a rule selecting it
 *   noncurrent    NoncurrentDays after `since`, once at least
 *                 NewerNoncurrentVersions newer noncurrent versions exist
 *   lone marker   ExpiredObjectDeleteMarker at once, or Expiration Days
 *                 after its mtime (S3 cleans those up with Days too)
 *   upload        DaysAfterInitiation after `since`; only rules filtering
 *                 on the key alone apply (an upload has no tags or size)
 */
lc_action_t lc_decide(const lc_config_t *c, const lc_version_t *v, int64_t now, int64_t day_s,
                      const lc_rule_t **rule, int64_t *due);

#endif
