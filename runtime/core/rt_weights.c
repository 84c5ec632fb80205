/* runtime/core/rt_weights.c: rt_load_weights, a model's weights into memory.
 *
 * Contract (kiln_rt.h): the file is a safetensors file, an index of
 * shards, or a GGUF file (rt_is_gguf: by its magic, whatever its name);
 * the loader sees either as named tensors of a shape, each held in the
 * file as f32, 16 bits or quantized blocks (wt_file, wt_tensor). With a
 * file, every tensor in it must be a declared weight (checked first,
 * before anything is allocated: a wrong file is named at once), and each
 * weight comes from the file when there, with the declared shape, else
 * from its init; without a file every weight needs an init. Each weight
 * gets its own rt_alloc'd buffer held as its info's store says: a tensor
 * of the file held in that very type is copied as stored (16 bits, or
 * quantized blocks byte for byte); any other is made exact f32 first
 * (16 bits widened; a GGUF's blocks widened by the info's dequantize,
 * rt_quant.h), then kept f32, rounded to 16 bits (to nearest even: lossy,
 * asked for by --weight-dtype), or quantized by the info's quantize. On
 * error nothing stays allocated and dst[] is all NULL. Messages:
 *   W: 'w_up': shape [8960,1024] in the file, the model declares [8960,1536]
 *   W: weight 'w_up' is not in the file and has no init
 *   W: 'foo': not a weight of the model
 *   W: 'w_up' is Q8_0, which this program cannot widen (it was built without
 *      quantized weights): build it with --weights W, which holds the file's
 *      blocks as stored
 *   weight 'w_up' has no init; give --weights */
#include "runtime/core/rt_core.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- the file, whichever kind ------------------------------------------- */

typedef struct {
    const char *path;
    int gguf;                   /* 1: g is open, else st */
    rt_safetensors st;
    rt_gguf g;
} wt_file;

/* A tensor of the file as the loader sees it. */
typedef struct {
    const char *name;
    int store;                  /* how the file holds it: RT_F32, RT_BF16,
                                   RT_F16, RT_Q8_0 ... RT_Q6_K */
    int rank;
    const int64_t *dims;
    int64_t count;
    const unsigned char *data;  /* inside the mapping, little-endian */
} wt_tensor;

static int wt_begin(wt_file *f, const char *path, rt_err *e)
{
    memset(f, 0, sizeof *f);
    f->path = path;
    f->gguf = rt_is_gguf(path);
    return f->gguf ? rt_gguf_open(&f->g, path, e) : rt_st_open(&f->st, path, e);
}

static void wt_end(wt_file *f)
{
    if (f->gguf)
        rt_gguf_close(&f->g);
    else
        rt_st_close(&f->st);
}

static int wt_count(const wt_file *f) { return f->gguf ? f->g.nt : f->st.n; }

static const char *wt_name(const wt_file *f, int i)
{
    return f->gguf ? f->g.t[i].name : f->st.t[i].name;
}

/* Tensor `name` of f (f NULL: none) into *t: 1 when found, else 0. */
static int wt_find(const wt_file *f, const char *name, wt_tensor *t)
{
    static const int st_store[] = {RT_F32, RT_F16, RT_BF16};    /* by RT_ST_* */
    if (f && f->gguf) {
        const rt_gguf_tensor *g = rt_gguf_find_tensor(&f->g, name);
        if (g)
            *t = (wt_tensor){g->name, g->store, g->rank, g->dims, g->count, g->data};
        return g != NULL;
    }
    const rt_st_tensor *s = f ? rt_st_find(&f->st, name) : NULL;
    if (s)
        *t = (wt_tensor){s->name, st_store[s->dtype], s->rank, s->dims, s->count, s->data};
    return s != NULL;
}

static int wt_by_name(const void *x, const void *y)
{
    return strcmp(*(const char *const *)x, *(const char *const *)y);
}

/* Every tensor of the file is a declared weight: each looked up among the
 * weights' names, sorted (a MoE model has tens of thousands). */
