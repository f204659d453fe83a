/* Fuzz the object head metadata decoder; a decoded head must re-encode to the same bytes. */
#include "common/err.h"
#include "server/obj.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    obj_info_t info;
    uint8_t *buf = malloc(size ? size : 1), out[16384];
    memcpy(buf, data, size);
    if (obj_meta_decode(buf, size, &info) == 0) {
        size_t n = obj_meta_encode(&info, out, sizeof(out));
        obj_info_t again;
        if (n == 0 || obj_meta_decode(out, n, &again) != 0 || again.mtime_ns != info.mtime_ns ||
            again.deleted != info.deleted || strcmp(again.upload_id, info.upload_id) != 0)
            abort();
    }
    free(buf);
    return 0;
}
