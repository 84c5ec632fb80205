/* runtime/core/rt_weights.c: rt_load_weights, a model's weights into memory.
 *
 * Contract (kiln_rt.h): the file is a safetensors file, an index of
 * shards, or a GGUF file (rt_is_gguf: by its magic, whatever its name;
 * read through the GGUF part's opener, rt_gguf_use, and refused by a
 * program without that part, RT_EUSAGE);
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
 * asked for by --weight-dtype), or quantized by the info's quantize. A
 * weight sharded over MPI ranks (rt_tensor_info.shard_of) is its whole
 * shape in the file, and this rank (rt_ranks_now) reads its part only
 * (wt_part: quantized blocks whole; an FP8 tensor's rows or columns, each
 * value scaled by the scale of its place in the whole tensor, so a part
 * may begin inside a 128 x 128 scale block; an MXFP4 tensor's blocks and
 * their scales alike); a
 * weight of one tensor per rank (rt_tensor_info.tensors: a moe's experts
 * of a Hugging Face folder, each rank its own) is read by each rank from
 * its own tensor, and the check of the file (wt_check, at every load and
 * by rt_check_weights) checks every rank's tensor. On
 * error nothing stays allocated and dst[] is all NULL.
 *
 * FP8 (docs/fp8.md): a safetensors tensor of dtype F8_E4M3 comes with its
 * scale, the tensor NAME_scale_inv (block-wise FP8) or NAME_scale
 * (compressed-tensors), f32, bf16 or f16, of one of three shapes: [1] or
 * [] (per tensor), [rows, 1] or [rows] (per row), or [ceil(rows / 128),
 * ceil(cols / 128)] (blocks of 128 x 128); value (r, c) is e4m3(byte) x
 * scale(r, c) (wt_scale). Held as f8_e4m3 it is re-blocked (wt_reblock):
 * per 128 values of a row (cols a multiple of 128, so a block of 128,
 * beginning at a multiple of 128 columns, lies in one scale's block) the
 * f32 scale then the 128 bytes as stored; a NaN
 * byte (0x7f, 0xff) is refused by place. Held otherwise it is widened to
 * those f32 values first, as any tensor. A scale and a compressed-tensors
 * input_scale (NAME minus "weight" plus "input_scale") of an FP8 weight
 * are companions, not extras; an input_scale is not read (kiln keeps
 * activations in f32). Messages:
 *   W: 'w_up': shape [8960,1024] in the file, the model declares [8960,1536]
 *   W: weight 'w_up' is not in the file and has no init
 *   W: 'foo': not a weight of the model
 *   W: 'w_up' is Q8_0, which this program cannot widen (it was built without
 *      quantized weights): build it with --weights W, which holds the file's
 *      blocks as stored
 *   weight 'w_up' has no init; give --weights
 *   W: 'q.weight' is F8_E4M3 but its scale 'q.weight_scale_inv' (or
 *      'q.weight_scale') is not in the file
 *   W: 'q.weight_scale_inv': shape [3,2], for 'q.weight' [256,128] kiln
 *      reads [2,1] (blocks of 128 x 128), [256,1] (per row) or [1]
 *   W: 'q.weight': element 77 is NaN (0x7f)
 *
 * MXFP4 (Hugging Face's gpt-oss checkpoints; docs/importing.md): a weight
 * NAME [..., rows, cols] that the safetensors file does not hold is read
 * from NAME_blocks, U8 [..., rows, cols / 32, 16], and NAME_scales, U8
 * [..., rows, cols / 32] (companions, not extras): block b's 32 values
 * are E2M1 nibbles, value 2j the low nibble of byte j of its 16, 2j + 1
 * the high one, times 2^(scale - 127). Held as mxfp4 each block is
 * repacked (wt_mx_repack) into kiln's (rt_quant.h: the scale byte, then
 * byte j = value j | value j + 16 << 4), nothing widened; held otherwise
 * it is widened to those f32 values (wt_mx_f32) as any tensor. A scale of
 * 255 (NaN) is refused by place (wt_mx_nan: of a sharded weight, by each
 * rank in its part as it loads, so that no rank reads another's). Messages:
 *   W: 'e.gate_up_proj_blocks' is MXFP4 but its scales 'e.gate_up_proj_scales'
 *      are not in the file
 *   W: 'e.gate_up_proj_scales': U8 [2,64], for 'e.gate_up_proj_blocks'
 *      [2,64,2,16] kiln reads [2,64,2] (U8)
 *   W: 'e.gate_up_proj_blocks': not U8 [2,64,2,16], kiln reads MXFP4
 *      blocks as U8 [..., cols / 32, 16]
 *   W: 'e.gate_up_proj_scales': element 9 is 255 (NaN)
 *   W: 'x': U8, which kiln reads only as MXFP4 blocks ('x_blocks' with
 *      'x_scales') */
