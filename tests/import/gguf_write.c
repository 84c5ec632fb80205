/* tests/import/gguf_write.c: GGUF files for the tests (gguf_write.h).
 * KVs are laid out as they are given, in a byte buffer; tensors are kept
 * until the file is asked for, when the alignment is final and their
 * offsets can be given. */
#include "gguf_write.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    unsigned char *p;
    size_t n, cap;
} GwBuf;

typedef struct {
    char *name;
    int type, rank;
    int64_t dims[8];
    unsigned char *data;        /* nbytes; NULL: zeros */
    size_t nbytes;
    int placed;                 /* offset given by gw_tensor_at */
    uint64_t offset;
} GwTensor;

struct GgufWriter {
    uint32_t version, alignment;
    GwBuf kvs;                  /* the KV section as written */
    uint64_t nkv;
    GwTensor *t;
    int nt, cap;
};

static void *gw_alloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "gguf_write: out of memory\n");
        abort();
    }
    return p;
}

static void gw_put(GwBuf *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n)
            cap *= 2;
        unsigned char *q = gw_alloc(cap);
        if (b->n)
            memcpy(q, b->p, b->n);
        free(b->p);
        b->p = q, b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void gw_le(GwBuf *b, uint64_t v, int bytes)
{
    unsigned char x[8];
    for (int i = 0; i < bytes; i++)
        x[i] = (unsigned char)(v >> 8 * i);
    gw_put(b, x, (size_t)bytes);
}

static void gw_string(GwBuf *b, const char *s, size_t len)
{
    gw_le(b, len, 8);
    gw_put(b, s, len);
}

GgufWriter *gw_new(uint32_t version)
{
    const uint32_t one = 1;
    if (*(const unsigned char *)&one != 1) {
        fprintf(stderr, "gguf_write: a big-endian host\n");
        abort();
    }
    GgufWriter *w = gw_alloc(sizeof *w);
    memset(w, 0, sizeof *w);
    w->version = version;
    w->alignment = 32;
    return w;
}

void gw_free(GgufWriter *w)
{
    if (!w)
        return;
    for (int i = 0; i < w->nt; i++) {
        free(w->t[i].name);
        free(w->t[i].data);
    }
    free(w->t);
    free(w->kvs.p);
    free(w);
}

/* ---- KVs ------------------------------------------------------------------ */

