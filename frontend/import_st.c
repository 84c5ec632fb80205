/* frontend/import_st.c: safetensors files from the importer's side:
 * writing one (llama2.c weights converted; the test tooling's
 * checkpoints), and opening a folder's (the GPT-2 import picks its names
 * by the tensors there).
 *
 * kiln has one safetensors reader, the runtime's (runtime/core/
 * rt_safetensors.c, rt_safetensors_index.c): importers open files with
 * it, so a file the importer takes is one the generated program loads. */
#include "import.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int dtype_size(const char *dtype)
{
    return !strcmp(dtype, "F32") ? 4 : !strcmp(dtype, "F8_E4M3") || !strcmp(dtype, "U8") ? 1 : 2;
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

/* ---- opening ------------------------------------------------------------- */

static void release_st(void *st)
{
    rt_st_close(st);
    free(st);
}

/* The runtime's line as it is: it names the file at fault (a shard, say),
 * which d->file need not be. */
static void say(Diags *d, const char *line)
{
    ARR_PUSH(d->a, d->lines, d->n, d->cap, arena_strdup(d->a, line));
}

const rt_safetensors *imp_st_open(Arena *a, const char *path, Diags *d, int *io)
{
    rt_safetensors *st = malloc(sizeof *st);
    if (!st)
        arena_oom(a);
    rt_err e = {0, ""};
    if (rt_st_open(st, path, &e)) {
        free(st);
        say(d, e.msg);
        *io |= e.code == RT_EIO;
        return NULL;
    }
    arena_hold(a, st, release_st);
    return st;
}

void imp_st_close(Arena *a, const rt_safetensors *st)
{
    if (st)
        arena_release(a, (void *)st);
}
