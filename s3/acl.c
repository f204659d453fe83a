/*
 * acl: S3's grants parsed (x-amz-grant-* values, AccessControlPolicy bodies),
 * stored, and read back into permissions. Contracts and the stored form: acl.h.
 *
 * Design: every parser is strict and bounded (S3_ACL_MAX_GRANTS, IDs of at
 * most S3_ACL_ID_MAX bytes), and what a grant gives is decided in one place,
 * s3_acl_perms, which fails closed: a value it cannot read gives nothing.
 */
#include "s3/acl.h"

#include "common/err.h"
#include "s3/xmltree.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#define GROUP_ALL  "http://acs.amazonaws.com/groups/global/AllUsers"
#define GROUP_AUTH "http://acs.amazonaws.com/groups/global/AuthenticatedUsers"
#define GROUP_LOG  "http://acs.amazonaws.com/groups/s3/LogDelivery"

static const struct {
    int perm;
    char code;
    const char *name;
} perms[] = {
    {S3_PERM_READ, 'r', "READ"},         {S3_PERM_WRITE, 'w', "WRITE"},
    {S3_PERM_READ_ACP, 'a', "READ_ACP"}, {S3_PERM_WRITE_ACP, 'c', "WRITE_ACP"},
    {S3_PERM_FULL, 'f', "FULL_CONTROL"},
};
#define NPERMS (sizeof(perms) / sizeof(perms[0]))

int s3_acl_is_grants(const char *stored)
{
    return stored[0] == '+';
}

const char *s3_acl_perm_name(int perm)
{
    for (size_t i = 0; i < NPERMS; i++)
        if (perms[i].perm == perm) return perms[i].name;
    return NULL;
}

/* Whether n bytes at id can be a stored canonical ID. */
static int id_ok(const char *id, size_t n)
{
    if (n == 0 || n > S3_ACL_ID_MAX) return 0;
    for (size_t i = 0; i < n; i++)
        if (id[i] < '!' || id[i] > '~' || id[i] == ',') return 0;
    return 1;
}

/* A grant of perm to the grantee TYPE=VALUE names (type: "id", "uri", "emailAddress" or, from
 * a body, the element's name). 0, or ERR_INVAL for an unknown type or group. */
static int grant_of(s3_grant_t *g, int perm, const char *type, const char *v, size_t vl)
{
    memset(g, 0, sizeof(*g));
    g->perm = perm;
    if (!strcasecmp(type, "id")) {
        g->type = id_ok(v, vl) ? S3_GRANTEE_USER : S3_GRANTEE_BAD_ID;
        if (g->type == S3_GRANTEE_USER) memcpy(g->id, v, vl);
    } else if (!strcasecmp(type, "uri")) {
        if (vl == strlen(GROUP_ALL) && !memcmp(v, GROUP_ALL, vl))
            g->type = S3_GRANTEE_ALL;
        else if (vl == strlen(GROUP_AUTH) && !memcmp(v, GROUP_AUTH, vl))
            g->type = S3_GRANTEE_AUTH;
        else if (vl == strlen(GROUP_LOG) && !memcmp(v, GROUP_LOG, vl))
            g->type = S3_GRANTEE_LOG;
        else
            return ERR_INVAL;
    } else if (!strcasecmp(type, "emailAddress")) {
        if (vl == 0) return ERR_INVAL;
        g->type = S3_GRANTEE_EMAIL;
    } else {
        return ERR_INVAL;
    }
    return 0;
}

static const char *skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

int s3_acl_parse_header(const char *value, int perm, s3_acl_t *acl)
{
    const char *p = skip_ws(value);
    if (!s3_acl_perm_name(perm) || !*p) return ERR_INVAL;
    for (;;) {
        /* TYPE */
        const char *t = p;
        while (*p && *p != '=' && *p != ',' && *p != ' ' && *p != '\t')
            p++;
        size_t tl = (size_t)(p - t);
        char type[16];
        if (tl == 0 || tl >= sizeof(type)) return ERR_INVAL;
        memcpy(type, t, tl);
        type[tl] = 0;
        p = skip_ws(p);
        if (*p != '=') return ERR_INVAL;
        p = skip_ws(p + 1);
        /* VALUE: quoted, or up to the next comma with trailing blanks dropped */
        const char *v;
        size_t vl;
        if (*p == '"') {
            v = ++p;
            while (*p && *p != '"')
                p++;
            if (*p != '"') return ERR_INVAL;
            vl = (size_t)(p - v);
            p++;
        } else {
            v = p;
            while (*p && *p != ',')
                p++;
            vl = (size_t)(p - v);
            while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
                vl--;
        }
        if (vl == 0 || acl->n == S3_ACL_MAX_GRANTS) return ERR_INVAL;
        if (grant_of(&acl->g[acl->n], perm, type, v, vl) != 0) return ERR_INVAL;
        acl->n++;
        p = skip_ws(p);
        if (!*p) return 0;
        if (*p != ',') return ERR_INVAL;
        p = skip_ws(p + 1);
    }
}

