/*
 * node_drives: the data directory's layout, replaced drives and the drives'
 * open (contracts in node_drives.h).
 *
 * A drive is a directory (DATA/driveN, or [drive.N] path); what it holds is
 * its engine's (storage/drive.h). Next to them this file keeps two markers:
 * DATA/layout, the sets the data was written for, and DRIVE/refilling, a
 * drive that took a failed one's place and is not refilled yet.
 */
#include "server/node_drives.h"

#include "storage/idx.h"

#include "common/err.h"
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * Replaced drives. A drive directory without its engine's files, on a node
 * whose other drives (or layout) show that data was written before, is an
 * empty drive that took a failed one's place: until the heal scanner has
 * refilled it, it holds none of the heads and inline copies the set expects
 * of it, and a listing that merged it among k stores could miss objects. It
 * is marked (DRIVE/refilling, kept across restarts, and drive_set_refilling:
 * readers take it last), the scanner is started at once, and the marks go
 * when a pass ends with nothing it could not make whole.
 */

static int drive_is_fresh(const char *path)
{
    char p[4200];
    struct stat sb;
    snprintf(p, sizeof(p), "%s/segments", path);
    return stat(p, &sb) != 0 && errno == ENOENT;
}

/* DRIVE/refilling, durable (the file and its name) before the drive's engine writes a byte.
 * 0, or -1 (logged). */
static int refill_mark(const char *path)
{
    char p[4200];
    int bad = 0;
    snprintf(p, sizeof(p), "%s/refilling", path);
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        log_error("event=refill_mark_failed path=%s err=%s", path, strerror(errno));
        bad = 1;
    }
    int fd = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0 || fsync(fd) != 0) {
        log_error("event=refill_mark_failed path=%s err=%s", p, strerror(errno));
        bad = 1;
    }
    if (fd >= 0) close(fd);
    int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || fsync(dfd) != 0) {
        log_error("event=refill_mark_failed path=%s err=%s", path, strerror(errno));
        bad = 1;
    }
    if (dfd >= 0) close(dfd);
    return bad ? -1 : 0;
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb, (void)flag;
    if (f->level == 0) return 0; /* the drive's directory itself stays (a mount point, say) */
    return remove(p) != 0 && errno != ENOENT ? -1 : 0;
}

/* Everything in a drive's directory removed, the directory kept. 0 or -1 (errno). */
static int empty_drive_dir(const char *path)
{
    return nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -1;
}

static int refill_marked(const char *path)
{
    char p[4200];
    struct stat sb;
    snprintf(p, sizeof(p), "%s/refilling", path);
    return stat(p, &sb) == 0;
}

/* s3_cfg_t.scrub_done: a whole pass refilled every marked drive. */
void node_drives_refilled(void *arg, unsigned failed)
{
    node_drives_t *r = arg;
    if (failed) return; /* not whole yet: the next pass tries again */
    for (int i = 0; i < r->n; i++) {
        if (!r->dv[i] || !drive_refilling(r->dv[i])) continue;
        char p[4200];
        snprintf(p, sizeof(p), "%s/refilling", r->path[i]);
        if (unlink(p) != 0 && errno != ENOENT) {
            log_error("event=refill_unmark_failed path=%s err=%s", p, strerror(errno));
            continue;
        }
        drive_set_refilling(r->dv[i], 0);
        log_info("event=drive_refilled path=%s", r->path[i]);
    }
}

/*
 * Drives that missed writes. A drive served as failed (it did not open) is
 * left out of every write while the node runs; mended and opened at a later
 * start, it lacks what was written meanwhile, and the heal queue that noted
 * it is gone with the process. DATA/missed lists such drives (a number a
 * line), written before the node serves without them; a listed drive that
 * opens is marked refilling (read last, refilled by the scanner at once,
 * unmarked after a whole pass), then taken off the list. The mark goes into
 * the drive only once it opens: a failed drive may take no write at all.
 */
