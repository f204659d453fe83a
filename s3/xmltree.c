/*
 * xmltree: a small S3 request body read whole into a tree of elements, for
 * the configurations whose checks are easier on a tree than on expat's
 * events ("exactly one of", "at most once", "not together"). Bounded: depth,
 * element count, and text never longer than the body. DTDs are refused, so
 * no entity can be declared or expanded. No I/O.
 */
#include "s3/xmltree.h"

#include "common/mem.h"

#include <expat.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    XML_Parser p;
    xml_node_t *root, *cur;
    int depth, nodes, bad, max_depth, max_nodes;
} tree_t;

/* Recursive over the depth only, which xmltree_read bounds. */
void xmltree_free(xml_node_t *n) // NOLINT(misc-no-recursion)
{
    while (n) {
        xml_node_t *next = n->next;
        xmltree_free(n->kids); /* depth is bounded by the reader */
        for (char **a = n->attrs; a && *a; a++)
            free(*a);
        free(n->attrs);
        free(n->name);
        free(n->text);
        free(n);
        n = next;
    }
}

static void stop(tree_t *t)
{
    t->bad = 1;
    XML_StopParser(t->p, XML_FALSE);
}

static void XMLCALL no_doctype(void *ud, const XML_Char *name, const XML_Char *sys,
                               const XML_Char *pub, int has_internal)
{
    (void)name;
    (void)sys;
    (void)pub;
    (void)has_internal;
    stop(ud); /* no DTD: no entity can be declared, so none can blow up */
}

static void XMLCALL on_start(void *ud, const XML_Char *name, const XML_Char **attrs)
{
    tree_t *t = ud;
    if (t->bad) return;
    if (t->depth == t->max_depth || t->nodes == t->max_nodes || (!t->cur && t->root)) {
        stop(t);
        return;
    }
    xml_node_t *n = xcalloc(1, sizeof(*n));
    n->name = xstrdup(name);
    /* Attributes as written (held bytes bounded by the body's, as the text's are). */
    size_t na = 0;
    while (attrs[na])
        na++;
    if (na) {
        n->attrs = xmalloc((na + 1) * sizeof(*n->attrs));
        for (size_t i = 0; i < na; i++)
            n->attrs[i] = xstrdup(attrs[i]);
        n->attrs[na] = NULL;
    }
    n->parent = t->cur;
    if (!t->cur) {
        t->root = n;
    } else {
        if (t->cur->last)
            t->cur->last->next = n;
        else
            t->cur->kids = n;
        t->cur->last = n;
    }
    t->cur = n;
    t->depth++;
    t->nodes++;
}

static void XMLCALL on_end(void *ud, const XML_Char *name)
{
    tree_t *t = ud;
    (void)name;
    if (t->bad || !t->cur) return; /* expat still reports ends after a stop */
    t->cur = t->cur->parent;
    t->depth--;
}

static void XMLCALL on_text(void *ud, const XML_Char *s, int len)
{
    tree_t *t = ud;
    if (t->bad || !t->cur || len <= 0) return;
    xml_node_t *n = t->cur;
    if (n->tl + (size_t)len + 1 > n->tcap) {
        n->tcap = (n->tl + (size_t)len + 1) * 2;
        n->text = xrealloc(n->text, n->tcap);
    }
    memcpy(n->text + n->tl, s, (size_t)len);
    n->tl += (size_t)len;
    n->text[n->tl] = 0;
}

xml_node_t *xmltree_read(const char *body, size_t len, int max_depth, int max_nodes, int *nomem)
{
    tree_t t = {0};
    *nomem = 0;
    t.max_depth = max_depth;
    t.max_nodes = max_nodes;
    if (len > INT32_MAX) return NULL;
    t.p = XML_ParserCreate(NULL);
    if (!t.p) {
        *nomem = 1;
        return NULL;
    }
    XML_SetUserData(t.p, &t);
    XML_SetStartDoctypeDeclHandler(t.p, no_doctype);
    XML_SetElementHandler(t.p, on_start, on_end);
    XML_SetCharacterDataHandler(t.p, on_text);
    int ok = XML_Parse(t.p, body, (int)len, XML_TRUE) == XML_STATUS_OK && !t.bad && t.root;
    XML_ParserFree(t.p);
    if (!ok) {
        xmltree_free(t.root);
        return NULL;
    }
    return t.root;
}

