#include "s3/xml.h"

#include "common/err.h"
#include "common/num.h"
#include "common/mem.h"
#include "s3/checksum.h"

#include <expat.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

/* Every parse state starts with this. */
typedef struct {
    XML_Parser p;
    int bad;
} base_t;

static void stop(base_t *b)
{
    b->bad = 1;
    XML_StopParser(b->p, XML_FALSE);
}

/* Any DOCTYPE stops the parse: S3 bodies have none. */
static void XMLCALL no_doctype(void *ud, const XML_Char *name, const XML_Char *sysid,
                               const XML_Char *pubid, int internal)
{
    (void)name;
    (void)sysid;
    (void)pubid;
    (void)internal;
    stop(ud);
}

typedef struct {
    base_t b;
    s3_xml_part_t *parts;
    int n, cap, depth, in_part, field; /* field: 1 PartNumber, 2 ETag, 3 a Checksum* */
    int seen;                          /* the Part's fields so far: 1 << field */
    int field_algo;                    /* the Checksum element's algorithm */
    char text[CKS_MAX_B64 + 8];        /* (an ETag, a checksum) */
    size_t tl;
} cmu_t;

static void XMLCALL cmu_start(void *ud, const XML_Char *name, const XML_Char **attrs)
{
    cmu_t *c = ud;
    (void)attrs;
    c->depth++;
    if (c->depth == 1 && strcmp(name, "CompleteMultipartUpload") != 0) {
        stop(&c->b); /* not a CompleteMultipartUpload request: MalformedXML, as S3 */
        return;
    }
    if (c->depth == 2 && strcmp(name, "Part") == 0) {
        if (c->n == S3_XML_MAX_PARTS) {
            stop(&c->b);
            return;
        }
        if (c->n == c->cap) {
            c->cap = c->cap ? c->cap * 2 : 16;
            c->parts = xrealloc(c->parts, (size_t)c->cap * sizeof(*c->parts));
        }
        memset(&c->parts[c->n], 0, sizeof(c->parts[c->n]));
        c->in_part = 1;
        c->seen = 0;
    } else if (c->depth == 3 && c->in_part) {
        c->field = strcmp(name, "PartNumber") == 0 ? 1 : strcmp(name, "ETag") == 0 ? 2 : 0;
        /* ChecksumCRC32, ChecksumCRC32C, ChecksumCRC64NVME, ChecksumSHA1, ChecksumSHA256 */
        c->field_algo = strncmp(name, "Checksum", 8) == 0 ? cks_algo(name + 8) : CKS_NONE;
        if (c->field_algo != CKS_NONE) {
            if (c->parts[c->n].cks_algo != CKS_NONE) c->parts[c->n].cks_many = 1; /* the caller's */
            c->field = 3;
        }
        c->tl = 0;
    }
}

static void XMLCALL cmu_text(void *ud, const XML_Char *s, int len)
{
    cmu_t *c = ud;
    if (!c->field) return;
    if (c->tl + (size_t)len >= sizeof(c->text)) {
        stop(&c->b);
        return;
    }
    memcpy(c->text + c->tl, s, (size_t)len);
    c->tl += (size_t)len;
}

