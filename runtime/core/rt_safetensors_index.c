/* runtime/core/rt_safetensors_index.c: an index of safetensors shards
 * (model.safetensors.index.json), read as one file (rt_safetensors.c).
 *
 * Contract (kiln_rt.h, rt_st_open_index): the index is strict JSON of at
 * most ST_MAX_INDEX bytes (as a header), read with rt_json.c's pieces:
 * every shard it names is a plain file name in the index's folder, opened
 * once and checked as a safetensors file; every tensor of a shard is
 * where the weight_map puts it, and every entry is found. st->t then
 * lists the tensors of all shards, sorted by name (rt_st_find). Messages:
 * "PATH: what is wrong" (the index's path), "PATH: 'NAME': what", or a
 * shard's own. */
#include "runtime/core/rt_core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ST_MAX_INDEX UINT64_C(100000000)

/* index  = '{' member (',' member)* '}'
 * member = "metadata" ':' value | "weight_map" ':' map   (each at most once)
 * map    = '{' (string ':' string (',' string ':' string)*)? '}'
 * value  = any JSON value, skipped (rt_json_skip bounds its nesting) */

typedef struct {
    char *name, *file;          /* a weight_map entry: tensor, shard file */
} st_mapping;

static int st_cmp_mapping(const void *a, const void *b)
{
    return strcmp(((const st_mapping *)a)->name, ((const st_mapping *)b)->name);
}

static int st_push_mapping(rt_json *J, st_mapping **v, int *n, int *cap, st_mapping x)
{
    if (*n == *cap) {
        int more = *cap ? 2 * *cap : 64;
        st_mapping *nv = *cap < INT32_MAX / 4 ? realloc(*v, sizeof *nv * (size_t)more) : NULL;
        if (!nv)
            return rt_json_oom(J);
        *v = nv;
        *cap = more;
    }
    (*v)[(*n)++] = x;
    return 0;
}

/* map: the entries into *v (malloc'd, sorted by name, names unique). */
static int st_weight_map(rt_json *J, st_mapping **v, int *n)
{
    int cap = 0;
    int rc = rt_json_eat(J, '{') ? rt_json_syntax(J, "weight_map is not an object") : 0;
    for (int first = 1, more; !rc && (more = rt_json_next(J, '}', first)) != 0; first = 0) {
        st_mapping x = {NULL, NULL};
        rc = more < 0 ? RT_EINVAL : rt_json_string(J, &x.name);
        if (!rc && rt_json_eat(J, ':'))
            rc = rt_json_syntax(J, "expected ':'");
        if (!rc)
            rc = rt_json_string(J, &x.file);
        if (!rc)
            rc = st_push_mapping(J, v, n, &cap, x);
        if (rc) {
            free(x.name);
            free(x.file);
        }
    }
    if (!rc && *n > 1)
        qsort(*v, (size_t)*n, sizeof **v, st_cmp_mapping);
    for (int i = 1; !rc && i < *n; i++)
        if (!strcmp((*v)[i - 1].name, (*v)[i].name))
            rc = rt_errf(J->e, RT_EINVAL, "%s: weight_map: '%s' given twice", J->path,
                         (*v)[i].name);
    return rc;
}

/* index: the weight_map's entries; metadata is skipped. */
static int st_index(rt_json *J, st_mapping **v, int *n)
{
    int seen = 0, rc = rt_json_eat(J, '{') ? rt_json_syntax(J, "not a JSON object") : 0;
    for (int first = 1, more; !rc && (more = rt_json_next(J, '}', first)) != 0; first = 0) {
        char *key = NULL;
        rc = more < 0 ? RT_EINVAL : rt_json_string(J, &key);
        int bit = rc ? 0 : !strcmp(key, "weight_map") ? 1 : !strcmp(key, "metadata") ? 2 : 0;
        if (!rc && !bit)
            rc = rt_errf(J->e, RT_EINVAL, "%s: unknown key '%s' (an index has metadata and "
                         "weight_map)", J->path, key);
        else if (!rc && seen & bit)
            rc = rt_errf(J->e, RT_EINVAL, "%s: '%s' given twice", J->path, key);
        else if (!rc && rt_json_eat(J, ':'))
            rc = rt_json_syntax(J, "expected ':'");
        free(key);
        seen |= bit;
        if (!rc)
            rc = bit == 1 ? st_weight_map(J, v, n) : rt_json_skip(J);
    }
    rt_json_ws(J);
    if (!rc && J->p != J->end)
        rc = rt_json_syntax(J, "unexpected text after the index object");
    if (!rc && !(seen & 1))
        rc = rt_errf(J->e, RT_EINVAL, "%s: no weight_map", J->path);
    return rc;
}

static int st_cmp_tensor(const void *a, const void *b)
{
    return strcmp(((const rt_st_tensor *)a)->name, ((const rt_st_tensor *)b)->name);
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
    int rc = rt_st_open_file(&st->shards[st->nshards], path, e);
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
        qsort(st->t, (size_t)st->n, sizeof *st->t, st_cmp_tensor);
    return 0;
}

int rt_st_open_index(rt_safetensors *st, const char *path, rt_err *e)
{
    memset(st, 0, sizeof *st);
    st->path = path;
    char *text;
    size_t len;
    st_mapping *v = NULL;
    int n = 0, rc = rt_read_file(path, ST_MAX_INDEX, &text, &len, e);
    const unsigned char *t = (const unsigned char *)text;
    size_t bad = rc ? len : rt_utf8_bad(t, len);
    if (bad < len)
        rc = rt_errf(e, RT_EINVAL, "%s: not valid UTF-8 at byte %zu", path, bad);
    if (!rc) {
        rt_json J = {.p = t, .start = t, .end = t + len, .path = path, .part = "index", .e = e};
        rc = st_index(&J, &v, &n);
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
