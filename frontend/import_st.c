/* frontend/import_st.c: safetensors files from the importer's side:
 * writing one (llama2.c weights converted; the test tooling's
 * checkpoints), and reading which tensors a checkpoint holds, from its
 * headers alone (the GPT-2 import picks its names by them).
 *
 * The reader only looks: the runtime's loader (runtime/core/rt_safetensors.c)
 * checks every byte of the same files before a model uses them. */
#include "fe.h"
#include "import.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ST_MAX_HEADER 100000000     /* bytes, as the runtime's reader */

static int dtype_size(const char *dtype)
{
    return !strcmp(dtype, "F32") ? 4 : 2;
}

static int64_t count(const ImpTensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++)
        n *= t->dims[i];
    return n;
}

/* ---- writing ------------------------------------------------------------- */

/* The header JSON, padded with spaces to a multiple of 8 bytes (so the
 * data starts aligned); malloc'd, its length in *len. */
static char *header(const ImpTensor *t, int n, size_t *len)
{
    char *text = NULL;
    FILE *f = open_memstream(&text, len);
    if (!f)
        return NULL;
    uint64_t off = 0;
    fputc('{', f);
    for (int i = 0; i < n; i++) {
        uint64_t bytes = (uint64_t)count(&t[i]) * (uint64_t)dtype_size(t[i].dtype);
        fputs(i ? "," : "", f);
        ig_put_string(f, t[i].name);
        fprintf(f, ":{\"dtype\":\"%s\",\"shape\":[", t[i].dtype);
        for (int d = 0; d < t[i].rank; d++)
            fprintf(f, "%s%lld", d ? "," : "", (long long)t[i].dims[d]);
        fprintf(f, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                (unsigned long long)(off + bytes));
        off += bytes;
    }
    fputc('}', f);
    while (ftell(f) % 8)
        fputc(' ', f);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

static int fail(char *why, size_t whylen, const char *path, const char *what)
{
    snprintf(why, whylen, "%s: %s", path, what);
    return -1;
}

/* Writes the file's bytes to f. */
static int put_all(FILE *f, const char *hdr, size_t hlen, const ImpTensor *t, int n)
{
    unsigned char len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    int ok = fwrite(len8, 1, 8, f) == 8 && fwrite(hdr, 1, hlen, f) == hlen;
    for (int i = 0; ok && i < n; i++) {
        size_t bytes = (size_t)count(&t[i]) * (size_t)dtype_size(t[i].dtype);
        ok = fwrite(t[i].data, 1, bytes, f) == bytes;
    }
    return ok ? 0 : -1;
}

int imp_st_write(const char *path, const ImpTensor *t, int n, char *why, size_t whylen)
{
    char real[PATH_MAX];
    struct stat st;
    const char *dest = path;
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode) && realpath(path, real))
        dest = real;                              /* a link: replace its target */
    if (stat(dest, &st) == 0 && !S_ISREG(st.st_mode))
        return fail(why, whylen, path, "not a regular file");
    size_t hlen;
    char *hdr = header(t, n, &hlen);
    if (!hdr)
        return fail(why, whylen, path, "out of memory");
    char tmp[PATH_MAX + 64];
    snprintf(tmp, sizeof tmp, "%s.kiln-tmp%ld", dest, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    int rc = f ? put_all(f, hdr, hlen, t, n) : -1;
    int e = errno;
    if (f && fclose(f) != 0 && !rc)
        rc = -1, e = errno;
    else if (!f && fd >= 0)
        close(fd);
    free(hdr);
    if (!rc && rename(tmp, dest) != 0)
        rc = -1, e = errno;
    if (rc) {
        unlink(tmp);
        return fail(why, whylen, path, strerror(e));
    }
    return 0;
}

/* ---- reading names ------------------------------------------------------- */

/* The JSON header of a safetensors file, malloc'd (len bytes); NULL after
 * reporting. */
static char *read_header(const char *path, size_t *len, Diags *d, int *io)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        diag(d, NULL, "cannot read: %s", strerror(errno));
        return *io = 1, NULL;
    }
    unsigned char len8[8];
    uint64_t n = 0;
    char *text = NULL;
    struct stat st;
    if (fread(len8, 1, 8, f) != 8 || fstat(fileno(f), &st) != 0) {
        diag(d, "header", "the file is too short for a safetensors header");
    } else {
        for (int i = 7; i >= 0; i--)
            n = n << 8 | len8[i];
        if (n > ST_MAX_HEADER || n > (uint64_t)st.st_size - 8)
            diag(d, "header", "length %llu is past the end of the file or the limit",
                 (unsigned long long)n);
        else if (!(text = malloc(n ? n : 1)) || fread(text, 1, n, f) != n) {
            diag(d, "header", "cannot read %llu bytes", (unsigned long long)n);
            free(text);
            text = NULL;
        }
    }
    fclose(f);
    *len = n;
    return text;
}

static void add_name(Arena *a, ImpNames *out, int *cap, const ImpTensor *t)
{
    if (out->n == *cap) {
        *cap = *cap ? 2 * *cap : 64;
        ImpTensor *nt = arena_alloc(a, sizeof *nt * (size_t)*cap);
        if (out->n)
            memcpy(nt, out->t, sizeof *nt * (size_t)out->n);
        out->t = nt;
    }
    out->t[out->n++] = *t;
}

