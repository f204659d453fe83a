/*
 * s3_mpu_cks: the additional checksums of multipart uploads, and reading
 * one part of an object (GET/HEAD ?partNumber).
 *
 * An upload created with x-amz-checksum-algorithm keeps "algo:TYPE" in its
 * record's metadata (CKA_META); every part of it gets that algorithm's
 * checksum, computed here whether or not the client sent one (a value sent
 * is checked first, as on PutObject), and kept with the part (CKS_META).
 * Complete, under the upload's lock (obj_mpu_hooks_t), checks the parts'
 * checksums the client lists, keeps each part's in the manifest (the note
 * obj_read_part_note returns) and gives the object its checksum, in CKS_META
 * as on a PUT:
 *   COMPOSITE    the checksum of the parts' raw digests, "-N" appended;
 *   FULL_OBJECT  the CRC of the whole object, the parts' CRCs combined
 *                (cks_crc_combine: no byte is read again).
 * A composite value is told from a full one by its "-N" (base64 has no '-'),
 * so an object needs no entry for the type.
 *
 * An upload created without an algorithm gets S3's default as a PUT does: each
 * part's CRC64NVME is computed (kept in CKS_META, or in CKD_META beside a
 * checksum the client sent in another algorithm), and Complete combines them
 * into a FULL_OBJECT value; when a part has none (uploaded by an older build),
 * the object has none.
 */

#include "server/s3_int.h"

/* ---- CreateMultipartUpload ---- */

int s3_mpu_cks_create(ctx_t *x, buf_t *um, char hdr[160])
{
    const char *an = s3_hdr(x->info, "x-amz-checksum-algorithm");
    const char *tn = s3_hdr(x->info, "x-amz-checksum-type");
    hdr[0] = 0;
    if (!an && !tn) return 0;
    int algo = an ? cks_algo(an) : CKS_NONE;
    if (an && (!algo || strncasecmp(an, "x-amz-", 6) == 0)) {
        s3_err_msg(x, S3E_INVALID_REQUEST, S3_CKS_UNSUPPORTED);
        return -1;
    }
    if (!an) { /* a type needs its algorithm */
        s3_err_msg(x, S3E_INVALID_REQUEST,
                   "The x-amz-checksum-type header can only be used with the "
                   "x-amz-checksum-algorithm header.");
        return -1;
    }
    int full;
    if (!tn)
        full = algo == CKS_CRC64NVME; /* AWS: CRC64NVME is full-object only */
    else if (!strcasecmp(tn, "FULL_OBJECT"))
        full = 1;
    else if (!strcasecmp(tn, "COMPOSITE"))
        full = 0;
    else {
        s3_err_msg(x, S3E_INVALID_REQUEST, "Value for x-amz-checksum-type header is invalid.");
        return -1;
    }
    /* Full-object values combine only for CRCs; CRC64NVME has no composite form. */
    if ((full && !cks_is_crc(algo)) || (!full && algo == CKS_CRC64NVME)) {
        char msg[128];
        snprintf(msg, sizeof(msg),
                 "The %s checksum type cannot be used with the %s checksum algorithm.",
                 full ? "FULL_OBJECT" : "COMPOSITE", cks_name(algo));
        s3_err_msg(x, S3E_INVALID_REQUEST, msg);
        return -1;
    }
    char v[48], up[16];
    snprintf(v, sizeof(v), "%s:%s", cks_name(algo), full ? "FULL_OBJECT" : "COMPOSITE");
    s3_pairs_set(um, CKA_META, v);
    snprintf(up, sizeof(up), "%s", cks_name(algo));
    for (char *c = up; *c; c++)
        *c = (char)(*c >= 'a' && *c <= 'z' ? *c - 32 : *c);
    snprintf(hdr, 160, "x-amz-checksum-algorithm: %s\r\nx-amz-checksum-type: %s\r\n", up,
             full ? "FULL_OBJECT" : "COMPOSITE");
    return 0;
}

