/* runtime/core/rt_safetensors.c: reading safetensors weights files.
 *
 * Contract (kiln_rt.h): rt_st_open maps a file read-only and trusts
 * nothing in it; every check happens before any tensor is used:
 *   1. the file holds at least the 8-byte header length; the length
 *      (u64 little-endian) is at most ST_MAX_HEADER, as the reference
 *      reader, and the header fits in the file: both before parsing;
 *   2. the header is valid UTF-8 and strict JSON, read by recursive
 *      descent below with rt_json.c's pieces. The grammar is fixed, so
 *      nesting is bounded by construction (object, entry, array: depth 3):
 *        header = '{' (member (',' member)*)? '}'
 *        member = string ':' (entry | metadata)
 *        entry  = '{' dtype, shape, data_offsets: each once, no others '}'
 *        metadata ("__metadata__", at most once) = object of string: string
 *   3. each tensor: dtype F32, F16, BF16, F8_E4M3 or U8 (bytes: MXFP4
 *      blocks and scales, rt_weights.c); rank <= 6; non-negative integer
 *      dims whose product does not overflow; begin <= end <= data section;
 *      end - begin == elements x dtype size;
 *   4. names are unique (tensors are kept sorted by name, so rt_st_find
 *      is a binary search), and the tensors sorted by offset tile the data
 *      section exactly: no overlap, no gap, nothing after the last one
 *      (the reference Rust reader refuses the same files).
 * A path ending in .json is an index of shards: rt_safetensors_index.c.
 * Messages: "PATH: 'NAME': what is wrong" or "PATH: header: what is wrong";
 * RT_EINVAL for a bad file, RT_EIO when it cannot be opened or mapped.
 * The mapping stays valid until rt_st_close; a file truncated meanwhile by
 * someone else faults (SIGBUS), as with any mmap reader. st->path points
 * at the caller's string, which must outlive st. */
#include "runtime/core/rt_core.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define ST_MAX_HEADER UINT64_C(100000000)

typedef struct {
    rt_json J;                  /* the header's (or index's) text */
    const unsigned char *data;  /* data section */
    uint64_t dlen;              /* its bytes */
    const char *name;           /* tensor being read */
    rt_safetensors *st;
    int cap;                    /* of st->t */
} st_parser;

static const char *const st_dtype_names[] = {"F32", "F16", "BF16", "F8_E4M3", "U8"};
static const int st_dtype_size[] = {4, 2, 2, 1, 1};

/* array = '[' (uint (',' uint)*)? ']'; keeps the first max, counts all.
 * Messages about a number name the tensor and the field. */
static int st_uints(st_parser *P, const char *field, int64_t *v, int max, int *n)
{
    char what[512];
    snprintf(what, sizeof what, "'%s': %s", P->name, field);
    *n = 0;
    if (rt_json_eat(&P->J, '['))
        return rt_json_syntax(&P->J, "expected '['");
    for (int first = 1, more; (more = rt_json_next(&P->J, ']', first)) != 0; first = 0) {
        int64_t x = 0;
        if (more < 0)
            return RT_EINVAL;
        int rc = rt_json_uint(&P->J, what, &x);
        if (rc)
            return rc;
        if (*n < max)
            v[*n] = x;
        if (*n < INT32_MAX)
            ++*n;
    }
    return 0;
}

/* ---- one tensor entry ------------------------------------------------- */

static int st_dtype(st_parser *P, rt_st_tensor *t)
{
    char *s;
    int rc = rt_json_string(&P->J, &s);
    if (rc)
        return rc;
    t->dtype = -1;
    for (int i = 0; i < (int)(sizeof st_dtype_size / sizeof *st_dtype_size); i++)
        if (!strcmp(s, st_dtype_names[i]))
            t->dtype = i;
    if (t->dtype < 0)
        rc = rt_errf(P->J.e, RT_EINVAL,
                     "%s: '%s': dtype '%s' is not supported (kiln reads F32, F16, BF16, F8_E4M3, "
                     "U8)", P->J.path,
                     P->name, s);
    free(s);
    return rc;
}

static int st_shape(st_parser *P, rt_st_tensor *t)
{
    int rc = st_uints(P, "shape", t->dims, RT_MAX_RANK, &t->rank);
    if (!rc && t->rank > RT_MAX_RANK)
        rc = rt_errf(P->J.e, RT_EINVAL, "%s: '%s': shape has rank %d, kiln allows at most %d",
                     P->J.path, P->name, t->rank, RT_MAX_RANK);
    return rc;
}

