#include "bench/wlbench/gen.h"

#include <stdio.h>
#include <string.h>
#define XXH_INLINE_ALL /* header-only use of Debian's xxhash */
#include <xxhash.h>

/* splitmix64's finaliser: every input bit reaches every output bit. */
static inline uint64_t mix(uint64_t seed, uint64_t word)
{
    uint64_t z = seed + (word + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t gen_seed(uint64_t run_seed, const char *key, uint64_t size)
{
    return XXH3_64bits_withSeed(key, strlen(key), run_seed ^ (size * 0xD6E8FEB86659FD93ull));
}

void gen_fill(uint64_t seed, uint64_t off, void *buf, size_t len)
{
    uint8_t *p = buf;
    /* Unaligned head, whole words, tail. */
    while (len && (off & 7)) {
        *p++ = (uint8_t)(mix(seed, off >> 3) >> (8 * (off & 7)));
        off++;
        len--;
    }
    uint64_t w = off >> 3;
    for (; len >= 8; len -= 8, p += 8, w++) {
        uint64_t v = mix(seed, w);
        memcpy(p, &v, 8); /* little-endian bytes, as the head and tail compute them */
    }
    for (size_t i = 0; i < len; i++)
        p[i] = (uint8_t)(mix(seed, w) >> (8 * i));
}

int64_t gen_check(uint64_t seed, uint64_t off, const void *buf, size_t len)
{
    /*
     * Generate a slice with the (vectorised) fill loop and memcmp it: three
     * times faster than comparing word by word, and a load generator must
     * spend as little of the machine as it can.
     */
    const uint8_t *p = buf;
    uint8_t want[4096];
    for (size_t done = 0; done < len;) {
        size_t n = len - done < sizeof(want) ? len - done : sizeof(want);
        gen_fill(seed, off + done, want, n);
        if (memcmp(want, p + done, n) != 0) {
            for (size_t i = 0; i < n; i++)
                if (want[i] != p[done + i]) return (int64_t)(done + i);
        }
        done += n;
    }
    return -1;
}

void gen_key(const char *prefix, uint64_t n, char *out, size_t cap)
{
    snprintf(out, cap, "%s%012llu", prefix, (unsigned long long)n);
}