#include "runtime/core/rt_core.h"

#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- GGUF, through the GGUF part ------------------------------------------ */

/* The GGUF part's opener (rt_gguf_use); NULL in a program without it. */
static int (*wt_gguf_reader)(const char *path, rt_gguf_file *f, rt_err *e);

void rt_gguf_use(int (*open)(const char *path, rt_gguf_file *f, rt_err *e))
{
    wt_gguf_reader = open;
}

int rt_gguf_weights(const char *path, rt_gguf_file *f, rt_err *e)
{
    if (!wt_gguf_reader)
        return rt_errf(e, RT_EUSAGE, "%s: a GGUF file, which this program cannot read (it has "
                       "no GGUF part): rebuild it from a GGUF (kiln build FILE.gguf) or pass "
                       "safetensors weights", path);
    return wt_gguf_reader(path, f, e);
}

int rt_is_gguf(const char *path)
{
    unsigned char b[4];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, b, 4) : -1;
    if (fd >= 0)
        close(fd);
    return n == 4 && !memcmp(b, "GGUF", 4);
}

/* ---- the file, whichever kind ------------------------------------------- */

typedef struct {
    const char *path;
    int gguf;                   /* 1: g is open, else st */
    rt_safetensors st;
    rt_gguf_file g;
} wt_file;

/* A tensor of the file as the loader sees it. */
typedef struct {
    const char *name;
    int store;                  /* how the file holds it: RT_F32, RT_BF16,
                                   RT_F16, RT_Q8_0 ... RT_Q6_K, RT_F8_E4M3 */
    int rank;
    const int64_t *dims;
    int64_t count;
    const unsigned char *data;  /* inside the mapping, little-endian */
    /* RT_F8_E4M3: its scale (wt_fp8_scale), element (r, c) of the tensor
     * (r a row, c a column) scaled by scale element (r0 + r) / srow * sld
     * + (c0 + c) / scol: a rank's part (wt_part) begins at row r0, column
     * c0 of the file's tensor, whose rows are ld long (0: cols) */
    const rt_st_tensor *scale;
    int64_t srow, scol, sld, r0, c0, ld;
    /* RT_MXFP4 of a safetensors file: NAME_blocks (data) and, in scale,
     * NAME_scales, a byte a block at sdata (a rank's part's); dims point
     * at mx_dims */
    const rt_st_tensor *blocks;
    const unsigned char *sdata;
    int64_t mx_dims[RT_MAX_RANK];
} wt_tensor;

static int wt_begin(wt_file *f, const char *path, rt_err *e)
{
    memset(f, 0, sizeof *f);
    f->path = path;
    f->gguf = rt_is_gguf(path);
    return f->gguf ? rt_gguf_weights(path, &f->g, e) : rt_st_open(&f->st, path, e);
}

static void wt_end(wt_file *f)
{
    if (f->gguf)
        f->g.close(f->g.g);
    else
        rt_st_close(&f->st);
}

static int wt_count(const wt_file *f) { return f->gguf ? f->g.nt : f->st.n; }

static const char *wt_name(const wt_file *f, int i)
{
    return f->gguf ? f->g.t[i].name : f->st.t[i].name;
}

/* NAME + suffix into buf; NULL when it does not fit. */
static const char *wt_suffixed(char *buf, size_t size, const char *name, const char *suffix)
{
    return (size_t)snprintf(buf, size, "%s%s", name, suffix) < size ? buf : NULL;
}

