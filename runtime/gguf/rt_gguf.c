/* runtime/gguf/rt_gguf.c: reading GGUF files, llama.cpp's model format.
 *
 * Contract (rt_gguf.h): rt_gguf_open maps a file read-only and trusts
 * nothing in it; every check below is made before it returns, so callers
 * use what they find without checking again. The layout (gguf.h, version
 * 3; version 2 is the same, little-endian only), all little-endian:
 *   "GGUF", u32 version, u64 tensor count, u64 KV count;
 *   KVs:    string key, u32 type, value (arrays: u32 element type, u64
 *           count, the elements); string = u64 length, bytes;
 *   infos:  string name, u32 n_dims, u64 ne[n_dims] (innermost first),
 *           u32 GGML type, u64 offset in the data section;
 *   data:   from the first multiple of the alignment after the infos.
 * Checks, in the file's order:
 *   1. magic; version 2 or 3 (1, whose counts were u32, is refused by
 *      name, as is a big-endian file, whose version reads byte-swapped);
 *      each count at most what the bytes left could hold at the fewest
 *      bytes an entry takes. Arrays grow with the entries read, so a
 *      lying count allocates nothing;
 *   2. each KV: key of 1 to 65535 bytes (the specification's limit),
 *      valid UTF-8 without NUL; type 0 to 12; an array's element type
 *      any but array (llama.cpp reads no nested arrays, nor does kiln) and
 *      its count bounded by the bytes left; every string inside the file;
 *      a bool 0 or 1; general.alignment, when there, a u32 power of two;
 *   3. each tensor info: name of 1 to 64 bytes (the specification's
 *      limit), UTF-8 without NUL; n_dims 1 to 4; every ne >= 1, fewer than
 *      2^60 elements; type F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K or MXFP4 (any
 *      other refused by its GGML name, with what to do) and, quantized,
 *      ne[0] a multiple of its block;
 *   4. keys and tensor names unique (sorted, for the finds);
 *   5. each tensor's offset a multiple of the alignment, its bytes inside
 *      the data section, no two overlapping (gaps are allowed: writers pad
 *      each tensor to the alignment).
 * Between 3 and 4 every string is copied once, NUL-terminated, into one
 * block (keys, names, string values): the file's are not terminated.
 * Messages: "PATH: at byte N: what" for the file's structure (naming the
 * KV or tensor being read), "PATH: key 'KEY': what", "PATH: tensor
 * 'NAME': what"; RT_EINVAL for a bad file, RT_EIO when it cannot be opened
 * or mapped, RT_EINTERNAL out of memory. The mapping stays valid until
 * rt_gguf_close; a file truncated meanwhile faults, as with any mmap.
 * The core's weights loader opens a GGUF through gg_weights, which
 * gg_install hands it (rt_gguf_use) before main. */
#include "runtime/core/rt_core.h"
#include "runtime/rt_gguf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#define GG_MAX_KEY 65535
#define GG_MAX_NAME 64
#define GG_MAX_DIMS 4                           /* GGML_MAX_DIMS */
#define GG_MAX_COUNT (INT64_C(1) << 60)         /* a tensor's elements */
#define GG_MAX_ENTRIES (INT32_MAX / 2)          /* KVs, tensors */
#define GG_ALIGNMENT 32                         /* without general.alignment */
/* The fewest bytes of a KV (a key of one byte, a u8) and of a tensor info
 * (a name of one byte, one ne): bounds on the counts. */
#define GG_MIN_KV (8 + 1 + 4 + 1)
#define GG_MIN_INFO (8 + 1 + 4 + 8 + 4 + 8)
#define GG_NOLEN UINT64_MAX

static const char *const gg_value_names[] = {"u8",  "i8",    "u16",   "i16", "u32",
                                             "i32", "f32",   "bool",  "string",
                                             "array", "u64", "i64",   "f64"};
