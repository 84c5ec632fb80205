/* runtime/rt_safetensors.c: reading safetensors weights files.
 *
 * Contract (kiln_rt.h): rt_st_open maps a file read-only and trusts
 * nothing in it; every check happens before any tensor is used:
 *   1. the file holds at least the 8-byte header length; the length
 *      (u64 little-endian) is at most ST_MAX_HEADER, as the reference
 *      reader, and the header fits in the file: both before parsing;
 *   2. the header is valid UTF-8 and strict JSON, read by the small
 *      recursive-descent parser below. The grammar is fixed, so nesting
 *      is bounded by construction (object, entry, array: depth 3):
 *        header = '{' (member (',' member)*)? '}'
 *        member = string ':' (entry | metadata)
 *        entry  = '{' dtype, shape, data_offsets: each once, no others '}'
 *        metadata ("__metadata__", at most once) = object of string: string
 *   3. each tensor: dtype F32, F16 or BF16; rank <= 6; non-negative integer
 *      dims whose product does not overflow; begin <= end <= data section;
 *      end - begin == elements x dtype size;
 *   4. names are unique (tensors are kept sorted by name, so rt_st_find
 *      is a binary search), and the tensors sorted by offset tile the data
 *      section exactly: no overlap, no gap, nothing after the last one
 *      (the reference Rust reader refuses the same files).
 * Messages: "PATH: 'NAME': what is wrong" or "PATH: header: what is wrong";
 * RT_EINVAL for a bad file, RT_EIO when it cannot be opened or mapped.
 * The mapping stays valid until rt_st_close; a file truncated meanwhile by
 * someone else faults (SIGBUS), as with any mmap reader. st->path points
 * at the caller's string, which must outlive st. */
#include "kiln_rt.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define ST_MAX_HEADER UINT64_C(100000000)

typedef struct {
    const unsigned char *p, *start, *end; /* header text */
    const unsigned char *data;            /* data section */
    uint64_t dlen;                        /* its bytes */
    const char *path, *name;              /* name: tensor being read */
    rt_safetensors *st;
    int cap; /* of st->t */
    rt_err *e;
} st_parser;

static const char *const st_dtype_names[] = {"F32", "F16", "BF16"};
static const int st_dtype_size[] = {4, 2, 2};

/* ---- errors ----------------------------------------------------------- */

static int st_syntax(st_parser *P, const char *what)
{
    return rt_errf(P->e, RT_EINVAL, "%s: header: invalid JSON at byte %zu: %s", P->path,
                   (size_t)(P->p - P->start), what);
}

static int st_oom(st_parser *P)
{
    return rt_errf(P->e, RT_EINTERNAL, "%s: out of memory reading the header", P->path);
}

/* ---- lexical: whitespace, UTF-8, strings, integers ------------------- */

static void st_ws(st_parser *P)
{
    while (P->p < P->end && (*P->p == ' ' || *P->p == '\t' || *P->p == '\n' || *P->p == '\r'))
        P->p++;
}

/* Consumes c after optional whitespace; 0 when it was there. */
static int st_eat(st_parser *P, int c)
{
    st_ws(P);
    if (P->p < P->end && *P->p == c) {
        P->p++;
        return 0;
    }
    return 1;
}

/* Offset of the first byte that is not well-formed UTF-8 (Unicode table
 * 3-7: no overlongs, no surrogates, nothing above U+10FFFF), or n. */
static size_t st_utf8_bad(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
        unsigned lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
        unsigned hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
        if (c < 0xC2 || c > 0xF4 || n - i < len || s[i + 1] < lo || s[i + 1] > hi)
            return i;
        for (size_t k = 2; k < len; k++)
            if ((s[i + k] & 0xC0) != 0x80)
                return i;
        i += len;
    }
    return n;
}

static int st_hex4(const unsigned char *p, unsigned *v)
{
    *v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned c = p[i], d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if ((c | 32) >= 'a' && (c | 32) <= 'f')
            d = (c | 32) - 'a' + 10;
        else
            return 1;
        *v = *v << 4 | d;
    }
    return 0;
}