/* NAME's MXFP4 blocks (NAME_blocks) in safetensors file f, or NULL. */
static const rt_st_tensor *wt_mx_blocks(const wt_file *f, const char *name)
{
    char buf[512];
    const char *b = wt_suffixed(buf, sizeof buf, name, "_blocks");
    return b ? rt_st_find(&f->st, b) : NULL;
}

/* t as the MXFP4 tensor of blocks b (see the top): [..., rows, G * 32]
 * (a rank below 2 is refused by wt_mx_check); scales found there. */
static void wt_mx_tensor(const wt_file *f, const char *name, const rt_st_tensor *b, wt_tensor *t)
{
    char buf[512];
    const char *sn = wt_suffixed(buf, sizeof buf, name, "_scales");
    memset(t, 0, sizeof *t);
    t->name = name;
    t->store = RT_MXFP4;
    t->rank = b->rank > 1 ? b->rank - 1 : 1;
    t->count = 1;
    for (int i = 0; i < t->rank; i++)
        t->count *= t->mx_dims[i] = b->rank > 1 ? b->dims[i] : 0;
    t->mx_dims[t->rank - 1] *= 32;
    t->count *= 32;
    t->dims = t->mx_dims;
    t->data = b->data;
    t->blocks = b;
    t->scale = sn ? rt_st_find(&f->st, sn) : NULL;
    t->sdata = t->scale ? t->scale->data : NULL;
}

/* Tensor `name` of f (f NULL: none) into *t: 1 when found, else 0. A
 * safetensors U8 tensor has store -1 (refused by wt_source). */
static int wt_find(const wt_file *f, const char *name, wt_tensor *t)
{
    static const int st_store[] = {RT_F32, RT_F16, RT_BF16, RT_F8_E4M3, -1}; /* by RT_ST_* */
    if (f && f->gguf) {
        const rt_gguf_tensor *g = f->g.find(f->g.g, name);
        if (g)
            *t = (wt_tensor){.name = g->name, .store = g->store, .rank = g->rank, .dims = g->dims,
                             .count = g->count, .data = g->data};
        return g != NULL;
    }
    const rt_st_tensor *s = f ? rt_st_find(&f->st, name) : NULL;
    if (s) {
        *t = (wt_tensor){.name = s->name, .store = st_store[s->dtype], .rank = s->rank,
                         .dims = s->dims, .count = s->count, .data = s->data};
        return 1;
    }
    const rt_st_tensor *b = f ? wt_mx_blocks(f, name) : NULL;
    if (b)
        wt_mx_tensor(f, name, b, t);
    return b != NULL;
}

static int wt_by_name(const void *x, const void *y)
{
    return strcmp(*(const char *const *)x, *(const char *const *)y);
}

/* The columns of a tensor (its last dim) and rows (the rest). */
static int64_t wt_cols(const wt_tensor *t) { return t->rank ? t->dims[t->rank - 1] : 1; }
static int64_t wt_rows(const wt_tensor *t) { return wt_cols(t) ? t->count / wt_cols(t) : 0; }

/* The name of FP8 tensor `name`'s scale in f, or NULL. */
static const rt_st_tensor *wt_scale_of(const wt_file *f, const char *name, char *buf, size_t size)
{
    const rt_st_tensor *s = NULL;
    snprintf(buf, size, "%s_scale_inv", name);
    if (!(s = rt_st_find(&f->st, buf))) {
        snprintf(buf, size, "%s_scale", name);
        s = rt_st_find(&f->st, buf);
    }
    return s;
}

