/* frontend/json.c: the frontend's JSON vocabulary: paths, how a user's
 * string or a JSON value is shown in a message, and typed reads that
 * report at a JSON path.
 *
 * Contract: nothing here fails silently; every read that refuses a value
 * has written one line to cx->d and returns -1. A user's string reaches a
 * message only through fe_quote (or fe_got), so a 100 kB name or one with
 * control bytes never floods or garbles a terminal. */
#include "fe.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *fe_at(FeCx *cx, const char *base, size_t i)
{
    return arena_printf(cx->a, "%s[%zu]", base, i);
}

const char *fe_dot(FeCx *cx, const char *base, const char *key)
{
    return base ? arena_printf(cx->a, "%s.%s", base, key) : key;
}

/* The first len bytes of s with bytes below 0x20, 0x7f and '\' escaped. */
static char *escape(Arena *a, const char *s, size_t len)
{
    char *out = arena_alloc(a, 4 * len + 4), *q = out;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f)
            q += sprintf(q, "\\x%02x", c);
        else if (c == '\\')
            q += sprintf(q, "\\\\");
        else
            *q++ = (char)c;
    }
    *q = 0;
    return out;
}

const char *fe_escape(FeCx *cx, const char *s) { return escape(cx->a, s, strlen(s)); }

const char *fe_quote(FeCx *cx, const char *s)
{
    size_t len = strlen(s);
    if (len <= FE_QUOTE_MAX)
        return escape(cx->a, s, len);
    size_t cut = FE_QUOTE_MAX;
    while (cut > 0 && ((unsigned char)s[cut] & 0xc0) == 0x80)
        cut--;                        /* never split a UTF-8 character */
    return arena_printf(cx->a, "%s...", escape(cx->a, s, cut));
}

/* The shortest text that reads back as v, with ".0" when it would read
 * as an integer: a real 2.0 shows as "2.0", not "2". */
static const char *real_str(FeCx *cx, double v)
{
    char buf[48];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    if (!strpbrk(buf, ".e"))
        strcat(buf, ".0");
    return arena_strdup(cx->a, buf);
}

const char *fe_got(FeCx *cx, json_t *j)
{
    if (!j)
        return "nothing";
    switch (json_typeof(j)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING:
        return arena_printf(cx->a, "\"%s\"", fe_quote(cx, json_string_value(j)));
    case JSON_INTEGER:
        return arena_printf(cx->a, "%lld", (long long)json_integer_value(j));
    case JSON_REAL: return real_str(cx, json_real_value(j));
    case JSON_TRUE: return "true";
    case JSON_FALSE: return "false";
    case JSON_NULL: return "null";
    }
    KILN_BUG("json type %d", (int)json_typeof(j));
}

int fe_want(FeCx *cx, const char *where, json_t *j, const char *want)
{
    diag(cx->d, where, "%s, got %s", want, fe_got(cx, j));
    return -1;
}

json_t *fe_get(FeCx *cx, json_t *obj, const char *where, const char *key,
               int required)
{
    json_t *v = json_object_get(obj, key);
    if (!v && required)
        diag(cx->d, fe_dot(cx, where, key), "missing");
    return v;
}

static int listed(const char *key, const char *const *keys)
{
    for (int i = 0; keys[i]; i++)
        if (strcmp(keys[i], key) == 0)
            return 1;
    return 0;
}

/* jansson 2.14 iterates an object in insertion order, which for a parsed
 * file is file order. */
int fe_keys(FeCx *cx, json_t *obj, const char *where, const char *const *keys)
{
    int bad = 0;
    for (void *it = json_object_iter(obj); it; it = json_object_iter_next(obj, it)) {
        const char *key = json_object_iter_key(it);
        if (!listed(key, keys)) {
            diag(cx->d, where, "unknown key '%s'", fe_quote(cx, key));
            bad++;
        }
    }
    return bad;
}

int fe_int(FeCx *cx, json_t *j, const char *where, const char *subject,
           int64_t *v)
{
    if (!json_is_integer(j))
        return fe_want(cx, where, j, arena_printf(cx->a, "%s must be an integer", subject));
    *v = json_integer_value(j);
    return 0;
}

int fe_is_f32(json_t *j)
{
    return json_is_number(j) && fabs(json_number_value(j)) <= FLT_MAX;
}

int fe_f32(FeCx *cx, json_t *j, const char *where, const char *subject,
           double *v)
{
    if (!json_is_number(j))
        return fe_want(cx, where, j, arena_printf(cx->a, "%s must be a number", subject));
    if (!fe_is_f32(j)) {
        diag(cx->d, where, "%s %s does not fit in f32", subject, fe_got(cx, j));
        return -1;
    }
    *v = json_number_value(j);
    return 0;
}
