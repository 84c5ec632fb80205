/* runtime/core/rt_json.c: strict JSON, read in place by its callers.
 *
 * Contract (kiln_rt.h): the readers of JSON files (the safetensors header
 * and index in rt_safetensors.c, tokenizer.json in rt_tokenizer_hf.c)
 * walk their own grammar with these pieces, so every message can name
 * what is wrong in the reader's terms. A cursor rt_json holds the text,
 * which the caller has checked to be valid UTF-8 (rt_utf8_bad). Each
 * function skips leading whitespace, consumes what it reads and returns
 * 0, or sets the error and returns its status:
 *   "PATH: PART: invalid JSON at byte N: what" (PART omitted when NULL)
 * for syntax, RT_EINVAL; "PATH: out of memory reading the PART",
 * RT_EINTERNAL. Strict: no trailing commas, no leading zeros, no control
 * characters in strings, escapes checked, "\u0000" refused (results are
 * C strings); rt_json_skip bounds nesting at JSON_MAX_DEPTH. Also whole
 * files: rt_read_file reads one, rt_map_file maps one (the safetensors and
 * GGUF readers' mapping). */
#include "runtime/core/rt_core.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define JSON_MAX_DEPTH 32

int rt_json_syntax(rt_json *J, const char *what)
{
    return rt_errf(J->e, RT_EINVAL, "%s: %s%sinvalid JSON at byte %zu: %s", J->path,
                   J->part ? J->part : "", J->part ? ": " : "", (size_t)(J->p - J->start), what);
}

int rt_json_oom(rt_json *J)
{
    return rt_errf(J->e, RT_EINTERNAL, "%s: out of memory reading the %s", J->path,
                   J->part ? J->part : "file");
}

/* ---- lexical: whitespace, UTF-8, strings, integers ------------------- */

void rt_json_ws(rt_json *J)
{
    while (J->p < J->end && (*J->p == ' ' || *J->p == '\t' || *J->p == '\n' || *J->p == '\r'))
        J->p++;
}

int rt_json_eat(rt_json *J, int c)
{
    rt_json_ws(J);
    if (J->p < J->end && *J->p == c) {
        J->p++;
        return 0;
    }
    return 1;
}

int rt_json_literal(rt_json *J, const char *word)
{
    size_t n = strlen(word);
    rt_json_ws(J);
    if ((size_t)(J->end - J->p) < n || memcmp(J->p, word, n))
        return 1;
    J->p += n;
    return 0;
}

/* Unicode table 3-7: no overlongs, no surrogates, nothing above U+10FFFF. */
size_t rt_utf8_bad(const unsigned char *s, size_t n)
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

static int json_hex4(const unsigned char *p, unsigned *v)
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

char *rt_utf8_put(char *o, unsigned cp)
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

/* \uXXXX, or a surrogate pair \uD8xx\uDCxx, at J->p (after the 'u').
 * The string's closing quote is not a hex digit, so reads stop there. */
static int json_unicode(rt_json *J, char **o)
{
    unsigned cp, lo;
    if (json_hex4(J->p, &cp))
        return rt_json_syntax(J, "\\u needs four hex digits");
    J->p += 4;
    if (cp >= 0xDC00 && cp <= 0xDFFF)
        return rt_json_syntax(J, "lone low surrogate in \\u escape");
    if (cp >= 0xD800 && cp <= 0xDBFF) {
        if (J->p[0] != '\\' || J->p[1] != 'u' || json_hex4(J->p + 2, &lo) || lo < 0xDC00 ||
            lo > 0xDFFF)
            return rt_json_syntax(J, "lone high surrogate in \\u escape");
        J->p += 6;
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    }
    if (cp == 0)
        return rt_json_syntax(J, "\\u0000 is not allowed (names are C strings)");
    *o = rt_utf8_put(*o, cp);
    return 0;
}

