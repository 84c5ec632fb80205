/* runtime/core/rt_weights.c: rt_load_weights, a model's weights into memory.
 *
 * Contract (kiln_rt.h): with a file, every tensor in it must be a declared
 * weight (checked first, before anything is allocated: a wrong file is
 * named at once), and each weight comes from the file when there, with
 * the declared shape, else from its init; without a file every weight
 * needs an init. Each weight gets its own rt_alloc'd buffer held as its
 * info's store says: f32 (16-bit data widened exactly), or 16-bit (a
 * tensor of the file in that very type copied bit for bit, anything else
 * made as f32 first, then rounded to nearest even: lossy, asked for by
 * --weight-dtype), or in quantized blocks (made as f32 first, then
 * quantized by the info's quantize, rt_quant.h). On error nothing stays
 * allocated and dst[] is all NULL. Messages:
 *   W: 'w_up': shape [8960,1024] in the file, the model declares [8960,1536]
 *   W: weight 'w_up' is not in the file and has no init
 *   W: 'foo': not a weight of the model
 *   weight 'w_up' has no init; give --weights */
#include "runtime/core/rt_core.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int wt_by_name(const void *x, const void *y)
{
    return strcmp(*(const char *const *)x, *(const char *const *)y);
}

/* Every tensor of the file is a declared weight: each looked up among the
 * weights' names, sorted (a MoE model has tens of thousands). */
static int wt_no_extras(const rt_safetensors *st, const rt_tensor_info *w, int nw, rt_err *e)
{
    const char **names = malloc(sizeof *names * ((size_t)nw + 1));
    if (!names)
        return rt_errf(e, RT_EINTERNAL, "out of memory checking %s", st->path);
    for (int i = 0; i < nw; i++)
        names[i] = w[i].name;
    qsort(names, (size_t)nw, sizeof *names, wt_by_name);
    int rc = 0;
    for (int i = 0; i < st->n && !rc; i++) {
        const char *key = st->t[i].name;
        if (!bsearch(&key, names, (size_t)nw, sizeof *names, wt_by_name))
            rc = rt_errf(e, RT_EINVAL, "%s: '%s': not a weight of the model", st->path, key);
    }
    free(names);
    return rc;
}

static int wt_same_shape(const rt_st_tensor *t, const rt_tensor_info *w)
{
    if (t->rank != w->rank)
        return 0;
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] != w->dims[i])
            return 0;
    return 1;
}

static void wt_init(const rt_tensor_info *w, float *d)
{
    if (w->init == RT_INIT_FILL)
        for (int64_t i = 0; i < w->count; i++)
            d[i] = (float)w->fill;
    else if (w->init == RT_INIT_RANDOM)
        rt_fill_random(d, w->count, w->seed, w->scale);
    else if (w->init == RT_INIT_DATA && w->data)
        memcpy(d, w->data, (size_t)w->count * sizeof *d);
}

/* Whether the file holds t as w is held: f32, or w's 16-bit store. */
static int wt_as_held(const rt_st_tensor *t, const rt_tensor_info *w)
{
    int file = t->dtype == RT_ST_F32 ? RT_F32 : t->dtype == RT_ST_BF16 ? RT_BF16 : RT_F16;
    return file == (w->store == RT_BF16 || w->store == RT_F16 ? w->store : RT_F32);
}

/* Fills a 16-bit weight d: a copy of t when it is of the store's type,
 * else rounded from f32 made in a scratch buffer. */
static int wt_half(const rt_st_tensor *t, const rt_tensor_info *w, uint16_t *d, rt_err *e)
{
    if (t && wt_as_held(t, w)) {
        const unsigned char *p = t->data;           /* little-endian in the file */
        for (int64_t i = 0; i < w->count; i++, p += 2)
            d[i] = (uint16_t)(p[0] | p[1] << 8);
        return 0;
    }
    float *f = rt_alloc((size_t)w->count * sizeof *f);
    if (!f)
        return rt_errf(e, RT_EINTERNAL, "weight '%s': out of memory (%lld bytes)", w->name,
                       (long long)w->count * 4);
    if (t)
        rt_st_to_f32(t, f);
    else
        wt_init(w, f);
    rt_round_half(d, f, w->count, w->store);
    rt_free(f);
    return 0;
}