static const int gg_value_size[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

/* GGML's types by number (ggml.h enum ggml_type), retired ones included
 * (4, 5, 31-33, 36-38), so that a refusal names them. */
static const char *const gg_type_names[] = {
    "F32",        "F16",        "Q4_0",       "Q4_1",     "Q4_2",     "Q4_3",     "Q5_0",
    "Q5_1",       "Q8_0",       "Q8_1",       "Q2_K",     "Q3_K",     "Q4_K",     "Q5_K",
    "Q6_K",       "Q8_K",       "IQ2_XXS",    "IQ2_XS",   "IQ3_XXS",  "IQ1_S",    "IQ4_NL",
    "IQ3_S",      "IQ2_S",      "IQ4_XS",     "I8",       "I16",      "I32",      "I64",
    "F64",        "IQ1_M",      "BF16",       "Q4_0_4_4", "Q4_0_4_8", "Q4_0_8_8", "TQ1_0",
    "TQ2_0",      "IQ4_NL_4_4", "IQ4_NL_4_8", "IQ4_NL_8_8", "MXFP4",  "NVFP4"};
#define GG_NTYPES ((int)(sizeof gg_type_names / sizeof gg_type_names[0]))

enum { GG_HEADER, GG_KV, GG_TENSOR };

typedef struct {
    rt_gguf *g;
    rt_err *e;
    const unsigned char *m;     /* the mapping */
    uint64_t size, at;          /* its bytes; the next one to read */
    int kind, idx;              /* what is being read: GG_KV or GG_TENSOR idx */
    const unsigned char *name;  /* its key or name once read (nlen bytes) */
    uint64_t nlen;
    int64_t el;                 /* the array element being read, or -1 */
    uint64_t *pos;              /* per KV, then per tensor: where its key or
                                   name begins */
    int cap, kcap, tcap;        /* of pos, g->kv, g->t */
    uint64_t nstr, nptr;        /* bytes of all strings copied (with their
                                   NULs); pointers of string KVs */
} gg_parser;

static uint64_t gg_le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    while (n--)
        v = v << 8 | p[n];
    return v;
}

/* ---- messages ----------------------------------------------------------- */

/* "KV 3: ", "key 'K': ", "tensor 'N': ", then "element J: " when reading
 * one; "" in the header. */
static void gg_context(const gg_parser *P, char *buf, size_t n)
{
    const char *what = P->kind == GG_KV ? (P->name ? "key" : "KV") : "tensor";
    int k = 0;
    buf[0] = 0;
    if (P->kind == GG_HEADER)
        return;
    if (P->name)
        k = snprintf(buf, n, "%s '%.*s': ", what, (int)(P->nlen < 200 ? P->nlen : 200), P->name);
    else
        k = snprintf(buf, n, "%s %d: ", what, P->idx);
    if (P->el >= 0 && k >= 0 && (size_t)k < n)
        snprintf(buf + k, n - (size_t)k, "element %lld: ", (long long)P->el);
}