static void missed_read(const char *data, int n, int *missed)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/missed", data);
    FILE *f = fopen(path, "r");
    if (!f) return;
    int i;
    while (fscanf(f, "%d", &i) == 1)
        if (i >= 0 && i < n) missed[i] = 1;
    fclose(f);
}

/* DATA/missed as missed says, durable (file, then its name); 0 or an errno. */
static int missed_write(const char *data, int n, const int *missed)
{
    char path[4200], tmp[4300];
    snprintf(path, sizeof(path), "%s/missed", data);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    int any = 0;
    for (int i = 0; i < n; i++)
        any |= missed[i];
    if (!any) return unlink(path) != 0 && errno != ENOENT ? errno : 0;
    FILE *o = fopen(tmp, "w");
    if (!o) return errno;
    int bad = 0;
    for (int i = 0; i < n; i++)
        if (missed[i] && fprintf(o, "%d\n", i) < 0) bad = 1;
    if (fflush(o) != 0 || fsync(fileno(o)) != 0) bad = 1;
    if (fclose(o) != 0) bad = 1;
    int e = bad ? (errno ? errno : EIO) : 0;
    if (!e && rename(tmp, path) != 0) e = errno;
    if (e) return e;
    int dfd = open(data, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || fsync(dfd) != 0) e = errno;
    if (dfd >= 0) close(dfd);
    return e;
}

/*
 * Where keys live depends on the sets (obj_set_multi: how many, and in a
 * cluster which drives each holds), so a data directory keeps the layout it
 * was made with: DATA/layout records it on the first start ("sets 2 ec
 * 4+2", and for a cluster member its id and a digest of the map's sets),
 * and a later start with another layout is refused (its keys would be
 * looked for on other sets). A single node compares the number of sets. A
 * data directory from before the file existed held one set. *existed: a
 * layout was there already (data was written before). 0, or 2 with the
 * reason printed.
 */
static int check_layout(const char *data, const char *want, int single, int nsets, int *existed)
{
    char path[4096], had[4096] = "";
    *existed = 0;
    if ((size_t)snprintf(path, sizeof(path), "%s/layout", data) >= sizeof(path)) {
        fprintf(stderr, "warmlaked: --data %s: path too long\n", data);
        return 2;
    }
    FILE *f = fopen(path, "r");
    if (f) {
        size_t got = fread(had, 1, sizeof(had) - 1, f);
        had[got] = 0;
        fclose(f);
        while (got && had[got - 1] == '\n')
            had[--got] = 0;
    } else {
        char d0[4096];
        struct stat sb;
        snprintf(d0, sizeof(d0), "%s/drive0", data);
        /* (An empty drive0, a mount point made before the first start, holds nothing.) */
        if (stat(d0, &sb) == 0 && !drive_is_fresh(d0) && nsets != 1)
            snprintf(had, sizeof(had), "sets 1");
    }
    *existed = had[0] != 0;
    /* A cluster's layout may grow by pools (a line each): what was recorded must begin it. */
    size_t hl = strlen(had);
    int hs = 0, same = single ? sscanf(had, "sets %d", &hs) == 1 && hs == nsets
                              : strncmp(had, want, hl) == 0 && (!want[hl] || want[hl] == '\n');
    if (had[0] && !same) {
        fprintf(stderr,
                "warmlaked: %s holds data laid out as \"%s\", but this start makes \"%s\": its "
                "objects would not be found. Start with the layout it was made with.\n",
                data, had, want);
        return 2;
    }
    if (f && (single || strcmp(had, want) == 0)) return 0; /* (a cluster's grew by a pool) */
    if (mkdir(data, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "warmlaked: cannot create %s: %s\n", data, strerror(errno));
        return 1;
    }
    char tmp[4200];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *o = fopen(tmp, "w");
    int bad = !o || fprintf(o, "%s\n", want) < 0 || fflush(o) != 0 || fsync(fileno(o)) != 0;
    if (o && fclose(o) != 0) bad = 1;
    if (bad || rename(tmp, path) != 0) {
        fprintf(stderr, "warmlaked: cannot write %s: %s\n", path, strerror(errno));
        return 1;
    }
    return 0;
}