static int wt_no_extras(const wt_file *f, const rt_tensor_info *w, int nw, rt_err *e)
{
    const char **names = malloc(sizeof *names * ((size_t)nw + 1));
    if (!names)
        return rt_errf(e, RT_EINTERNAL, "out of memory checking %s", f->path);
    for (int i = 0; i < nw; i++)
        names[i] = w[i].name;
    qsort(names, (size_t)nw, sizeof *names, wt_by_name);
    int rc = 0;
    for (int i = 0; i < wt_count(f) && !rc; i++) {
        const char *key = wt_name(f, i);
        if (!bsearch(&key, names, (size_t)nw, sizeof *names, wt_by_name))
            rc = rt_errf(e, RT_EINVAL, "%s: '%s': not a weight of the model", f->path, key);
    }
    free(names);
    return rc;
}

static int wt_same_shape(const wt_tensor *t, const rt_tensor_info *w)
{
    if (t->rank != w->rank)
        return 0;
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] != w->dims[i])
            return 0;
    return 1;
}

static int wt_half_store(int store) { return store == RT_BF16 || store == RT_F16; }
static int wt_quant_store(int store) { return store >= RT_Q8_0; }

/* Whether the file holds t as w is held: f32, w's 16-bit type, or w's
 * quantized type. */
static int wt_as_held(const wt_tensor *t, const rt_tensor_info *w) { return t->store == w->store; }