/* One escape at J->p (the backslash). */
static int json_escape(rt_json *J, char **o)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    unsigned char c = J->p[1];
    J->p += 2;
    if (c == 'u')
        return json_unicode(J, o);
    const char *k = c ? strchr(from, c) : NULL;
    if (!k) {
        J->p -= 2;
        return rt_json_syntax(J, "invalid escape in a string");
    }
    *(*o)++ = to[k - from];
    return 0;
}

/* string = '"' (char | escape)* '"'. Escapes never lengthen text, so the
 * raw length bounds the decoded one. */
int rt_json_string(rt_json *J, char **out)
{
    *out = NULL;
    rt_json_ws(J);
    if (J->p >= J->end || *J->p != '"')
        return rt_json_syntax(J, "expected a string");
    const unsigned char *q = ++J->p;
    while (q < J->end && *q != '"')
        q += (*q == '\\' && q + 1 < J->end) ? 2 : 1;
    if (q >= J->end)
        return rt_json_syntax(J, "unterminated string");
    char *s = malloc((size_t)(q - J->p) + 1), *o = s;
    if (!s)
        return rt_json_oom(J);
    int rc = 0;
    while (!rc && J->p < q) {
        if (*J->p < 0x20)
            rc = rt_json_syntax(J, "control character in a string");
        else if (*J->p == '\\')
            rc = json_escape(J, &o);
        else
            *o++ = (char)*J->p++;
    }
    if (rc) {
        free(s);
        return rc;
    }
    J->p++;
    *o = 0;
    *out = s;
    return 0;
}

static int json_digit(const rt_json *J, const unsigned char *p)
{
    return p < J->end && *p >= '0' && *p <= '9';
}

/* Skips [0-9]+ at *p; 0 when there was at least one digit. */
static int json_digits(rt_json *J, const unsigned char **p, const char *what)
{
    if (!json_digit(J, *p)) {
        J->p = *p;
        return rt_json_syntax(J, what);
    }
    while (json_digit(J, *p))
        ++*p;
    return 0;
}

/* The fraction and exponent of a number at *p (after its integer part);
 * sets *frac when there was either. */
static int json_tail(rt_json *J, const unsigned char **p, int *frac)
{
    int rc = 0;
    if (*p < J->end && **p == '.') {
        *frac = 1, ++*p;
        rc = json_digits(J, p, "expected a digit after '.'");
    }
    if (!rc && *p < J->end && (**p == 'e' || **p == 'E')) {
        *frac = 1, ++*p;
        *p += *p < J->end && (**p == '+' || **p == '-');
        rc = json_digits(J, p, "expected a digit in the exponent");
    }
    return rc;
}

/* number = '-'? ('0' | [1-9][0-9]*) ('.' [0-9]+)? ([eE] [+-]? [0-9]+)? */
int rt_json_uint(rt_json *J, const char *what, int64_t *v)
{
    rt_json_ws(J);
    const unsigned char *b = J->p, *p = b;
    int neg = p < J->end && *p == '-', frac = 0, big = 0;
    int64_t x = 0;
    p += neg;
    if (!json_digit(J, p))
        return rt_json_syntax(J, "expected a number");
    if (*p == '0')
        p++; /* JSON: no leading zeros */
    else
        for (; json_digit(J, p); p++) {
            int d = *p - '0';
            big |= x > (INT64_MAX - d) / 10;
            x = big ? 0 : x * 10 + d;
        }
    int rc = json_tail(J, &p, &frac);
    if (rc)
        return rc;
    J->p = p;
    int len = p - b > 40 ? 40 : (int)(p - b);
    if (neg || frac)
        return rt_errf(J->e, RT_EINVAL, "%s: %s: %.*s is not a non-negative integer", J->path,
                       what, len, (const char *)b);
    if (big)
        return rt_errf(J->e, RT_EINVAL, "%s: %s: %.*s is too large", J->path, what, len,
                       (const char *)b);
    *v = x;
    return 0;
}

