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
    const char *part;                     /* what the text is: "header" (NULL), "index" */
    rt_safetensors *st;
    int cap; /* of st->t */
    rt_err *e;
} st_parser;

static const char *const st_dtype_names[] = {"F32", "F16", "BF16"};
static const int st_dtype_size[] = {4, 2, 2};

/* ---- errors ----------------------------------------------------------- */

static int st_syntax(st_parser *P, const char *what)
{
    return rt_errf(P->e, RT_EINVAL, "%s: %s: invalid JSON at byte %zu: %s", P->path,
                   P->part ? P->part : "header", (size_t)(P->p - P->start), what);
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

static int st_open_file(rt_safetensors *st, const char *path, rt_err *e)
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

/* ---- an index of shards (model.safetensors.index.json) ------------------- */
/* index  = '{' member (',' member)* '}'
 * member = "metadata" ':' value | "weight_map" ':' map   (each at most once)
 * map    = '{' (string ':' string (',' string ':' string)*)? '}'
 * value  = any JSON value, skipped, nested at most ST_MAX_DEPTH deep */

#define ST_MAX_DEPTH 32

typedef struct {
    char *name, *file;          /* a weight_map entry: tensor, shard file */
} st_mapping;

static int st_skip(st_parser *P, int depth);

/* number = '-'? [0-9]+ ('.' [0-9]+)? ([eE] [+-]? [0-9]+)? */
static int st_skip_number(st_parser *P)
{
    const unsigned char *p = P->p;
    p += p < P->end && *p == '-';
    int rc = st_digits(P, &p, "expected a value");
    if (!rc && p < P->end && *p == '.') {
        p++;
        rc = st_digits(P, &p, "expected a digit after '.'");
    }
    if (!rc && p < P->end && (*p == 'e' || *p == 'E')) {
        p++;
        p += p < P->end && (*p == '+' || *p == '-');
        rc = st_digits(P, &p, "expected a digit in the exponent");
    }
    if (!rc)
        P->p = p;
    return rc;
}

/* The items of an object or array, its opening bracket at P->p. */
static int st_skip_items(st_parser *P, int depth)
{
    int close = *P->p++ == '{' ? '}' : ']';
    for (int first = 1, more; (more = st_next(P, close, first)) != 0; first = 0) {
        char *key = NULL;
        int rc = more < 0 ? RT_EINVAL : close == '}' ? st_string(P, &key) : 0;
        free(key);
        if (!rc && close == '}' && st_eat(P, ':'))
            rc = st_syntax(P, "expected ':'");
        if (!rc)
            rc = st_skip(P, depth + 1);
        if (rc)
            return rc;
    }
    return 0;
}

static int st_skip(st_parser *P, int depth)
{
    static const char *const words[] = {"true", "false", "null"};
    st_ws(P);
    if (depth > ST_MAX_DEPTH)
        return st_syntax(P, "nested too deeply");
    if (P->p < P->end && (*P->p == '{' || *P->p == '['))
        return st_skip_items(P, depth);
    if (P->p < P->end && *P->p == '"') {
        char *s;
        int rc = st_string(P, &s);
        free(s);
        return rc;
    }
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(words[i]);
        if ((size_t)(P->end - P->p) >= n && !memcmp(P->p, words[i], n)) {
            P->p += n;
            return 0;
        }
    }
    return st_skip_number(P);
}

static int st_cmp_mapping(const void *a, const void *b)
{
    return strcmp(((const st_mapping *)a)->name, ((const st_mapping *)b)->name);
}

static int st_push_mapping(st_parser *P, st_mapping **v, int *n, int *cap, st_mapping x)
{
    if (*n == *cap) {
        int more = *cap ? 2 * *cap : 64;
        st_mapping *nv = *cap < INT32_MAX / 4 ? realloc(*v, sizeof *nv * (size_t)more) : NULL;
        if (!nv)
            return st_oom(P);
        *v = nv;
        *cap = more;
    }
    (*v)[(*n)++] = x;
    return 0;
}