/*
 * A cluster member's layout: a line per pool. The first names the cluster,
 * the coding, pool 0's sets and a digest of which drive (node id and
 * number) holds each shard of each of them (a map without pools is one
 * pool: its line is what it was before pools); each further pool a line of
 * its id, sets and digest.
 */
static void cluster_layout(const cmap_t *map, char *out, size_t cap)
{
    size_t at = 0;
    out[0] = 0;
    for (int p = 0; p < map->npools && at < cap; p++) {
        const cmap_pool_t *pool = &map->pools[p];
        uint64_t h = 1469598103934665603ull;
        for (int j = pool->first; j < pool->first + pool->nsets; j++)
            for (int i = 0; i < map->sets[j].k + map->sets[j].m; i++) {
                char d[CMAP_MAX_ID + 16];
                snprintf(d, sizeof(d), "%s/%d;", map->nodes[map->sets[j].d[i].node].id,
                         map->sets[j].d[i].drive);
                for (const char *c = d; *c; c++)
                    h = (h ^ (uint8_t)*c) * 1099511628211ull;
            }
        if (p == 0)
            at += (size_t)snprintf(out + at, cap - at, "cluster %s sets %d ec %d+%d drives %016llx",
                                   map->cluster, pool->nsets, map->sets[0].k, map->sets[0].m,
                                   (unsigned long long)h);
        else
            at += (size_t)snprintf(out + at, cap - at, "\npool %s sets %d drives %016llx", pool->id,
                                   pool->nsets, (unsigned long long)h);
    }
}

/* One drive's open on its own thread (open_drives). */
typedef struct {
    const drive_cfg_t *cfg;
    drive_t **out;
    int rc;
    pthread_t tid;
} drive_opener_t;

static void *drive_opener(void *arg)
{
    drive_opener_t *o = arg;
    o->rc = drive_open(o->cfg, o->out);
    return NULL;
}

/* Opens n drives side by side, each on a thread of its own (a thread that cannot start
 * opens its drive in place); rc[i] is drive i's outcome once every open has ended. */
static void open_drives(const drive_cfg_t *cfg, int n, drive_t **dv, int *rc)
{
    drive_opener_t op[OBJ_MAX_SHARDS];
    int started[OBJ_MAX_SHARDS] = {0};
    for (int i = 0; i < n; i++) {
        op[i] = (drive_opener_t){.cfg = &cfg[i], .out = &dv[i]};
        started[i] = pthread_create(&op[i].tid, NULL, drive_opener, &op[i]) == 0;
        if (!started[i]) drive_opener(&op[i]);
    }
    for (int i = 0; i < n; i++) {
        if (started[i]) pthread_join(op[i].tid, NULL);
        rc[i] = op[i].rc;
    }
}

/* How this node's drives form sets: a cluster's map (me: this node), else nsets sets of k+m
 * drives in a row (set j: drives j(k+m)...). */
typedef struct {
    const cmap_t *map;
    int me, k, m, n, nsets;
} sets_t;

/* Set j's drives on this node (their numbers in out; how many), *most those it may lose. */
static int set_drives(const sets_t *ly, int j, int out[OBJ_MAX_SHARDS], int *most)
{
    const cmap_set_t *set = ly->map ? &ly->map->sets[j] : NULL;
    int width = set ? set->k + set->m : ly->k + ly->m, nd = 0;
    *most = set ? set->m : ly->m;
    for (int s = 0; s < width; s++) {
        int drive = !set                       ? j * (ly->k + ly->m) + s
                    : set->d[s].node == ly->me ? set->d[s].drive
                                               : -1;
        if (drive >= 0 && drive < ly->n) out[nd++] = drive;
    }
    return nd;
}

