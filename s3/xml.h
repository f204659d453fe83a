/*
 * xml: the S3 request bodies warmlake parses (no I/O), with expat. Documents
 * with a DTD are refused outright, so no entity can be declared or expanded
 * (billion laughs, external entities); only XML's five predefined entities
 * and character references are understood.
 */
#ifndef WL_S3XML_H
#define WL_S3XML_H

#include "s3/checksum.h"

#include <stddef.h>

#define S3_XML_MAX_PARTS 10000
#define S3_XML_MAX_KEYS  1000
#define S3_XML_MAX_KEY   1024

typedef struct {
    int part;
    char etag[80];
    int cks_algo; /* a ChecksumCRC32 (...) element's algorithm (s3/checksum.h), CKS_NONE if none */
    char cks[CKS_MAX_B64 + 8]; /* its value as sent */
    int cks_many;              /* more than one Checksum element */
} s3_xml_part_t;

/* CompleteMultipartUpload: on 0, *parts (malloc'd, n >= 1). ERR_INVAL when malformed. */
int s3_xml_complete(const char *body, size_t len, s3_xml_part_t **parts, int *n)
    __attribute__((warn_unused_result));

/* AccessControlPolicy bodies: s3/acl.h (s3_acl_parse_xml). */

/*
 * Length (1-4) of the character at s (n bytes available) when it is valid
 * UTF-8 (shortest form, no surrogates, at most U+10FFFF) and a character
 * XML 1.0 can carry (tab, LF, CR, U+0020 and up, not U+FFFE/U+FFFF); 0
 * otherwise.
 */
size_t s3_xml_char_len(const unsigned char *s, size_t n);
/* Whether all of s is such characters. */
int s3_xml_text_ok(const char *s, size_t n);
/* The same for any valid UTF-8 character but NUL (control characters included). */
size_t s3_utf8_char_len(const unsigned char *s, size_t n);
/*
 * Whether s is an acceptable object key (or listing parameter): valid UTF-8
 * without NUL. As in S3, control characters are allowed; listings write
 * what XML 1.0 cannot carry as character references (&#x1;), as S3 does,
 * and encoding-type=url gives them back exactly.
 */
int s3_key_ok(const char *s, size_t n);

/* A TagSet (PutObjectTagging / PutBucketTagging) of at most S3_XML_MAX_TAGS tags. */
#define S3_XML_MAX_TAGS 64
typedef struct {
    char key[513], value[1025]; /* as sent: room for 128 and 256 four-byte characters (the
                                   caller checks the limits in characters) */
} s3_xml_tag_t;
/* On 0, *tags (malloc'd) and *n (may be 0). ERR_INVAL when malformed, ERR_TOO_LARGE when
 * more than S3_XML_MAX_TAGS tags, ERR_RANGE when a Key or Value is longer than its room. */
int s3_xml_tagging(const char *body, size_t len, s3_xml_tag_t **tags, int *n)
    __attribute__((warn_unused_result));

/* Per object of a DeleteObjects: the conditions it names ("" / -1 when absent). */
typedef struct {
    char etag[80];
    char mtime[64]; /* LastModifiedTime as sent (ISO 8601) */
    long long size;
    char version_id[80]; /* VersionId as sent ("" when absent) */
} s3_xml_delcond_t;
/* DeleteObjects: on 0, *keys (free with s3_xml_free_keys), *n, *quiet. ERR_INVAL otherwise. */
/* conds (may be NULL): on 0, one entry per key (malloc'd, free()). */
int s3_xml_delete(const char *body, size_t len, char ***keys, int *n, int *quiet,
                  s3_xml_delcond_t **conds) __attribute__((warn_unused_result));
void s3_xml_free_keys(char **keys, int n);

/*
 * A batch GET (docs/batch-get.md): <BatchGet> of <Object> elements, each
 * with exactly one non-empty <Key> (at most S3_XML_MAX_KEY bytes) and at
 * most one <Range> and one <VersionId>; nothing else. An empty batch is
 * valid (n 0).
 */
#define S3_XML_BATCH_MAX   10000
#define S3_XML_BATCH_FIELD 128 /* a Range or VersionId value, NUL included */
typedef struct {
    char *key;                      /* malloc'd (s3_xml_batch_free) */
    char range[S3_XML_BATCH_FIELD]; /* as sent; "" when absent */
    char vid[S3_XML_BATCH_FIELD];   /* as sent; "" when absent (present but empty: refused) */
    int has_vid;
} s3_xml_batch_entry_t;
/* On 0, *entries (free with s3_xml_batch_free; NULL when n is 0) and *n. ERR_TOO_LARGE for
 * more than S3_XML_BATCH_MAX entries, ERR_INVAL when malformed, ERR_NOMEM. */
int s3_xml_batch_get(const char *body, size_t len, s3_xml_batch_entry_t **entries, int *n)
    __attribute__((warn_unused_result));
void s3_xml_batch_free(s3_xml_batch_entry_t *entries, int n);

/*
 * VersioningConfiguration (PutBucketVersioning): *status 1 Enabled,
 * 2 Suspended, 0 not given; *mfa_delete 1 when MfaDelete is Enabled.
 * ERR_INVAL when malformed or a value is neither of S3's.
 */
int s3_xml_versioning(const char *body, size_t len, int *status, int *mfa_delete)
    __attribute__((warn_unused_result));

#endif