/* The algorithm of a kept "algo:value" (CKS_META, CKA_META) and *value, what follows the colon;
 * CKS_NONE (*value "") when there is none. */
static int kept_split(const char *kept, const char **value)
{
    const char *colon = strchr(kept, ':');
    char name[16];
    *value = "";
    if (!colon || (size_t)(colon - kept) >= sizeof(name)) return CKS_NONE;
    snprintf(name, sizeof(name), "%.*s", (int)(colon - kept), kept);
    int algo = cks_algo(name);
    if (algo) *value = colon + 1;
    return algo;
}

/* The algorithm and type of an upload (its record's CKA_META). */
static int upload_algo(const obj_info_t *rec, int *full)
{
    const char *type;
    int algo = kept_split(s3_umeta_get(rec, CKA_META), &type);
    *full = strcmp(type, "FULL_OBJECT") == 0;
    return algo;
}

int s3_cks_composite_algo(const char *kept)
{
    const char *v;
    int algo = kept_split(kept, &v);
    return strchr(v, '-') ? algo : CKS_NONE;
}

/* "CRC32" for crc32: the element and member names of the API. */
static const char *upper_name(int algo)
{
    static const char *const up[CKS_N] = {"",         "CRC32",   "CRC32C",   "CRC64NVME",
                                          "SHA1",     "SHA256",  "SHA512",   "MD5",
                                          "XXHASH64", "XXHASH3", "XXHASH128"};
    return algo > 0 && algo < CKS_N ? up[algo] : "";
}

void s3_mpu_cks_upload_xml(buf_t *b, const obj_info_t *rec)
{
    int full, algo = upload_algo(rec, &full);
    if (algo)
        buf_printf(b, "<ChecksumAlgorithm>%s</ChecksumAlgorithm><ChecksumType>%s</ChecksumType>",
                   upper_name(algo), full ? "FULL_OBJECT" : "COMPOSITE");
}

/* ---- UploadPart ---- */

/* The algorithm a request's body checksum is in (header or trailer), as s3_stream_body picks
 * it; CKS_NONE for none or one it will refuse. */
int s3_cks_request_algo(ctx_t *x)
{
    char hname[40];
    for (int a = CKS_CRC32; a < CKS_N; a++) {
        snprintf(hname, sizeof(hname), "x-amz-checksum-%s", cks_name(a));
        if (s3_hdr(x->info, hname)) return a;
    }
    return cks_algo(s3_hdr(x->info, "x-amz-trailer"));
}

int s3_mpu_cks_part_begin(ctx_t *x, const obj_info_t *rec, int copy)
{
    int full, algo = upload_algo(rec, &full), sent = s3_cks_request_algo(x);
    /*
     * A COMPOSITE upload's checksum is made of its parts' own, so S3 wants each part's
     * from its client ("null" when none came); a FULL_OBJECT one's parts are computed here
     * when they come without (their CRCs combine). A copied part has no body to check.
     */
    if (algo && ((sent && sent != algo) || (!sent && !full && !copy))) {
        char msg[160];
        snprintf(msg, sizeof(msg),
                 "Checksum Type mismatch occurred, expected checksum Type: %s, actual checksum "
                 "Type: %s",
                 cks_name(algo), sent ? cks_name(sent) : "null");
        s3_err_msg(x, S3E_INVALID_REQUEST, msg);
        return -1;
    }
    x->cks_default = algo; /* computed (and kept) even when the client sends none */
    if (!algo) {
        /* No algorithm: S3's default, FULL_OBJECT, made of each part's (cks_part). A part
         * that sends another checksum keeps both, the default in CKD_META. */
        x->cks_default = S3_CKS_DEFAULT;
        x->cks_also = S3_CKS_DEFAULT;
    }
    return 0;
}

/* ---- CompleteMultipartUpload ---- */

