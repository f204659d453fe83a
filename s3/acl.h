/*
 * acl: S3's grant model (no I/O). An ACL is either a canned name
 * ("private", "public-read", ...) or a list of grants, each a grantee and a
 * permission. This module parses grants from x-amz-grant-* header values and
 * from AccessControlPolicy bodies, keeps a list in a stored form that no
 * canned name can be confused with, and answers what an ACL (either kind)
 * gives a requester. Whether a named user exists is the caller's to check.
 *
 * Stored form (the value of a bucket's "acl" / an object's "\001acl" entry):
 *
 *   "+" GRANT *("," GRANT)        (just "+": no grants at all)
 *   GRANT = PERM TYPE [ID]
 *   PERM  = 'r' READ | 'w' WRITE | 'a' READ_ACP | 'c' WRITE_ACP | 'f' FULL_CONTROL
 *   TYPE  = 'u' CanonicalUser, followed by its ID (1..S3_ACL_ID_MAX bytes, '!'..'~' but ',')
 *         | 'A' group AllUsers | 'U' group AuthenticatedUsers (no ID)
 *
 * Canned names are lower-case letters and '-', so never start with '+'. A
 * stored value that does not decode grants nothing (fail closed).
 */
#ifndef WL_S3ACL_H
#define WL_S3ACL_H

#include <stddef.h>

#define S3_ACL_MAX_GRANTS 100 /* as S3 */
#define S3_ACL_ID_MAX     64
/* The longest stored form: "+" and per grant PERM TYPE ID ",". */
#define S3_ACL_STORED_MAX (1 + S3_ACL_MAX_GRANTS * (S3_ACL_ID_MAX + 3))

/* Permissions, as bits so a set of them is one int. FULL_CONTROL is all four. */
enum {
    S3_PERM_READ = 1,
    S3_PERM_WRITE = 2,
    S3_PERM_READ_ACP = 4,
    S3_PERM_WRITE_ACP = 8,
    S3_PERM_FULL = 15,
};

typedef enum {
    S3_GRANTEE_USER = 1, /* CanonicalUser: id */
    S3_GRANTEE_ALL,      /* http://acs.amazonaws.com/groups/global/AllUsers */
    S3_GRANTEE_AUTH,     /* http://acs.amazonaws.com/groups/global/AuthenticatedUsers */
    S3_GRANTEE_LOG,      /* http://acs.amazonaws.com/groups/s3/LogDelivery: parsed, not kept */
    S3_GRANTEE_EMAIL,    /* AmazonCustomerByEmail: parsed, never kept (no e-mail addresses) */
    S3_GRANTEE_BAD_ID,   /* a CanonicalUser whose ID cannot be anyone's (empty, too long,
                            characters outside '!'..'~' or ',') */
} s3_grantee_t;

typedef struct {
    s3_grantee_t type;
    int perm;                   /* one S3_PERM_* (FULL_CONTROL: S3_PERM_FULL) */
    char id[S3_ACL_ID_MAX + 1]; /* S3_GRANTEE_USER: the canonical ID; "" otherwise */
} s3_grant_t;

typedef struct {
    int n;
    s3_grant_t g[S3_ACL_MAX_GRANTS];
} s3_acl_t;

/* Whether a stored ACL value is a grant list (else a canned name). */
int s3_acl_is_grants(const char *stored);

/*
 * The value of x-amz-grant-<perm> appended to acl as grants of perm: a
 * comma-separated list of TYPE=VALUE, TYPE one of id, uri, emailAddress (any
 * case), VALUE quoted ("...") or not, white space around each part ignored.
 * 0; ERR_INVAL when malformed (an unknown type or group URI, an empty list or
 * value) or when acl would hold more than S3_ACL_MAX_GRANTS. acl may be
 * partly appended to on failure.
 */
int s3_acl_parse_header(const char *value, int perm, s3_acl_t *acl)
    __attribute__((warn_unused_result));

/*
 * An AccessControlPolicy body: the Owner's ID into owner ("" when the body
 * names no Owner or no ID in it; cap bytes, truncated IDs come back as ""),
 * its grants into acl in document order (none is allowed). The grantee's kind
 * is read from what it holds: exactly one of ID, URI, EmailAddress (the
 * xsi:type attribute is not needed). 0; ERR_INVAL when malformed (not an
 * AccessControlPolicy, unknown elements, a Grant without a valid Permission,
 * a Grantee with none or several of ID/URI/EmailAddress, an unknown group URI,
 * more than S3_ACL_MAX_GRANTS grants); ERR_NOMEM.
 */
int s3_acl_parse_xml(const char *body, size_t len, char *owner, size_t cap, s3_acl_t *acl)
    __attribute__((warn_unused_result));

/*
 * acl in stored form into out (cap bytes, at least S3_ACL_STORED_MAX is
 * always enough): 0, or ERR_INVAL when a grant cannot be stored (a grantee
 * other than USER / ALL / AUTH, an ID outside the ID alphabet, a perm that is
 * not one permission).
 */
int s3_acl_encode(const s3_acl_t *acl, char *out, size_t cap) __attribute__((warn_unused_result));

/* A stored grant list back into acl: 0, or ERR_INVAL when it is not well-formed. */
int s3_acl_decode(const char *stored, s3_acl_t *acl) __attribute__((warn_unused_result));

/*
 * The permissions (S3_PERM_* bits) a stored ACL (canned or grants) gives
 * requester (NULL: anonymous), ownership aside: public-read gives everyone
 * READ, public-read-write READ and WRITE, authenticated-read READ to the
 * signed-in; other canned names nothing. A grant list gives the union of its
 * grants to requester, AllUsers, and (when signed in) AuthenticatedUsers. An
 * unknown or corrupt value gives nothing.
 */
int s3_acl_perms(const char *stored, const char *requester);
/* The same for an object's ACL in a bucket bucket_owner owns: bucket-owner-read and
 * bucket-owner-full-control give that owner READ and FULL_CONTROL. */
int s3_acl_perms_of_object(const char *stored, const char *requester, const char *bucket_owner);

/* S3's name of one permission ("READ", ..., "FULL_CONTROL"), or NULL. */
const char *s3_acl_perm_name(int perm);

#endif