/* FP8 tensor t's scale found and its shape read into t (see the top). */
static int wt_fp8_scale(const wt_file *f, wt_tensor *t, rt_err *e)
{
    char name[512], a[160], b[160];
    const rt_st_tensor *s = wt_scale_of(f, t->name, name, sizeof name);
    if (!s)
        return rt_errf(e, RT_EINVAL, "%s: '%s' is F8_E4M3 but its scale '%s_scale_inv' (or "
                       "'%s_scale') is not in the file", f->path, t->name, t->name, t->name);
    int64_t rows = wt_rows(t), cols = wt_cols(t), br = (rows + 127) / 128, bc = (cols + 127) / 128;
    t->scale = s;
    if (s->count == 1) {
        t->srow = rows ? rows : 1, t->scol = cols ? cols : 1, t->sld = 1;
    } else if (s->count == rows && (s->rank == 1 || (s->rank == 2 && s->dims[1] == 1))) {
        t->srow = 1, t->scol = cols ? cols : 1, t->sld = 1;
    } else if (s->rank == 2 && s->dims[0] == br && s->dims[1] == bc) {
        t->srow = 128, t->scol = 128, t->sld = bc;
    } else {
        return rt_errf(e, RT_EINVAL, "%s: '%s': shape %s, for '%s' %s kiln reads [%lld,%lld] "
                       "(blocks of 128 x 128), [%lld,1] (per row) or [1]", f->path, name,
                       rt_fmt_shape(a, sizeof a, s->rank, s->dims), t->name,
                       rt_fmt_shape(b, sizeof b, t->rank, t->dims), (long long)br, (long long)bc,
                       (long long)rows);
    }
    if (s->dtype == RT_ST_F8_E4M3)
        return rt_errf(e, RT_EINVAL, "%s: '%s': an F8_E4M3 scale (kiln reads F32, BF16 or F16 "
                       "scales)", f->path, name);
    return 0;
}

/* The scale of element (r, c) of FP8 tensor t. */
static float wt_scale(const wt_tensor *t, int64_t r, int64_t c)
{
    const rt_st_tensor *s = t->scale;
    int64_t i = (t->r0 + r) / t->srow * t->sld + (t->c0 + c) / t->scol;
    const unsigned char *p = s->data + i * (s->dtype == RT_ST_F32 ? 4 : 2);
    if (s->dtype == RT_ST_F32) {
        uint32_t u = p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        float v;
        memcpy(&v, &u, 4);
        return v;
    }
    uint16_t h = (uint16_t)(p[0] | p[1] << 8);
    return s->dtype == RT_ST_F16 ? rt_f16_f32(h) : rt_bf16_f32(h);
}

/* MXFP4 tensor t's blocks and scales checked (see the top). */
static int wt_mx_check(const wt_file *f, const wt_tensor *t, rt_err *e)
{
    char a[160], b[160], c[160];
    const rt_st_tensor *bl = t->blocks, *sc = t->scale;
    int r = bl->rank;
    if (bl->dtype != RT_ST_U8 || r < 2 || bl->dims[r - 1] != 16)
        return rt_errf(e, RT_EINVAL, "%s: '%s': %s %s, kiln reads MXFP4 blocks as U8 [..., "
                       "cols / 32, 16]", f->path, bl->name, bl->dtype == RT_ST_U8 ? "U8" : "not U8",
                       rt_fmt_shape(a, sizeof a, r, bl->dims));
    if (!sc)
        return rt_errf(e, RT_EINVAL, "%s: '%s' is MXFP4 but its scales '%s_scales' are not in "
                       "the file", f->path, bl->name, t->name);
    int same = sc->rank == r - 1 && sc->dtype == RT_ST_U8;
    for (int i = 0; same && i < r - 1; i++)
        same = sc->dims[i] == bl->dims[i];
    if (!same)
        return rt_errf(e, RT_EINVAL, "%s: '%s': %s %s, for '%s' %s kiln reads %s (U8)", f->path,
                       sc->name, sc->dtype == RT_ST_U8 ? "U8" : "not U8",
                       rt_fmt_shape(a, sizeof a, sc->rank, sc->dims), bl->name,
                       rt_fmt_shape(b, sizeof b, r, bl->dims),
                       rt_fmt_shape(c, sizeof c, r - 1, bl->dims));
    return 0;
}

/* MXFP4 tensor t's scales hold no NaN (255): the whole tensor's, or a
 * rank's part's (part r of `size` of each run of `run` scales), each
 * named by its place in the file's tensor. */
static int wt_mx_nan(const wt_file *f, const wt_tensor *t, int64_t run, int r, int size,
                     rt_err *e)
{
    for (int64_t i = 0; i < t->count / 32; i++)
        if (t->sdata[i] == 255)
            return rt_errf(e, RT_EINVAL, "%s: '%s': element %lld is 255 (NaN)", f->path,
                           t->scale->name, (long long)((i / run * size + r) * run + i % run));
    return 0;
}

