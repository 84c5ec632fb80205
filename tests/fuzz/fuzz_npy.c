/* tests/fuzz/fuzz_npy.c: the .npy reader.
 *
 * Input: an .npy file. rt_npy_load must refuse it with one line, or
 * return an array whose element count is the product of its shape, of
 * '<f4' or '<i4'. rt_npy_read against a few declared inputs (f32 and i32,
 * several ranks) must fill exactly the declared buffer or refuse; it
 * accepts the file exactly when rt_npy_load does and the type agrees. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "runtime/kiln_rt.h"

/* The seeds in corpus/npy/ are files of these types, and a few others. */
static const rt_tensor_info inputs[] = {
    {.name = "x", .dtype = RT_F32, .rank = 2, .dims = {2, 3}, .count = 6},
    {.name = "ids", .dtype = RT_I32, .rank = 1, .dims = {4}, .count = 4},
    {.name = "pos", .dtype = RT_I32, .rank = 0, .count = 1},
    {.name = "h", .dtype = RT_F32, .rank = 4, .dims = {1, 2, 1, 2}, .count = 4},
};
#define NIN ((int)(sizeof inputs / sizeof inputs[0]))

static void check_err(const rt_err *e, int rc)
{
    FUZZ_CHECK(rc == e->code && (rc == RT_EINVAL || rc == RT_EINTERNAL || rc == RT_EIO));
    FUZZ_CHECK(e->msg[0] && !strchr(e->msg, '\n'));
}

static int same_type(const rt_array *a, const rt_tensor_info *t)
{
    if (a->dtype != t->dtype || a->rank != t->rank)
        return 0;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != t->dims[i])
            return 0;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size);
    rt_array a;
    rt_err e = {0, ""};
    int rc = rt_npy_load(path, &a, &e);
    if (rc == 0) {
        int64_t count = 1;
        for (int i = 0; i < a.rank; i++)
            count *= a.dims[i];
        FUZZ_CHECK(a.dtype == RT_F32 || a.dtype == RT_I32);
        FUZZ_CHECK(a.rank >= 0 && a.rank <= RT_MAX_RANK && a.count == count);
        FUZZ_CHECK(a.data != NULL && (uint64_t)count * 4 <= size);
    } else {
        check_err(&e, rc);
        FUZZ_CHECK(a.data == NULL);
    }

    for (int i = 0; i < NIN; i++) {
        const rt_tensor_info *t = &inputs[i];
        void *dst = malloc((size_t)t->count * 4);
        rt_err re = {0, ""};
        int rrc = rt_npy_read(path, t, dst, &re);
        FUZZ_CHECK((rrc == 0) == (rc == 0 && same_type(&a, t)));
        if (rrc)
            check_err(&re, rrc);
        else
            FUZZ_CHECK(memcmp(dst, a.data, (size_t)t->count * 4) == 0);
        free(dst);
    }
    free(a.data);
    return 0;
}