static void XMLCALL cmu_end(void *ud, const XML_Char *name)
{
    cmu_t *c = ud;
    (void)name;
    if (c->depth == 3 && c->field) {
        c->text[c->tl] = 0;
        if (c->field == 1) {
            /* An integer, strictly (surrounding XML white space aside): anything else ("1x",
             * "+1", "") is not one (MalformedXML, as S3's schema check); below 1 is the caller's
             * (InvalidArgument: -1 for any negative), above 10,000 is 10,001 (no part has it:
             * InvalidPart). */
            const char *t = c->text;
            size_t n = c->tl;
            while (n && (*t == ' ' || *t == '\t' || *t == '\n' || *t == '\r')) {
                t++;
                n--;
            }
            while (n &&
                   (t[n - 1] == ' ' || t[n - 1] == '\t' || t[n - 1] == '\n' || t[n - 1] == '\r'))
                n--;
            int neg = n > 1 && t[0] == '-';
            uint64_t v;
            /* (a 32-bit int, as the schema's: past it is no integer the schema knows) */
            if (num_parse_u64n(t + neg, n - (size_t)neg, 0, 2147483647u + (unsigned)neg, &v)) {
                stop(&c->b);
                return;
            }
            c->parts[c->n].part = neg ? (v ? -1 : 0) : v > 10000 ? 10001 : (int)v;
        } else if (c->field == 3) {
            c->parts[c->n].cks_algo = c->field_algo;
            snprintf(c->parts[c->n].cks, sizeof(c->parts[c->n].cks), "%s", c->text);
        } else if (c->tl < sizeof(c->parts[c->n].etag)) {
            memcpy(c->parts[c->n].etag, c->text, c->tl + 1);
        } else {
            stop(&c->b); /* longer than any ETag (as before the text grew for SHA-512s) */
            return;
        }
        c->seen |= 1 << c->field;
        c->field = 0;
    } else if (c->depth == 2 && c->in_part) {
        /* A Part without its PartNumber or ETag does not fit S3's schema: MalformedXML. */
        if ((c->seen & 6) != 6) {
            stop(&c->b);
            return;
        }
        c->in_part = 0;
        c->n++;
    }
    c->depth--;
}

static int run(base_t *b, const char *body, size_t len)
{
    XML_SetUserData(b->p, b);
    XML_SetStartDoctypeDeclHandler(b->p, no_doctype);
    int ok = len <= (size_t)1 << 30 && XML_Parse(b->p, body, (int)len, XML_TRUE) == XML_STATUS_OK &&
             !b->bad;
    XML_ParserFree(b->p);
    return ok ? 0 : ERR_INVAL;
}

int s3_xml_complete(const char *body, size_t len, s3_xml_part_t **parts, int *n)
{
    cmu_t c = {0};
    c.b.p = XML_ParserCreate(NULL);
    if (!c.b.p) return ERR_NOMEM;
    XML_SetElementHandler(c.b.p, cmu_start, cmu_end);
    XML_SetCharacterDataHandler(c.b.p, cmu_text);
    int rc = run(&c.b, body, len);
    if (rc || c.n == 0) {
        free(c.parts);
        return ERR_INVAL;
    }
    *parts = c.parts;
    *n = c.n;
    return 0;
}

typedef struct {
    base_t b;
    char **keys;
    s3_xml_delcond_t *conds, cur; /* cur: the conditions of the Object being read */
    int n, cap, depth, in_key, in_quiet, quiet, quiet_seen, cond_field, obj_first, in_object;
    char text[S3_XML_MAX_KEY + 1];
    size_t tl;
} del_t;

static void XMLCALL del_start(void *ud, const XML_Char *name, const XML_Char **attrs)
{
    del_t *d = ud;
    (void)attrs;
    d->depth++;
    d->tl = 0;
    if (d->depth == 1 && strcmp(name, "Delete") != 0) stop(&d->b); /* not a Delete request */
    if (d->depth == 2 && strcmp(name, "Object") == 0) d->in_object = 1;
    d->in_key = d->depth == 3 && d->in_object && strcmp(name, "Key") == 0;
    if (d->depth == 3 && !d->in_object) stop(&d->b); /* a Key (or anything) outside an Object */
    d->in_quiet = d->depth == 2 && strcmp(name, "Quiet") == 0;
    d->cond_field = d->depth != 3                           ? 0
                    : strcmp(name, "ETag") == 0             ? 1
                    : strcmp(name, "LastModifiedTime") == 0 ? 2
                    : strcmp(name, "Size") == 0             ? 3
                    : strcmp(name, "VersionId") == 0        ? 4
                                                            : 0;
    if (d->depth == 2 && strcmp(name, "Object") == 0) {
        memset(&d->cur, 0, sizeof(d->cur));
        d->cur.size = -1;
        d->obj_first = d->n; /* the Object must bring exactly one Key */
    }
}

