/*
 * Fuzz the cluster map parser (cluster/map.h): any bytes are a map that
 * passes every check, or a refusal with a message; never a crash, and a
 * map that parses names only drives its nodes have.
 */
#include "cluster/map.h"
#include "common/err.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size ? size : 1);
    memcpy(buf, data, size);
    cmap_t m;
    char err[300];
    int rc = cmap_parse(buf, size, &m, err, sizeof(err));
    if (rc == 0) {
        if (m.nnodes < 1 || m.nsets < 1 || m.epoch < 1) abort();
        for (int s = 0; s < m.nsets; s++) {
            const cmap_set_t *set = &m.sets[s];
            if (set->k < 1 || set->m < 0 || set->k + set->m > ERS_MAX_SHARDS) abort();
            for (int i = 0; i < set->k + set->m; i++)
                if (set->d[i].node < 0 || set->d[i].node >= m.nnodes || set->d[i].drive < 0 ||
                    set->d[i].drive >= m.nodes[set->d[i].node].drives)
                    abort();
        }
        cmap_free(&m);
    } else if (rc != ERR_INVAL || !err[0]) {
        abort();
    }
    free(buf);
    return 0;
}