/* Nibble k (0 .. 31) of an MXFP4 block's 16 bytes in the file's order. */
static int wt_mx_nibble(const unsigned char *q, int k) { return q[k / 2] >> (k & 1) * 4 & 15; }

/* MXFP4 tensor t widened: value k of block i is E2M1 x 2^(scale - 127). */
static void wt_mx_f32(const wt_tensor *t, float *d)
{
    static const float e2m1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6,
                                   -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
    for (int64_t i = 0; i < t->count / 32; i++)
        for (int k = 0; k < 32; k++)
            d[i * 32 + k] = ldexpf(e2m1[wt_mx_nibble(t->data + i * 16, k)], t->sdata[i] - 127);
}

/* MXFP4 tensor t into kiln's blocks at d: the scale byte, then byte j =
 * value j | value j + 16 << 4. */
static void wt_mx_repack(const wt_tensor *t, unsigned char *d)
{
    for (int64_t i = 0; i < t->count / 32; i++, d += 17) {
        const unsigned char *q = t->data + i * 16;
        d[0] = t->sdata[i];
        for (int j = 0; j < 16; j++)
            d[1 + j] = (unsigned char)(wt_mx_nibble(q, j) | wt_mx_nibble(q, j + 16) << 4);
    }
}

/* Whether `key` is an MXFP4 weight's NAME_blocks or NAME_scales in f: a
 * weight NAME that f does not hold otherwise. */
static int wt_mx_companion(const wt_file *f, const char *key, const char **names, int nw)
{
    static const char *const ends[] = {"_blocks", "_scales"};
    char base[512];
    size_t n = strlen(key);
    for (int i = 0; i < 2; i++) {
        size_t m = strlen(ends[i]);
        if (n <= m || strcmp(key + n - m, ends[i]) || n - m >= sizeof base)
            continue;
        memcpy(base, key, n - m);
        base[n - m] = 0;
        const char *b = base;
        if (!rt_st_find(&f->st, base) && wt_mx_blocks(f, base) &&
            bsearch(&b, names, (size_t)nw, sizeof *names, wt_by_name))
            return 1;
    }
    return 0;
}

/* Whether `key`, no weight, is an FP8 weight's companion in f: its scale
 * or its input_scale; or an MXFP4 weight's blocks or scales. */
static int wt_companion(const wt_file *f, const char *key, const char **names, int nw)
{
    static const char *const ends[][2] = {{"_scale_inv", ""}, {"_scale", ""},
                                          {"input_scale", "weight"}};
    char base[512];
    size_t n = strlen(key);
    if (!f->gguf && wt_mx_companion(f, key, names, nw))
        return 1;
    for (int i = 0; !f->gguf && i < 3; i++) {
        size_t m = strlen(ends[i][0]);
        if (n <= m || strcmp(key + n - m, ends[i][0]) ||
            (size_t)snprintf(base, sizeof base, "%.*s%s", (int)(n - m), key, ends[i][1]) >= sizeof base)
            continue;
        const char *b = base;
        const rt_st_tensor *t = rt_st_find(&f->st, base);
        if (t && t->dtype == RT_ST_F8_E4M3 &&
            bsearch(&b, names, (size_t)nw, sizeof *names, wt_by_name))
            return 1;
    }
    return 0;
}


/* Every tensor of the file is a declared weight: each looked up among the
 * weights' names, sorted (a MoE model has tens of thousands). */