static char *st_put_utf8(char *o, unsigned cp)
{
    if (cp < 0x80) {
        *o++ = (char)cp;
    } else if (cp < 0x800) {
        *o++ = (char)(0xC0 | cp >> 6);
        *o++ = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        *o++ = (char)(0xE0 | cp >> 12);
        *o++ = (char)(0x80 | (cp >> 6 & 0x3F));
        *o++ = (char)(0x80 | (cp & 0x3F));
    } else {
        *o++ = (char)(0xF0 | cp >> 18);
        *o++ = (char)(0x80 | (cp >> 12 & 0x3F));
        *o++ = (char)(0x80 | (cp >> 6 & 0x3F));
        *o++ = (char)(0x80 | (cp & 0x3F));
    }
    return o;
}

/* \uXXXX, or a surrogate pair \uD8xx\uDCxx, at P->p (after the 'u').
 * The string's closing quote is not a hex digit, so reads stop there. */
static int st_unicode(st_parser *P, char **o)
{
    unsigned cp, lo;
    if (st_hex4(P->p, &cp))
        return st_syntax(P, "\\u needs four hex digits");
    P->p += 4;
    if (cp >= 0xDC00 && cp <= 0xDFFF)
        return st_syntax(P, "lone low surrogate in \\u escape");
    if (cp >= 0xD800 && cp <= 0xDBFF) {
        if (P->p[0] != '\\' || P->p[1] != 'u' || st_hex4(P->p + 2, &lo) || lo < 0xDC00 ||
            lo > 0xDFFF)
            return st_syntax(P, "lone high surrogate in \\u escape");
        P->p += 6;
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    }
    if (cp == 0)
        return st_syntax(P, "\\u0000 is not allowed (names are C strings)");
    *o = st_put_utf8(*o, cp);
    return 0;
}

/* One escape at P->p (the backslash). */
static int st_escape(st_parser *P, char **o)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    unsigned char c = P->p[1];
    P->p += 2;
    if (c == 'u')
        return st_unicode(P, o);
    const char *k = c ? strchr(from, c) : NULL;
    if (!k) {
        P->p -= 2;
        return st_syntax(P, "invalid escape in a string");
    }
    *(*o)++ = to[k - from];
    return 0;
}

/* string = '"' (char | escape)* '"'; the result is malloc'd UTF-8. Escapes
 * never lengthen text, so the raw length bounds the decoded one. */
static int st_string(st_parser *P, char **out)
{
    *out = NULL;
    st_ws(P);
    if (P->p >= P->end || *P->p != '"')
        return st_syntax(P, "expected a string");
    const unsigned char *q = ++P->p;
    while (q < P->end && *q != '"')
        q += (*q == '\\' && q + 1 < P->end) ? 2 : 1;
    if (q >= P->end)
        return st_syntax(P, "unterminated string");
    char *s = malloc((size_t)(q - P->p) + 1), *o = s;
    if (!s)
        return st_oom(P);
    int rc = 0;
    while (!rc && P->p < q) {
        if (*P->p < 0x20)
            rc = st_syntax(P, "control character in a string");
        else if (*P->p == '\\')
            rc = st_escape(P, &o);
        else
            *o++ = (char)*P->p++;
    }
    if (rc) {
        free(s);
        return rc;
    }
    P->p++;
    *o = 0;
    *out = s;
    return 0;
}

static int st_digit(const st_parser *P, const unsigned char *p)
{
    return p < P->end && *p >= '0' && *p <= '9';
}

/* Skips [0-9]+ at *p; 0 when there was at least one digit. */
static int st_digits(st_parser *P, const unsigned char **p, const char *what)
{
    if (!st_digit(P, *p)) {
        P->p = *p;
        return st_syntax(P, what);
    }
    while (st_digit(P, *p))
        ++*p;
    return 0;
}

/* number = '-'? ('0' | [1-9][0-9]*) ('.' [0-9]+)? ([eE] [+-]? [0-9]+)?
 * Syntax is JSON's; kiln then wants a non-negative integer below 2^63. */
