/*
 * cli_int.h: what the files of the `wl` command share.
 *
 * Map:
 *   main.c      options, usage, dispatch
 *   util.c      output (JSON strings, errors, transfer lines), wl:// paths,
 *               full listings
 *   cmd_obj.c   ls, stat, cat, rm, mb, rb, du, presign
 *   cmd_xfer.c  cp (upload, download, server-side copy), sync
 *   config.c    endpoint and credentials (aws-style)
 *   xfer.c      job runner and progress meter
 */
#ifndef WL_CLI_INT_H
#define WL_CLI_INT_H

#include "client/include/warmlake/wl.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

/* Options of the command line (main.c). */
typedef struct {
    int json, recursive, jobs, quiet, stats, force, no_batch, verify;
    long expires;
    const char *method, *content_type;
    uint64_t part_size;
} cli_opt_t;

extern cli_opt_t cli__opt;
extern wl_client_t *cli__cl;
extern pthread_mutex_t cli__out_mu; /* stdout and stderr lines from transfer threads */

/* wl://bucket/key (or s3://) split. */
typedef struct {
    char bucket[256];
    char key[1100];
} rpath_t;

/* One object of a listing. */
typedef struct {
    char *key;
    uint64_t size;
    char etag[128];
    char date[64];
} ent_t;

typedef struct {
    ent_t *v;
    size_t n, cap;
} ents_t;

void cli__json_str(FILE *f, const char *s);
/* A failed library call: one line on stderr with what the server said; returns 1. */
int cli__fail(const char *what);
/* A usage error on stderr; returns 2. */
int cli__usage_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* 1 with rp filled for a wl:// (or s3://) path, 0 for a local one. */
int cli__remote(const char *s, rpath_t *rp);
const char *cli__base_name(const char *p);
/* key under prefix: "" -> rel, "p/" -> "p/rel", "p" -> "p/rel". -1 (reported) when too long. */
int cli__join_key(const char *prefix, const char *rel, char *out, size_t cap);
void cli__ents_free(ents_t *e);
/* Every key under prefix (all pages). 0, or 1 (reported). */
int cli__list_all(const char *bucket, const char *prefix, ents_t *out);
int cli__write_all(int fd, const void *p, size_t n);
/* A transfer's line on stdout (text or JSON), unless --quiet. */
void cli__report(const char *op, const char *src, const char *dst, uint64_t size, const char *etag);
/* Delete every key under prefix (parallel). 0 or 1. */
int cli__rm_prefix(const char *bucket, const char *prefix);

/* The commands: 0, 1 (something failed), 2 (usage). */
int cli__cmd_ls(int argc, char **argv);
int cli__cmd_stat(int argc, char **argv);
int cli__cmd_cat(int argc, char **argv);
int cli__cmd_rm(int argc, char **argv);
int cli__cmd_mb(int argc, char **argv, int make);
int cli__cmd_du(int argc, char **argv);
int cli__cmd_presign(int argc, char **argv);
int cli__cmd_cp(int argc, char **argv);
int cli__cmd_sync(int argc, char **argv);

#endif
