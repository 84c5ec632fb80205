/* tests/fuzz/fuzz_gguf.c: the GGUF reader (runtime/core/rt_gguf.c).
 *
 * Input: a GGUF file. rt_gguf_open must refuse it with one line and
 * nothing left in g, or accept it with: version 2 or 3, an alignment that
 * is a power of two, the data section at a multiple of it; every tensor of
 * a store kiln holds, rank 1 to 4, dims >= 1 whose product is its count,
 * rt_store_bytes(store, count) bytes at an aligned offset, inside the
 * file, overlapping no other tensor, findable by name; every KV findable
 * by key and readable through the accessors: a scalar by exactly the
 * accessors of its type, each element of an array likewise, numbers and
 * bools inside the file, strings NUL-terminated at their length. Then
 * the weights loader (rt_load_weights) on an accepted file, its tensors
 * declared as a model's weights: held as stored, each buffer is the
 * file's bytes; held as f32, each is the tensor widened (blocks by
 * rt_dequantize); held as f32 by a program without the quantized part, a
 * file with a quantized tensor is refused with one line, else loads. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "runtime/kiln_rt.h"
#include "runtime/rt_gguf.h"
#include "runtime/rt_quant.h"

static int is_unsigned(int t)
{
    return t == RT_GGUF_U8 || t == RT_GGUF_U16 || t == RT_GGUF_U32 || t == RT_GGUF_U64;
}

static int is_signed(int t)
{
    return t == RT_GGUF_I8 || t == RT_GGUF_I16 || t == RT_GGUF_I32 || t == RT_GGUF_I64;
}

/* Element i of kv (a scalar: i is 0) answers exactly the accessors of its
 * type. */
static void check_value(const rt_gguf_kv *kv, uint64_t i)
{
    int arr = kv->type == RT_GGUF_ARR, t = kv->etype, b = 0;
    uint64_t u = 0;
    int64_t s = 0;
    double d = 0;
    size_t len = 0;
    int ru = arr ? rt_gguf_arr_u64(kv, i, &u) : rt_gguf_u64(kv, &u);
    int rs = arr ? rt_gguf_arr_i64(kv, i, &s) : rt_gguf_i64(kv, &s);
    int rd = arr ? rt_gguf_arr_f64(kv, i, &d) : rt_gguf_f64(kv, &d);
    int rb = arr ? rt_gguf_arr_bool(kv, i, &b) : rt_gguf_bool(kv, &b);
    const char *str = arr ? rt_gguf_arr_str(kv, i, &len) : rt_gguf_str(kv, &len);
    FUZZ_CHECK((rd == 0) == (t == RT_GGUF_F32 || t == RT_GGUF_F64));
    FUZZ_CHECK((rb == 0) == (t == RT_GGUF_BOOL) && (rb || b == 0 || b == 1));
    FUZZ_CHECK((str != NULL) == (t == RT_GGUF_STR) && (!str || str[len] == 0));
    FUZZ_CHECK(!str || strlen(str) <= len);
    if (is_unsigned(t))
        FUZZ_CHECK(ru == 0 && (rs == 0) == (u <= (uint64_t)INT64_MAX) && (rs || (uint64_t)s == u));
    else if (is_signed(t))
        FUZZ_CHECK(rs == 0 && (ru == 0) == (s >= 0) && (ru || (uint64_t)s == u));
    else
        FUZZ_CHECK(ru && rs);
}