/* A container element: only the children names allows (many: those that may repeat), and
 * no text but blanks between them. */
static int container_ok(const xml_node_t *n, const char *const *names, const char *const *many)
{
    return xmltree_blank(n) && xmltree_kids_ok(n, names, many);
}

/* A leaf element's text, when it is one (no child elements). */
static const char *leaf(const xml_node_t *n)
{
    return n && !n->kids ? xmltree_text(n) : NULL;
}

static int parse_grant(const xml_node_t *gr, s3_grant_t *g)
{
    static const char *const grant_names[] = {"Grantee", "Permission", NULL};
    static const char *const grantee_names[] = {"ID", "DisplayName", "URI", "EmailAddress", NULL};
    static const char *const kinds[] = {"ID", "URI", "EmailAddress"};
    /* Grantee's xsi:type, which S3 requires (API reference, Grantee: Type, Required), and
     * which must name the kind given: a Group with an ID is not a grant of anything. */
    static const char *const types[] = {"CanonicalUser", "Group", "AmazonCustomerByEmail"};
    const xml_node_t *ge = xmltree_kid(gr, "Grantee", NULL);
    const char *pn = leaf(xmltree_kid(gr, "Permission", NULL));
    if (!container_ok(gr, grant_names, NULL) || !ge || !pn) return ERR_INVAL;
    int perm = 0;
    for (size_t i = 0; i < NPERMS && !perm; i++)
        if (!strcmp(pn, perms[i].name)) perm = perms[i].perm;
    if (!perm || !container_ok(ge, grantee_names, NULL)) return ERR_INVAL;
    const xml_node_t *dn = xmltree_kid(ge, "DisplayName", NULL);
    if (dn && !leaf(dn)) return ERR_INVAL;
    const xml_node_t *which = NULL;
    const char *kind = NULL, *type = NULL;
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        const xml_node_t *k = xmltree_kid(ge, kinds[i], NULL);
        if (!k) continue;
        if (which) return ERR_INVAL; /* one grantee per Grant */
        which = k;
        kind = kinds[i];
        type = types[i];
    }
    const char *v = leaf(which);
    if (!v) return ERR_INVAL;
    const char *xt = xmltree_attr_ns(ge, "http://www.w3.org/2001/XMLSchema-instance", "type");
    if (!xt || strcmp(xt, type) != 0) return ERR_INVAL;
    return grant_of(g, perm, !strcmp(kind, "ID") ? "id" : kind, v, strlen(v));
}

int s3_acl_parse_xml(const char *body, size_t len, char *owner, size_t cap, s3_acl_t *acl)
{
    static const char *const root_names[] = {"Owner", "AccessControlList", NULL};
    static const char *const owner_names[] = {"ID", "DisplayName", NULL};
    static const char *const list_names[] = {"Grant", NULL};
    int nomem, rc = ERR_INVAL;
    /* AccessControlPolicy > AccessControlList > Grant > Grantee > ID: depth 5. */
    xml_node_t *root = xmltree_read(body, len, 5, 8 + 8 * S3_ACL_MAX_GRANTS, &nomem);
    if (!root) return nomem ? ERR_NOMEM : ERR_INVAL;
    acl->n = 0;
    if (cap) owner[0] = 0;
    if (strcmp(root->name, "AccessControlPolicy") != 0 || !container_ok(root, root_names, NULL))
        goto out;
    const xml_node_t *o = xmltree_kid(root, "Owner", NULL);
    if (o) {
        if (!container_ok(o, owner_names, NULL)) goto out;
        const xml_node_t *dn = xmltree_kid(o, "DisplayName", NULL);
        const char *id = leaf(xmltree_kid(o, "ID", NULL));
        if (dn && !leaf(dn)) goto out;
        if (xmltree_kid(o, "ID", NULL) && !id) goto out;
        if (id && strlen(id) < cap) memcpy(owner, id, strlen(id) + 1);
    }
    const xml_node_t *l = xmltree_kid(root, "AccessControlList", NULL);
    if (l) {
        if (!container_ok(l, list_names, list_names)) goto out;
        for (const xml_node_t *gr = l->kids; gr; gr = gr->next) {
            if (acl->n == S3_ACL_MAX_GRANTS || parse_grant(gr, &acl->g[acl->n]) != 0) goto out;
            acl->n++;
        }
    }
    rc = 0;
out:
    xmltree_free(root);
    return rc;
}