static int wt_no_extras(const wt_file *f, const rt_tensor_info *w, int nw, rt_err *e)
{
    size_t n = 0;                       /* a weight of a tensor per rank: every rank's */
    for (int i = 0; i < nw; i++)
        for (int r = 0; r == 0 || (w[i].tensors && w[i].tensors[r]); r++)
            n++;
    const char **names = malloc(sizeof *names * (n + 1));
    if (!names)
        return rt_errf(e, RT_EINTERNAL, "out of memory checking %s", f->path);
    n = 0;
    for (int i = 0; i < nw; i++)
        if (!w[i].tensors)
            names[n++] = w[i].name;
        else
            for (int r = 0; w[i].tensors[r]; r++)
                names[n++] = w[i].tensors[r];
    nw = (int)n;
    qsort(names, (size_t)nw, sizeof *names, wt_by_name);
    int rc = 0;
    for (int i = 0; i < wt_count(f) && !rc; i++) {
        const char *key = wt_name(f, i);
        if (!bsearch(&key, names, (size_t)nw, sizeof *names, wt_by_name) &&
            !wt_companion(f, key, names, nw))
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
/* A GGUF's blocks, which only the quantized part widens (FP8's the core does). */
static int wt_gguf_quant(int store) { return store >= RT_Q8_0 && store != RT_F8_E4M3; }

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
    else if (t->blocks)
        wt_mx_f32(t, d);
    else if (t->store == RT_F8_E4M3)
        for (int64_t r = 0, i = 0, cols = wt_cols(t); r < wt_rows(t); r++)
            for (int64_t c = 0; c < cols; c++, i++)
                d[i] = rt_e4m3_f32(p[i]) * wt_scale(t, r, c);
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

/* FP8 tensor t into f8_e4m3 blocks at d (see the top): per block of a
 * row, the f32 scale of its first value, then the bytes; a NaN byte
 * refused. */
static int wt_reblock(const wt_file *f, const wt_tensor *t, unsigned char *d, rt_err *e)
{
    int64_t cols = wt_cols(t), n = rt_store_block(RT_F8_E4M3);
    if (cols % n)
        return rt_errf(e, RT_EINTERNAL, "weight '%s': cannot hold it as f8_e4m3: rows of %lld",
                       t->name, (long long)cols);
    for (int64_t i = 0; i < t->count; i += n, d += rt_store_bytes(RT_F8_E4M3, n)) {
        float s = wt_scale(t, i / cols, i % cols);
        memcpy(d, &s, 4);
        memcpy(d + 4, t->data + i, (size_t)n);
        for (int j = 0; j < n; j++)
            if ((d[4 + j] & 0x7f) == 0x7f)
                return rt_errf(e, RT_EINVAL, "%s: '%s': element %lld is NaN (0x%02x)", f->path,
                               t->name, (long long)((t->r0 + i / cols) * (t->ld ? t->ld : cols) +
                                                    t->c0 + i % cols + j), d[4 + j]);
    }
    return 0;
}

/* Fills a 16-bit or quantized weight d: a copy of t when it is of the
 * store's type (an FP8 tensor re-blocked), else made as f32 in a scratch
 * buffer, then rounded or quantized. */
static int wt_small(const wt_file *f, const wt_tensor *t, const rt_tensor_info *w, void *d,
                    rt_err *e)
{
    int quant = wt_quant_store(w->store);
    if (t && wt_as_held(t, w) && w->store == RT_F8_E4M3)
        return wt_reblock(f, t, d, e);
    if (t && wt_as_held(t, w) && t->blocks) {
        wt_mx_repack(t, d);
        return 0;
    }
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
    if (quant && (!w->quantize || row % rt_store_block(w->store)))
        return rt_errf(e, RT_EINTERNAL, "weight '%s': cannot hold it quantized (store %d)",
                       w->name, w->store);
    float *x = rt_alloc((size_t)w->count * sizeof *x);
    if (!x)
        return rt_errf(e, RT_EINTERNAL, "weight '%s': out of memory (%lld bytes)", w->name,
                       (long long)w->count * 4);
    wt_f32(t, w, x);
    if (quant)
        w->quantize(w->store, x, d, w->count);
    else
        rt_round_half(d, x, w->count, w->store);
    rt_free(x);
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

/* w as the file holds it: a sharded weight's whole tensor. */
static rt_tensor_info wt_whole(const rt_tensor_info *w)
{
    rt_tensor_info whole = *w;
    if (w->shard_of) {
        whole.count = w->count / w->dims[w->shard_axis] * w->shard_of;
        whole.dims[w->shard_axis] = w->shard_of;
    }
    return whole;
}

/* Where a weight comes from: the file (f; NULL: none), of its declared
 * shape (a sharded weight's whole shape) and widenable when held
 * otherwise, or its init; *t the file's tensor, found is 1 when it is
 * there. */
static int wt_source(const wt_file *f, const rt_tensor_info *w, wt_tensor *t, int *found,
                     rt_err *e)
{
    char a[160], b[160];
    rt_tensor_info whole = wt_whole(w);
    *found = wt_find(f, w->name, t);
    if (*found && t->store < 0)
        return rt_errf(e, RT_EINVAL, "%s: '%s': U8, which kiln reads only as MXFP4 blocks "
                       "('%s_blocks' with '%s_scales')", f->path, w->name, w->name, w->name);
    if (*found && t->blocks) {              /* a part's scales: as it is read */
        int rc = wt_mx_check(f, t, e);
        if (!rc && !w->shard_of)
            rc = wt_mx_nan(f, t, t->count / 32, 0, 1, e);
        if (rc)
            return rc;
    }
    if (*found && !wt_same_shape(t, &whole))
        return rt_errf(e, RT_EINVAL, "%s: '%s': shape %s in the file, the model declares %s",
                       f->path, w->name, rt_fmt_shape(a, sizeof a, t->rank, t->dims),
                       rt_fmt_shape(b, sizeof b, whole.rank, whole.dims));
    if (!*found && w->shard_of)
        return rt_errf(e, RT_EINVAL, "%s: weight '%s' is split over ranks and must come from the "
                       "weights file", f ? f->path : "no weights file", w->name);
    if (*found && t->store == RT_F8_E4M3) {
        int rc = wt_fp8_scale(f, t, e);
        if (rc)
            return rc;
    }
    if (*found && wt_gguf_quant(t->store) && !t->blocks && !wt_as_held(t, w) && !w->dequantize)
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

/* w as rank r reads it: a weight of a tensor per rank is its tensor
 * tensors[r] of the file (r past them: name NULL). */
static rt_tensor_info wt_of_rank(const rt_tensor_info *w, int r)
{
    rt_tensor_info v = *w;
    if (w->tensors) {
        int n = 0;
        while (w->tensors[n])
            n++;
        v.name = r < n ? w->tensors[r] : NULL;
        v.tensors = NULL;
    }
    return v;
}

/* Every weight's source, of every rank for a weight of a tensor per
 * rank: each rank checks all the ranks' tensors, as a build does. */
static int wt_check(const wt_file *f, const rt_tensor_info *w, int nw, rt_err *e)
{
    int rc = wt_no_extras(f, w, nw, e), found;
    wt_tensor t;
    for (int i = 0; !rc && i < nw; i++)
        for (int r = 0; !rc && (r == 0 || (w[i].tensors && w[i].tensors[r])); r++) {
            rt_tensor_info v = wt_of_rank(&w[i], r);
            rc = wt_source(f, &v, &t, &found, e);
        }
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

/* One weight from src (the file's tensor f holds, as w is shaped; NULL:
 * its init): allocates and fills it. */
static int wt_make(const wt_file *f, const wt_tensor *src, const rt_tensor_info *w, void **out,
                   rt_err *e)
{
    int rc = 0;
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
    int from_file = src && (wt_as_held(src, w) || (half && src->store == RT_F32));
    if (w->panel && from_file)
        wt_pack_file(src, w, d);
    else if (small)
        rc = wt_small(f, src, w, d, e);
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

/* The file's bytes of n values of t: FP8's one a value, MXFP4's 16 a
 * block of 32 (its scales apart), else as it is held. */
static int64_t wt_file_bytes(const wt_tensor *t, int64_t n)
{
    return t->store == RT_F8_E4M3 ? n : t->blocks ? n / 32 * 16 : rt_store_bytes(t->store, n);
}

/* Part `r` of each of `outer` runs of `size` parts of `bytes` at p: p's
 * own bytes when outer is 1, else the parts copied into *owned
 * (rt_alloc'd); NULL when out of memory. */
static const unsigned char *wt_runs(const unsigned char *p, int64_t outer, int64_t bytes, int r,
                                    int size, void **owned)
{
    if (outer == 1)
        return p + bytes * r;
    unsigned char *d = *owned = rt_alloc((size_t)(bytes * outer));
    for (int64_t o = 0; d && o < outer; o++)
        memcpy(d + o * bytes, p + (o * size + r) * bytes, (size_t)bytes);
    return d;
}

/* t, the whole of a sharded weight w in the file ([outer, of, inner]
 * around its shard axis), becomes this rank's part ([outer, len, inner]):
 * a view of the mapping when outer is 1, else the runs copied into
 * owned[0] (rt_alloc'd). Only the part's bytes are read. A quantized
 * tensor's runs must hold whole blocks; an MXFP4 tensor's scales are cut
 * alike (into owned[1]), a NaN among them refused (each rank checks
 * its own); an FP8 tensor's part keeps the place it begins
 * at in the whole (r0, c0, ld), where its scale is read, and is a run of
 * rows (outer 1) or of columns (the last axis). */
static int wt_part(const wt_file *f, wt_tensor *t, const rt_tensor_info *w, void **owned,
                   rt_err *e)
{
    const rt_ranks *rk = rt_ranks_now();
    int a = w->shard_axis;
    int64_t len = w->dims[a], inner = 1, outer = 1;
    for (int d = a + 1; d < w->rank; d++)
        inner *= w->dims[d];
    for (int d = 0; d < a; d++)
        outer *= w->dims[d];
    if (w->shard_of / len != rk->size || rk->rank >= rk->size)
        return rt_errf(e, RT_EINVAL, "weight '%s' is split over %lld ranks; this is rank %d of %d",
                       w->name, (long long)(w->shard_of / len), rk->rank, rk->size);
    int64_t run = len * inner, bytes = wt_file_bytes(t, run);
    if (bytes * rk->size != wt_file_bytes(t, w->shard_of * inner))
        return rt_errf(e, RT_EINVAL, "weight '%s': its parts of %lld values do not hold whole "
                       "blocks", w->name, (long long)run);
    if (t->store == RT_F8_E4M3 && a == w->rank - 1)
        t->c0 = len * rk->rank, t->ld = w->shard_of;
    else if (t->store == RT_F8_E4M3 && outer == 1)
        t->r0 = run / wt_cols(t) * rk->rank;
    else if (t->store == RT_F8_E4M3)
        return rt_errf(e, RT_EINVAL, "weight '%s': F8_E4M3 split along axis %d of %d, where "
                       "kiln reads no part of it", w->name, a, w->rank);
    t->data = wt_runs(t->data, outer, bytes, rk->rank, rk->size, &owned[0]);
    if (t->data && t->blocks)
        t->sdata = wt_runs(t->sdata, outer, run / 32, rk->rank, rk->size, &owned[1]);
    if (!t->data || (t->blocks && !t->sdata))
        return rt_errf(e, RT_EINTERNAL, "weight '%s': out of memory (%lld bytes)", w->name,
                       (long long)(bytes * outer));
    t->dims = w->dims;
    t->count = w->count;
    return t->blocks ? wt_mx_nan(f, t, run / 32, rk->rank, rk->size, e) : 0;
}

/* One weight (its source checked): this rank's part of it when sharded. */
static int wt_one(const wt_file *f, const rt_tensor_info *w0, void **out, rt_err *e)
{
    wt_tensor t;
    void *owned[2] = {NULL, NULL};
    const rt_ranks *rk = rt_ranks_now();
    rt_tensor_info mine = wt_of_rank(w0, rk->rank), *w = &mine;
    if (w0->tensors && (!mine.name || wt_of_rank(w0, rk->size).name))
        return rt_errf(e, RT_EINVAL, "weight '%s' is one tensor of the file per rank, for another "
                       "number of ranks; this is rank %d of %d", w0->name, rk->rank, rk->size);
    int found, rc = wt_source(f, w, &t, &found, e);
    if (!rc && found && w->shard_of)
        rc = wt_part(f, &t, w, owned, e);
    if (!rc)
        rc = wt_make(f, found ? &t : NULL, w, out, e);
    rt_free(owned[0]);
    rt_free(owned[1]);
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
