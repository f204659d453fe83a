/*
 * s3_gone: what a deleted bucket leaves on the drives (the bucket room's
 * afterlife; map in s3_int.h).
 *
 * DeleteBucket takes a bucket that every store's listing proves empty, yet
 * its internal name ("NAME\x04ID": objects, block records) may still hold
 * records no listing shows: the tombstones of its last deletes (dropped a
 * minute on by the heal thread of the node that deleted, in memory: a
 * restart keeps them), the head a store kept through a delete it missed,
 * the blocks of a write cut short by a crash or of a drop a store missed.
 * For a live bucket the heal and the reaper see to those; both walk the
 * live buckets only, so a deleted one's stayed for good (a soak probe: 13-20
 * MiB per drive after every bucket was emptied and deleted).
 *
 * So a successful DeleteBucket notes the incarnation's internal name in
 * GONE_BUCKETS (an empty object: its time is the delete's). Each scanner
 * pass then purges every name noted longer ago than the reaper's grace:
 * every record under it, on every store (obj_purge_bucket). Nothing can be
 * written there any more once the grace has passed (a new bucket of that
 * name is another incarnation; a write racing the delete is undone, and its
 * blocks stream no longer than the grace the reaper already relies on). A
 * name is forgotten by the first pass that walked every store and found
 * nothing left: until then a store that was away, or a late record, gets
 * another pass. A reaper grace of 0 (reap nothing) purges nothing.
 */
#include "server/s3_int.h"

#include "common/clock.h"

void s3_gone_note(ctx_t *x, const char *iname)
{
    /* A bucket made before generations lives under its bare name, which a bucket of that
     * name made again by a build of that time would reuse: never purged (a review). */
    if (!strchr(iname, '\x04')) return;
    int err;
    obj_writer_t *w = obj_put_begin(x->cfg->set, GONE_BUCKETS, iname, &err);
    if (w) err = obj_put_commit(w, NULL, NULL, 0, NULL);
    if (err)
        log_warn("event=gone_bucket_note_failed bucket=%s err=%s: what it left stays", x->bucket,
                 err_name(err));
}

#define GONE_PER_PASS 1024 /* notes a pass takes; the next goes on after them */

typedef struct {
    char **names;
    uint64_t now_ns, grace_ns;
    int n, cap, capped;
} gone_list_t;

static int collect_gone(void *arg, const char *key, const obj_info_t *info)
{
    gone_list_t *g = arg;
    /* Notes still in their grace are passed by, not counted: a window of young ones must
     * not hold back those due after them (a review: 4096 fresh notes did). */
    if (!info || info->mtime_ns + g->grace_ns > g->now_ns) return 0;
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 16;
        g->names = xrealloc(g->names, (size_t)g->cap * sizeof(*g->names));
    }
    g->names[g->n++] = xstrdup(key);
    return g->capped = g->n >= GONE_PER_PASS;
}

/*
 * Whether a bucket of incarnation iname exists: 1, 0, or -1 when that cannot be told (the
 * next pass asks again). An incarnation's name ("NAME\x04ID", ID 64 random bits) is never
 * made again: this is a last guard, not the rule.
 */
static int is_live(const s3_cfg_t *cfg, const char *iname)
{
    char name[INAME_MAX];
    snprintf(name, sizeof(name), "%s", iname);
    char *cut = strchr(name, '\x04');
    if (cut) *cut = 0;
    obj_info_t *bi = xmalloc(sizeof(*bi));
    int rc = obj_stat(cfg->set, BUCKETS, name, bi), live = rc == ERR_NOT_FOUND ? 0 : -1;
    if (rc == 0) {
        char now[INAME_MAX];
        s3_bucket_iname(name, bi, now);
        live = strcmp(now, iname) == 0;
    }
    free(bi);
    return live;
}

void s3_gone_purge(const s3_cfg_t *cfg, uint64_t grace_s, char **cursor, int (*stop)(void *arg),
                   void *stop_arg, s3_gone_report_t *rep)
{
    if (!grace_s) return;
    gone_list_t g = {.now_ns = clock_wall_ns(), .grace_ns = grace_s * 1000000000ull};
    int rc = obj_list(cfg->set, GONE_BUCKETS, NULL, *cursor, collect_gone, &g);
    if (rc < 0) log_warn("event=gone_buckets_list_failed err=%s", err_name(rc));
    /* A note that cannot go yet (a store away) must not hold back the rest either: the next
     * pass goes on after the last one taken, and from the start once the list ended. */
    free(*cursor);
    *cursor = g.capped ? xstrdup(g.names[g.n - 1]) : NULL;
    for (int i = 0; i < g.n && !(stop && stop(stop_arg)); i++) {
        int live = is_live(cfg, g.names[i]);
        if (live) {
            if (live > 0) { /* never purged: forgotten */
                log_error("event=gone_bucket_alive bucket=%s: a bucket of that incarnation "
                          "exists; its note goes, nothing is purged",
                          g.names[i]);
                if (obj_delete(cfg->set, GONE_BUCKETS, g.names[i]) != 0)
                    log_warn("event=gone_bucket_forget_failed bucket=%s", g.names[i]);
            }
            continue;
        }
        obj_heal_report_t hr = {0};
        if (obj_heal(cfg->set, GONE_BUCKETS, g.names[i], &hr) != 0) /* (its note, whole) */
            log_limited(LOG_LVL_WARN, "event=gone_bucket_heal_failed bucket=%s", g.names[i]);
        obj_purge_report_t pr = {0};
        int pc = obj_purge_bucket(cfg->set, g.names[i], &pr);
        rep->records += pr.records;
        rep->bytes += pr.bytes;
        if (pr.records)
            log_info("event=gone_bucket_purged bucket=%s records=%llu bytes=%llu failed=%llu "
                     "stores_left=%llu",
                     g.names[i], (unsigned long long)pr.records, (unsigned long long)pr.bytes,
                     (unsigned long long)pr.failed, (unsigned long long)pr.stores_left);
        if (pc == 0 && pr.records == 0 && pr.failed == 0) {
            /* Walked everywhere, nothing left: forgotten. */
            int dr = obj_delete(cfg->set, GONE_BUCKETS, g.names[i]);
            if (dr == 0)
                rep->buckets++;
            else if (dr != ERR_NOT_FOUND)
                log_warn("event=gone_bucket_forget_failed bucket=%s err=%s", g.names[i],
                         err_name(dr));
        }
    }
    for (int i = 0; i < g.n; i++)
        free(g.names[i]);
    free(g.names);
}