/* "cannot open drive" on stderr for each drive whose open failed (with `only`, if not 0). */
static void print_failed(const node_drives_t *d, const int *rc, int only)
{
    for (int i = 0; i < d->n; i++)
        if (rc[i] && (!only || rc[i] == only))
            fprintf(stderr, "warmlaked: cannot open drive %s: %s\n", d->path[i], err_str(rc[i]));
}

/*
 * Drives that did not open. A node of many drives is not stopped by one of
 * them: a drive whose superblock, index or file system is bad is served as
 * failed (shard_store_local(NULL): its calls fail, its health is down), as a
 * node that is away is, and the sets it belongs to run on their other
 * drives. What no drive can mend is still fatal: another process holding a
 * drive (two daemons on one data directory) and memory. So is more than m
 * failed drives in one set (this node's drives of it, in a cluster): the
 * set could not be read, and what stands in the drives may be a setting
 * that is wrong for all of them. 0, or the error that stops the start
 * (printed).
 */
static int judge_failed(node_drives_t *d, const int *rc, const sets_t *ly)
{
    int fatal = 0;
    for (int i = 0; i < d->n; i++) {
        d->err[i] = rc[i];
        if (!rc[i]) continue;
        d->failed++;
        if (rc[i] == ERR_BUSY || rc[i] == ERR_NOMEM) fatal = rc[i];
    }
    if (!d->failed) return 0;
    if (!fatal && d->failed == d->n) {
        /* None opened: a setting wrong for them all, or the node's storage gone, not m
         * drives' bad luck (a review: a cluster member of two drives started with none). */
        print_failed(d, rc, 0);
        fprintf(stderr, "warmlaked: no drive of this node opened: not starting\n");
        return rc[0];
    }
    if (fatal) {
        print_failed(d, rc, fatal);
        return fatal;
    }
    for (int j = 0; j < ly->nsets; j++) {
        int drives[OBJ_MAX_SHARDS], most, down = 0, first = -1;
        int nd = set_drives(ly, j, drives, &most);
        for (int s = 0; s < nd; s++) {
            if (!rc[drives[s]]) continue;
            down++;
            if (first < 0) first = drives[s];
        }
        if (down > most) {
            print_failed(d, rc, 0);
            fprintf(stderr,
                    "warmlaked: %d drives of set %d did not open, and a set may do without %d "
                    "at most: not starting\n",
                    down, j, most);
            return rc[first];
        }
    }
    for (int i = 0; i < d->n; i++)
        if (rc[i])
            log_error("event=drive_failed path=%s err=%s: serving without it (its sets run "
                      "degraded); mend it and restart, or empty its directory to have it refilled",
                      d->path[i], err_name(rc[i]));
    return 0;
}

/* Whether drive i of this node is not whole: it did not open, or it is marked refilling. */
static int drive_short(const node_drives_t *d, int i)
{
    return !d->dv[i] || refill_marked(d->path[i]) || drive_refilling(d->dv[i]);
}

/*
 * Whether every set holding drive i can do without it: fewer than m other drives of each
 * are short on this node (what other nodes' drives are doing is not known at the start).
 */
static int sets_spare(const node_drives_t *d, int i, const sets_t *ly)
{
    for (int j = 0; j < ly->nsets; j++) {
        int drives[OBJ_MAX_SHARDS], most, in = 0, other = 0;
        int nd = set_drives(ly, j, drives, &most);
        for (int s = 0; s < nd; s++) {
            if (drives[s] == i)
                in = 1;
            else
                other += drive_short(d, drives[s]);
        }
        if (in && other >= most) return 0;
    }
    return 1;
}