static void check_kvs(const rt_gguf *g)
{
    static const int size[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    const unsigned char *lo = g->map, *hi = lo + g->size;
    for (int k = 0; k < g->nkv; k++) {
        const rt_gguf_kv *kv = &g->kv[k];
        FUZZ_CHECK(rt_gguf_find_key(g, kv->key) == kv && kv->key[0]);
        FUZZ_CHECK(kv->type >= RT_GGUF_U8 && kv->type <= RT_GGUF_F64);
        FUZZ_CHECK(kv->etype >= RT_GGUF_U8 && kv->etype <= RT_GGUF_F64 &&
                   kv->etype != RT_GGUF_ARR);
        FUZZ_CHECK(kv->type == RT_GGUF_ARR || (kv->etype == kv->type && kv->n == 1));
        if (kv->etype != RT_GGUF_STR)
            FUZZ_CHECK(kv->raw >= lo && kv->n <= (uint64_t)(hi - kv->raw) / size[kv->etype]);
        for (uint64_t i = 0; i < kv->n; i++)
            check_value(kv, i);
        /* past the end, or the wrong shape: nothing */
        uint64_t u;
        if (kv->type == RT_GGUF_ARR)
            FUZZ_CHECK(rt_gguf_arr_u64(kv, kv->n, &u) && !rt_gguf_arr_str(kv, kv->n, NULL) &&
                       rt_gguf_u64(kv, &u) && !rt_gguf_str(kv, NULL));
        else
            FUZZ_CHECK(rt_gguf_arr_u64(kv, 0, &u) && !rt_gguf_arr_str(kv, 0, NULL));
    }
}

static int by_offset(const void *a, const void *b)
{
    const rt_gguf_tensor *x = *(const rt_gguf_tensor *const *)a;
    const rt_gguf_tensor *y = *(const rt_gguf_tensor *const *)b;
    return (x->offset > y->offset) - (x->offset < y->offset);
}

static void check_tensors(const rt_gguf *g)
{
    const unsigned char *lo = g->map, *hi = lo + g->size;
    const rt_gguf_tensor **by = malloc((size_t)(g->nt ? g->nt : 1) * sizeof *by);
    FUZZ_CHECK(by != NULL);
    for (int i = 0; i < g->nt; i++) {
        const rt_gguf_tensor *t = &g->t[i];
        FUZZ_CHECK(rt_gguf_find_tensor(g, t->name) == t && t->name[0]);
        FUZZ_CHECK((t->store >= RT_F32 && t->store <= RT_Q6_K && t->store != RT_I32) ||
                   t->store == RT_MXFP4);
        FUZZ_CHECK(rt_gguf_type_name(t->type) != NULL);
        FUZZ_CHECK(t->rank >= 1 && t->rank <= 4);
        int64_t count = 1;
        for (int j = 0; j < t->rank; j++) {
            FUZZ_CHECK(t->dims[j] >= 1);
            count *= t->dims[j];
        }
        FUZZ_CHECK(count == t->count);
        FUZZ_CHECK((int64_t)t->nbytes == rt_store_bytes(t->store, t->count) && t->nbytes > 0);
        FUZZ_CHECK(t->offset % g->alignment == 0);
        FUZZ_CHECK(t->data == lo + g->data_start + t->offset);
        FUZZ_CHECK(t->data >= lo && t->data < hi && t->nbytes <= (size_t)(hi - t->data));
        FUZZ_CHECK(t->data[0] == lo[g->data_start + t->offset]);   /* mapped */
        by[i] = t;
    }
    qsort(by, (size_t)g->nt, sizeof *by, by_offset);
    for (int i = 1; i < g->nt; i++)
        FUZZ_CHECK(by[i - 1]->data + by[i - 1]->nbytes <= by[i]->data);
    free(by);
}

#define LOAD_MAX (1 << 22)   /* values a tensor: larger files are not loaded */

/* Tensor t as f32, exactly: what a load held as f32 must give. */
static void widen(const rt_gguf_tensor *t, float *f)
{
    const unsigned char *p = t->data;
    for (int64_t i = 0; t->store == RT_F32 && i < t->count; i++)
        memcpy(&f[i], p + 4 * i, 4);
    for (int64_t i = 0; (t->store == RT_F16 || t->store == RT_BF16) && i < t->count; i++) {
        uint16_t h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
        f[i] = t->store == RT_F16 ? rt_f16_f32(h) : rt_bf16_f32(h);
    }
    if (t->store >= RT_Q8_0)
        rt_dequantize(t->store, p, f, t->count);
}

/* Loads every tensor as a weight: as stored (as_f32 0), as f32 (1), as
 * f32 without rt_dequantize (2); checks what each gives. */
static void check_load(const rt_gguf *g, const char *path, int as_f32)
{
    rt_tensor_info *w = calloc((size_t)g->nt + 1, sizeof *w);
    void **dst = calloc((size_t)g->nt + 1, sizeof *dst);
    FUZZ_CHECK(w && dst);
    int quantized = 0;
    for (int i = 0; i < g->nt; i++) {
        const rt_gguf_tensor *t = &g->t[i];
        w[i] = (rt_tensor_info){.name = t->name, .dtype = RT_F32, .rank = t->rank,
                                .count = t->count, .store = as_f32 ? RT_F32 : t->store,
                                .quantize = rt_quantize,
                                .dequantize = as_f32 == 2 ? NULL : rt_dequantize};
        memcpy(w[i].dims, t->dims, sizeof t->dims);
        quantized |= t->store >= RT_Q8_0;
    }
    rt_err e = {0, ""};
    int rc = rt_load_weights(path, w, g->nt, dst, &e);
    if (as_f32 == 2 && quantized) {
        FUZZ_CHECK(rc == RT_EINVAL && e.msg[0] && !strchr(e.msg, '\n'));
        for (int i = 0; i < g->nt; i++)
            FUZZ_CHECK(dst[i] == NULL);
    } else {
        FUZZ_CHECK(rc == 0);
    }
    for (int i = 0; !rc && i < g->nt; i++) {
        const rt_gguf_tensor *t = &g->t[i];
        if (!as_f32) {
            FUZZ_CHECK(!memcmp(dst[i], t->data, t->nbytes));
        } else {
            float *f = malloc((size_t)t->count * sizeof *f);
            FUZZ_CHECK(f != NULL);
            widen(t, f);
            FUZZ_CHECK(!memcmp(dst[i], f, (size_t)t->count * sizeof *f));
            free(f);
        }
        rt_free(dst[i]);
    }
    free(w);
    free(dst);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size);
    rt_gguf g;
    rt_err e = {0, ""};
    int rc = rt_gguf_open(&g, path, &e);
    if (rc == 0) {
        FUZZ_CHECK(g.size == size && (g.version == 2 || g.version == 3));
        FUZZ_CHECK(g.alignment && !(g.alignment & (g.alignment - 1)));
        FUZZ_CHECK(g.data_start % g.alignment == 0);
        check_kvs(&g);
        check_tensors(&g);
        int64_t most = 0;
        for (int i = 0; i < g.nt; i++)
            most = g.t[i].count > most ? g.t[i].count : most;
        for (int as_f32 = 0; most <= LOAD_MAX && as_f32 < 3; as_f32++)
            check_load(&g, path, as_f32);
        rt_gguf_close(&g);
    } else {
        FUZZ_CHECK(rc == e.code && (rc == RT_EINVAL || rc == RT_EINTERNAL || rc == RT_EIO));
        FUZZ_CHECK(e.msg[0] && !strchr(e.msg, '\n'));
        FUZZ_CHECK(g.map == NULL && g.kv == NULL && g.t == NULL && g.strs == NULL);
    }
    return 0;
}
