/* runtime/gen/rt_json_at.c: JSON values kept in place, for readers whose
 * objects' keys come in any order (tokenizer.json): a value's start is
 * noted, and read later through a cursor of the same text (rt_tok.h
 * says how each reads and what it refuses). The cursor and the lexical
 * pieces are the core's (core/rt_json.c). */
#include "runtime/gen/rt_tok.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

rt_json rt_json_at(const rt_json *J, const unsigned char *at)
{
    rt_json c = *J;
    c.p = at;
    return c;
}

int rt_json_bad(const rt_json *J, const char *where, const char *fmt, ...)
{
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return rt_errf(J->e, RT_EINVAL, "%s: %s%s%s", J->path, where, *where ? ": " : "", what);
}

int rt_json_object(rt_json *J, const char *where, const char *const *keys, int nkeys,
                   const unsigned char **val)
{
    for (int i = 0; i < nkeys; i++)
        val[i] = NULL;
    if (rt_json_eat(J, '{'))
        return rt_json_bad(J, where, "not an object");
    for (int first = 1, more; (more = rt_json_next(J, '}', first)) != 0; first = 0) {
        char *k = NULL;
        int i = 0, rc = more < 0 ? RT_EINVAL : rt_json_string(J, &k);
        while (!rc && i < nkeys && strcmp(k, keys[i]))
            i++;
        if (!rc && i == nkeys)
            rc = rt_json_bad(J, where, "unknown key '%.80s' (refused rather than ignored)", k);
        else if (!rc && val[i])
            rc = rt_json_bad(J, where, "'%s' given twice", k);
        else if (!rc && rt_json_eat(J, ':'))
            rc = rt_json_syntax(J, "expected ':'");
        free(k);
        if (!rc) {
            rt_json_ws(J);
            val[i] = J->p;
            rc = rt_json_skip(J);
        }
        if (rc)
            return rc;
    }
    return 0;
}

int rt_json_object_at(const rt_json *J, const unsigned char *at, const char *where,
                      const char *const *keys, int nkeys, const unsigned char **val)
{
    rt_json c = rt_json_at(J, at);
    return rt_json_object(&c, where, keys, nkeys, val);
}

int rt_json_null_at(const rt_json *J, const unsigned char *at)
{
    rt_json c = rt_json_at(J, at);
    return !at || !rt_json_literal(&c, "null");
}

int rt_json_string_at(const rt_json *J, const unsigned char *at, char **s)
{
    rt_json c = rt_json_at(J, at);
    return rt_json_string(&c, s);
}

int rt_json_bool_at(const rt_json *J, const unsigned char *at, const char *where,
                    const char *key, int *v)
{
    rt_json c = rt_json_at(J, at);
    if (at && !rt_json_literal(&c, "true"))
        *v = 1;
    else if (at && !rt_json_literal(&c, "false"))
        *v = 0;
    else if (at)
        return rt_json_bad(J, where, "%s: not true or false", key);
    return 0;
}

int rt_json_false_at(const rt_json *J, const unsigned char *at, const char *where,
                     const char *key)
{
    int v = 0, rc = rt_json_bool_at(J, at, where, key, &v);
    return rc ? rc : v ? rt_json_bad(J, where, "%s: true is not supported", key) : 0;
}

int rt_json_items(const rt_json *J, const unsigned char *at, const char *where, int max,
                  const unsigned char **item, int *n)
{
    rt_json c = rt_json_at(J, at);
    int rc = !at || rt_json_eat(&c, '[') ? rt_json_bad(J, where, "not an array") : 0;
    *n = 0;
    for (int first = 1, more; !rc && (more = rt_json_next(&c, ']', first)) != 0; first = 0) {
        rt_json_ws(&c);
        if (more > 0 && *n < max)
            item[*n] = c.p;
        rc = more < 0 ? RT_EINVAL : rt_json_skip(&c);
        ++*n;
    }
    return rc;
}

int rt_json_types(const rt_json *J, const unsigned char **item, int n, const char *where,
                  char **type)
{
    int rc = 0;
    for (int i = 0; !rc && i < n; i++) {
        char w[96];
        snprintf(w, sizeof w, "%s[%d]", where, i);
        rc = rt_json_type_at(J, item[i], w, &type[i]);
    }
    return rc;
}

int rt_json_type_at(const rt_json *J, const unsigned char *at, const char *where, char **type)
{
    rt_json c = rt_json_at(J, at);
    *type = NULL;
    if (rt_json_eat(&c, '{'))
        return rt_json_bad(J, where, "not an object");
    for (int first = 1, more; (more = rt_json_next(&c, '}', first)) != 0; first = 0) {
        char *k = NULL;
        int rc = more < 0 ? RT_EINVAL : rt_json_string(&c, &k);
        if (!rc && rt_json_eat(&c, ':'))
            rc = rt_json_syntax(&c, "expected ':'");
        int is_type = !rc && !strcmp(k, "type");
        free(k);
        if (!rc)
            rc = is_type ? rt_json_string(&c, type) : rt_json_skip(&c);
        if (rc || is_type)
            return rc;
    }
    return rt_json_bad(J, where, "no type");
}