static const int gw_size[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

/* key, u32 type */
static void gw_key(GgufWriter *w, const char *key, uint32_t type)
{
    gw_string(&w->kvs, key, strlen(key));
    gw_le(&w->kvs, type, 4);
    w->nkv++;
}

/* One value of etype from v (C's layout), little-endian. */
static void gw_value(GwBuf *b, int etype, const void *v)
{
    uint64_t u = 0;
    memcpy(&u, v, (size_t)gw_size[etype]);     /* little-endian host */
    gw_le(b, u, gw_size[etype]);
}

static void gw_scalar(GgufWriter *w, const char *key, int type, const void *v)
{
    gw_key(w, key, (uint32_t)type);
    gw_value(&w->kvs, type, v);
}

void gw_u8(GgufWriter *w, const char *key, uint8_t v) { gw_scalar(w, key, GW_U8, &v); }
void gw_i8(GgufWriter *w, const char *key, int8_t v) { gw_scalar(w, key, GW_I8, &v); }
void gw_u16(GgufWriter *w, const char *key, uint16_t v) { gw_scalar(w, key, GW_U16, &v); }
void gw_i16(GgufWriter *w, const char *key, int16_t v) { gw_scalar(w, key, GW_I16, &v); }
void gw_i32(GgufWriter *w, const char *key, int32_t v) { gw_scalar(w, key, GW_I32, &v); }
void gw_f32(GgufWriter *w, const char *key, float v) { gw_scalar(w, key, GW_F32, &v); }
void gw_u64(GgufWriter *w, const char *key, uint64_t v) { gw_scalar(w, key, GW_U64, &v); }
void gw_i64(GgufWriter *w, const char *key, int64_t v) { gw_scalar(w, key, GW_I64, &v); }
void gw_f64(GgufWriter *w, const char *key, double v) { gw_scalar(w, key, GW_F64, &v); }

void gw_bool(GgufWriter *w, const char *key, int v)
{
    uint8_t b = v != 0;
    gw_scalar(w, key, GW_BOOL, &b);
}

/* general.alignment as a u32 is the file's alignment. */
void gw_u32(GgufWriter *w, const char *key, uint32_t v)
{
    gw_scalar(w, key, GW_U32, &v);
    if (!strcmp(key, "general.alignment"))
        w->alignment = v;
}

void gw_strn(GgufWriter *w, const char *key, const char *v, size_t len)
{
    gw_key(w, key, GW_STR);
    gw_string(&w->kvs, v, len);
}

void gw_str(GgufWriter *w, const char *key, const char *v) { gw_strn(w, key, v, strlen(v)); }

void gw_arr(GgufWriter *w, const char *key, int etype, uint64_t n, const void *v)
{
    gw_key(w, key, GW_ARR);
    gw_le(&w->kvs, (uint64_t)etype, 4);
    gw_le(&w->kvs, n, 8);
    for (uint64_t i = 0; i < n; i++)
        gw_value(&w->kvs, etype, (const char *)v + i * (uint64_t)gw_size[etype]);
}

void gw_arr_str(GgufWriter *w, const char *key, uint64_t n, const char *const *v)
{
    gw_key(w, key, GW_ARR);
    gw_le(&w->kvs, GW_STR, 4);
    gw_le(&w->kvs, n, 8);
    for (uint64_t i = 0; i < n; i++)
        gw_string(&w->kvs, v[i], strlen(v[i]));
}

void gw_kv_raw(GgufWriter *w, const char *key, uint32_t type, const void *bytes, size_t n)
{
    gw_key(w, key, type);
    gw_put(&w->kvs, bytes, n);
}

/* ---- tensors ------------------------------------------------------------ */

static GwTensor *gw_add(GgufWriter *w, const char *name, int type, int rank,
                        const int64_t *dims, const void *data, size_t nbytes)
{
    if (w->nt == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 16;
        GwTensor *t = gw_alloc((size_t)w->cap * sizeof *t);
        if (w->nt)
            memcpy(t, w->t, (size_t)w->nt * sizeof *t);
        free(w->t);
        w->t = t;
    }
    GwTensor *t = &w->t[w->nt++];
    memset(t, 0, sizeof *t);
    t->name = strcpy(gw_alloc(strlen(name) + 1), name);
    t->type = type;
    t->rank = rank;
    for (int i = 0; i < rank && i < 8; i++)
        t->dims[i] = dims[i];
    t->nbytes = nbytes;
    if (data)
        t->data = memcpy(gw_alloc(nbytes), data, nbytes);
    return t;
}

void gw_tensor(GgufWriter *w, const char *name, int type, int rank, const int64_t *dims,
               const void *data, size_t nbytes)
{
    gw_add(w, name, type, rank, dims, data, nbytes);
}

void gw_tensor_at(GgufWriter *w, const char *name, int type, int rank, const int64_t *dims,
                  const void *data, size_t nbytes, uint64_t offset)
{
    GwTensor *t = gw_add(w, name, type, rank, dims, data, nbytes);
    t->placed = 1;
    t->offset = offset;
}

/* ---- the file ------------------------------------------------------------- */

static uint64_t gw_pad(uint64_t n, uint64_t a) { return a ? (n + a - 1) / a * a : n; }

/* Offsets for the tensors not placed, one after the other; the data
 * section they make, padded. */
static uint64_t gw_layout(GgufWriter *w)
{
    uint64_t end = 0;
    for (int i = 0; i < w->nt; i++) {
        GwTensor *t = &w->t[i];
        if (!t->placed) {
            t->offset = gw_pad(end, w->alignment);
            end = t->offset + t->nbytes;
        }
    }
    return gw_pad(end, w->alignment);
}

unsigned char *gw_bytes(GgufWriter *w, size_t *n)
{
    GwBuf b = {0};
    uint64_t dsize = gw_layout(w);
    gw_put(&b, "GGUF", 4);
    gw_le(&b, w->version, 4);
    gw_le(&b, (uint64_t)w->nt, 8);
    gw_le(&b, w->nkv, 8);
    gw_put(&b, w->kvs.p, w->kvs.n);
    for (int i = 0; i < w->nt; i++) {
        const GwTensor *t = &w->t[i];
        gw_string(&b, t->name, strlen(t->name));
        gw_le(&b, (uint64_t)t->rank, 4);
        for (int j = t->rank - 1; j >= 0; j--)
            gw_le(&b, (uint64_t)(j < 8 ? t->dims[j] : 1), 8);
        gw_le(&b, (uint64_t)t->type, 4);
        gw_le(&b, t->offset, 8);
    }
    size_t start = (size_t)gw_pad(b.n, w->alignment);
    unsigned char *f = gw_alloc(start + (size_t)dsize);
    memcpy(f, b.p, b.n);
    memset(f + b.n, 0, start + (size_t)dsize - b.n);
    for (int i = 0; i < w->nt; i++) {
        const GwTensor *t = &w->t[i];
        if (t->data && t->offset < dsize)
            memcpy(f + start + t->offset, t->data,
                   (size_t)(t->nbytes < dsize - t->offset ? t->nbytes : dsize - t->offset));
    }
    free(b.p);
    *n = start + (size_t)dsize;
    return f;
}

int gw_write(GgufWriter *w, const char *path)
{
    size_t n;
    unsigned char *f = gw_bytes(w, &n);
    FILE *o = fopen(path, "wb");
    int rc = o && fwrite(f, 1, n, o) == n ? 0 : -1;
    if (o && fclose(o) != 0)
        rc = -1;
    free(f);
    return rc;
}