/* A part of an upload without an algorithm: its S3_CKS_DEFAULT (kept, or beside the one its
 * client sent) folded into the object's. No note: a Complete cut short by a kill is resumed
 * only with the very manifest it recorded, which an older build made without notes. */
static int default_part(s3_mpu_cks_t *c, const obj_info_t *head, const char *kept)
{
    const char *value;
    int algo = kept_split(kept, &value);
    if (algo != S3_CKS_DEFAULT) algo = kept_split(s3_umeta_get(head, CKD_META), &value);
    uint8_t d[8];
    if (algo != S3_CKS_DEFAULT || cks_decode(algo, value, d) != 0) {
        c->dflt_missing = 1;
    } else if (!c->dflt_missing) {
        uint64_t crc = cks_crc_from_digest(algo, d);
        c->crc = c->dflt_parts ? cks_crc_combine(algo, c->crc, crc, head->size) : crc;
        c->dflt_parts++;
    }
    return 0;
}

static int cks_part(void *arg, int i, const obj_info_t *head, char note[OBJ_MPU_NOTE_MAX])
{
    s3_mpu_cks_t *c = arg;
    const s3_xml_part_t *xp = &c->xp[i];
    const char *kept = s3_umeta_get(head, CKS_META), *value;
    int kept_algo = kept_split(kept, &value);
    c->total += head->size;
    /* A checksum listed must be the part's, in its algorithm. */
    if (xp->cks_algo && (xp->cks_algo != kept_algo || strcmp(xp->cks, value) != 0)) {
        c->refused = 1;
        c->err = S3E_INVALID_PART;
        snprintf(c->msg, sizeof(c->msg),
                 "One or more of the specified parts could not be found. The part may not have "
                 "been uploaded, or the specified checksum may not match the part's checksum.");
        return -1;
    }
    if (!c->algo) return default_part(c, head, kept);
    /* AWS: with checksums, part numbers start at 1 and follow each other. */
    if (xp->part != i + 1) {
        c->refused = 1;
        c->err = S3E_INVALID_PART_ORDER;
        snprintf(c->msg, sizeof(c->msg),
                 "The list of parts was not in ascending order. Parts must be consecutive and "
                 "start at 1 when the upload has a checksum algorithm.");
        return -1;
    }
    if (!xp->cks_algo && !c->full) { /* a composite value is over what the client names */
        c->refused = 1;
        c->err = S3E_INVALID_REQUEST;
        snprintf(c->msg, sizeof(c->msg),
                 "The upload was created using a %s checksum. The complete request must include "
                 "the checksum for each part. It was missing for part %d in the request.",
                 cks_name(c->algo), xp->part);
        return -1;
    }
    uint8_t d[EVP_MAX_MD_SIZE];
    if (kept_algo != c->algo || cks_decode(c->algo, value, d) != 0) {
        /* Every part of the upload got one at upload: this part predates it, or was damaged. */
        c->refused = 1;
        c->err = S3E_INVALID_PART;
        snprintf(c->msg, sizeof(c->msg), "Part %d has no %s checksum.", xp->part,
                 cks_name(c->algo));
        return -1;
    }
    if (!c->full) {
        cks_update(&c->comp, d, cks_digest_len(c->algo));
    } else {
        uint64_t crc = cks_crc_from_digest(c->algo, d);
        c->crc = i == 0 ? crc : cks_crc_combine(c->algo, c->crc, crc, head->size);
    }
    snprintf(note, OBJ_MPU_NOTE_MAX, "%s", kept);
    c->n++;
    return 0;
}

