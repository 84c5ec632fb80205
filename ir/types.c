/* ir/types.c: dtypes, shapes, broadcasting and axes. */
#include "ir.h"

#include <string.h>

const char *dtype_name(DType t) { return t == DT_I32 ? "i32" : "f32"; }

static const char *const storage_names[] = {"f32", "", "bf16", "f16", "q8_0",
                                            "q4_0", "q4_k", "q6_k", "q4_k_m", "f8_e4m3",
                                            "mxfp4"};

const char *storage_name(Storage s)
{
    return s >= ST_F32 && s <= ST_MXFP4 && *storage_names[s] ? storage_names[s] : "f32";
}

int storage_parse(const char *name, Storage *s)
{
    for (int i = 0; i <= ST_MXFP4; i++)
        if (*storage_names[i] && strcmp(name, storage_names[i]) == 0) {
            *s = (Storage)i;
            return 1;
        }
    return 0;
}

int storage_block(Storage s)
{
    return s == ST_Q8_0 || s == ST_Q4_0 || s == ST_MXFP4 ? 32
           : s == ST_F8_E4M3                              ? 128
           : s == ST_Q4_K || s == ST_Q6_K                 ? 256
                                                          : 0;
}

int64_t storage_bytes(Storage s, int64_t count)
{
    switch (s) {
    case ST_BF16:
    case ST_F16: return count * 2;
    case ST_Q8_0: return count / 32 * 34;
    case ST_Q4_0: return count / 32 * 18;
    case ST_Q4_K: return count / 256 * 144;
    case ST_Q6_K: return count / 256 * 210;
    case ST_F8_E4M3: return count / 128 * 132;
    case ST_MXFP4: return count / 32 * 17;
    default: return count * 4;
    }
}

int64_t shape_count(int rank, const int64_t *dims)
{
    int64_t c = 1;
    for (int i = 0; i < rank; i++)
        c *= dims[i];
    return c;
}

int shape_fits(int rank, const int64_t *dims)
{
    int64_t c = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0 || (dims[i] && c > KILN_MAX_ELEMS / dims[i]))
            return 0;
        c *= dims[i];
    }
    return 1;
}

char *shape_str(Arena *a, int rank, const int64_t *dims)
{
    char buf[KILN_MAX_RANK * 24 + 4];
    size_t len = 0;
    buf[len++] = '[';
    for (int i = 0; i < rank; i++)
        len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%lld",
                                i ? "," : "", (long long)dims[i]);
    buf[len++] = ']';
    buf[len] = 0;
    return arena_strdup(a, buf);
}

int shape_broadcast(int ra, const int64_t *da, int rb, const int64_t *db,
                    int64_t *out)
{
    int r = ra > rb ? ra : rb;
    for (int i = 0; i < r; i++) {
        int64_t x = i < r - ra ? 1 : da[i - (r - ra)];
        int64_t y = i < r - rb ? 1 : db[i - (r - rb)];
        if (x != y && x != 1 && y != 1)
            return -1;
        out[i] = x == 1 ? y : x;
    }
    return r;
}

int axis_norm(int64_t axis, int rank)
{
    if (axis < -(int64_t)rank || axis >= rank)
        return -1;
    return (int)(axis < 0 ? axis + rank : axis);
}
