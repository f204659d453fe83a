/*
 * num: strict parsing of decimal integers, the one way numbers from the
 * outside (query parameters, headers, options, config files) are read.
 *
 * Only ASCII digits: no sign, no spaces, no "0x", nothing after the digits,
 * at most 20 digits; the value must lie in [min, max]. strtol and atoi
 * accept "+1", " 1" and "1abc" and wrap or clamp on overflow, which let a
 * part number 4294967297 pass as part 1.
 */
#ifndef WL_NUM_H
#define WL_NUM_H

#include <stddef.h>
#include <stdint.h>

/* s (NUL-terminated) as a number in [min, max]: 0, or ERR_INVAL / ERR_RANGE. */
int num_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
    __attribute__((warn_unused_result));
/* The same over n bytes that need not be NUL-terminated. */
int num_parse_u64n(const char *s, size_t n, uint64_t min, uint64_t max, uint64_t *out)
    __attribute__((warn_unused_result));
/* For int-sized values: [min, max] within [0, INT_MAX]. */
int num_parse_int(const char *s, int min, int max, int *out) __attribute__((warn_unused_result));

#endif