static void XMLCALL del_text(void *ud, const XML_Char *s, int len)
{
    del_t *d = ud;
    if (!d->in_key && !d->in_quiet && !d->cond_field) return;
    if (d->tl + (size_t)len > S3_XML_MAX_KEY) {
        stop(&d->b);
        return;
    }
    memcpy(d->text + d->tl, s, (size_t)len);
    d->tl += (size_t)len;
}

static void XMLCALL del_end(void *ud, const XML_Char *name)
{
    del_t *d = ud;
    d->text[d->tl] = 0;
    if (d->cond_field == 1 && d->tl < sizeof(d->cur.etag)) {
        memcpy(d->cur.etag, d->text, d->tl + 1);
        if (!d->tl) strcpy(d->cur.etag, "\"\""); /* present but empty: matches no object */
    } else if (d->cond_field == 2 && d->tl < sizeof(d->cur.mtime)) {
        memcpy(d->cur.mtime, d->text, d->tl + 1);
    } else if (d->cond_field == 3) {
        uint64_t v;
        if (num_parse_u64(d->text, 0, INT64_MAX, &v) != 0) stop(&d->b);
        d->cur.size = (long long)v;
    } else if (d->cond_field == 4 && d->tl < sizeof(d->cur.version_id)) {
        memcpy(d->cur.version_id, d->text, d->tl + 1);
    } else if (d->cond_field) {
        stop(&d->b); /* too long to be what it names */
    } else if (d->in_key) {
        if (d->n == S3_XML_MAX_KEYS) {
            stop(&d->b);
        } else {
            if (d->n == d->cap) {
                d->cap = d->cap ? d->cap * 2 : 16;
                d->keys = xrealloc(d->keys, (size_t)d->cap * sizeof(*d->keys));
                d->conds = xrealloc(d->conds, (size_t)d->cap * sizeof(*d->conds));
            }
            memset(&d->conds[d->n], 0, sizeof(*d->conds));
            d->conds[d->n].size = -1;
            d->keys[d->n++] = xstrdup(d->text);
        }
    } else if (d->depth == 2 && strcmp(name, "Object") == 0) {
        if (d->n != d->obj_first + 1)
            stop(&d->b);
        else
            d->conds[d->n - 1] = d->cur; /* the Object's conditions, whatever their order */
        d->in_object = 0;
    } else if (d->in_quiet) {
        /* xs:boolean (true, false, 1, 0; whitespace collapsed), the case of true and false
         * aside: S3 takes "True" (minio-py sends it). Anything else, or a second Quiet, does
         * not validate against the schema: "yes" was read as false, every key reported. */
        const char *t = d->text + strspn(d->text, " \t\r\n");
        size_t tl = strlen(t);
        while (tl && strchr(" \t\r\n", t[tl - 1]))
            tl--;
        int q = (tl == 4 && !strncasecmp(t, "true", 4)) || (tl == 1 && t[0] == '1')    ? 1
                : (tl == 5 && !strncasecmp(t, "false", 5)) || (tl == 1 && t[0] == '0') ? 0
                                                                                       : -1;
        if (q < 0 || d->quiet_seen++) stop(&d->b);
        d->quiet = q == 1;
    }
    d->in_key = d->in_quiet = d->cond_field = 0;
    d->depth--;
}

int s3_xml_delete(const char *body, size_t len, char ***keys, int *n, int *quiet,
                  s3_xml_delcond_t **conds)
{
    del_t d = {0};
    d.b.p = XML_ParserCreate(NULL);
    if (!d.b.p) return ERR_NOMEM;
    XML_SetElementHandler(d.b.p, del_start, del_end);
    XML_SetCharacterDataHandler(d.b.p, del_text);
    if (run(&d.b, body, len) != 0) {
        s3_xml_free_keys(d.keys, d.n);
        free(d.conds);
        return ERR_INVAL;
    }
    if (conds)
        *conds = d.conds;
    else
        free(d.conds);
    *keys = d.keys;
    *n = d.n;
    *quiet = d.quiet;
    return 0;
}

void s3_xml_free_keys(char **keys, int n)
{
    for (int i = 0; i < n; i++)
        free(keys[i]);
    free(keys);
}