int s3_acl_encode(const s3_acl_t *acl, char *out, size_t cap)
{
    size_t len = 0;
    if (cap < 2) return ERR_INVAL;
    out[len++] = '+';
    for (int i = 0; i < acl->n; i++) {
        const s3_grant_t *g = &acl->g[i];
        char pc = 0;
        for (size_t j = 0; j < NPERMS && !pc; j++)
            if (perms[j].perm == g->perm) pc = perms[j].code;
        size_t il = g->type == S3_GRANTEE_USER ? strnlen(g->id, sizeof(g->id)) : 0;
        if (!pc || (g->type == S3_GRANTEE_USER && !id_ok(g->id, il)) ||
            (g->type != S3_GRANTEE_USER && g->type != S3_GRANTEE_ALL && g->type != S3_GRANTEE_AUTH))
            return ERR_INVAL;
        if (len + (i > 0) + 2 + il + 1 > cap) return ERR_INVAL;
        if (i > 0) out[len++] = ',';
        out[len++] = pc;
        out[len++] = g->type == S3_GRANTEE_USER ? 'u' : g->type == S3_GRANTEE_ALL ? 'A' : 'U';
        memcpy(out + len, g->id, il);
        len += il;
    }
    out[len] = 0;
    return 0;
}

int s3_acl_decode(const char *stored, s3_acl_t *acl)
{
    acl->n = 0;
    if (stored[0] != '+') return ERR_INVAL;
    const char *p = stored + 1;
    while (*p) {
        if (acl->n == S3_ACL_MAX_GRANTS) return ERR_INVAL;
        s3_grant_t *g = &acl->g[acl->n];
        memset(g, 0, sizeof(*g));
        for (size_t j = 0; j < NPERMS && !g->perm; j++)
            if (perms[j].code == p[0]) g->perm = perms[j].perm;
        if (!g->perm) return ERR_INVAL;
        size_t il = strcspn(p + 2 - (p[1] == 0), ",");
        if (p[1] == 'u') {
            if (!id_ok(p + 2, il)) return ERR_INVAL;
            g->type = S3_GRANTEE_USER;
            memcpy(g->id, p + 2, il);
        } else if ((p[1] == 'A' || p[1] == 'U') && il == 0) {
            g->type = p[1] == 'A' ? S3_GRANTEE_ALL : S3_GRANTEE_AUTH;
        } else {
            return ERR_INVAL;
        }
        acl->n++;
        p += 2 + il;
        if (*p == ',') {
            if (!*++p) return ERR_INVAL; /* a trailing comma */
        }
    }
    return 0;
}

int s3_acl_perms_of_object(const char *stored, const char *requester, const char *bucket_owner)
{
    /* The two canned ACLs that name the bucket's owner without naming it (stored as given). */
    if (requester && bucket_owner && bucket_owner[0] && !strcmp(requester, bucket_owner)) {
        if (!strcmp(stored, "bucket-owner-read")) return S3_PERM_READ;
        if (!strcmp(stored, "bucket-owner-full-control")) return S3_PERM_FULL;
    }
    return s3_acl_perms(stored, requester);
}

int s3_acl_perms(const char *stored, const char *requester)
{
    if (!s3_acl_is_grants(stored)) {
        if (!strcmp(stored, "public-read")) return S3_PERM_READ;
        if (!strcmp(stored, "public-read-write")) return S3_PERM_READ | S3_PERM_WRITE;
        if (!strcmp(stored, "authenticated-read") && requester) return S3_PERM_READ;
        return 0;
    }
    s3_acl_t acl;
    if (s3_acl_decode(stored, &acl) != 0) return 0;
    int got = 0;
    for (int i = 0; i < acl.n; i++) {
        const s3_grant_t *g = &acl.g[i];
        if (g->type == S3_GRANTEE_ALL || (g->type == S3_GRANTEE_AUTH && requester) ||
            (g->type == S3_GRANTEE_USER && requester && !strcmp(g->id, requester)))
            got |= g->perm;
    }
    return got;
}
