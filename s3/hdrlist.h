/*
 * hdrlist: walking an HTTP header's comma-separated list ("a, b ,c"): the
 * one tokenizer for Content-Encoding, Access-Control-Request-Headers and
 * x-amz-object-attributes. No I/O, no allocation.
 */
#ifndef WL_HDRLIST_H
#define WL_HDRLIST_H

#include <stddef.h>

/*
 * The next non-empty item of the list at *p: its start in *item, its length
 * (spaces around it trimmed) as the result; 0 at the end. *p moves past it.
 */
static inline size_t hdrlist_next(const char **p, const char **item)
{
    const char *s = *p;
    for (;;) {
        while (*s == ' ' || *s == ',')
            s++;
        if (!*s) {
            *p = s;
            return 0;
        }
        const char *e = s;
        while (*e && *e != ',')
            e++;
        size_t l = (size_t)(e - s);
        while (l && s[l - 1] == ' ')
            l--;
        *p = e;
        if (l) {
            *item = s;
            return l;
        }
        s = e;
    }
}

#endif