static int cks_finish(void *arg, char *umeta, size_t *umeta_len, size_t cap)
{
    s3_mpu_cks_t *c = arg;
    if (c->mp_size >= 0 && (uint64_t)c->mp_size != c->total) {
        c->refused = 1;
        c->err = S3E_INVALID_REQUEST;
        snprintf(c->msg, sizeof(c->msg),
                 "The provided 'x-amz-mp-object-size' header value %lld does not match what was "
                 "computed: %llu",
                 c->mp_size, (unsigned long long)c->total);
        return -1;
    }
    char v[CKS_MAX_B64 + 8];
    if (c->algo) {
        if (c->full) {
            uint8_t d[8];
            cks_crc_to_digest(c->algo, c->crc, d);
            cks_encode(d, cks_digest_len(c->algo), v, sizeof(v));
        } else {
            cks_final(&c->comp, v, sizeof(v));
            size_t l = strlen(v);
            snprintf(v + l, sizeof(v) - l, "-%d", c->n);
        }
        if (c->expect[0] && strcmp(c->expect, v) != 0) {
            c->refused = 1;
            c->err = S3E_BAD_DIGEST;
            snprintf(c->msg, sizeof(c->msg),
                     "The %s you specified did not match the calculated checksum.",
                     cks_name(c->algo));
            return -1;
        }
    }
    int dflt = !c->algo && c->dflt_parts && !c->dflt_missing;
    if (dflt) {
        uint8_t d[8];
        cks_crc_to_digest(S3_CKS_DEFAULT, c->crc, d);
        cks_encode(d, cks_digest_len(S3_CKS_DEFAULT), v, sizeof(v));
    }
    /* The default named in the request (S3_CKS_DEFAULT only: cks_begin) is checked too. */
    if (!c->algo && c->expect[0] && (!dflt || strcmp(c->expect, v) != 0)) {
        c->refused = 1;
        c->err = dflt ? S3E_BAD_DIGEST : S3E_INVALID_REQUEST;
        snprintf(c->msg, sizeof(c->msg), "%s",
                 dflt ? "The crc64nvme you specified did not match the calculated checksum."
                      : "The upload was created without a checksum algorithm.");
        return -1;
    }
    buf_t um = {xmalloc(*umeta_len + 1), *umeta_len, *umeta_len + 1};
    memcpy(um.p, umeta, *umeta_len);
    if (dflt) {
        char kept[128];
        snprintf(kept, sizeof(kept), "%s:%s", cks_name(S3_CKS_DEFAULT), v);
        s3_pairs_set(&um, CKS_META, kept);
        s3_pairs_set(&um, CK0_META, "1");
        /* The default is S3's, not asked for: an upload whose metadata leaves no room for it
         * (created at the limit, which counts none) completes without it. */
        if (um.len > cap) {
            s3_pairs_set(&um, CKS_META, NULL);
            s3_pairs_set(&um, CK0_META, NULL);
        }
    }
    if (c->algo) {
        char kept[128];
        snprintf(kept, sizeof(kept), "%s:%s", cks_name(c->algo), v);
        s3_pairs_set(&um, CKA_META, NULL); /* the upload's, not the object's */
        s3_pairs_set(&um, CKS_META, kept);
    }
    int rc = um.len > cap ? -1 : 0;
    if (!rc) {
        if (um.len) memcpy(umeta, um.p, um.len); /* (um.p may be NULL once emptied) */
        *umeta_len = um.len;
    } else {
        c->refused = 1;
        c->err = S3E_METADATA_TOO_LARGE;
        c->msg[0] = 0;
    }
    free(um.p);
    return rc;
}

/* First, with the upload's record (under its lock): what the request says of the object's
 * checksum must fit the upload's algorithm and type. */
