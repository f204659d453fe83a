#include "server/node_memory.h"

#include <malloc.h>
#include <stdio.h>
#include <unistd.h>

void node_memory_setup(void)
{
    /* Setting it also turns glibc's moving of the trim threshold off (it stays 128 KiB). */
    mallopt(M_MMAP_THRESHOLD, NODE_MALLOC_MMAP);
}

void node_memory_process(node_memory_t *m)
{
    unsigned long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%lu %lu", &pages, &resident) != 2) resident = 0;
        fclose(f);
    }
    m->rss = (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
    /* Every arena's totals (glibc walks them, each under its lock: a stats call, not a hot
     * path). hblkhd: chunks mmapped on their own, in use until freed. */
    struct mallinfo2 mi = mallinfo2();
    m->malloc_in_use = (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
    m->malloc_held = (uint64_t)mi.arena + (uint64_t)mi.hblkhd;
}
