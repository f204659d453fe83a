#include "common/err.h"

#include <errno.h>

const char *err_str(int err)
{
    switch (err) {
#define ERR_CASE(name, val, msg)                                                                   \
    case val:                                                                                      \
        return msg;
        ERR_MAP(ERR_CASE)
#undef ERR_CASE
    }
    return "unknown error";
}

const char *err_name(int err)
{
    switch (err) {
#define ERR_CASE(name, val, msg)                                                                   \
    case val:                                                                                      \
        return #name;
        ERR_MAP(ERR_CASE)
#undef ERR_CASE
    }
    return "UNKNOWN";
}

int err_from_errno(int e)
{
    switch (e) {
    case 0:
        return ERR_OK;
    case ENOMEM:
        return ERR_NOMEM;
    case ENOSPC:
    case EDQUOT:
        return ERR_NOSPC;
    case ENOENT:
        return ERR_NOT_FOUND;
    case EEXIST:
        return ERR_EXISTS;
    case EINVAL:
        return ERR_INVAL;
    case EROFS:
        return ERR_READONLY;
    case EFBIG:
        return ERR_TOO_LARGE;
    default:
        return ERR_IO;
    }
}