/* map: the entries into *v (malloc'd, sorted by name, names unique). */
static int st_weight_map(st_parser *P, st_mapping **v, int *n)
{
    int cap = 0, rc = st_eat(P, '{') ? st_syntax(P, "weight_map is not an object") : 0;
    for (int first = 1, more; !rc && (more = st_next(P, '}', first)) != 0; first = 0) {
        st_mapping x = {NULL, NULL};
        rc = more < 0 ? RT_EINVAL : st_string(P, &x.name);
        if (!rc && st_eat(P, ':'))
            rc = st_syntax(P, "expected ':'");
        if (!rc)
            rc = st_string(P, &x.file);
        if (!rc)
            rc = st_push_mapping(P, v, n, &cap, x);
        if (rc) {
            free(x.name);
            free(x.file);
        }
    }
    if (!rc && *n > 1)
        qsort(*v, (size_t)*n, sizeof **v, st_cmp_mapping);
    for (int i = 1; !rc && i < *n; i++)
        if (!strcmp((*v)[i - 1].name, (*v)[i].name))
            rc = rt_errf(P->e, RT_EINVAL, "%s: weight_map: '%s' given twice", P->path,
                         (*v)[i].name);
    return rc;
}

/* index: the weight_map's entries; metadata is skipped. */
static int st_index(st_parser *P, st_mapping **v, int *n)
{
    int seen = 0, rc = st_eat(P, '{') ? st_syntax(P, "not a JSON object") : 0;
    for (int first = 1, more; !rc && (more = st_next(P, '}', first)) != 0; first = 0) {
        char *key = NULL;
        rc = more < 0 ? RT_EINVAL : st_string(P, &key);
        int bit = rc ? 0 : !strcmp(key, "weight_map") ? 1 : !strcmp(key, "metadata") ? 2 : 0;
        if (!rc && !bit)
            rc = rt_errf(P->e, RT_EINVAL, "%s: unknown key '%s' (an index has metadata and "
                         "weight_map)", P->path, key);
        else if (!rc && seen & bit)
            rc = rt_errf(P->e, RT_EINVAL, "%s: '%s' given twice", P->path, key);
        else if (!rc && st_eat(P, ':'))
            rc = st_syntax(P, "expected ':'");
        free(key);
        seen |= bit;
        if (!rc)
            rc = bit == 1 ? st_weight_map(P, v, n) : st_skip(P, 0);
    }
    st_ws(P);
    if (!rc && P->p != P->end)
        rc = st_syntax(P, "unexpected text after the index object");
    if (!rc && !(seen & 1))
        rc = rt_errf(P->e, RT_EINVAL, "%s: no weight_map", P->path);
    return rc;
}

/* The index file's text into *text (malloc'd, *len bytes, valid UTF-8). */
static int st_index_text(const char *path, char **text, size_t *len, rt_err *e)
{
    FILE *f = fopen(path, "rb");
    struct stat sb;
    size_t bad = 0;
    int rc = 0;
    *text = NULL;
    if (!f || fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode))
        rc = rt_errf(e, RT_EIO, "%s: cannot read: %s", path,
                     f ? "not a regular file" : strerror(errno));
    else if ((uint64_t)sb.st_size > ST_MAX_HEADER)
        rc = rt_errf(e, RT_EINVAL, "%s: larger than the limit of %llu bytes", path,
                     (unsigned long long)ST_MAX_HEADER);
    else if (!(*text = malloc((size_t)sb.st_size + 1)))
        rc = rt_errf(e, RT_EINTERNAL, "%s: out of memory", path);
    else if (fread(*text, 1, (size_t)sb.st_size, f) != (size_t)sb.st_size)
        rc = rt_errf(e, RT_EIO, "%s: cannot read: %s", path, strerror(errno));
    else if ((bad = st_utf8_bad((unsigned char *)*text, (size_t)sb.st_size)) < (size_t)sb.st_size)
        rc = rt_errf(e, RT_EINVAL, "%s: not valid UTF-8 at byte %zu", path, bad);
    if (f)
        fclose(f);
    if (rc) {
        free(*text);
        *text = NULL;
    }
    *len = bad;
    return rc;
}

/* The shard file's index in st->shards, or -1. */
static int st_find_shard(const rt_safetensors *st, const char *file)
{
    for (int k = 0; k < st->nshards; k++)
        if (!strcmp(strrchr(st->shards[k].path, '/') + 1, file))
            return k;
    return -1;
}

/* The shard a weight_map entry names, opened once. A shard is a plain
 * file name in the index's folder. */
