/*
 * node_drives: this node's drives brought up. The data directory keeps the
 * layout it was made with (DATA/layout: a start with another one is
 * refused), drives found empty where data was are marked as replaced, and
 * all are opened side by side; a replaced drive is read last until the
 * heal scanner has refilled it. Main thread at start, except
 * node_drives_refilled (the heal scanner's thread) and
 * node_drives_layout_record (the member's, as a pool is added).
 */
#ifndef WL_NODE_DRIVES_H
#define WL_NODE_DRIVES_H

#include "cluster/map.h"
#include "server/node_conf.h"
#include "server/node_memory.h"
#include "server/obj.h"
#include "storage/drive.h"

typedef struct {
    drive_t *dv[OBJ_MAX_SHARDS];     /* drive i, or NULL where it did not open */
    char path[OBJ_MAX_SHARDS][4096]; /* drive i's directory */
    int n;                           /* drives of the node */
    int refilling;                   /* marked replaced, not refilled yet, at the open */
    int err[OBJ_MAX_SHARDS];         /* drive i's open: 0, or why it failed */
    int failed;                      /* drives that did not open (served as failed) */
    struct idx_cache *cache;         /* the block cache their indexes share */
} node_drives_t;

/*
 * Opens the node's n drives for a layout of nsets sets of k+m drives (map:
 * a cluster member's layout, its pools, sets and which drive holds each
 * shard), with c's drive settings, into d (zeroed, as a static is; too
 * large for a stack). DATA/layout is checked and written first, then the
 * replaced drives marked, then all opened at once. A drive that does not
 * open leaves dv[i] NULL (d->err[i] says why, logged as drive_failed) as
 * long as no set has more than m such drives on this node and none failed
 * for a reason no drive can mend (ERR_BUSY: another process holds it;
 * ERR_NOMEM). Returns 0, or 1 or 2 with the reason printed on stderr, or the
 * ERR_* of a drive that stops the start (printed); node_drives_close(d) in
 * every case. Blocks (disk).
 */
int node_drives_open(node_drives_t *d, const node_conf_t *conf, int n, const cmap_t *map, int nsets,
                     int k, int m) __attribute__((warn_unused_result));

/*
 * s3_cfg_t.scrub_done, arg the node_drives_t: a heal scanner's walk of the
 * refilling drives' sets (a whole pass, or its first part) ended with failed
 * objects it could not make whole; with none, every drive marked replaced
 * is refilled (its mark removed, read as any other).
 */
void node_drives_refilled(void *arg, unsigned failed);

/*
 * A pool added to map while the node runs: DATA/layout records map's
 * layout. 0, or 1 or 2 with the reason printed on stderr. Blocks (fsync).
 */
int node_drives_layout_record(const char *data, const cmap_t *map)
    __attribute__((warn_unused_result));

/* Closes the drives that opened, then frees their cache. */
void node_drives_close(node_drives_t *d);

/* s3_cfg_t.memory, arg the node_drives_t: the drives' share of the node's memory. */
void node_drives_memory(void *arg, node_memory_t *m);

#endif