/*
 * A drive that was served as failed opens again: it holds what it held then, and misses
 * every write and delete made since. The deletes are why it is emptied: a head it kept of a
 * version deleted meanwhile stands against tombstones that a refill of another drive does
 * not carry (they stay where they were written), so with two other drives replaced later
 * the deleted version was listed and read again (a review: 4+2, forty deletes). Emptied, it
 * is a replaced drive: marked, read last, refilled from the others by the scanner at once.
 * That is safe while its sets can spare it (each still has k whole drives without it); when
 * one cannot, it is kept and refilled in place (marked the same), and said so. 0 when the
 * drive is marked (DATA/missed may drop it), -1 when not.
 */
static int drive_back(node_drives_t *d, int i, const drive_cfg_t *cfg, const sets_t *ly)
{
    if (!sets_spare(d, i, ly)) {
        log_warn("event=drive_back path=%s emptied=0: it missed the writes and deletes made "
                 "while it was failed, and its sets cannot do without it now: refilled in place, "
                 "read last until then; a version deleted meanwhile may come back if more of "
                 "its set is lost before the scanner's pass ends",
                 d->path[i]);
        return refill_mark(d->path[i]);
    }
    drive_close(d->dv[i]);
    d->dv[i] = NULL;
    int rc = empty_drive_dir(d->path[i]) != 0 ? err_from_errno(errno) : 0;
    if (!rc && refill_mark(d->path[i]) != 0) rc = ERR_IO;
    if (!rc) rc = drive_open(cfg, &d->dv[i]);
    if (rc) {
        /* Served as failed again (DATA/missed keeps it); its sets spare it, as just judged. */
        log_error("event=drive_failed path=%s err=%s: emptying a drive back from failed did not "
                  "go through; serving without it",
                  d->path[i], err_name(rc));
        d->dv[i] = NULL;
        d->err[i] = rc;
        d->failed++;
        return -1;
    }
    log_warn("event=drive_back path=%s emptied=1: it missed the writes and deletes made while "
             "it was failed; emptied and refilled by the heal scanner as a replaced drive, "
             "read last until then",
             d->path[i]);
    return 0;
}