/* The name GGUF gives a quantized store, for messages. */
static const char *wt_quant_name(int store)
{
    static const char *const names[] = {"Q8_0", "Q4_0", "Q4_K", "Q6_K"};
    return store == RT_MXFP4 ? "MXFP4" : names[store - RT_Q8_0];
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

static float wt_f32_at(const unsigned char *p)      /* little-endian in the file */
{
    uint32_t u = p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* w's values as exact f32 into d: t widened (its source checked by
 * wt_source), or w's init. */
static void wt_f32(const wt_tensor *t, const rt_tensor_info *w, float *d)
{
    const unsigned char *p = t ? t->data : NULL;
    if (!t)
        wt_init(w, d);
    else if (wt_quant_store(t->store))
        w->dequantize(t->store, p, d, t->count);
    else if (t->store == RT_F32)
        for (int64_t i = 0; i < t->count; i++, p += 4)
            d[i] = wt_f32_at(p);
    else if (t->store == RT_F16)
        for (int64_t i = 0; i < t->count; i++, p += 2)
            d[i] = rt_f16_f32((uint16_t)(p[0] | p[1] << 8));
    else
        for (int64_t i = 0; i < t->count; i++, p += 2)
            d[i] = rt_bf16_f32((uint16_t)(p[0] | p[1] << 8));
}

/* Fills a 16-bit or quantized weight d: a copy of t when it is of the
 * store's type, else made as f32 in a scratch buffer, then rounded or
 * quantized. */
static int wt_small(const wt_tensor *t, const rt_tensor_info *w, void *d, rt_err *e)
{
    int quant = wt_quant_store(w->store);
    if (t && wt_as_held(t, w) && quant) {
        memcpy(d, t->data, (size_t)rt_store_bytes(w->store, w->count));
        return 0;
    }
    if (t && wt_as_held(t, w)) {
        const unsigned char *p = t->data;           /* little-endian in the file */
        uint16_t *h = d;
        for (int64_t i = 0; i < w->count; i++, p += 2)
            h[i] = (uint16_t)(p[0] | p[1] << 8);
        return 0;
    }
    int64_t row = w->rank ? w->dims[w->rank - 1] : 0;
    if (quant && (!w->quantize || row % 32))
        return rt_errf(e, RT_EINTERNAL, "weight '%s': cannot hold it quantized (store %d)",
                       w->name, w->store);
    float *f = rt_alloc((size_t)w->count * sizeof *f);
    if (!f)
        return rt_errf(e, RT_EINTERNAL, "weight '%s': out of memory (%lld bytes)", w->name,
                       (long long)w->count * 4);
    wt_f32(t, w, f);
    if (quant)
        w->quantize(w->store, f, d, w->count);
    else
        rt_round_half(d, f, w->count, w->store);
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
    const wt_tensor *t;
    const rt_tensor_info *w;
    void *d;
} wt_pack_job;

static void wt_pack_panels(void *ctx, int64_t lo, int64_t hi)
{
    const wt_pack_job *j = ctx;
    int64_t k = j->w->dims[j->w->rank - 1], nr = j->w->panel;
    int from_f32 = j->t->store == RT_F32, store = j->w->store;
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

static void wt_pack_file(const wt_tensor *t, const rt_tensor_info *w, void *d)
{
    wt_pack_job j = {t, w, d};
    rt_parallel_for(wt_pack_panels, &j, w->count / (w->panel * w->dims[w->rank - 1]));
}

/* Where a weight comes from: the file (f; NULL: none), of its declared
 * shape and widenable when held otherwise, or its init; *t the file's
 * tensor, found is 1 when it is there. */
static int wt_source(const wt_file *f, const rt_tensor_info *w, wt_tensor *t, int *found,
                     rt_err *e)
{
    char a[160], b[160];
    *found = wt_find(f, w->name, t);
    if (*found && !wt_same_shape(t, w))
        return rt_errf(e, RT_EINVAL, "%s: '%s': shape %s in the file, the model declares %s",
                       f->path, w->name, rt_fmt_shape(a, sizeof a, t->rank, t->dims),
                       rt_fmt_shape(b, sizeof b, w->rank, w->dims));
    if (*found && wt_quant_store(t->store) && !wt_as_held(t, w) && !w->dequantize)
        return rt_errf(e, RT_EINVAL, "%s: '%s' is %s, which this program cannot widen (it "
                       "was built without quantized weights): build it with --weights %s, which "
                       "holds the file's blocks as stored", f->path, w->name,
                       wt_quant_name(t->store), f->path);
    if (!*found && w->init == RT_INIT_NONE)
        return f ? rt_errf(e, RT_EINVAL, "%s: weight '%s' is not in the file and has no init",
                           f->path, w->name)
                 : rt_errf(e, RT_EINVAL, "weight '%s' has no init; give --weights", w->name);
    return 0;
}

static int wt_check(const wt_file *f, const rt_tensor_info *w, int nw, rt_err *e)
{
    int rc = wt_no_extras(f, w, nw, e), found;
    wt_tensor t;
    for (int i = 0; !rc && i < nw; i++)
        rc = wt_source(f, &w[i], &t, &found, e);
    return rc;
}

int rt_check_weights(const char *path, const rt_tensor_info *w, int nw, rt_err *e)
{
    wt_file f;
    int rc = wt_begin(&f, path, e);
    if (rc)
        return rc;
    rc = wt_check(&f, w, nw, e);
    wt_end(&f);
    return rc;
}

/* One weight (its source checked): allocates and fills it. */
static int wt_one(const wt_file *f, const rt_tensor_info *w, void **out, rt_err *e)
{
    wt_tensor t;
    int found, rc = wt_source(f, w, &t, &found, e);
    if (rc)
        return rc;
    if (w->count < 0 || (uint64_t)w->count > SIZE_MAX / sizeof(float))
        return rt_errf(e, RT_EINTERNAL, "weight '%s': bad element count %lld", w->name,
                       (long long)w->count);
    int half = wt_half_store(w->store), small = half || wt_quant_store(w->store);
    size_t esize = half ? 2 : 4;
    void *d = rt_alloc((size_t)rt_store_bytes(w->store, w->count));
    if (!d)
        return rt_errf(e, RT_EINTERNAL, "weight '%s': out of memory (%lld bytes)", w->name,
                       (long long)rt_store_bytes(w->store, w->count));
    int64_t k = w->rank >= 2 ? w->dims[w->rank - 1] : 0, n = w->rank >= 2 ? w->dims[w->rank - 2] : 0;
    if (w->panel && (k < 1 || n < 1 || n % w->panel || wt_quant_store(w->store))) {
        rt_free(d);
        return rt_errf(e, RT_EINTERNAL, "weight '%s': cannot pack in panels of %lld", w->name,
                       (long long)w->panel);
    }
    const wt_tensor *src = found ? &t : NULL;
    int from_file = src && (wt_as_held(src, w) || (half && src->store == RT_F32));
    if (w->panel && from_file)
        wt_pack_file(src, w, d);
    else if (small)
        rc = wt_small(src, w, d, e);
    else
        wt_f32(src, w, d);
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
    wt_file f;
    for (int i = 0; i < nw; i++)
        dst[i] = NULL;
    int rc = path ? wt_begin(&f, path, e) : 0;
    if (rc)
        return rc;
    if (path)
        rc = wt_check(&f, w, nw, e);
    for (int i = 0; !rc && i < nw; i++)
        rc = wt_one(path ? &f : NULL, &w[i], &dst[i], e);
    if (path)
        wt_end(&f);
    for (int i = 0; rc && i < nw; i++) {
        rt_free(dst[i]);
        dst[i] = NULL;
    }
    return rc;
}