static int cks_begin(void *arg, const obj_info_t *rec)
{
    s3_mpu_cks_t *c = arg;
    c->began = 1;
    /* Only the upload's initiator completes it (S3), decided on the record under its lock. */
    if (!s3_initiated(c->x, rec)) {
        c->refused = 1;
        c->err = S3E_ACCESS_DENIED;
        c->msg[0] = 0;
        return -1;
    }
    c->algo = upload_algo(rec, &c->full);
    const char *msg = NULL;
    s3_err_t err = S3E_INVALID_REQUEST;
    /* Without an algorithm the object gets S3's default, a FULL_OBJECT CRC64NVME, which a
     * Complete may name (checked in cks_finish). */
    int dflt_named = !c->algo && c->expect_algo == S3_CKS_DEFAULT;
    if (c->expect_algo && c->expect_algo != c->algo && !dflt_named) {
        msg = c->algo ? "The checksum header names another algorithm than the upload's."
                      : "The upload was created without a checksum algorithm.";
    } else if (c->type[0] && !c->algo && !dflt_named) {
        msg = "The x-amz-checksum-type header does not match the upload's checksum type.";
    } else if (c->type[0] &&
               strcasecmp(c->type, c->algo && !c->full ? "COMPOSITE" : "FULL_OBJECT")) {
        msg = "The x-amz-checksum-type header does not match the upload's checksum type.";
        if (c->algo) err = S3E_BAD_DIGEST; /* as S3 documents a type other than the upload's */
    }
    if (msg) {
        c->refused = 1;
        c->err = err;
        snprintf(c->msg, sizeof(c->msg), "%s", msg);
        return -1;
    }
    if (c->algo && !c->full && cks_init(&c->comp, c->algo) != 0) {
        c->refused = 1;
        c->err = S3E_INTERNAL;
        c->msg[0] = 0;
        return -1;
    }
    return 0;
}

int s3_mpu_cks_complete_begin(ctx_t *x, const s3_xml_part_t *xp, int np, s3_mpu_cks_t *c,
                              obj_mpu_hooks_t *hooks)
{
    memset(c, 0, sizeof(*c));
    c->x = x;
    c->xp = xp;
    c->mp_size = -1;
    hooks->begin = cks_begin;
    hooks->part = cks_part;
    hooks->finish = cks_finish;
    hooks->arg = c;
    const char *mps = s3_hdr(x->info, "x-amz-mp-object-size");
    uint64_t v;
    if (mps) {
        if (num_parse_u64(mps, 0, INT64_MAX, &v) != 0) {
            char msg[160];
            snprintf(msg, sizeof(msg), "Value for x-amz-mp-object-size header is %s: '%.64s'",
                     mps[0] == '-' && mps[1] >= '0' && mps[1] <= '9' ? "less than zero" : "invalid",
                     mps);
            s3_err_msg(x, S3E_INVALID_REQUEST, msg);
            return -1;
        }
        c->mp_size = (long long)v;
    }
    /* A part's checksum that is no value of its kind, or two of them: refused before any
     * part is looked at (S3: InvalidArgument), not taken for a part that does not match. */
    for (const s3_xml_part_t *p = xp; p < xp + np; p++) {
        uint8_t d[EVP_MAX_MD_SIZE];
        if (p->cks_many || (p->cks_algo && cks_decode(p->cks_algo, p->cks, d) != 0)) {
            s3_err_msg(x, S3E_INVALID_ARGUMENT,
                       "Invalid Base64 or multiple checksums present in request");
            return -1;
        }
    }
    /* x-amz-checksum-ALGO of the whole object: checked against what the parts make. */
    char hname[40];
    for (int a = CKS_CRC32; a < CKS_N; a++) {
        snprintf(hname, sizeof(hname), "x-amz-checksum-%s", cks_name(a));
        const char *val = s3_hdr(x->info, hname);
        if (!val) continue;
        if (c->expect_algo) {
            s3_err_msg(x, S3E_INVALID_REQUEST, S3_CKS_MULTIPLE);
            return -1;
        }
        c->expect_algo = a;
        snprintf(c->expect, sizeof(c->expect), "%s", val);
        /* A value that is no checksum of its kind (empty, not base64, the wrong length; a
         * composite one's "-N" aside) was not compared: InvalidRequest, as on PutObject. */
        char *dash = strchr(c->expect, '-');
        uint8_t d[EVP_MAX_MD_SIZE];
        if (dash) *dash = 0;
        int bad = strlen(val) >= sizeof(c->expect) || cks_decode(a, c->expect, d) != 0 ||
                  (dash && num_parse_int(dash + 1, 1, 10000, &(int){0}) != 0);
        if (dash) *dash = '-';
        if (bad) {
            char msg[96];
            snprintf(msg, sizeof(msg), "Value for x-amz-checksum-%s header is invalid.",
                     cks_name(a));
            s3_err_msg(x, S3E_INVALID_REQUEST, msg);
            return -1;
        }
    }
    const char *tn = s3_hdr(x->info, "x-amz-checksum-type");
    if (tn && strcasecmp(tn, "COMPOSITE") != 0 && strcasecmp(tn, "FULL_OBJECT") != 0) {
        s3_err_msg(x, S3E_INVALID_REQUEST, "Value for x-amz-checksum-type header is invalid.");
        return -1;
    }
    snprintf(c->type, sizeof(c->type), "%s", tn ? tn : "");
    return 0;
}