static int st_open_shard(rt_safetensors *st, const char *file, rt_err *e)
{
    if (st_find_shard(st, file) >= 0)
        return 0;
    if (!*file || strchr(file, '/') || !strcmp(file, ".") || !strcmp(file, ".."))
        return rt_errf(e, RT_EINVAL,
                       "%s: weight_map: '%s' is not a file name in the index's folder", st->path,
                       file);
    const char *slash = strrchr(st->path, '/');
    int dir = slash ? (int)(slash - st->path) : 1;
    char *path = malloc((size_t)dir + strlen(file) + 2);
    rt_safetensors *sh = realloc(st->shards, sizeof *sh * (size_t)(st->nshards + 1));
    if (sh)
        st->shards = sh;
    if (!path || !sh) {
        free(path);
        return rt_errf(e, RT_EINTERNAL, "%s: out of memory", st->path);
    }
    sprintf(path, "%.*s/%s", dir, slash ? st->path : ".", file);
    int rc = st_open_file(&st->shards[st->nshards], path, e);
    if (rc)
        free(path);
    else
        st->nshards++;
    return rc;
}

/* Every tensor of every shard is where the weight_map puts it, and every
 * entry is found; then st->t takes them all over, sorted by name. */
static int st_merge(rt_safetensors *st, const st_mapping *v, int n, rt_err *e)
{
    int total = 0;
    for (int s = 0; s < st->nshards; s++) {
        const rt_safetensors *sh = &st->shards[s];
        const char *file = strrchr(sh->path, '/') + 1;
        for (int i = 0; i < sh->n; i++) {
            st_mapping key = {sh->t[i].name, NULL};
            const st_mapping *x = bsearch(&key, v, (size_t)n, sizeof *v, st_cmp_mapping);
            if (!x)
                return rt_errf(e, RT_EINVAL, "%s: '%s': in %s, but the weight_map does not list it",
                               st->path, key.name, file);
            if (strcmp(x->file, file))
                return rt_errf(e, RT_EINVAL, "%s: '%s': in %s, but the weight_map puts it in %s",
                               st->path, key.name, file, x->file);
        }
        total += sh->n;
    }
    for (int i = 0; total < n && i < n; i++)      /* names are unique: one is missing */
        if (!rt_st_find(&st->shards[st_find_shard(st, v[i].file)], v[i].name))
            return rt_errf(e, RT_EINVAL, "%s: '%s': the weight_map puts it in %s, which does "
                           "not hold it", st->path, v[i].name, v[i].file);
    if (!(st->t = malloc(sizeof *st->t * (size_t)(total ? total : 1))))
        return rt_errf(e, RT_EINTERNAL, "%s: out of memory", st->path);
    for (int s = 0; s < st->nshards; s++) {
        rt_safetensors *sh = &st->shards[s];
        memcpy(st->t + st->n, sh->t, sizeof *sh->t * (size_t)sh->n);
        st->n += sh->n;
        free(sh->t);                      /* its names now belong to st */
        sh->t = NULL;
        sh->n = 0;
    }
    if (st->n > 1)
        qsort(st->t, (size_t)st->n, sizeof *st->t, st_cmp_name);
    return 0;
}

static int st_open_index(rt_safetensors *st, const char *path, rt_err *e)
{
    memset(st, 0, sizeof *st);
    st->path = path;
    char *text;
    size_t len;
    st_mapping *v = NULL;
    int n = 0, rc = st_index_text(path, &text, &len, e);
    if (!rc) {
        const unsigned char *t = (const unsigned char *)text;
        st_parser P = {.p = t, .start = t, .end = t + len, .path = path, .name = "",
                       .part = "index", .e = e};
        rc = st_index(&P, &v, &n);
    }
    for (int i = 0; !rc && i < n; i++)
        rc = st_open_shard(st, v[i].file, e);
    if (!rc)
        rc = st_merge(st, v, n, e);
    for (int i = 0; i < n; i++) {
        free(v[i].name);
        free(v[i].file);
    }
    free(v);
    free(text);
    if (rc)
        rt_st_close(st);
    return rc;
}

int rt_st_open(rt_safetensors *st, const char *path, rt_err *e)
{
    size_t n = strlen(path);
    return n >= 5 && !strcmp(path + n - 5, ".json") ? st_open_index(st, path, e)
                                                    : st_open_file(st, path, e);
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