/* Fills a quantized weight d: its values made as f32 in a scratch buffer,
 * then quantized into blocks. */
static int wt_quant(const rt_st_tensor *t, const rt_tensor_info *w, void *d, rt_err *e)
{
    int64_t row = w->rank ? w->dims[w->rank - 1] : 0;
    if (!w->quantize || row % 32 || w->panel)
        return rt_errf(e, RT_EINTERNAL, "weight '%s': cannot hold it quantized (store %d)",
                       w->name, w->store);
    float *f = rt_alloc((size_t)w->count * sizeof *f);
    if (!f)
        return rt_errf(e, RT_EINTERNAL, "weight '%s': out of memory (%lld bytes)", w->name,
                       (long long)w->count * 4);
    if (t)
        rt_st_to_f32(t, f);
    else
        wt_init(w, f);
    w->quantize(w->store, f, d, w->count);
    rt_free(f);
    return 0;
}

/* Weight w packed straight from the file's tensor t, which is f32 or of
 * w's 16-bit store: element i of row kk of panel g (the panels of every
 * batch in turn) is the file's row g * nr + i, column kk, as
 * rt_pack_panels lays them out, rounded when w is held in 16 bits that
 * the file is not. One pass, where widening, rounding and packing took
 * two or three and a buffer each; the panels shared out on the thread
 * pool. */
typedef struct {
    const rt_st_tensor *t;
    const rt_tensor_info *w;
    void *d;
} wt_pack_job;