int s3_mpu_cks_complete_error(ctx_t *x, s3_mpu_cks_t *c)
{
    if (!c->refused) return 0;
    if (c->msg[0])
        s3_err_msg(x, c->err, c->msg);
    else
        s3_err(x, c->err);
    return 1;
}

void s3_mpu_cks_complete_end(s3_mpu_cks_t *c)
{
    cks_free(&c->comp);
}

/* The kept "algo:value" as its element and the type; value without "-N" when strip. */
static void object_cks_xml(buf_t *b, const char *kept, int strip)
{
    const char *v;
    int algo = kept_split(kept, &v);
    const char *dash = strchr(v, '-');
    if (!algo) return;
    buf_printf(b, "<Checksum%s>%.*s</Checksum%s><ChecksumType>%s</ChecksumType>", upper_name(algo),
               (int)(dash && strip ? (size_t)(dash - v) : strlen(v)), v, upper_name(algo),
               dash ? "COMPOSITE" : "FULL_OBJECT");
}

void s3_mpu_cks_object_xml(buf_t *b, const obj_info_t *info)
{
    object_cks_xml(b, s3_umeta_get(info, CKS_META), 0);
}

/* An inline object written without a checksum: S3's default, computed from its bytes. */
static int default_cks_virtual(const obj_info_t *info)
{
    return info->inl && !info->multipart && !info->deleted && !s3_umeta_get(info, CKS_META)[0];
}

const char *s3_cks_of(const obj_info_t *info, obj_reader_t *rd, char buf[S3_CKS_MAX])
{
    const uint8_t *bytes = rd ? obj_read_inline(rd) : NULL;
    if (!default_cks_virtual(info) || (!bytes && info->size)) return s3_umeta_get(info, CKS_META);
    cks_t c;
    char v[64];
    if (cks_init(&c, S3_CKS_DEFAULT) != 0) return "";
    cks_update(&c, bytes, (size_t)info->size);
    cks_final(&c, v, sizeof(v));
    snprintf(buf, S3_CKS_MAX, "%s:%s", cks_name(S3_CKS_DEFAULT), v);
    return buf;
}

void s3_cks_list_xml(buf_t *b, const obj_info_t *info)
{
    const char *kept = s3_umeta_get(info, CKS_META), *v;
    int algo = kept_split(kept, &v);
    if (!algo && default_cks_virtual(info)) algo = S3_CKS_DEFAULT; /* (v "": full) */
    if (!algo) return;
    /* Pieces, not buf_printf: a listing writes this per key, and formatting was 5% of it. */
    static const char a[] = "<ChecksumAlgorithm>", t[] = "</ChecksumAlgorithm><ChecksumType>",
                      e[] = "</ChecksumType>";
    const char *name = upper_name(algo), *type = strchr(v, '-') ? "COMPOSITE" : "FULL_OBJECT";
    buf_put(b, a, sizeof(a) - 1);
    buf_put(b, name, strlen(name));
    buf_put(b, t, sizeof(t) - 1);
    buf_put(b, type, strlen(type));
    buf_put(b, e, sizeof(e) - 1);
}