/* A UTF-8 character's length (0: not valid UTF-8); xml: only what XML 1.0 can carry. */
static size_t char_len(const unsigned char *s, size_t n, int xml)
{
    if (n == 0) return 0;
    unsigned c = s[0];
    if (c < 0x80) return c >= 0x20 || c == '\t' || c == '\n' || c == '\r' || (!xml && c) ? 1 : 0;
    size_t len;
    uint32_t cp, min;
    if ((c & 0xE0) == 0xC0) {
        len = 2;
        cp = c & 0x1F;
        min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
        len = 3;
        cp = c & 0x0F;
        min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
        len = 4;
        cp = c & 0x07;
        min = 0x10000;
    } else {
        return 0;
    }
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF) ||
        (xml && (cp == 0xFFFE || cp == 0xFFFF)))
        return 0;
    return len;
}

size_t s3_xml_char_len(const unsigned char *s, size_t n)
{
    return char_len(s, n, 1);
}

size_t s3_utf8_char_len(const unsigned char *s, size_t n)
{
    return char_len(s, n, 0);
}

int s3_key_ok(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    while (n) {
        size_t l = char_len(p, n, 0);
        if (!l) return 0;
        p += l;
        n -= l;
    }
    return 1;
}

int s3_xml_text_ok(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    while (n) {
        size_t l = s3_xml_char_len(p, n);
        if (!l) return 0;
        p += l;
        n -= l;
    }
    return 1;
}

typedef struct {
    base_t b;
    s3_xml_tag_t *tags;
    int n, depth, field, in_tag, seen; /* seen: this Tag's fields (1 << field), a TagSet's 8 */
    int too; /* ERR_TOO_LARGE: too many tags; ERR_RANGE: a Key or Value too long */
    char text[sizeof(((s3_xml_tag_t *)0)->value)]; /* the longest field: a Value */
    size_t tl;
} tag_t;

static void XMLCALL tag_start(void *ud, const XML_Char *name, const XML_Char **attrs)
{
    tag_t *t = ud;
    (void)attrs;
    t->depth++;
    t->tl = 0;
    t->field = 0;
    if ((t->depth == 1 && strcmp(name, "Tagging") != 0) ||
        (t->depth == 2 && strcmp(name, "TagSet") != 0) ||
        (t->depth == 3 && strcmp(name, "Tag") != 0) || t->depth > 4 ||
        (t->depth == 2 && (t->seen & 8))) { /* one TagSet: two would not be one set of tags */
        stop(&t->b);
        return;
    }
    if (t->depth == 2) t->seen = 8;
    if (t->depth == 3) {
        if (t->n == S3_XML_MAX_TAGS) {
            t->too = ERR_TOO_LARGE;
            stop(&t->b);
            return;
        }
        t->tags = xrealloc(t->tags, (size_t)(t->n + 1) * sizeof(*t->tags));
        memset(&t->tags[t->n], 0, sizeof(*t->tags));
        t->in_tag = 1;
        t->seen &= 8;
    }
    if (t->depth == 4) t->field = !strcmp(name, "Key") ? 1 : !strcmp(name, "Value") ? 2 : 0;
    /* One Key and at most one Value: of two, which would be the tag's is anyone's guess. */
    if (t->depth == 4 && (!t->field || (t->seen & 1 << t->field))) {
        stop(&t->b);
        return;
    }
    if (t->depth == 4) t->seen |= 1 << t->field;
}

static void XMLCALL tag_text(void *ud, const XML_Char *s, int len)
{
    tag_t *t = ud;
    if (!t->field) return;
    size_t cap = t->field == 1 ? sizeof(t->tags->key) : sizeof(t->tags->value);
    if (t->tl + (size_t)len >= cap) {
        t->too = ERR_RANGE;
        stop(&t->b);
        return;
    }
    memcpy(t->text + t->tl, s, (size_t)len);
    t->tl += (size_t)len;
}