const char *xmltree_text(const xml_node_t *n)
{
    return n->text ? n->text : "";
}

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

int xmltree_blank(const xml_node_t *n)
{
    for (const char *p = xmltree_text(n); *p; p++)
        if (!is_space(*p)) return 0;
    return 1;
}

const xml_node_t *xmltree_kid(const xml_node_t *n, const char *name, int *count)
{
    const xml_node_t *first = NULL;
    int c = 0;
    for (const xml_node_t *k = n->kids; k; k = k->next)
        if (strcmp(k->name, name) == 0) {
            if (!first) first = k;
            c++;
        }
    if (count) *count = c;
    return first;
}

int xmltree_kids_ok(const xml_node_t *n, const char *const *names, const char *const *many)
{
    if (n->kids && !xmltree_blank(n)) return 0; /* text mixed with elements */
    for (const xml_node_t *k = n->kids; k; k = k->next) {
        int known = 0, repeat_ok = 0;
        for (int i = 0; names[i] && !known; i++)
            known = strcmp(k->name, names[i]) == 0;
        for (int i = 0; many && many[i] && !repeat_ok; i++)
            repeat_ok = strcmp(k->name, many[i]) == 0;
        if (!known) return 0;
        /* Counted only for the names that may not repeat: no more of those pass than names[]
         * has before one repeats, so this stays linear however many repeatable kids there are
         * (a body of 60000 empty Rules). */
        int count = 1;
        if (!repeat_ok) (void)xmltree_kid(n, k->name, &count);
        if (count > 1) return 0;
    }
    return 1;
}

int xmltree_integer(const xml_node_t *n, int64_t *out)
{
    if (n->kids) return -1;
    const char *p = xmltree_text(n);
    while (is_space(*p))
        p++;
    int neg = *p == '-';
    if (*p == '-' || *p == '+') p++;
    if (*p < '0' || *p > '9') return -1;
    int64_t v = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > INT64_MAX / 100) return -1; /* far beyond any Long S3 takes */
        v = v * 10 + (*p - '0');
    }
    while (is_space(*p))
        p++;
    if (*p) return -1;
    *out = neg ? -v : v;
    return 0;
}

int xmltree_bool(const xml_node_t *n)
{
    if (n->kids) return -1;
    const char *p = xmltree_text(n), *e;
    while (is_space(*p))
        p++;
    for (e = p + strlen(p); e > p && is_space(e[-1]); e--)
        ;
    size_t l = (size_t)(e - p);
    if ((l == 4 && !strncmp(p, "true", 4)) || (l == 1 && *p == '1')) return 1;
    if ((l == 5 && !strncmp(p, "false", 5)) || (l == 1 && *p == '0')) return 0;
    return -1;
}

/* The URI PREFIX is bound to at n (xmlns:PREFIX on n or the nearest element above), or NULL. */
static const char *prefix_uri(const xml_node_t *n, const char *prefix, size_t pl)
{
    for (; n; n = n->parent)
        for (char **a = n->attrs; a && *a; a += 2)
            if (!strncmp(*a, "xmlns:", 6) && strlen(*a + 6) == pl && !memcmp(*a + 6, prefix, pl))
                return a[1];
    return NULL;
}

const char *xmltree_attr_ns(const xml_node_t *n, const char *ns_uri, const char *local)
{
    for (char **a = n->attrs; a && *a; a += 2) {
        const char *colon = strchr(*a, ':');
        if (!colon || strcmp(colon + 1, local) != 0) continue;
        size_t pl = (size_t)(colon - *a);
        if (pl == 5 && !memcmp(*a, "xmlns", 5)) continue; /* a declaration, not an attribute */
        const char *uri = prefix_uri(n, *a, pl);
        if (uri && !strcmp(uri, ns_uri)) return a[1];
    }
    return NULL;
}