static int st_uint(st_parser *P, const char *field, int64_t *v)
{
    st_ws(P);
    const unsigned char *b = P->p, *p = b;
    int neg = p < P->end && *p == '-', frac = 0, big = 0, rc = 0;
    int64_t x = 0;
    p += neg;
    if (!st_digit(P, p))
        return st_syntax(P, "expected a number");
    if (*p == '0')
        p++; /* JSON: no leading zeros */
    else
        for (; st_digit(P, p); p++) {
            int d = *p - '0';
            big |= x > (INT64_MAX - d) / 10;
            x = big ? 0 : x * 10 + d;
        }
    if (p < P->end && *p == '.') {
        frac = 1, p++;
        rc = st_digits(P, &p, "expected a digit after '.'");
    }
    if (!rc && p < P->end && (*p == 'e' || *p == 'E')) {
        frac = 1, p++;
        p += p < P->end && (*p == '+' || *p == '-');
        rc = st_digits(P, &p, "expected a digit in the exponent");
    }
    if (rc)
        return rc;
    P->p = p;
    int len = p - b > 40 ? 40 : (int)(p - b);
    if (neg || frac)
        return rt_errf(P->e, RT_EINVAL, "%s: '%s': %s: %.*s is not a non-negative integer", P->path,
                       P->name, field, len, (const char *)b);
    if (big)
        return rt_errf(P->e, RT_EINVAL, "%s: '%s': %s: %.*s is too large", P->path, P->name, field,
                       len, (const char *)b);
    *v = x;
    return 0;
}

/* Inside a list after its opening bracket: 1 when another item follows,
 * 0 at the closing bracket c, -1 (error set) otherwise. A comma is needed
 * between items and refused before the closing bracket (strict JSON). */