static float wt_f32_at(const unsigned char *p)      /* little-endian in the file */
{
    uint32_t u = p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void wt_pack_panels(void *ctx, int64_t lo, int64_t hi)
{
    const wt_pack_job *j = ctx;
    int64_t k = j->w->dims[j->w->rank - 1], nr = j->w->panel;
    int from_f32 = j->t->dtype == RT_ST_F32, store = j->w->store;
    const unsigned char *s = j->t->data;
    float *df = j->d;
    uint16_t *dh = j->d;
    for (int64_t g = lo; g < hi; g++)
        for (int64_t kk = 0; kk < k; kk++) {
            int64_t at = (g * k + kk) * nr, from = g * nr * k + kk;
            if (!from_f32)                          /* the store's own 16 bits */
                for (int64_t i = 0; i < nr; i++) {
                    const unsigned char *p = s + (from + i * k) * 2;
                    dh[at + i] = (uint16_t)(p[0] | p[1] << 8);
                }
            else if (store == RT_BF16)
                for (int64_t i = 0; i < nr; i++)
                    dh[at + i] = rt_f32_bf16(wt_f32_at(s + (from + i * k) * 4));
            else if (store == RT_F16)
                for (int64_t i = 0; i < nr; i++)
                    dh[at + i] = rt_f32_f16(wt_f32_at(s + (from + i * k) * 4));
            else
                for (int64_t i = 0; i < nr; i++)
                    df[at + i] = wt_f32_at(s + (from + i * k) * 4);
        }
}

static void wt_pack_file(const rt_st_tensor *t, const rt_tensor_info *w, void *d)
{
    wt_pack_job j = {t, w, d};
    rt_parallel_for(wt_pack_panels, &j, w->count / (w->panel * w->dims[w->rank - 1]));
}

/* Where a weight comes from: the file (st; NULL: none), of its declared
 * shape, or its init. */
static int wt_source(const rt_safetensors *st, const rt_tensor_info *w, rt_err *e)
{
    const rt_st_tensor *t = st ? rt_st_find(st, w->name) : NULL;
    char a[160], b[160];
    if (t && !wt_same_shape(t, w))
        return rt_errf(e, RT_EINVAL, "%s: '%s': shape %s in the file, the model declares %s",
                       st->path, w->name, rt_fmt_shape(a, sizeof a, t->rank, t->dims),
                       rt_fmt_shape(b, sizeof b, w->rank, w->dims));
    if (!t && w->init == RT_INIT_NONE)
        return st ? rt_errf(e, RT_EINVAL, "%s: weight '%s' is not in the file and has no init",
                            st->path, w->name)
                  : rt_errf(e, RT_EINVAL, "weight '%s' has no init; give --weights", w->name);
    return 0;
}

int rt_check_weights(const rt_safetensors *st, const rt_tensor_info *w, int nw, rt_err *e)
{
    int rc = wt_no_extras(st, w, nw, e);
    for (int i = 0; !rc && i < nw; i++)
        rc = wt_source(st, &w[i], e);
    return rc;
}

/* One weight (its source checked): allocates and fills it. */
static int wt_one(const rt_safetensors *st, const rt_tensor_info *w, void **out, rt_err *e)
{
    const rt_st_tensor *t = st ? rt_st_find(st, w->name) : NULL;
    int rc = wt_source(st, w, e);
    if (rc)
        return rc;
    if (w->count < 0 || (uint64_t)w->count > SIZE_MAX / sizeof(float))
        return rt_errf(e, RT_EINTERNAL, "weight '%s': bad element count %lld", w->name,
                       (long long)w->count);
    int half = w->store == RT_BF16 || w->store == RT_F16, quant = w->store >= RT_Q8_0;
    size_t esize = half ? 2 : 4;
    void *d = rt_alloc((size_t)rt_store_bytes(w->store, w->count));
    if (!d)
        return rt_errf(e, RT_EINTERNAL, "weight '%s': out of memory (%lld bytes)", w->name,
                       (long long)rt_store_bytes(w->store, w->count));
    if (quant) {
        rc = wt_quant(t, w, d, e);
        if (rc)
            rt_free(d);
        else
            *out = d;
        return rc;
    }
    int64_t k = w->rank >= 2 ? w->dims[w->rank - 1] : 0, n = w->rank >= 2 ? w->dims[w->rank - 2] : 0;
    if (w->panel && (k < 1 || n < 1 || n % w->panel)) {
        rt_free(d);
        return rt_errf(e, RT_EINTERNAL, "weight '%s': cannot pack in panels of %lld", w->name,
                       (long long)w->panel);
    }
    int from_file = t && (wt_as_held(t, w) || (half && t->dtype == RT_ST_F32));
    if (w->panel && from_file)
        wt_pack_file(t, w, d);
    else if (half)
        rc = wt_half(t, w, d, e);
    else if (t)
        rt_st_to_f32(t, d);
    else
        wt_init(w, d);
    if (!rc && w->panel && !from_file)           /* made another way: packed after */
        rc = rt_pack_panels(&d, w->count / (n * k), n, k, w->panel, (int)esize, e);
    if (rc)
        rt_free(d);
    else
        *out = d;
    return rc;
}

int rt_load_weights(const char *path, const rt_tensor_info *w, int nw, void **dst, rt_err *e)
{
    rt_safetensors st;
    memset(&st, 0, sizeof st);
    for (int i = 0; i < nw; i++)
        dst[i] = NULL;
    int rc = path ? rt_st_open(&st, path, e) : 0;
    if (!rc && path)
        rc = rt_check_weights(&st, w, nw, e);
    for (int i = 0; !rc && i < nw; i++)
        rc = wt_one(path ? &st : NULL, &w[i], &dst[i], e);
    rt_st_close(&st);
    for (int i = 0; rc && i < nw; i++) {
        rt_free(dst[i]);
        dst[i] = NULL;
    }
    return rc;
}