/* ---- ListParts, GetObjectAttributes ---- */

void s3_mpu_cks_part_xml(buf_t *b, const char *kept)
{
    const char *v;
    int algo = kept_split(kept, &v);
    if (algo) buf_printf(b, "<Checksum%s>%s</Checksum%s>", upper_name(algo), v, upper_name(algo));
}

void s3_mpu_cks_attributes_xml(buf_t *b, const obj_info_t *info, obj_reader_t *rd)
{
    /* GetObjectAttributes names a composite checksum without its part count (HEAD keeps it). */
    buf_t in = {0};
    char dflt[S3_CKS_MAX];
    object_cks_xml(&in, s3_cks_of(info, rd, dflt), 1);
    if (in.len) buf_printf(b, "<Checksum>%s</Checksum>", in.p);
    free(in.p);
}

/* ---- GET / HEAD ---- */

void s3_cks_get_headers(ctx_t *x, const obj_info_t *info, obj_reader_t *rd, int part_idx, buf_t *hb)
{
    const char *mode = s3_hdr(x->info, "x-amz-checksum-mode");
    if (!mode || strcasecmp(mode, "ENABLED") != 0) return;
    char ch[160];
    if (part_idx >= 0 && info->multipart) {
        /* One part: its own checksum, which is over exactly the bytes sent. */
        s3_cks_header(obj_read_part_note(rd, part_idx), ch, sizeof(ch));
        buf_printf(hb, "%s", ch);
        return;
    }
    if (part_idx < 0 && s3_hdr(x->info, "range")) return; /* no checksum covers a range */
    char dflt[S3_CKS_MAX];
    const char *kept = s3_cks_of(info, rd, dflt);
    s3_cks_header(kept, ch, sizeof(ch));
    if (!ch[0]) return;
    buf_printf(hb, "%sx-amz-checksum-type: %s\r\n", ch,
               strchr(kept, '-') ? "COMPOSITE" : "FULL_OBJECT");
}

int s3_part_number(ctx_t *x)
{
    int present, pn = 0;
    char *v = s3_qparam(x->query, "partNumber", &present);
    int bad = present && (!v || num_parse_int(v, 1, 10000, &pn) != 0);
    free(v);
    if (bad) {
        s3_err_msg(x, S3E_INVALID_ARGUMENT,
                   "Part number must be an integer between 1 and 10000, inclusive");
        return -1;
    }
    if (pn && s3_hdr(x->info, "range")) {
        s3_err_msg(x, S3E_INVALID_REQUEST,
                   "Cannot specify both Range header and partNumber query parameter");
        return -1;
    }
    return pn;
}

int s3_part_locate(ctx_t *x, obj_reader_t *rd, const obj_info_t *info, int pn, uint64_t *off,
                   uint64_t *len)
{
    const int *nums;
    const uint64_t *sizes;
    int n = obj_read_parts(rd, &nums, &sizes);
    if (!n) { /* one PUT: part 1 is the whole object */
        if (pn != 1) {
            s3_err(x, S3E_INVALID_PART_NUMBER);
            return -1;
        }
        *off = 0;
        *len = info->size;
        return 0;
    }
    /*
     * A part number counts the object's parts in order, 1..N, whatever numbers they were
     * uploaded under (a Complete may skip some): SDKs that download by part ask for 1 to
     * x-amz-mp-parts-count.
     */
    if (pn > n) {
        s3_err(x, S3E_INVALID_PART_NUMBER);
        return -1;
    }
    uint64_t o = 0;
    for (int i = 0; i < pn - 1; i++)
        o += sizes[i];
    *off = o;
    *len = sizes[pn - 1];
    return pn - 1;
}
