/*
 * xmltree: a small S3 request body (a bucket configuration) read whole into
 * a tree of elements, for checks that are plain on a tree and awkward on
 * expat's events: "exactly one of", "at most once", "not together". The
 * reader is bounded (depth, element count; the text held is never longer
 * than the body) and refuses DTDs, so no entity can be declared or
 * expanded. Namespaces are not processed: names are as written (S3 bodies
 * carry their namespace as a default xmlns, which is ignored). No I/O.
 */
#ifndef WL_XMLTREE_H
#define WL_XMLTREE_H

#include <stddef.h>
#include <stdint.h>

typedef struct xml_node {
    char *name;
    char *text; /* character data directly inside (NULL when none; see xmltree_text) */
    size_t tl, tcap;
    char **attrs; /* name, value, name, value, ..., NULL (as written; NULL when none) */
    struct xml_node *parent, *kids, *last, *next; /* kids: first child; next: next sibling */
} xml_node_t;

/*
 * The document of len bytes as a tree: its root element, or NULL when it is
 * not well-formed, has a DTD, nests deeper than max_depth or holds more than
 * max_nodes elements (*nomem set when expat could not even start). Free with
 * xmltree_free.
 */
xml_node_t *xmltree_read(const char *body, size_t len, int max_depth, int max_nodes, int *nomem);
void xmltree_free(xml_node_t *n); /* n and its siblings after it, with their subtrees; NULL ok */

/* n's own text, "" when none. */
const char *xmltree_text(const xml_node_t *n);
/* Whether n's own text is only XML white space (what containers may hold between elements). */
int xmltree_blank(const xml_node_t *n);
/* The first child of n named name, or NULL; *count (may be NULL) how many there are. */
const xml_node_t *xmltree_kid(const xml_node_t *n, const char *name, int *count);
/*
 * Whether every child of n is named in names[] (NULL-terminated), at most
 * once unless also in many[] (NULL-terminated, or NULL), and n holds no text
 * besides its children. Linear in the children.
 */
int xmltree_kids_ok(const xml_node_t *n, const char *const *names, const char *const *many);
/* A leaf's text as a decimal integer (XML schema: a sign, white space around): 0, or -1 when
 * it is not one or is beyond +-INT64_MAX/10. */
int xmltree_integer(const xml_node_t *n, int64_t *out);
/*
 * The value of n's attribute LOCAL in namespace ns_uri, or NULL: an attribute
 * written PREFIX:LOCAL whose PREFIX is bound to ns_uri by an xmlns:PREFIX on n
 * or an element above it (the nearest binding counts), so that xsi:type and
 * x:type with xmlns:x bound to the same URI are the same attribute, and an
 * unbound prefix is none. (Unprefixed attributes have no namespace.)
 */
const char *xmltree_attr_ns(const xml_node_t *n, const char *ns_uri, const char *local);
/* A leaf's text as xs:boolean ("true", "false", "1", "0"): 1, 0, or -1. */
int xmltree_bool(const xml_node_t *n);

#endif