/* "PATH: at byte AT: CONTEXT what". */
__attribute__((format(printf, 3, 4))) static int gg_fail(gg_parser *P, uint64_t at,
                                                         const char *fmt, ...)
{
    char what[400], ctx[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    gg_context(P, ctx, sizeof ctx);
    return rt_errf(P->e, RT_EINVAL, "%s: at byte %llu: %s%s", P->g->path, (unsigned long long)at,
                   ctx, what);
}

/* "PATH: key 'K': what" or "PATH: tensor 'N': what", of the entry being
 * read, whose key or name has been read. */
__attribute__((format(printf, 2, 3))) static int gg_bad(gg_parser *P, const char *fmt, ...)
{
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return rt_errf(P->e, RT_EINVAL, "%s: %s '%.*s': %s", P->g->path,
                   P->kind == GG_KV ? "key" : "tensor",
                   (int)(P->nlen < 200 ? P->nlen : 200), P->name, what);
}

/* WHAT, beginning at byte at (len bytes of it, unless GG_NOLEN), does not
 * fit in the file. */
static int gg_past(gg_parser *P, uint64_t at, const char *what, uint64_t len)
{
    char of[48] = "";
    if (len != GG_NOLEN)
        snprintf(of, sizeof of, " of %llu bytes", (unsigned long long)len);
    return gg_fail(P, at, "%s%s runs past the end of the file (%llu bytes)", what, of,
                   (unsigned long long)P->size);
}

/* ---- reading ------------------------------------------------------------ */

static int gg_u32(gg_parser *P, const char *what, uint32_t *v)
{
    *v = 0;                             /* defined on every path */
    if (P->size - P->at < 4)
        return gg_past(P, P->at, what, GG_NOLEN);
    *v = (uint32_t)gg_le(P->m + P->at, 4);
    P->at += 4;
    return 0;
}

static int gg_u64(gg_parser *P, const char *what, uint64_t *v)
{
    *v = 0;
    if (P->size - P->at < 8)
        return gg_past(P, P->at, what, GG_NOLEN);
    *v = gg_le(P->m + P->at, 8);
    P->at += 8;
    return 0;
}

/* string = u64 length, bytes; *s points at the bytes, in the file. */
static int gg_string(gg_parser *P, const char *what, const unsigned char **s, uint64_t *len)
{
    uint64_t at = P->at;
    *s = NULL;
    int rc = gg_u64(P, what, len);
    if (rc)
        return rc;
    if (*len > P->size - P->at)
        return gg_past(P, at, what, *len);
    *s = P->m + P->at;
    P->at += *len;
    return 0;
}

/* A key or a tensor name: a string of 1 to max bytes, UTF-8, no NUL. */
static int gg_name(gg_parser *P, const char *what, uint64_t max)
{
    uint64_t at = P->at, len;
    const unsigned char *s;
    int rc = gg_string(P, what, &s, &len);
    if (rc)
        return rc;
    if (len == 0)
        return gg_fail(P, at, "%s is empty", what);
    if (len > max)
        return gg_fail(P, at, "%s has %llu bytes, more than GGUF's limit of %llu", what,
                       (unsigned long long)len, (unsigned long long)max);
    if (memchr(s, 0, len))
        return gg_fail(P, at, "%s holds a NUL byte", what);
    size_t bad = rt_utf8_bad(s, len);
    if (bad < len)
        return gg_fail(P, at + 8 + bad, "%s is not valid UTF-8", what);
    P->name = s;
    P->nlen = len;
    P->nstr += len + 1;
    return 0;
}

/* Room for entry i in *arr (of *cap, size bytes each), and P->pos[slot]
 * set to where it begins. */
static int gg_grow(gg_parser *P, void **arr, int *cap, size_t size, int i, int slot)
{
    if (i == *cap) {
        int n = *cap ? 2 * *cap : 16;
        void *a = realloc(*arr, (size_t)n * size);
        if (!a)
            return rt_errf(P->e, RT_EINTERNAL, "%s: out of memory", P->g->path);
        *arr = a;
        *cap = n;
    }
    if (slot == P->cap) {
        int n = P->cap ? 2 * P->cap : 32;
        uint64_t *p = realloc(P->pos, (size_t)n * sizeof *p);
        if (!p)
            return rt_errf(P->e, RT_EINTERNAL, "%s: out of memory", P->g->path);
        P->pos = p;
        P->cap = n;
    }
    P->pos[slot] = P->at;
    return 0;
}

/* ---- the header and the KVs ------------------------------------------- */

static int gg_header(gg_parser *P, uint64_t *nt, uint64_t *nkv)
{
    const unsigned char *m = P->m;
    *nt = *nkv = 0;
    if (P->size < 4)
        return gg_fail(P, 0, "not a GGUF file: %llu bytes, too few for the magic",
                       (unsigned long long)P->size);
    if (memcmp(m, "GGUF", 4)) {
        char s[20];
        int k = 0;
        for (int i = 0; i < 4; i++)
            k += snprintf(s + k, sizeof s - (size_t)k, m[i] >= 0x20 && m[i] < 0x7f && m[i] != '\\'
                          ? "%c" : "\\x%02x", m[i]);
        return gg_fail(P, 0, "not a GGUF file: it begins '%s', not 'GGUF'", s);
    }
    P->at = 4;
    uint32_t v;
    int rc = gg_u32(P, "the version", &v);
    if (rc)
        return rc;
    if (v == 1)
        return gg_fail(P, 4, "GGUF version 1 is not supported (kiln reads versions 2 and 3): "
                       "convert the model again with a current llama.cpp");
    if (v > 3 && !(v & 0xffff))
        return gg_fail(P, 4, "a big-endian GGUF file (version %u byte-swapped): kiln reads "
                       "little-endian files", (unsigned)(v >> 24 | (v >> 8 & 0xff00)));
    if (v != 2 && v != 3)
        return gg_fail(P, 4, "GGUF version %u is not supported (kiln reads versions 2 and 3)", v);
    P->g->version = v;
    if ((rc = gg_u64(P, "the tensor count", nt)) || (rc = gg_u64(P, "the KV count", nkv)))
        return rc;
    uint64_t left = P->size - P->at;
    if (*nt > left / GG_MIN_INFO || *nt > GG_MAX_ENTRIES)
        return gg_fail(P, 8, "tensor count %llu does not fit in the %llu bytes left (a tensor "
                       "info takes %d or more)", (unsigned long long)*nt,
                       (unsigned long long)left, GG_MIN_INFO);
    if (*nkv > left / GG_MIN_KV || *nkv > GG_MAX_ENTRIES)
        return gg_fail(P, 16, "KV count %llu does not fit in the %llu bytes left (a KV takes "
                       "%d or more)", (unsigned long long)*nkv, (unsigned long long)left,
                       GG_MIN_KV);
    return 0;
}

/* A value of kv's element type, n of them; numbers and bools stay in the
 * file (kv->raw), strings are counted for the copy. */
static int gg_values(gg_parser *P, rt_gguf_kv *kv)
{
    int arr = kv->type == RT_GGUF_ARR;
    kv->raw = P->m + P->at;
    if (kv->etype == RT_GGUF_STR) {
        P->nptr += kv->n + 1;
        for (uint64_t j = 0; j < kv->n; j++) {
            const unsigned char *s;
            uint64_t len;
            P->el = arr ? (int64_t)j : -1;
            int rc = gg_string(P, arr ? "the string" : "its value", &s, &len);
            if (rc)
                return rc;
            P->nstr += len + 1;
        }
        P->el = -1;
        return 0;
    }
    uint64_t bytes = kv->n * (uint64_t)gg_value_size[kv->etype];  /* bounded: gg_kv */
    if (bytes > P->size - P->at)
        return gg_past(P, P->at, "its value", GG_NOLEN);
    if (kv->etype == RT_GGUF_BOOL)
        for (uint64_t j = 0; j < kv->n; j++)
            if (kv->raw[j] > 1) {
                P->el = arr ? (int64_t)j : -1;
                return gg_fail(P, P->at + j, "a bool of value %u, not 0 or 1", kv->raw[j]);
            }
    P->at += bytes;
    return 0;
}

/* general.alignment: a u32 power of two. */
static int gg_alignment(gg_parser *P, const rt_gguf_kv *kv)
{
    if (kv->type != RT_GGUF_U32)
        return gg_bad(P, "of type %s%s, GGUF wants u32", kv->type == RT_GGUF_ARR ? "array of " : "",
                      gg_value_names[kv->etype]);
    uint32_t a = (uint32_t)gg_le(kv->raw, 4);
    if (!a || (a & (a - 1)))
        return gg_bad(P, "%u is not a power of two", a);
    P->g->alignment = a;
    return 0;
}

/* kv = key, u32 type, value | key, 9, u32 etype, u64 n, n values */
static int gg_kv(gg_parser *P, int i)
{
    rt_gguf *g = P->g;
    int rc = gg_grow(P, (void **)&g->kv, &P->kcap, sizeof *g->kv, i, i);
    if (rc)
        return rc;
    rt_gguf_kv *kv = &g->kv[i];
    memset(kv, 0, sizeof *kv);
    P->kind = GG_KV, P->idx = i, P->name = NULL;
    if ((rc = gg_name(P, "its key", GG_MAX_KEY)))
        return rc;
    uint64_t at = P->at;
    uint32_t type, etype;
    if ((rc = gg_u32(P, "its type", &type)))
        return rc;
    if (type > RT_GGUF_F64)
        return gg_fail(P, at, "type %u is not a GGUF value type (0 to 12)", type);
    kv->type = kv->etype = (int)type;
    kv->n = 1;
    if (type == RT_GGUF_ARR) {
        at = P->at;
        if ((rc = gg_u32(P, "its element type", &etype)))
            return rc;
        if (etype == RT_GGUF_ARR)
            return gg_fail(P, at, "an array of arrays (kiln, as llama.cpp, reads arrays of "
                           "numbers, bools and strings)");
        if (etype > RT_GGUF_F64)
            return gg_fail(P, at, "element type %u is not a GGUF value type (0 to 12)", etype);
        kv->etype = (int)etype;
        at = P->at;
        if ((rc = gg_u64(P, "its count", &kv->n)))
            return rc;
        uint64_t least = etype == RT_GGUF_STR ? 8 : (uint64_t)gg_value_size[etype];
        if (kv->n > (P->size - P->at) / least)
            return gg_fail(P, at, "count %llu of %s elements does not fit in the %llu bytes left",
                           (unsigned long long)kv->n, gg_value_names[etype],
                           (unsigned long long)(P->size - P->at));
    }
    if ((rc = gg_values(P, kv)))
        return rc;
    return P->nlen == 17 && !memcmp(P->name, "general.alignment", 17) ? gg_alignment(P, kv) : 0;
}

/* ---- tensor infos ------------------------------------------------------- */

static int gg_store(uint32_t type)
{
    switch (type) {
    case 0: return RT_F32;
    case 1: return RT_F16;
    case 2: return RT_Q4_0;
    case 8: return RT_Q8_0;
    case 12: return RT_Q4_K;
    case 14: return RT_Q6_K;
    case 30: return RT_BF16;
    case 39: return RT_MXFP4;
    default: return -1;
    }
}

static int gg_type(gg_parser *P, rt_gguf_tensor *t, uint32_t type)
{
    static const char kept[] = "kiln holds F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K and MXFP4: "
                               "requantize the model with llama-quantize to Q8_0 or Q4_K_M";
    const char *name = type < (uint32_t)GG_NTYPES ? gg_type_names[type] : NULL;
    int store = gg_store(type);
    if (store < 0 && name)
        return gg_bad(P, "GGML type %s is not supported (%s)", name, kept);
    if (store < 0)
        return gg_bad(P, "GGML type %u is unknown (%s)", type, kept);
    int64_t block = store == RT_Q8_0 || store == RT_Q4_0 || store == RT_MXFP4 ? 32
                    : store == RT_Q4_K || store == RT_Q6_K ? 256 : 1;
    int64_t row = t->dims[t->rank - 1];
    if (row % block)
        return gg_bad(P, "rows of %lld values (ne[0]) are not a multiple of %s's block of %lld",
                      (long long)row, name, (long long)block);
    t->type = (int)type;
    t->store = store;
    t->nbytes = (size_t)rt_store_bytes(store, t->count);
    return 0;
}

/* info = name, u32 n_dims, u64 ne[n_dims], u32 type, u64 offset */
static int gg_info(gg_parser *P, int i)
{
    rt_gguf *g = P->g;
    int rc = gg_grow(P, (void **)&g->t, &P->tcap, sizeof *g->t, i, g->nkv + i);
    if (rc)
        return rc;
    rt_gguf_tensor *t = &g->t[i];
    memset(t, 0, sizeof *t);
    P->kind = GG_TENSOR, P->idx = i, P->name = NULL;
    uint32_t nd, type;
    if ((rc = gg_name(P, "its name", GG_MAX_NAME)) || (rc = gg_u32(P, "its n_dims", &nd)))
        return rc;
    if (nd < 1 || nd > GG_MAX_DIMS)
        return gg_bad(P, "n_dims is %u, GGUF allows 1 to %d", nd, GG_MAX_DIMS);
    t->rank = (int)nd;
    t->count = 1;
    for (uint32_t j = 0; j < nd; j++) {
        char what[24];
        snprintf(what, sizeof what, "its ne[%u]", j);
        uint64_t ne;
        if ((rc = gg_u64(P, what, &ne)))
            return rc;
        if (ne == 0)
            return gg_bad(P, "ne[%u] is 0: every dim must be at least 1", j);
        if (ne >= (uint64_t)GG_MAX_COUNT / (uint64_t)t->count)
            return gg_bad(P, "ne[0..%u] hold 2^60 elements or more", j);
        t->dims[nd - 1 - j] = (int64_t)ne;
        t->count *= (int64_t)ne;
    }
    if ((rc = gg_u32(P, "its type", &type)) || (rc = gg_type(P, t, type)))
        return rc;
    return gg_u64(P, "its offset", &t->offset);
}

/* ---- strings, uniqueness, places ----------------------------------------- */

/* The string whose u64 length is at p, copied to *o with a NUL; returns
 * the copy and moves *p and *o past it. */
static const char *gg_copy1(const unsigned char **p, char **o)
{
    uint64_t len = gg_le(*p, 8);
    char *s = *o;
    memcpy(s, *p + 8, (size_t)len);
    s[len] = 0;
    *p += 8 + len;
    *o += len + 1;
    return s;
}

/* Every key, name and string value into g->strs (checked already). */
static int gg_copy(gg_parser *P)
{
    rt_gguf *g = P->g;
    g->strs = malloc(P->nstr ? (size_t)P->nstr : 1);
    g->strp = malloc(P->nptr ? (size_t)P->nptr * sizeof *g->strp : 1);
    if (!g->strs || !g->strp)
        return rt_errf(P->e, RT_EINTERNAL, "%s: out of memory", g->path);
    char *o = g->strs;
    const char **q = g->strp;
    for (int i = 0; i < g->nkv; i++) {
        rt_gguf_kv *kv = &g->kv[i];
        const unsigned char *p = P->m + P->pos[i];
        kv->key = gg_copy1(&p, &o);
        if (kv->etype != RT_GGUF_STR)
            continue;
        kv->str = q;
        p = kv->raw;
        for (uint64_t j = 0; j < kv->n; j++)
            q[j] = gg_copy1(&p, &o);
        q[kv->n] = o;
        q += kv->n + 1;
        kv->raw = NULL;
    }
    for (int i = 0; i < g->nt; i++) {
        const unsigned char *p = P->m + P->pos[g->nkv + i];
        g->t[i].name = gg_copy1(&p, &o);
    }
    return 0;
}

static int gg_cmp_key(const void *a, const void *b)
{
    return strcmp((*(const rt_gguf_kv *const *)a)->key, (*(const rt_gguf_kv *const *)b)->key);
}

static int gg_cmp_name(const void *a, const void *b)
{
    return strcmp((*(const rt_gguf_tensor *const *)a)->name,
                  (*(const rt_gguf_tensor *const *)b)->name);
}

static int gg_cmp_offset(const void *a, const void *b)
{
    const rt_gguf_tensor *x = *(const rt_gguf_tensor *const *)a;
    const rt_gguf_tensor *y = *(const rt_gguf_tensor *const *)b;
    return (x->offset > y->offset) - (x->offset < y->offset);
}

/* The finds' sorted indexes; a key or name given twice is refused. */
static int gg_unique(gg_parser *P)
{
    rt_gguf *g = P->g;
    g->kv_by_key = malloc((size_t)(g->nkv ? g->nkv : 1) * sizeof *g->kv_by_key);
    g->t_by_name = malloc((size_t)(g->nt ? g->nt : 1) * sizeof *g->t_by_name);
    if (!g->kv_by_key || !g->t_by_name)
        return rt_errf(P->e, RT_EINTERNAL, "%s: out of memory", g->path);
    for (int i = 0; i < g->nkv; i++)
        g->kv_by_key[i] = &g->kv[i];
    for (int i = 0; i < g->nt; i++)
        g->t_by_name[i] = &g->t[i];
    qsort(g->kv_by_key, (size_t)g->nkv, sizeof *g->kv_by_key, gg_cmp_key);
    qsort(g->t_by_name, (size_t)g->nt, sizeof *g->t_by_name, gg_cmp_name);
    for (int i = 1; i < g->nkv; i++)
        if (!strcmp(g->kv_by_key[i - 1]->key, g->kv_by_key[i]->key))
            return rt_errf(P->e, RT_EINVAL, "%s: key '%s' given twice", g->path,
                           g->kv_by_key[i]->key);
    for (int i = 1; i < g->nt; i++)
        if (!strcmp(g->t_by_name[i - 1]->name, g->t_by_name[i]->name))
            return rt_errf(P->e, RT_EINVAL, "%s: tensor '%s': name given twice", g->path,
                           g->t_by_name[i]->name);
    return 0;
}

/* Every tensor aligned and inside the data section; sorted by offset,
 * each ends before the next begins (then no two overlap). */
static int gg_place(gg_parser *P)
{
    rt_gguf *g = P->g;
    uint64_t dlen = P->size > g->data_start ? P->size - g->data_start : 0;
    for (int i = 0; i < g->nt; i++) {
        rt_gguf_tensor *t = &g->t[i];
        if (t->offset % g->alignment)
            return rt_errf(P->e, RT_EINVAL, "%s: tensor '%s': offset %llu is not a multiple of "
                           "the alignment %u", g->path, t->name,
                           (unsigned long long)t->offset, g->alignment);
        if (t->offset > dlen || t->nbytes > dlen - t->offset)
            return rt_errf(P->e, RT_EINVAL, "%s: tensor '%s': %zu bytes at offset %llu run past "
                           "the data section (%llu bytes from byte %llu)", g->path, t->name,
                           t->nbytes, (unsigned long long)t->offset, (unsigned long long)dlen,
                           (unsigned long long)g->data_start);
        t->data = P->m + g->data_start + t->offset;
    }
    const rt_gguf_tensor **by = malloc((size_t)(g->nt ? g->nt : 1) * sizeof *by);
    if (!by)
        return rt_errf(P->e, RT_EINTERNAL, "%s: out of memory", g->path);
    memcpy(by, g->t_by_name, (size_t)g->nt * sizeof *by);
    qsort(by, (size_t)g->nt, sizeof *by, gg_cmp_offset);
    int rc = 0;
    for (int i = 1; i < g->nt && !rc; i++) {
        const rt_gguf_tensor *a = by[i - 1], *b = by[i];
        if (a->offset + a->nbytes > b->offset)
            rc = rt_errf(P->e, RT_EINVAL, "%s: tensor '%s': bytes [%llu, %llu) of the data "
                         "section overlap tensor '%s' (bytes [%llu, %llu))", g->path, b->name,
                         (unsigned long long)b->offset,
                         (unsigned long long)(b->offset + b->nbytes), a->name,
                         (unsigned long long)a->offset,
                         (unsigned long long)(a->offset + a->nbytes));
    }
    free(by);
    return rc;
}

/* ---- the file --------------------------------------------------------- */

static int gg_parse(gg_parser *P)
{
    rt_gguf *g = P->g;
    uint64_t nt, nkv;
    int rc = gg_header(P, &nt, &nkv);
    for (int i = 0; !rc && i < (int)nkv; i++)
        if (!(rc = gg_kv(P, i)))
            g->nkv++;
    for (int i = 0; !rc && i < (int)nt; i++)
        if (!(rc = gg_info(P, i)))
            g->nt++;
    if (rc)
        return rc;
    uint64_t a = g->alignment;
    g->data_start = P->at + (a - P->at % a) % a;
    if ((rc = gg_copy(P)) || (rc = gg_unique(P)))
        return rc;
    return gg_place(P);
}

int rt_gguf_open(rt_gguf *g, const char *path, rt_err *e)
{
    memset(g, 0, sizeof *g);
    g->path = path;
    g->alignment = GG_ALIGNMENT;
    int rc = rt_map_file(path, &g->map, &g->size, e);
    if (!rc) {
        gg_parser P = {.g = g, .e = e, .m = g->map, .size = g->size, .el = -1};
        rc = gg_parse(&P);
        free(P.pos);
    }
    if (rc)
        rt_gguf_close(g);
    return rc;
}

void rt_gguf_close(rt_gguf *g)
{
    free(g->kv);
    free(g->t);
    free(g->kv_by_key);
    free(g->t_by_name);
    free(g->strs);
    free(g->strp);
    if (g->map)
        munmap(g->map, g->size);
    memset(g, 0, sizeof *g);
}

/* ---- the weights loader's reader (kiln_rt.h's rt_gguf_file) -------------- */

static const rt_gguf_tensor *gg_find(const void *g, const char *name)
{
    return rt_gguf_find_tensor(g, name);
}

static void gg_release(void *g)
{
    rt_gguf_close(g);
    free(g);
}

static int gg_weights(const char *path, rt_gguf_file *f, rt_err *e)
{
    rt_gguf *g = malloc(sizeof *g);
    if (!g)
        return rt_errf(e, RT_EINTERNAL, "out of memory");
    int rc = rt_gguf_open(g, path, e);
    if (rc) {
        free(g);
        return rc;
    }
    *f = (rt_gguf_file){g, g->nt, g->t, g->data_start, gg_find, gg_release};
    return 0;
}

__attribute__((constructor)) static void gg_install(void) { rt_gguf_use(gg_weights); }

const rt_gguf_kv *rt_gguf_find_key(const rt_gguf *g, const char *key)
{
    int lo = 0, hi = g->nkv;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(key, g->kv_by_key[mid]->key);
        if (!c)
            return g->kv_by_key[mid];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

const rt_gguf_tensor *rt_gguf_find_tensor(const rt_gguf *g, const char *name)
{
    int lo = 0, hi = g->nt;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(name, g->t_by_name[mid]->name);
        if (!c)
            return g->t_by_name[mid];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

const char *rt_gguf_type_name(int type)
{
    return type >= 0 && type < GG_NTYPES ? gg_type_names[type] : NULL;
}

/* ---- values ------------------------------------------------------------- */

/* Element i of an integer KV as a sign and a magnitude: 0, or -1 when
 * the KV holds no integers. */
static int gg_int(const rt_gguf_kv *kv, uint64_t i, int *neg, uint64_t *mag)
{
    int t = kv->etype;
    if (t == RT_GGUF_F32 || t == RT_GGUF_F64 || t == RT_GGUF_BOOL || t == RT_GGUF_STR)
        return -1;
    int size = gg_value_size[t];
    uint64_t u = gg_le(kv->raw + i * (uint64_t)size, size);
    *neg = 0;
    if (t == RT_GGUF_I8 || t == RT_GGUF_I16 || t == RT_GGUF_I32 || t == RT_GGUF_I64) {
        uint64_t sign = UINT64_C(1) << (8 * size - 1);
        *neg = (u & sign) != 0;
        if (*neg)                                   /* two's complement magnitude */
            u = (~u & ((sign << 1) - 1)) + 1;
    }
    *mag = u;
    return 0;
}

static int gg_get_u64(const rt_gguf_kv *kv, uint64_t i, uint64_t *v)
{
    int neg;
    uint64_t mag;
    if (gg_int(kv, i, &neg, &mag) || (neg && mag))
        return -1;
    *v = mag;
    return 0;
}

static int gg_get_i64(const rt_gguf_kv *kv, uint64_t i, int64_t *v)
{
    int neg;
    uint64_t mag;
    if (gg_int(kv, i, &neg, &mag) || mag > (uint64_t)INT64_MAX + neg)
        return -1;
    *v = neg ? (mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag) : (int64_t)mag;
    return 0;
}

static int gg_get_f64(const rt_gguf_kv *kv, uint64_t i, double *v)
{
    if (kv->etype == RT_GGUF_F32) {
        uint32_t u = (uint32_t)gg_le(kv->raw + 4 * i, 4);
        float f;
        memcpy(&f, &u, 4);
        *v = f;
    } else if (kv->etype == RT_GGUF_F64) {
        uint64_t u = gg_le(kv->raw + 8 * i, 8);
        memcpy(v, &u, 8);
    } else
        return -1;
    return 0;
}

static int gg_get_bool(const rt_gguf_kv *kv, uint64_t i, int *v)
{
    if (kv->etype != RT_GGUF_BOOL)
        return -1;
    *v = kv->raw[i];
    return 0;
}

static const char *gg_get_str(const rt_gguf_kv *kv, uint64_t i, size_t *len)
{
    if (kv->etype != RT_GGUF_STR)      /* *len: 0, as its callers set it */
        return NULL;
    if (len)
        *len = (size_t)(kv->str[i + 1] - kv->str[i] - 1);
    return kv->str[i];
}

#define GG_SCALAR(kv) ((kv) && (kv)->type != RT_GGUF_ARR)
#define GG_ELEMENT(kv, i) ((kv) && (kv)->type == RT_GGUF_ARR && (i) < (kv)->n)

int rt_gguf_u64(const rt_gguf_kv *kv, uint64_t *v)
{
    return GG_SCALAR(kv) ? gg_get_u64(kv, 0, v) : -1;
}
int rt_gguf_i64(const rt_gguf_kv *kv, int64_t *v)
{
    return GG_SCALAR(kv) ? gg_get_i64(kv, 0, v) : -1;
}
int rt_gguf_f64(const rt_gguf_kv *kv, double *v)
{
    return GG_SCALAR(kv) ? gg_get_f64(kv, 0, v) : -1;
}
int rt_gguf_bool(const rt_gguf_kv *kv, int *v)
{
    return GG_SCALAR(kv) ? gg_get_bool(kv, 0, v) : -1;
}
const char *rt_gguf_str(const rt_gguf_kv *kv, size_t *len)
{
    if (len)
        *len = 0;                       /* defined on every path */
    return GG_SCALAR(kv) ? gg_get_str(kv, 0, len) : NULL;
}

int rt_gguf_arr_u64(const rt_gguf_kv *kv, uint64_t i, uint64_t *v)
{
    return GG_ELEMENT(kv, i) ? gg_get_u64(kv, i, v) : -1;
}
int rt_gguf_arr_i64(const rt_gguf_kv *kv, uint64_t i, int64_t *v)
{
    return GG_ELEMENT(kv, i) ? gg_get_i64(kv, i, v) : -1;
}
int rt_gguf_arr_f64(const rt_gguf_kv *kv, uint64_t i, double *v)
{
    return GG_ELEMENT(kv, i) ? gg_get_f64(kv, i, v) : -1;
}
int rt_gguf_arr_bool(const rt_gguf_kv *kv, uint64_t i, int *v)
{
    return GG_ELEMENT(kv, i) ? gg_get_bool(kv, i, v) : -1;
}
const char *rt_gguf_arr_str(const rt_gguf_kv *kv, uint64_t i, size_t *len)
{
    if (len)
        *len = 0;
    return GG_ELEMENT(kv, i) ? gg_get_str(kv, i, len) : NULL;
}