static void XMLCALL tag_end(void *ud, const XML_Char *name)
{
    tag_t *t = ud;
    (void)name;
    if (t->depth == 4 && t->field) {
        t->text[t->tl] = 0;
        if (t->field == 1) {
            memcpy(t->tags[t->n].key, t->text, t->tl + 1);
        } else {
            memcpy(t->tags[t->n].value, t->text, t->tl + 1);
        }
        t->field = 0;
    } else if (t->depth == 3 && t->in_tag) {
        /* A Tag without a Key, or without a Value: S3's Tag requires both (API_Tag; an
         * empty <Value/> is a value). The header form "k" is k="", not this. */
        if (!(t->seen & 2) || !(t->seen & 4)) stop(&t->b);
        t->in_tag = 0;
        t->n++;
    }
    t->depth--;
}

int s3_xml_tagging(const char *body, size_t len, s3_xml_tag_t **tags, int *n)
{
    tag_t t = {0};
    t.b.p = XML_ParserCreate(NULL);
    if (!t.b.p) return ERR_NOMEM;
    XML_SetElementHandler(t.b.p, tag_start, tag_end);
    XML_SetCharacterDataHandler(t.b.p, tag_text);
    /* A Tagging without its TagSet does not validate against S3's schema (MalformedXML); an
     * empty TagSet is a set of no tags. */
    if (run(&t.b, body, len) != 0 || !(t.seen & 8)) {
        free(t.tags);
        return t.too ? t.too : ERR_INVAL;
    }
    *tags = t.tags;
    *n = t.n;
    return 0;
}

typedef struct {
    base_t b;
    int depth, field, status, mfa; /* field: 1 Status, 2 MfaDelete */
    int seen;                      /* fields read (bits 1 << field) */
    char text[16];
    size_t tl;
} ver_t;

static void XMLCALL ver_start(void *ud, const XML_Char *name, const XML_Char **attrs)
{
    ver_t *v = ud;
    (void)attrs;
    v->depth++;
    v->tl = 0;
    if (v->depth == 1 && strcmp(name, "VersioningConfiguration") != 0) stop(&v->b);
    v->field = v->depth != 2                    ? 0
               : strcmp(name, "Status") == 0    ? 1
               : strcmp(name, "MfaDelete") == 0 ? 2
                                                : 0;
    /* Two Status elements are not one setting: which would win is anyone's guess. */
    if (v->field && (v->seen & 1 << v->field)) stop(&v->b);
    v->seen |= 1 << v->field;
}

static void XMLCALL ver_text(void *ud, const XML_Char *s, int len)
{
    ver_t *v = ud;
    if (!v->field) return;
    if (v->tl + (size_t)len >= sizeof(v->text)) {
        stop(&v->b);
        return;
    }
    memcpy(v->text + v->tl, s, (size_t)len);
    v->tl += (size_t)len;
}

static void XMLCALL ver_end(void *ud, const XML_Char *name)
{
    ver_t *v = ud;
    (void)name;
    v->text[v->tl] = 0;
    if (v->field == 1) {
        v->status = !strcmp(v->text, "Enabled") ? 1 : !strcmp(v->text, "Suspended") ? 2 : -1;
        if (v->status < 0) stop(&v->b);
    } else if (v->field == 2) {
        v->mfa = !strcmp(v->text, "Enabled") ? 1 : !strcmp(v->text, "Disabled") ? 0 : -1;
        if (v->mfa < 0) stop(&v->b);
    }
    v->field = 0;
    v->depth--;
}

int s3_xml_versioning(const char *body, size_t len, int *status, int *mfa_delete)
{
    ver_t v = {0};
    v.b.p = XML_ParserCreate(NULL);
    if (!v.b.p) return ERR_NOMEM;
    XML_SetElementHandler(v.b.p, ver_start, ver_end);
    XML_SetCharacterDataHandler(v.b.p, ver_text);
    if (run(&v.b, body, len) != 0) return ERR_INVAL;
    *status = v.status;
    *mfa_delete = v.mfa;
    return 0;
}

typedef struct {
    base_t b;
    s3_xml_batch_entry_t *e;
    int n, cap, depth, field, too_many; /* field: 1 Key, 2 Range, 3 VersionId */
    int open;                           /* e[n] is an Object being read */
    int seen;                           /* fields of the Object being read (bits 1 << field) */
    char text[S3_XML_MAX_KEY + 1];
    size_t tl;
} bat_t;

