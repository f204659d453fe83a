#include "common/num.h"

#include "common/err.h"

#include <string.h>

int num_parse_u64n(const char *s, size_t n, uint64_t min, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;
    if (!s || n == 0 || n > 20) return ERR_INVAL;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return ERR_INVAL;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10) return ERR_RANGE;
        v = v * 10 + d;
    }
    if (v < min || v > max) return ERR_RANGE;
    *out = v;
    return 0;
}

int num_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    return num_parse_u64n(s, s ? strlen(s) : 0, min, max, out);
}

int num_parse_int(const char *s, int min, int max, int *out)
{
    uint64_t v;
    if (min < 0 || max < min) return ERR_INVAL;
    int rc = num_parse_u64(s, (uint64_t)min, (uint64_t)max, &v);
    if (!rc) *out = (int)v;
    return rc;
}
