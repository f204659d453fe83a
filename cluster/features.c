/*
 * features: the names of the features a build reads (contract in features.h).
 */
#include "cluster/features.h"

#include <stdio.h>
#include <string.h>

static const struct {
    uint32_t bit;
    const char *name;
} names[] = {
    {WL_FEAT_IF_KEPT, "if-kept"},
    {WL_FEAT_PART_TAGS, "part-tags"},
    {WL_FEAT_CLOSING_RECORDS, "closing-records"},
    {WL_FEAT_INITIATORS, "initiators"},
    {WL_FEAT_TOKEN_CRC, "token-crc"},
};

int wl_features_voter(const cmap_t *map, int node)
{
    int in_sets = 0, in_service = 0;
    for (int p = 0; p < map->npools; p++)
        for (int j = map->pools[p].first; j < map->pools[p].first + map->pools[p].nsets; j++)
            for (int i = 0; i < map->sets[j].k + map->sets[j].m; i++)
                if (map->sets[j].d[i].node == node) {
                    in_sets = 1;
                    in_service |= map->pools[p].draining != CMAP_POOL_REMOVED;
                }
    return !in_sets || in_service; /* a node in no set is a gateway: it writes */
}

uint32_t wl_features_in_use_decode(const char *val, size_t len)
{
    json_t *o = json_loadb(val, len, 0, NULL), *v = o ? json_object_get(o, "in_use") : NULL;
    uint32_t mask = json_is_integer(v) ? (uint32_t)json_integer_value(v) : UINT32_MAX;
    json_decref(o);
    return mask;
}

uint32_t wl_features_of_entry(const json_t *entry)
{
    json_t *v = entry ? json_object_get(entry, "features") : NULL;
    return json_is_integer(v) ? (uint32_t)json_integer_value(v) : 0;
}

const char *wl_build_name(void)
{
    return "warmlake " WL_VERSION " (" WL_COMMIT ")";
}

void wl_features_names(uint32_t mask, char *out, size_t cap)
{
    size_t at = 0;
    if (!cap) return;
    out[0] = 0;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (!(mask & names[i].bit)) continue;
        int n = snprintf(out + at, cap - at, "%s%s", at ? "," : "", names[i].name);
        if (n < 0 || (size_t)n >= cap - at) return;
        at += (size_t)n;
        mask &= ~names[i].bit;
    }
    if (mask)
        snprintf(out + at, cap - at, "%s0x%x", at ? "," : "", mask); /* a newer build's */
    else if (!at)
        snprintf(out, cap, "none");
}