static int st_offsets(st_parser *P, int64_t off[2])
{
    int n, rc = st_uints(P, "data_offsets", off, 2, &n);
    if (!rc && n != 2)
        rc = rt_errf(P->J.e, RT_EINVAL, "%s: '%s': data_offsets has %d entries, not [begin, end]",
                     P->J.path, P->name, n);
    return rc;
}

/* Elements, bytes and place in the data section, all checked. */
static int st_place(st_parser *P, rt_st_tensor *t, const int64_t off[2])
{
    char sh[160];
    int64_t esize = st_dtype_size[t->dtype], count = 1;
    for (int i = 0; i < t->rank; i++) {
        if (t->dims[i] && count > INT64_MAX / esize / t->dims[i])
            return rt_errf(P->J.e, RT_EINVAL, "%s: '%s': shape %s is too large", P->J.path, P->name,
                           rt_fmt_shape(sh, sizeof sh, t->rank, t->dims));
        count *= t->dims[i];
    }
    if (off[0] > off[1])
        return rt_errf(P->J.e, RT_EINVAL,
                       "%s: '%s': data_offsets [%lld, %lld] end before they begin", P->J.path,
                       P->name, (long long)off[0], (long long)off[1]);
    if ((uint64_t)off[1] > P->dlen)
        return rt_errf(
            P->J.e, RT_EINVAL,
            "%s: '%s': data_offsets [%lld, %lld] are not inside the data section of %llu bytes",
            P->J.path, P->name, (long long)off[0], (long long)off[1], (unsigned long long)P->dlen);
    if (off[1] - off[0] != count * esize)
        return rt_errf(
            P->J.e, RT_EINVAL,
            "%s: '%s': shape %s of %s needs %lld bytes, data_offsets [%lld, %lld] hold %lld",
            P->J.path, P->name, rt_fmt_shape(sh, sizeof sh, t->rank, t->dims),
            st_dtype_names[t->dtype], (long long)(count * esize), (long long)off[0],
            (long long)off[1], (long long)(off[1] - off[0]));
    t->count = count;
    t->data = P->data + off[0];
    t->nbytes = (size_t)(off[1] - off[0]);
    return 0;
}

static const char *const st_keys[] = {"dtype", "shape", "data_offsets"};

/* Which key of an entry: 1 dtype, 2 shape, 4 data_offsets, 0 unknown. */
static int st_key_bit(const char *k)
{
    for (int i = 0; i < 3; i++)
        if (!strcmp(k, st_keys[i]))
            return 1 << i;
    return 0;
}

static int st_member(st_parser *P, rt_st_tensor *t, int *seen, int64_t off[2])
{
    char *k;
    int rc = rt_json_string(&P->J, &k);
    if (rc)
        return rc;
    int bit = st_key_bit(k);
    if (!bit)
        rc = rt_errf(P->J.e, RT_EINVAL,
                     "%s: '%s': unknown key '%s' (a tensor has dtype, shape, data_offsets)",
                     P->J.path, P->name, k);
    else if (*seen & bit)
        rc = rt_errf(P->J.e, RT_EINVAL, "%s: '%s': key '%s' given twice", P->J.path, P->name, k);
    else if (rt_json_eat(&P->J, ':'))
        rc = rt_json_syntax(&P->J, "expected ':'");
    free(k);
    if (rc)
        return rc;
    *seen |= bit;
    return bit == 1 ? st_dtype(P, t) : bit == 2 ? st_shape(P, t) : st_offsets(P, off);
}

/* entry = '{' member (',' member)* '}' */
static int st_entry(st_parser *P, rt_st_tensor *t)
{
    int seen = 0;
    int64_t off[2] = {0, 0};
    if (rt_json_eat(&P->J, '{'))
        return rt_errf(P->J.e, RT_EINVAL, "%s: '%s': not an object {dtype, shape, data_offsets}",
                       P->J.path, P->name);
    for (int first = 1, more; (more = rt_json_next(&P->J, '}', first)) != 0; first = 0) {
        int rc = more < 0 ? RT_EINVAL : st_member(P, t, &seen, off);
        if (rc)
            return rc;
    }
    for (int i = 0; i < 3; i++)
        if (!(seen & 1 << i))
            return rt_errf(P->J.e, RT_EINVAL, "%s: '%s': missing '%s'", P->J.path, P->name,
                           st_keys[i]);
    return st_place(P, t, off);
}

