/*
 * options: a program's settings from one table. Each opt_def_t row names a
 * setting's command-line flag, its INI [section] key, its type and range,
 * its default and its help text; from the table come the defaults, --help,
 * the getopt_long() options and the INI file handler (inih), so a setting
 * cannot be known to one and missing from another.
 *
 * Values are parsed strictly: no leading '+' or blanks, no trailing
 * garbage, no overflow, and in range; a bad value names the setting and
 * what it accepts. Sizes are whole bytes with an optional K/M/G/T suffix
 * (powers of 1024, either case; with a suffix a fraction such as 1.5G is
 * allowed and rounded down to whole bytes).
 *
 * Sections that repeat ([drive.N], [user.NAME]) are rows whose section is a
 * pattern and whose offsets point into one record; opt_ctx_t.resolve maps a
 * section of the file to its pattern and record.
 */
#ifndef WL_OPTIONS_H
#define WL_OPTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum {
    OPT_HELP,   /* no value: print the help and exit 0 */
    OPT_CONFIG, /* FILE: an INI file, read before any flag applies (nothing stored) */
    OPT_STR,    /* text of min..max bytes (max 0: any length) -> const char * */
    OPT_NAME,   /* like OPT_STR, letters, digits, '.', '-' and '_' only -> const char * */
    OPT_ADDR,   /* HOST:PORT, PORT in min..max -> const char * */
    OPT_INT,    /* whole decimal number in min..max -> int64_t */
    OPT_SIZE,   /* bytes, optional K/M/G/T suffix, min..max -> uint64_t */
    OPT_REAL,   /* decimal number (no exponent) in min..max -> double */
    OPT_LEVEL,  /* log level name (common/log.h) -> int64_t */
    OPT_PAIR,   /* "A+B": key names two rows of the same section ("k+m"); each half is
                   parsed by its row. Command line only. Nothing stored itself. */
} opt_type_t;

enum {
    OPT_ZERO_OK = 1, /* 0 is accepted besides min..max (it means "automatic") */
    OPT_EACH = 2,    /* row of a repeating section: off is into the record resolve returns */
};

typedef struct {
    const char *flag;    /* long option without "--"; NULL: config file only */
    const char *arg;     /* the value's name in --help ("N", "SIZE") */
    const char *section; /* INI section; NULL: command line only */
    const char *key;     /* INI key */
    opt_type_t type;
    unsigned flags; /* OPT_ZERO_OK, OPT_EACH */
    int64_t min, max;
    const char *def;  /* default, as text through the same parser; NULL: none (zero) */
    size_t off;       /* where the value goes, in opt_ctx_t.conf or an OPT_EACH record */
    const char *help; /* lines separated by '\n' */
} opt_def_t;

typedef struct {
    const opt_def_t *defs;
    size_t ndefs;
    void *conf; /* the settings the rows' offsets point into */
    /*
     * A section no plain row names: return the record its keys go into and
     * set *pattern to the rows' section ("drive.N"); or NULL, with a message
     * in err when the section is malformed (err left empty: unknown section).
     */
    void *(*resolve)(void *conf, const char *section, const char **pattern, char *err, size_t cap);
    char err[512]; /* the first error, for the caller to print */
    char **owned;  /* copies of string values, freed by opt_free */
    size_t nowned, capowned;
} opt_ctx_t;

/* Strict number parsers: 0, or -1 for malformed or overflowing text. */
int opt_parse_int(const char *s, int64_t *out);
int opt_parse_size(const char *s, uint64_t *out);
int opt_parse_real(const char *s, double *out);

/* Parse text for def into base + def->off. label names the setting in the message
 * left in ctx->err on failure ("--workers", "[server] workers"). 0 or -1. */
int opt_parse(opt_ctx_t *ctx, const opt_def_t *def, const char *label, const char *text,
              void *base);

/* Store every row's default into ctx->conf. 0, or -1 with ctx->err (a bad table). */
int opt_defaults(opt_ctx_t *ctx);

/* Apply an INI file. 0, or -1 with ctx->err naming the file, the line and the setting. */
int opt_load_ini(opt_ctx_t *ctx, const char *file);

/*
 * The command line: the config files first (in order), then the flags (in
 * order, so the last wins). Returns 0, 1 when help was asked for (printed
 * on out by opt_usage with head and tail), or -1 with ctx->err.
 */
int opt_command_line(opt_ctx_t *ctx, int argc, char **argv, FILE *out, const char *head,
                     const char *tail);

/* --help: head, every flag, every config-file-only key, tail. */
void opt_usage(const opt_ctx_t *ctx, FILE *f, const char *head, const char *tail);

/* The row for an INI section (or pattern) and key, or NULL. */
const opt_def_t *opt_find(const opt_ctx_t *ctx, const char *section, const char *key);

void opt_free(opt_ctx_t *ctx);

#endif
