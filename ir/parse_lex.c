/* ir/parse_lex.c: the lines and tokens of a .kir file (KIR.md, "Lines"
 * and "Tokens"), for the parser's other files (parse.h).
 *
 * Contract: the current line is [bol, eol), p the cursor in it; blank
 * lines are never current. Every token function skips blanks first, takes
 * its token only when the whole of it is there (a word is not the start
 * of a longer word), and leaves p alone otherwise. kir_fail records
 * "FILE: line N: message" for the current line and longjmps out. */
#include "parse.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

_Noreturn void kir_fail(Parser *ps, const char *fmt, ...)
{
    char msg[640];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    diag(ps->d, arena_printf(ps->a, "line %d", ps->lineno), "%s", msg);
    longjmp(ps->fail, 1);
}

/* ---- lines ------------------------------------------------------------- */

static int is_blank(int c) { return c == ' ' || c == '\t' || c == '\r'; }
static int is_word(int c) { return isalnum((unsigned char)c) || c == '_'; }
static int is_digit(int c) { return c >= '0' && c <= '9'; }

static void skip_blanks(Parser *ps)
{
    while (ps->p < ps->eol && is_blank(*ps->p))
        ps->p++;
}

int kir_at_end(Parser *ps)
{
    skip_blanks(ps);
    return ps->p == ps->eol;
}

void kir_next_line(Parser *ps)
{
    while (!ps->eof) {
        ps->lineno++;
        if (!*ps->next) {
            ps->eof = 1;
            ps->bol = ps->eol = ps->p = ps->next;
            ps->indent = 0;
            return;
        }
        ps->bol = ps->next;
        ps->eol = ps->bol + strcspn(ps->bol, "\n");
        ps->next = *ps->eol ? ps->eol + 1 : ps->eol;
        ps->indent = (int)strspn(ps->bol, " ");
        ps->p = ps->bol + ps->indent;
        if (!kir_at_end(ps))
            return;
    }
}

int kir_is_note(const Parser *ps) { return !ps->eof && *ps->p == '#'; }

const char *kir_note_text(Parser *ps)
{
    const char *s = ps->p + 1;
    s += s < ps->eol && *s == ' ';
    size_t n = (size_t)(ps->eol - s);
    char *t = arena_alloc(ps->a, n + 1);
    memcpy(t, s, n);
    return t;
}

void kir_indent(Parser *ps, int n)
{
    if (ps->indent != n)
        kir_fail(ps, "expected %d spaces of indentation, found %d", n, ps->indent);
}

/* ---- tokens ------------------------------------------------------------ */

const char *kir_found(Parser *ps)
{
    if (ps->eof)
        return "the end of the file";
    if (kir_at_end(ps))
        return "the end of the line";
    const char *q = ps->p + (*ps->p == '%' || *ps->p == '-');
    while (q < ps->eol && (is_word(*q) || *q == '.'))
        q++;
    size_t n = q > ps->p ? (size_t)(q - ps->p) : 1, cut = n > 24 ? 24 : n;
    char buf[24 * 4 + 8], *o = buf;
    *o++ = '\'';
    for (size_t i = 0; i < cut; i++) {
        unsigned char c = (unsigned char)ps->p[i];
        o += sprintf(o, c >= 0x20 && c < 0x7f ? "%c" : "\\x%02x", c);
    }
    strcpy(o, n > cut ? "...'" : "'");
    return arena_strdup(ps->a, buf);
}

int kir_peek(Parser *ps, char c)
{
    skip_blanks(ps);
    return ps->p < ps->eol && *ps->p == c;
}

int kir_accept(Parser *ps, const char *s)
{
    skip_blanks(ps);
    size_t n = strlen(s);
    if ((size_t)(ps->eol - ps->p) < n || memcmp(ps->p, s, n) != 0)
        return 0;
    if (is_word(s[n - 1]) && ps->p + n < ps->eol && is_word(ps->p[n]))
        return 0;
    ps->p += n;
    return 1;
}

void kir_end(Parser *ps)
{
    if (!kir_at_end(ps))
        kir_fail(ps, "expected the end of the line, found %s", kir_found(ps));
}

void kir_expect(Parser *ps, const char *s)
{
    if (!kir_accept(ps, s))
        kir_fail(ps, "expected '%s', found %s", s, kir_found(ps));
}

/* NAME = (LETTER | "_") {LETTER | DIGIT | "_"} */
char *kir_name(Parser *ps)
{
    skip_blanks(ps);
    const char *q = ps->p;
    if (q == ps->eol || !is_word(*q) || is_digit(*q))
        return NULL;
    while (q < ps->eol && is_word(*q))
        q++;
    size_t n = (size_t)(q - ps->p);
    char *s = arena_alloc(ps->a, n + 1);
    memcpy(s, ps->p, n);
    ps->p = q;
    return s;
}

int kir_ref(Parser *ps, char c)
{
    skip_blanks(ps);
    const char *q = ps->p + 1;
    if (ps->p == ps->eol || *ps->p != c || q == ps->eol || !is_digit(*q))
        return -1;
    int64_t id = 0;
    for (; q < ps->eol && is_digit(*q); q++)
        id = id < INT_MAX ? id * 10 + (*q - '0') : id;
    if (q < ps->eol && is_word(*q))
        return -1;
    ps->p = q;
    if (id > 1000000000)
        kir_fail(ps, "%c%lld: the id is too large", c, (long long)id);
    return (int)id;
}