int rt_json_next(rt_json *J, int close, int first)
{
    if (!rt_json_eat(J, close))
        return 0;
    if (first || !rt_json_eat(J, ','))
        return 1;
    rt_json_syntax(J, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
    return -1;
}

/* ---- any value, skipped ------------------------------------------------ */

static int json_skip(rt_json *J, int depth);

/* number = '-'? [0-9]+ ('.' [0-9]+)? ([eE] [+-]? [0-9]+)? */
static int json_skip_number(rt_json *J)
{
    const unsigned char *p = J->p;
    int frac = 0;
    p += p < J->end && *p == '-';
    int rc = json_digits(J, &p, "expected a value");
    if (!rc)
        rc = json_tail(J, &p, &frac);
    if (!rc)
        J->p = p;
    return rc;
}

/* The items of an object or array, its opening bracket at J->p. */
static int json_skip_items(rt_json *J, int depth)
{
    int close = *J->p++ == '{' ? '}' : ']';
    for (int first = 1, more; (more = rt_json_next(J, close, first)) != 0; first = 0) {
        char *key = NULL;
        int rc = more < 0 ? RT_EINVAL : close == '}' ? rt_json_string(J, &key) : 0;
        free(key);
        if (!rc && close == '}' && rt_json_eat(J, ':'))
            rc = rt_json_syntax(J, "expected ':'");
        if (!rc)
            rc = json_skip(J, depth + 1);
        if (rc)
            return rc;
    }
    return 0;
}

static int json_skip(rt_json *J, int depth)
{
    static const char *const words[] = {"true", "false", "null"};
    rt_json_ws(J);
    if (depth > JSON_MAX_DEPTH)
        return rt_json_syntax(J, "nested too deeply");
    if (J->p < J->end && (*J->p == '{' || *J->p == '['))
        return json_skip_items(J, depth);
    if (J->p < J->end && *J->p == '"') {
        char *s;
        int rc = rt_json_string(J, &s);
        free(s);
        return rc;
    }
    for (int i = 0; i < 3; i++)
        if (!rt_json_literal(J, words[i]))
            return 0;
    return json_skip_number(J);
}

int rt_json_skip(rt_json *J) { return json_skip(J, 0); }

/* ---- a file read whole, or mapped -------------------------------------- */

int rt_map_file(const char *path, void **map, size_t *size, rt_err *e)
{
    *map = NULL;
    *size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 0;
    if (fd < 0)
        return rt_errf(e, RT_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0)
        rc = rt_errf(e, RT_EIO, "%s: cannot read: %s", path, strerror(errno));
    else if (!S_ISREG(sb.st_mode))
        rc = rt_errf(e, RT_EIO, "%s: cannot read: not a regular file", path);
    else if (sb.st_size > 0) {
        void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED)
            rc = rt_errf(e, RT_EIO, "%s: cannot map: %s", path, strerror(errno));
        else
            *map = m, *size = (size_t)sb.st_size;
    }
    close(fd);
    return rc;
}

int rt_read_file(const char *path, uint64_t max, char **data, size_t *len, rt_err *e)
{
    FILE *f = fopen(path, "rb");
    struct stat sb;
    int rc = 0;
    *data = NULL;
    *len = 0;
    if (!f || fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode))
        rc = rt_errf(e, RT_EIO, "%s: cannot read: %s", path,
                     f ? "not a regular file" : strerror(errno));
    else if ((uint64_t)sb.st_size > max)
        rc = rt_errf(e, RT_EINVAL, "%s: larger than the limit of %llu bytes", path,
                     (unsigned long long)max);
    else if (!(*data = malloc((size_t)sb.st_size + 1)))
        rc = rt_errf(e, RT_EINTERNAL, "%s: out of memory", path);
    else if (fread(*data, 1, (size_t)sb.st_size, f) != (size_t)sb.st_size)
        rc = rt_errf(e, RT_EIO, "%s: cannot read: %s", path, strerror(errno));
    if (f)
        fclose(f);
    if (rc) {
        free(*data);
        *data = NULL;
    } else {
        (*data)[sb.st_size] = 0;
        *len = (size_t)sb.st_size;
    }
    return rc;
}