static void XMLCALL bat_start(void *ud, const XML_Char *name, const XML_Char **attrs)
{
    bat_t *t = ud;
    (void)attrs;
    t->depth++;
    t->tl = 0;
    t->field = 0;
    if ((t->depth == 1 && strcmp(name, "BatchGet") != 0) ||
        (t->depth == 2 && strcmp(name, "Object") != 0) || t->depth > 3) {
        stop(&t->b);
        return;
    }
    if (t->depth == 2) {
        if (t->n == S3_XML_BATCH_MAX) {
            t->too_many = 1;
            stop(&t->b);
            return;
        }
        if (t->n == t->cap) {
            t->cap = t->cap ? t->cap * 2 : 16;
            t->e = xrealloc(t->e, (size_t)t->cap * sizeof(*t->e));
        }
        memset(&t->e[t->n], 0, sizeof(*t->e));
        t->open = 1;
        t->seen = 0;
    } else if (t->depth == 3) {
        t->field = !strcmp(name, "Key")         ? 1
                   : !strcmp(name, "Range")     ? 2
                   : !strcmp(name, "VersionId") ? 3
                                                : 0;
        /* Each field at most once, and nothing S3 would read as something else. */
        if (!t->field || (t->seen & (1 << t->field))) {
            stop(&t->b);
            return;
        }
        t->seen |= 1 << t->field;
    }
}

static void XMLCALL bat_text(void *ud, const XML_Char *s, int len)
{
    bat_t *t = ud;
    if (!t->field) return;
    size_t cap = t->field == 1 ? S3_XML_MAX_KEY + 1 : S3_XML_BATCH_FIELD;
    if (t->tl + (size_t)len >= cap) {
        stop(&t->b);
        return;
    }
    memcpy(t->text + t->tl, s, (size_t)len);
    t->tl += (size_t)len;
}

static void XMLCALL bat_end(void *ud, const XML_Char *name)
{
    bat_t *t = ud;
    (void)name;
    s3_xml_batch_entry_t *e = t->open ? &t->e[t->n] : NULL;
    if (t->depth == 3 && t->field && e) {
        t->text[t->tl] = 0;
        /* An empty key or version id names nothing (S3 refuses both). A key holds no NUL:
         * expat never gives one (XML cannot carry it). */
        if (t->tl == 0 && t->field != 2) {
            stop(&t->b);
        } else if (t->field == 1) {
            e->key = xmalloc(t->tl + 1);
            memcpy(e->key, t->text, t->tl + 1);
        } else if (t->field == 2) {
            memcpy(e->range, t->text, t->tl + 1);
        } else {
            memcpy(e->vid, t->text, t->tl + 1);
            e->has_vid = 1;
        }
        t->field = 0;
    } else if (t->depth == 2 && e) {
        if (!e->key) {
            stop(&t->b); /* an Object without a Key */
        } else {
            t->open = 0;
            t->n++;
        }
    }
    t->depth--;
}

int s3_xml_batch_get(const char *body, size_t len, s3_xml_batch_entry_t **entries, int *n)
{
    bat_t t = {0};
    t.b.p = XML_ParserCreate(NULL);
    if (!t.b.p) return ERR_NOMEM;
    XML_SetElementHandler(t.b.p, bat_start, bat_end);
    XML_SetCharacterDataHandler(t.b.p, bat_text);
    int rc = run(&t.b, body, len);
    if (rc != 0) {
        /* The Object being read when the parse stopped may hold a key of its own. */
        if (t.open) free(t.e[t.n].key);
        s3_xml_batch_free(t.e, t.n);
        return t.too_many ? ERR_TOO_LARGE : ERR_INVAL;
    }
    *entries = t.e;
    *n = t.n;
    return 0;
}

void s3_xml_batch_free(s3_xml_batch_entry_t *entries, int n)
{
    for (int i = 0; entries && i < n; i++)
        free(entries[i].key);
    free(entries);
}