/* One tensor's entry: {"dtype": ..., "shape": [...], ...}. */
static int entry(Arena *a, const char *name, json_t *j, ImpTensor *t, Diags *d)
{
    json_t *shape = json_object_get(j, "shape");
    const char *dtype = json_string_value(json_object_get(j, "dtype"));
    if (!json_is_array(shape) || !dtype || json_array_size(shape) > KILN_MAX_RANK) {
        diag(d, "header", "'%s' is not a tensor of rank <= %d with a dtype", name, KILN_MAX_RANK);
        return -1;
    }
    memset(t, 0, sizeof *t);
    t->name = arena_strdup(a, name);
    t->dtype = arena_strdup(a, dtype);
    t->rank = (int)json_array_size(shape);
    for (int i = 0; i < t->rank; i++)
        t->dims[i] = json_integer_value(json_array_get(shape, (size_t)i));
    return 0;
}

static void release_json(void *root) { json_decref(root); }

/* text (len bytes, malloc'd, taken over) parsed; held by the arena until
 * release_tree, so that running out of memory leaks neither. NULL after
 * reporting. */
static json_t *parse(Arena *a, char *text, size_t len, Diags *d)
{
    arena_hold(a, text, free);
    json_error_t err;
    json_t *root = fe_json_load(a, text, len, &err);
    arena_release(a, text);
    if (!root)
        diag(d, NULL, "line %d, column %d: %s", err.line, err.column, err.text);
    else
        arena_hold(a, root, release_json);
    return root;
}

static void release_tree(Arena *a, json_t *root)
{
    if (root)
        arena_release(a, root);
}

/* The tensors of one safetensors file, added to out. */
static int one_file(Arena *a, const char *path, ImpNames *out, int *cap, Diags *d, int *io)
{
    const char *keep = d->file;
    d->file = path;
    size_t len;
    char *text = read_header(path, &len, d, io);
    json_t *root = text ? parse(a, text, len, d) : NULL;
    int rc = json_is_object(root) ? 0 : -1;
    if (root && rc)
        diag(d, "header", "not a JSON object");
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        ImpTensor t;
        if (rc || !strcmp(key, "__metadata__"))
            continue;
        rc = entry(a, key, v, &t, d);
        if (!rc)
            add_name(a, out, cap, &t);
    }
    release_tree(a, root);
    d->file = keep;
    return rc;
}

/* The whole of a small file (an index), malloc'd; NULL after reporting. */
static char *slurp(const char *path, size_t *len, Diags *d, int *io)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    char *text = NULL;
    if (!f || fstat(fileno(f), &st) != 0) {
        diag(d, NULL, "cannot read: %s", strerror(errno));
        *io = 1;
    } else if (st.st_size > ST_MAX_HEADER) {
        diag(d, NULL, "larger than %d bytes", ST_MAX_HEADER);
    } else if (!(text = malloc((size_t)st.st_size + 1)) ||
               fread(text, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
        diag(d, NULL, "cannot read: %s", text ? strerror(errno) : "out of memory");
        free(text);
        text = NULL;
        *io = 1;
    }
    if (f)
        fclose(f);
    *len = text ? (size_t)st.st_size : 0;
    return text;
}

/* The distinct shard files of an index's weight_map, in the arena. */
static int shards(Arena *a, const char *path, const char ***files, int *nfiles, Diags *d,
                  int *io)
{
    const char *keep = d->file;
    d->file = path;
    size_t len;
    char *text = slurp(path, &len, d, io);
    json_t *root = text ? parse(a, text, len, d) : NULL;
    json_t *map = json_object_get(root, "weight_map");
    if (root && !json_is_object(map))
        diag(d, "weight_map", "missing, or not an object of tensor name: file name");
    int cap = 0, rc = json_is_object(map) ? 0 : -1;
    const char *key;
    json_t *v;
    json_object_foreach(map, key, v) {
        const char *file = json_string_value(v);
        int seen = 0;
        for (int i = 0; file && i < *nfiles; i++)
            seen |= !strcmp((*files)[i], file);
        if (file && !seen)
            ARR_PUSH(a, *files, *nfiles, cap, arena_strdup(a, file));
    }
    release_tree(a, root);
    d->file = keep;
    return rc;
}

static int by_name(const void *x, const void *y)
{
    return strcmp(((const ImpTensor *)x)->name, ((const ImpTensor *)y)->name);
}

static int ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), m = strlen(tail);
    return n >= m && !strcmp(s + n - m, tail);
}

int imp_st_names(Arena *a, const char *path, ImpNames *out, Diags *d, int *io)
{
    int cap = 0, rc = 0;
    memset(out, 0, sizeof *out);
    if (ends_with(path, ".json")) {
        const char **files = NULL;
        int nfiles = 0;
        rc = shards(a, path, &files, &nfiles, d, io);
        const char *slash = strrchr(path, '/');
        const char *dir = slash ? arena_printf(a, "%.*s", (int)(slash - path), path) : ".";
        for (int i = 0; !rc && i < nfiles; i++)
            rc = one_file(a, arena_printf(a, "%s/%s", dir, files[i]), out, &cap, d, io);
    } else {
        rc = one_file(a, path, out, &cap, d, io);
    }
    if (!rc && out->n > 1)
        qsort(out->t, (size_t)out->n, sizeof *out->t, by_name);
    return rc;
}

const ImpTensor *imp_st_find(const ImpNames *names, const char *name)
{
    ImpTensor key = {.name = name};
    return names->n ? bsearch(&key, names->t, (size_t)names->n, sizeof key, by_name) : NULL;
}
