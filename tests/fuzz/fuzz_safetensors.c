/* tests/fuzz/fuzz_safetensors.c: the safetensors reader and weight loader.
 *
 * Input: a weights file. rt_st_open must refuse it with one line, or
 * accept it with every tensor inside the mapping, of shape x dtype-size
 * bytes and findable by name. Then rt_load_weights
 * loads it against a small fixed table of weights (some with an init,
 * some without, of several ranks): success fills every weight, failure
 * leaves nothing allocated. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "runtime/kiln_rt.h"

static const float table_data[4] = {1, 2, 3, 4};

/* The seeds in corpus/safetensors/ are files that fit this table. */
static const rt_tensor_info table[] = {
    {.name = "w", .dtype = RT_F32, .rank = 2, .dims = {2, 3}, .count = 6},
    {.name = "b", .dtype = RT_F32, .rank = 1, .dims = {3}, .count = 3,
     .init = RT_INIT_FILL, .fill = 0.5},
    {.name = "s", .dtype = RT_F32, .rank = 0, .count = 1,
     .init = RT_INIT_RANDOM, .seed = 7, .scale = 0.1},
    {.name = "d", .dtype = RT_F32, .rank = 3, .dims = {1, 2, 2}, .count = 4,
     .init = RT_INIT_DATA, .data = table_data},
    {.name = "emb.weight", .dtype = RT_F32, .rank = 2, .dims = {4, 2}, .count = 8},
    /* also MXFP4, x_blocks and x_scales (widened) */
    {.name = "x", .dtype = RT_F32, .rank = 2, .dims = {2, 32}, .count = 64,
     .init = RT_INIT_FILL, .fill = 0},
};
#define NW ((int)(sizeof table / sizeof table[0]))

static const int esize[] = {4, 2, 2, 1, 1};   /* RT_ST_F32, F16, BF16, F8_E4M3, U8 */

/* A message is one non-empty line, with a status that means bad input. */
static void check_err(const rt_err *e, int rc)
{
    FUZZ_CHECK(rc == e->code && (rc == RT_EINVAL || rc == RT_EINTERNAL || rc == RT_EIO));
    FUZZ_CHECK(e->msg[0] && !strchr(e->msg, '\n'));
}

static void check_file(const rt_safetensors *st, size_t size)
{
    const unsigned char *lo = st->map, *hi = lo + st->size;
    FUZZ_CHECK(st->size == size);
    for (int i = 0; i < st->n; i++) {
        const rt_st_tensor *t = &st->t[i];
        FUZZ_CHECK(t->dtype >= RT_ST_F32 && t->dtype <= RT_ST_U8);
        FUZZ_CHECK(t->rank >= 0 && t->rank <= RT_MAX_RANK);
        FUZZ_CHECK(t->data >= lo + 8 && t->data <= hi && t->nbytes <= (size_t)(hi - t->data));
        FUZZ_CHECK(t->nbytes == (size_t)t->count * (size_t)esize[t->dtype]);
        FUZZ_CHECK(rt_st_find(st, t->name) == t);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size);
    rt_safetensors st;
    rt_err e = {0, ""};
    int rc = rt_st_open(&st, path, &e);
    if (rc == 0) {
        check_file(&st, size);
        rt_st_close(&st);
    } else {
        check_err(&e, rc);
        FUZZ_CHECK(st.map == NULL && st.t == NULL);
    }

    float *w[NW];
    rt_err we = {0, ""};
    rc = rt_load_weights(path, table, NW, (void **)w, &we);
    if (rc == 0) {
        for (int i = 0; i < NW; i++) {
            FUZZ_CHECK(w[i] != NULL);
            rt_free(w[i]);
        }
    } else {
        /* a GGUF file: refused when the GGUF part's reader is not linked */
        if (rc == RT_EUSAGE && size >= 4 && !memcmp(data, "GGUF", 4))
            rc = we.code = RT_EINVAL;
        check_err(&we, rc);
        for (int i = 0; i < NW; i++)
            FUZZ_CHECK(w[i] == NULL);
    }
    return 0;
}