static const char *digits(const char *q, const char *end)
{
    while (q < end && is_digit(*q))
        q++;
    return q;
}

/* The length of the NUMBER at p (KIR.md), 0 when none; *is_float when it
 * has a fraction or an exponent, or is inf or nan. */
static size_t number_len(const char *p, const char *end, int *is_float)
{
    const char *q = p + (p < end && *p == '-');
    *is_float = end - q >= 3 && (!memcmp(q, "inf", 3) || !memcmp(q, "nan", 3));
    if (*is_float)
        q += 3;
    else if (q < end && is_digit(*q))
        q = digits(q, end);
    else
        return 0;
    if (!*is_float && end - q >= 2 && q[0] == '.' && is_digit(q[1])) {
        q = digits(q + 1, end);
        *is_float = 1;
    }
    if (q < end && (*q == 'e' || *q == 'E')) {
        const char *r = q + 1 + (q + 1 < end && (q[1] == '+' || q[1] == '-'));
        if (r < end && is_digit(*r)) {
            q = digits(r, end);
            *is_float = 1;
        }
    }
    return q < end && is_word(*q) ? 0 : (size_t)(q - p);
}

int kir_number(Parser *ps, int64_t *i, double *f, int *is_float)
{
    skip_blanks(ps);
    size_t n = number_len(ps->p, ps->eol, is_float);
    if (!n)
        return 0;
    char buf[64];
    if (n >= sizeof buf)
        kir_fail(ps, "a number of %zu characters is too long", n);
    memcpy(buf, ps->p, n);
    buf[n] = 0;
    errno = 0;
    if (*is_float) {
        *f = strtod(buf, NULL);
        if (isinf(*f) && !strstr(buf, "inf"))
            kir_fail(ps, "%s is out of range", buf);
    } else {
        *i = strtoll(buf, NULL, 10);
        if (errno == ERANGE)
            kir_fail(ps, "%s is out of range for a 64-bit integer", buf);
        *f = strtod(buf, NULL);       /* as (double)*i, but "-0" keeps its sign */
    }
    ps->p += n;
    return 1;
}

int64_t kir_int(Parser *ps, const char *what)
{
    int64_t i;
    double f;
    int is_float;
    skip_blanks(ps);
    const char *at = ps->p;
    if (!kir_number(ps, &i, &f, &is_float) || is_float) {
        ps->p = at;
        kir_fail(ps, "expected %s, found %s", what, kir_found(ps));
    }
    return i;
}

double kir_float(Parser *ps, const char *what)
{
    int64_t i;
    double f;
    int is_float;
    if (!kir_number(ps, &i, &f, &is_float))
        kir_fail(ps, "expected %s, found %s", what, kir_found(ps));
    return f;
}

static int hex(int c)
{
    return is_digit(c) ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* One character of a STRING at *q (an escape or a byte). */
static int string_char(Parser *ps, const char **q)
{
    unsigned char c = (unsigned char)*(*q)++;
    if (c < 0x20 || c == 0x7f)
        kir_fail(ps, "a string holds byte 0x%02x: write it as \\x%02x", c, c);
    if (c != '\\')
        return c;
    c = *q < ps->eol ? (unsigned char)*(*q)++ : 0;
    if (c == '"' || c == '\\')
        return c;
    int hi = c == 'x' && ps->eol - *q >= 2 ? hex((*q)[0]) : -1, lo = hi < 0 ? -1 : hex((*q)[1]);
    if (lo < 0 || hi * 16 + lo == 0)
        kir_fail(ps, "a string may only escape \\\", \\\\ and \\xNN (not \\x00)");
    *q += 2;
    return hi * 16 + lo;
}

/* STRING = '"' {CHAR | '\"' | '\\' | "\x" HEX HEX} '"' */
char *kir_string(Parser *ps)
{
    kir_expect(ps, "\"");
    char *s = arena_alloc(ps->a, (size_t)(ps->eol - ps->p) + 1), *o = s;
    const char *q = ps->p;
    while (q < ps->eol && *q != '"')
        *o++ = (char)string_char(ps, &q);
    if (q == ps->eol)
        kir_fail(ps, "the string does not end on this line");
    ps->p = q + 1;
    return s;
}

/* type = ("f32" | "i32") "[" [INT {"," INT}] "]" */
void kir_type(Parser *ps, DType *t, int *rank, int64_t *dims)
{
    if (kir_accept(ps, "f32"))
        *t = DT_F32;
    else if (kir_accept(ps, "i32"))
        *t = DT_I32;
    else
        kir_fail(ps, "expected a type (f32[...] or i32[...]), found %s", kir_found(ps));
    kir_expect(ps, "[");
    int64_t count = 1;
    *rank = 0;
    if (kir_accept(ps, "]"))
        return;
    do {
        if (*rank == KILN_MAX_RANK)
            kir_fail(ps, "a type has at most %d dimensions", KILN_MAX_RANK);
        int64_t v = kir_int(ps, "a dimension");
        if (v < 1)
            kir_fail(ps, "dimension %lld is not >= 1", (long long)v);
        if (v > KILN_MAX_ELEMS / count)
            kir_fail(ps, "a type holds at most 2^40 elements");
        count *= v;
        dims[(*rank)++] = v;
    } while (kir_accept(ps, ","));
    kir_expect(ps, "]");
}