static int st_next(st_parser *P, int c, int first)
{
    if (!st_eat(P, c))
        return 0;
    if (first || !st_eat(P, ','))
        return 1;
    st_syntax(P, c == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
    return -1;
}

/* array = '[' (uint (',' uint)*)? ']'; keeps the first max, counts all. */
static int st_uints(st_parser *P, const char *field, int64_t *v, int max, int *n)
{
    *n = 0;
    if (st_eat(P, '['))
        return st_syntax(P, "expected '['");
    for (int first = 1, more; (more = st_next(P, ']', first)) != 0; first = 0) {
        int64_t x = 0;
        if (more < 0)
            return RT_EINVAL;
        int rc = st_uint(P, field, &x);
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
    int rc = st_string(P, &s);
    if (rc)
        return rc;
    t->dtype = -1;
    for (int i = 0; i < 3; i++)
        if (!strcmp(s, st_dtype_names[i]))
            t->dtype = i;
    if (t->dtype < 0)
        rc = rt_errf(P->e, RT_EINVAL,
                     "%s: '%s': dtype '%s' is not supported (kiln reads F32, F16, BF16)", P->path,
                     P->name, s);
    free(s);
    return rc;
}

static int st_shape(st_parser *P, rt_st_tensor *t)
{
    int rc = st_uints(P, "shape", t->dims, RT_MAX_RANK, &t->rank);
    if (!rc && t->rank > RT_MAX_RANK)
        rc = rt_errf(P->e, RT_EINVAL, "%s: '%s': shape has rank %d, kiln allows at most %d",
                     P->path, P->name, t->rank, RT_MAX_RANK);
    return rc;
}

static int st_offsets(st_parser *P, int64_t off[2])
{
    int n, rc = st_uints(P, "data_offsets", off, 2, &n);
    if (!rc && n != 2)
        rc = rt_errf(P->e, RT_EINVAL, "%s: '%s': data_offsets has %d entries, not [begin, end]",
                     P->path, P->name, n);
    return rc;
}

/* Elements, bytes and place in the data section, all checked. */
static int st_place(st_parser *P, rt_st_tensor *t, const int64_t off[2])
{
    char sh[160];
    int64_t esize = st_dtype_size[t->dtype], count = 1;
    for (int i = 0; i < t->rank; i++) {
        if (t->dims[i] && count > INT64_MAX / esize / t->dims[i])
            return rt_errf(P->e, RT_EINVAL, "%s: '%s': shape %s is too large", P->path, P->name,
                           rt_fmt_shape(sh, sizeof sh, t->rank, t->dims));
        count *= t->dims[i];
    }
    if (off[0] > off[1])
        return rt_errf(P->e, RT_EINVAL, "%s: '%s': data_offsets [%lld, %lld] end before they begin",
                       P->path, P->name, (long long)off[0], (long long)off[1]);
    if ((uint64_t)off[1] > P->dlen)
        return rt_errf(
            P->e, RT_EINVAL,
            "%s: '%s': data_offsets [%lld, %lld] are not inside the data section of %llu bytes",
            P->path, P->name, (long long)off[0], (long long)off[1], (unsigned long long)P->dlen);
    if (off[1] - off[0] != count * esize)
        return rt_errf(
            P->e, RT_EINVAL,
            "%s: '%s': shape %s of %s needs %lld bytes, data_offsets [%lld, %lld] hold %lld",
            P->path, P->name, rt_fmt_shape(sh, sizeof sh, t->rank, t->dims),
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
    int rc = st_string(P, &k);
    if (rc)
        return rc;
    int bit = st_key_bit(k);
    if (!bit)
        rc = rt_errf(P->e, RT_EINVAL,
                     "%s: '%s': unknown key '%s' (a tensor has dtype, shape, data_offsets)",
                     P->path, P->name, k);
    else if (*seen & bit)
        rc = rt_errf(P->e, RT_EINVAL, "%s: '%s': key '%s' given twice", P->path, P->name, k);
    else if (st_eat(P, ':'))
        rc = st_syntax(P, "expected ':'");
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
    if (st_eat(P, '{'))
        return rt_errf(P->e, RT_EINVAL, "%s: '%s': not an object {dtype, shape, data_offsets}",
                       P->path, P->name);
    for (int first = 1, more; (more = st_next(P, '}', first)) != 0; first = 0) {
        int rc = more < 0 ? RT_EINVAL : st_member(P, t, &seen, off);
        if (rc)
            return rc;
    }
    for (int i = 0; i < 3; i++)
        if (!(seen & 1 << i))
            return rt_errf(P->e, RT_EINVAL, "%s: '%s': missing '%s'", P->path, P->name, st_keys[i]);
    return st_place(P, t, off);
}

/* metadata = '{' (string ':' string (',' string ':' string)*)? '}' */
static int st_metadata(st_parser *P)
{
    if (st_eat(P, '{'))
        return rt_errf(P->e, RT_EINVAL, "%s: header: __metadata__ is not an object", P->path);
    for (int first = 1, more; (more = st_next(P, '}', first)) != 0; first = 0) {
        char *k = NULL, *v = NULL;
        int rc = more < 0 ? RT_EINVAL : st_string(P, &k);
        if (!rc && st_eat(P, ':'))
            rc = st_syntax(P, "expected ':'");
        if (!rc && (st_ws(P), P->p < P->end && *P->p != '"'))
            rc = rt_errf(P->e, RT_EINVAL,
                         "%s: header: __metadata__: the value of '%s' is not a string", P->path, k);
        if (!rc)
            rc = st_string(P, &v);
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
            st_oom(P);
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
    int rc = st_string(P, &name);
    if (rc)
        return rc;
    if (st_eat(P, ':')) {
        free(name);
        return st_syntax(P, "expected ':'");
    }
    if (!strcmp(name, "__metadata__")) {
        free(name);
        if ((*meta)++)
            return rt_errf(P->e, RT_EINVAL, "%s: header: __metadata__ given twice", P->path);
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
    if (st_eat(P, '{'))
        return rt_errf(P->e, RT_EINVAL, "%s: header: not a JSON object", P->path);
    for (int first = 1, more; (more = st_next(P, '}', first)) != 0; first = 0) {
        int rc = more < 0 ? RT_EINVAL : st_top_member(P, &meta);
        if (rc)
            return rc;
    }
    st_ws(P);
    return P->p == P->end ? 0 : st_syntax(P, "unexpected text after the header object");
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
            return rt_errf(P->e, RT_EINVAL, "%s: '%s': tensor name given twice", P->path,
                           st->t[i].name);
    return 0;
}

/* The tensors, in offset order, must cover [0, dlen) exactly once. */
static int st_tiles(st_parser *P)
{
    const rt_safetensors *st = P->st;
    const rt_st_tensor **by = malloc((size_t)(st->n ? st->n : 1) * sizeof *by);
    if (!by)
        return st_oom(P);
    for (int i = 0; i < st->n; i++)
        by[i] = &st->t[i];
    qsort(by, (size_t)st->n, sizeof *by, st_cmp_data);
    uint64_t at = 0;
    int rc = 0;
    for (int i = 0; !rc && i < st->n; i++) {
        uint64_t b = (uint64_t)(by[i]->data - P->data), e = b + by[i]->nbytes;
        if (b < at)
            rc = rt_errf(P->e, RT_EINVAL, "%s: '%s': data_offsets [%llu, %llu] overlap '%s'",
                         P->path, by[i]->name, (unsigned long long)b, (unsigned long long)e,
                         by[i - 1]->name);
        else if (b > at)
            rc = rt_errf(
                P->e, RT_EINVAL,
                "%s: '%s': bytes [%llu, %llu) of the data section before it belong to no tensor",
                P->path, by[i]->name, (unsigned long long)at, (unsigned long long)b);
        at = e;
    }
    if (!rc && at != P->dlen)
        rc = rt_errf(
            P->e, RT_EINVAL,
            "%s: header: %llu bytes after the last tensor (data section %llu, tensors %llu)",
            P->path, (unsigned long long)(P->dlen - at), (unsigned long long)P->dlen,
            (unsigned long long)at);
    free(by);
    return rc;
}

/* ---- the file ------------------------------------------------------- */

static int st_map(rt_safetensors *st, const char *path, rt_err *e)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 0;
    if (fd < 0)
        return rt_errf(e, RT_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0)
        rc = rt_errf(e, RT_EIO, "%s: cannot read: %s", path, strerror(errno));
    else if (!S_ISREG(sb.st_mode))
        rc = rt_errf(e, RT_EIO, "%s: cannot read: not a regular file", path);
    else if (sb.st_size < 8)
        rc = rt_errf(e, RT_EINVAL,
                     "%s: header: the file has %lld bytes, too few for the 8-byte header length",
                     path, (long long)sb.st_size);
    if (!rc) {
        void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED)
            rc = rt_errf(e, RT_EIO, "%s: cannot map: %s", path, strerror(errno));
        else
            st->map = m, st->size = (size_t)sb.st_size;
    }
    close(fd);
    return rc;
}

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
    size_t bad = st_utf8_bad(m + 8, (size_t)hlen);
    if (bad < hlen)
        return rt_errf(e, RT_EINVAL, "%s: header: not valid UTF-8 at byte %zu", st->path, bad);
    const unsigned char *h = m + 8, *data = h + hlen;
    st_parser P = {.p = h,
                   .start = h,
                   .end = data,
                   .data = data,
                   .dlen = st->size - 8 - hlen,
                   .path = st->path,
                   .name = "",
                   .st = st,
                   .e = e};
    int rc = st_header(&P);
    if (!rc)
        rc = st_unique(&P);
    return rc ? rc : st_tiles(&P);
}

int rt_st_open(rt_safetensors *st, const char *path, rt_err *e)
{
    memset(st, 0, sizeof *st);
    st->path = path;
    int rc = st_map(st, path, e);
    if (!rc)
        rc = st_parse(st, e);
    if (rc)
        rt_st_close(st);
    return rc;
}

void rt_st_close(rt_safetensors *st)
{
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

/* ---- widening to f32 ---------------------------------------------------- */

static float st_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* IEEE half to float, exactly: every half is a float. */
static float st_f16(uint32_t h)
{
    uint32_t sign = (h & 0x8000) << 16, exp = h >> 10 & 0x1f, man = h & 0x3ff;
    if (exp == 0) { /* zero or subnormal: man * 2^-24 */
        float f = (float)man * 0x1p-24f;
        return sign ? -f : f;
    }
    if (exp == 31) /* inf, or nan with its payload */
        return st_bits(sign | 0x7f800000 | man << 13);
    return st_bits(sign | (exp + 112) << 23 | man << 13);
}

/* Bytes are little-endian in the file whatever the host; one loop per
 * dtype so each stays a tight, vectorisable loop. */
void rt_st_to_f32(const rt_st_tensor *t, float *dst)
{
    const unsigned char *p = t->data;
    int64_t n = t->count;
    if (t->dtype == RT_ST_F32)
        for (int64_t i = 0; i < n; i++, p += 4)
            dst[i] =
                st_bits(p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
    else if (t->dtype == RT_ST_F16)
        for (int64_t i = 0; i < n; i++, p += 2)
            dst[i] = st_f16(p[0] | (uint32_t)p[1] << 8);
    else
        for (int64_t i = 0; i < n; i++, p += 2)
            dst[i] = st_bits((p[0] | (uint32_t)p[1] << 8) << 16);
}
