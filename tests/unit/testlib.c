#define _XOPEN_SOURCE_EXTRA
#include "testlib.h"

#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

void tl_rm_rf(const char *path)
{
    nftw(path, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

char *tl_tmpdir(const char *name)
{
    const char *base = getenv("WL_TEST_DIR") ? getenv("WL_TEST_DIR") : "/tmp";
    char *p = malloc(strlen(base) + strlen(name) + 32);
    sprintf(p, "%s/wl-%s-XXXXXX", base, name);
    assert_non_null(mkdtemp(p));
    return p;
}

uint64_t tl_mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

void tl_fill(uint8_t *p, size_t n, uint64_t seed)
{
    uint64_t s = tl_mix(seed + 1);
    for (size_t i = 0; i < n; i++) {
        if (i % 8 == 0) s = tl_mix(s + i);
        p[i] = (uint8_t)(s >> (8 * (i % 8)));
    }
}