/* metadata = '{' (string ':' string (',' string ':' string)*)? '}' */
static int st_metadata(st_parser *P)
{
    if (rt_json_eat(&P->J, '{'))
        return rt_errf(P->J.e, RT_EINVAL, "%s: header: __metadata__ is not an object", P->J.path);
    for (int first = 1, more; (more = rt_json_next(&P->J, '}', first)) != 0; first = 0) {
        char *k = NULL, *v = NULL;
        int rc = more < 0 ? RT_EINVAL : rt_json_string(&P->J, &k);
        if (!rc && rt_json_eat(&P->J, ':'))
            rc = rt_json_syntax(&P->J, "expected ':'");
        if (!rc && (rt_json_ws(&P->J), P->J.p < P->J.end && *P->J.p != '"'))
            rc = rt_errf(P->J.e, RT_EINVAL,
                         "%s: header: __metadata__: the value of '%s' is not a string",
                         P->J.path, k);
        if (!rc)
            rc = rt_json_string(&P->J, &v);
        free(k);
        free(v);
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- the header as a whole -------------------------------------------- */

/* A new zeroed tensor slot named name (which it takes over). */
static rt_st_tensor *st_push(st_parser *P, char *name)
{
    rt_safetensors *st = P->st;
    if (st->n == P->cap) {
        int cap = P->cap ? 2 * P->cap : 16;
        void *t = P->cap < INT32_MAX / 4 ? realloc(st->t, (size_t)cap * sizeof *st->t) : NULL;
        if (!t) {
            free(name);
            rt_json_oom(&P->J);
            return NULL;
        }
        st->t = t;
        P->cap = cap;
    }
    rt_st_tensor *t = &st->t[st->n++];
    memset(t, 0, sizeof *t);
    t->name = name;
    return t;
}

/* member = string ':' (entry | metadata) */
static int st_top_member(st_parser *P, int *meta)
{
    char *name;
    int rc = rt_json_string(&P->J, &name);
    if (rc)
        return rc;
    if (rt_json_eat(&P->J, ':')) {
        free(name);
        return rt_json_syntax(&P->J, "expected ':'");
    }
    if (!strcmp(name, "__metadata__")) {
        free(name);
        if ((*meta)++)
            return rt_errf(P->J.e, RT_EINVAL, "%s: header: __metadata__ given twice", P->J.path);
        return st_metadata(P);
    }
    rt_st_tensor *t = st_push(P, name);
    if (!t)
        return RT_EINTERNAL;
    P->name = name;
    return st_entry(P, t);
}

/* header = '{' (member (',' member)*)? '}' */
static int st_header(st_parser *P)
{
    int meta = 0;
    if (rt_json_eat(&P->J, '{'))
        return rt_errf(P->J.e, RT_EINVAL, "%s: header: not a JSON object", P->J.path);
    for (int first = 1, more; (more = rt_json_next(&P->J, '}', first)) != 0; first = 0) {
        int rc = more < 0 ? RT_EINVAL : st_top_member(P, &meta);
        if (rc)
            return rc;
    }
    rt_json_ws(&P->J);
    return P->J.p == P->J.end ? 0
                              : rt_json_syntax(&P->J, "unexpected text after the header object");
}

static int st_cmp_name(const void *a, const void *b)
{
    return strcmp(((const rt_st_tensor *)a)->name, ((const rt_st_tensor *)b)->name);
}

/* By offset, then size, so empty tensors sort before a tensor they start. */
static int st_cmp_data(const void *a, const void *b)
{
    const rt_st_tensor *x = *(const rt_st_tensor *const *)a, *y = *(const rt_st_tensor *const *)b;
    if (x->data != y->data)
        return x->data < y->data ? -1 : 1;
    return (x->nbytes > y->nbytes) - (x->nbytes < y->nbytes);
}

/* Sorts st->t by name (for rt_st_find) and refuses duplicates. */
static int st_unique(st_parser *P)
{
    rt_safetensors *st = P->st;
    if (st->n > 1)
        qsort(st->t, (size_t)st->n, sizeof *st->t, st_cmp_name);
    for (int i = 1; i < st->n; i++)
        if (!strcmp(st->t[i - 1].name, st->t[i].name))
            return rt_errf(P->J.e, RT_EINVAL, "%s: '%s': tensor name given twice", P->J.path,
                           st->t[i].name);
    return 0;
}

/* The tensors, in offset order, must cover [0, dlen) exactly once. */
static int st_tiles(st_parser *P)
{
    const rt_safetensors *st = P->st;
    const rt_st_tensor **by = malloc((size_t)(st->n ? st->n : 1) * sizeof *by);
    if (!by)
        return rt_json_oom(&P->J);
    for (int i = 0; i < st->n; i++)
        by[i] = &st->t[i];
    qsort(by, (size_t)st->n, sizeof *by, st_cmp_data);
    uint64_t at = 0;
    int rc = 0;
    for (int i = 0; !rc && i < st->n; i++) {
        uint64_t b = (uint64_t)(by[i]->data - P->data), e = b + by[i]->nbytes;
        if (b < at)
            rc = rt_errf(P->J.e, RT_EINVAL, "%s: '%s': data_offsets [%llu, %llu] overlap '%s'",
                         P->J.path, by[i]->name, (unsigned long long)b, (unsigned long long)e,
                         by[i - 1]->name);
        else if (b > at)
            rc = rt_errf(
                P->J.e, RT_EINVAL,
                "%s: '%s': bytes [%llu, %llu) of the data section before it belong to no tensor",
                P->J.path, by[i]->name, (unsigned long long)at, (unsigned long long)b);
        at = e;
    }
    if (!rc && at != P->dlen)
        rc = rt_errf(
            P->J.e, RT_EINVAL,
            "%s: header: %llu bytes after the last tensor (data section %llu, tensors %llu)",
            P->J.path, (unsigned long long)(P->dlen - at), (unsigned long long)P->dlen,
            (unsigned long long)at);
    free(by);
    return rc;
}

/* ---- the file ------------------------------------------------------- */

/* Header length and place first, then the parse and whole-file checks. */
static int st_parse(rt_safetensors *st, rt_err *e)
{
    const unsigned char *m = st->map;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | m[i];
    if (hlen > ST_MAX_HEADER)
        return rt_errf(e, RT_EINVAL, "%s: header: length %llu exceeds the limit of %llu bytes",
                       st->path, (unsigned long long)hlen, (unsigned long long)ST_MAX_HEADER);
    if (hlen > st->size - 8)
        return rt_errf(e, RT_EINVAL,
                       "%s: header: length %llu runs past the end of the file (%zu bytes)",
                       st->path, (unsigned long long)hlen, st->size);
    size_t bad = rt_utf8_bad(m + 8, (size_t)hlen);
    if (bad < hlen)
        return rt_errf(e, RT_EINVAL, "%s: header: not valid UTF-8 at byte %zu", st->path, bad);
    const unsigned char *h = m + 8, *data = h + hlen;
    st_parser P = {.J = {.p = h, .start = h, .end = data, .path = st->path, .part = "header",
                         .e = e},
                   .data = data,
                   .dlen = st->size - 8 - hlen,
                   .name = "",
                   .st = st};
    int rc = st_header(&P);
    if (!rc)
        rc = st_unique(&P);
    return rc ? rc : st_tiles(&P);
}

int rt_st_open_file(rt_safetensors *st, const char *path, rt_err *e)
{
    memset(st, 0, sizeof *st);
    st->path = path;
    int rc = rt_map_file(path, &st->map, &st->size, e);
    if (!rc && st->size < 8)
        rc = rt_errf(e, RT_EINVAL,
                     "%s: header: the file has %zu bytes, too few for the 8-byte header length",
                     path, st->size);
    if (!rc)
        rc = st_parse(st, e);
    if (rc)
        rt_st_close(st);
    return rc;
}

int rt_st_open(rt_safetensors *st, const char *path, rt_err *e)
{
    size_t n = strlen(path);
    return n >= 5 && !strcmp(path + n - 5, ".json") ? rt_st_open_index(st, path, e)
                                                    : rt_st_open_file(st, path, e);
}

void rt_st_close(rt_safetensors *st)
{
    for (int i = 0; i < st->nshards; i++) {
        char *path = (char *)st->shards[i].path;   /* the index's own copy */
        rt_st_close(&st->shards[i]);
        free(path);
    }
    free(st->shards);
    for (int i = 0; i < st->n; i++)
        free(st->t[i].name);
    free(st->t);
    if (st->map)
        munmap(st->map, st->size);
    memset(st, 0, sizeof *st);
}

const rt_st_tensor *rt_st_find(const rt_safetensors *st, const char *name)
{
    int lo = 0, hi = st->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(name, st->t[mid].name);
        if (!c)
            return &st->t[mid];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}