int node_drives_open(node_drives_t *d, const node_conf_t *conf, int n, const cmap_t *map, int nsets,
                     int k, int m)
{
    int made_data = 0, had_layout = 0, rc;
    d->n = n;
    {
        char want[4096];
        if (map)
            cluster_layout(map, want, sizeof(want));
        else
            snprintf(want, sizeof(want), "sets %d ec %d+%d", nsets, k, m);
        if ((rc = check_layout(conf->data, want, !map, nsets, &had_layout)) != 0) return rc;
    }
    int fresh[OBJ_MAX_SHARDS] = {0}, nfresh = 0;
    for (int i = 0; i < n; i++) {
        if (conf->drive[i].path)
            snprintf(d->path[i], sizeof(d->path[i]), "%s", conf->drive[i].path);
        else
            snprintf(d->path[i], sizeof(d->path[i]), "%s/drive%d", conf->data, i);
        nfresh += fresh[i] = drive_is_fresh(d->path[i]);
    }
    /* Drives fresh while others are not (or the layout was written before): replaced. Marked
     * before they are opened, so that no crash leaves one written to and unmarked. */
    for (int i = 0; i < n; i++) {
        if (!fresh[i] || (nfresh == n && !had_layout)) continue;
        log_warn("event=drive_replaced path=%s: empty where data was; refilled by the heal "
                 "scanner, read last until then",
                 d->path[i]);
        refill_mark(d->path[i]);
    }
    uint64_t capacity = conf->capacity, segment = conf->segment;
    if (!segment) segment = capacity >= (64ull << 30) ? 256u << 20 : 64u << 20;
    /* Each drive's configuration, then all opened at once: an open replays the drive's log
     * past its index, which takes seconds on a big drive; twenty drives one after another
     * made a restart twenty times as long. */
    drive_cfg_t dcfg[OBJ_MAX_SHARDS];
    d->cache = idx_cache_new(conf->index_cache ? conf->index_cache : (size_t)n * IDX_OWN_CACHE);
    for (int i = 0; i < n; i++) {
        const node_drive_conf_t *dc = &conf->drive[i];
        if (!dc->path) {
            if (!made_data && mkdir(conf->data, 0755) != 0 && errno != EEXIST) {
                fprintf(stderr, "warmlaked: cannot create %s: %s\n", conf->data, strerror(errno));
                return 1;
            }
            made_data = 1;
            if ((size_t)snprintf(NULL, 0, "%s/drive%d", conf->data, i) >= sizeof(d->path[i])) {
                fprintf(stderr, "warmlaked: --data %s: path too long\n", conf->data);
                return 1;
            }
        }
        drive_cfg_t c = {0};
        c.path = d->path[i];
        c.capacity = dc->capacity ? dc->capacity : capacity;
        c.segment_size = segment;
        c.iu = (uint32_t)(dc->iu ? dc->iu : conf->iu);
        c.dwpd = dc->dwpd ? dc->dwpd : conf->dwpd;
        c.compaction = 1;
        c.commit_gather_us = (uint32_t)conf->commit_gather_us;
        c.segment_pool = conf->segment_pool ? (int)conf->segment_pool : -1;
        c.index_cache = d->cache;
        dcfg[i] = c;
    }
    int orc[OBJ_MAX_SHARDS];
    open_drives(dcfg, n, d->dv, orc);
    sets_t ly = {
        map, map ? cmap_node_index(map, conf->node) : -1, k, m, n, map ? map->nsets : n / (k + m)};
    if ((rc = judge_failed(d, orc, &ly)) != 0) return rc;
    /* The list of drives that missed writes: the failed ones on, the ones back refilled and
     * off (kept on while that cannot be made durable). */
    int missed[OBJ_MAX_SHARDS] = {0}, changed = 0;
    missed_read(conf->data, n, missed);
    for (int i = 0; i < n; i++)
        if (!d->dv[i] && !missed[i]) changed = missed[i] = 1;
    for (int i = 0; i < n; i++) {
        if (!d->dv[i] || !missed[i]) continue;
        if (drive_back(d, i, &dcfg[i], &ly) == 0) {
            missed[i] = 0;
            changed = 1;
        }
    }
    if (changed && (rc = missed_write(conf->data, n, missed)) != 0)
        log_error("event=missed_list_failed path=%s/missed err=%s: a failed drive back at a later "
                  "start waits for the scanner's interval to get what it missed",
                  conf->data, strerror(rc));
    for (int i = 0; i < n; i++) {
        if (!d->dv[i]) continue;
        if (refill_marked(d->path[i]) || missed[i]) drive_set_refilling(d->dv[i], 1);
        d->refilling += drive_refilling(d->dv[i]);
    }
    return 0;
}

int node_drives_layout_record(const char *data, const cmap_t *map)
{
    char want[4096];
    int existed;
    cluster_layout(map, want, sizeof(want));
    return check_layout(data, want, 0, 0, &existed);
}

void node_drives_close(node_drives_t *d)
{
    for (int i = 0; i < d->n; i++)
        if (d->dv[i]) drive_close(d->dv[i]);
    idx_cache_free(d->cache);
    d->cache = NULL;
}

void node_drives_memory(void *arg, node_memory_t *m)
{
    node_drives_t *d = arg;
    for (int i = 0; i < d->n; i++) {
        if (!d->dv[i]) continue;
        drive_mem_t dm;
        drive_mem(d->dv[i], &dm);
        m->index_memtables += dm.index_memtables;
        m->index_readers += dm.index_readers;
        m->index_cache += dm.index_cache;
        m->drive_buffers += dm.buffers_kept + dm.buffers_out;
        m->writer_buffers += dm.writer_buffers;
    }
    if (d->cache) {
        m->index_cache += idx_cache_usage(d->cache);
        m->index_cache_capacity = idx_cache_capacity(d->cache);
    }
}
