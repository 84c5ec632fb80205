/* runtime/core/rt_npy.c: NumPy .npy files, the inputs and outputs of a run.
 *
 * Reading (numpy.lib.format): magic "\x93NUMPY", version 1.0 (u16 header
 * length) or 2.0/3.0 (u32), then the header, a Python dict literal that
 * is parsed, not pattern-matched:
 *   dict  = '{' (item (',' item)* ','?)? '}'     item = key ':' value
 *   key   = 'descr' | 'fortran_order' | 'shape', each exactly once
 *   tuple = '(' ')' | '(' int ',' ')' | '(' int (',' int)+ ','? ')'
 * Strings are quoted with ' or ", without escapes; whitespace anywhere.
 * Only '<f4' and '<i4' in C order and rank <= 6 are read; the data must be
 * exactly elements x 4 bytes, short and long both refused. Data is read
 * with read(), so a pipe works as well as a file. Hosts are little-endian
 * like the data (x86-64, arm64).
 * Writing: version 1.0 with the header numpy writes, padded with spaces so
 * that magic + header is a multiple of 64 bytes and ending in '\n'. The
 * bytes go to a new temporary beside the target (created O_EXCL, mode
 * 0666 less the umask, like any new file), which rename() then puts in
 * place at once: on any failure the temporary is removed and a file
 * already at the path is left intact. A symlink, device or pipe at the
 * path is written through instead: replacing it would be wrong.
 * rt_write_file writes any bytes (a profile) the same way. */
#include "runtime/core/rt_core.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NPY_MAX_HEADER (1u << 20)

typedef struct {
    const char *p, *start, *end; /* header text */
    const char *path;
    rt_err *e;
} npy_parser;

/* ---- the header dict ------------------------------------------------ */

static int npy_bad(npy_parser *P, const char *what)
{
    return rt_errf(P->e, RT_EINVAL, "%s: header: %s at byte %zu", P->path, what,
                   (size_t)(P->p - P->start));
}

static void npy_ws(npy_parser *P)
{
    while (P->p < P->end && (*P->p == ' ' || *P->p == '\t' || *P->p == '\n' || *P->p == '\r'))
        P->p++;
}

/* Consumes c after optional whitespace; 0 when it was there. */
static int npy_eat(npy_parser *P, int c)
{
    npy_ws(P);
    if (P->p < P->end && *P->p == c) {
        P->p++;
        return 0;
    }
    return 1;
}

/* str = '\'' [^'\\\n]* '\'' | '"' [^"\\\n]* '"'; keeps at most cap-1
 * bytes, enough to tell every known key and dtype from the rest. */
static int npy_str(npy_parser *P, char *buf, size_t cap)
{
    npy_ws(P);
    if (P->p >= P->end || (*P->p != '\'' && *P->p != '"'))
        return npy_bad(P, "expected a string");
    char q = *P->p++;
    size_t n = 0;
    for (; P->p < P->end && *P->p != q; P->p++) {
        if (*P->p == '\\' || *P->p == '\n')
            return npy_bad(P, "escape or newline in a string");
        if (n + 1 < cap)
            buf[n++] = *P->p;
    }
    if (P->p >= P->end)
        return npy_bad(P, "unterminated string");
    P->p++;
    buf[n] = 0;
    return 0;
}

/* int = [0-9]+ */
static int npy_int(npy_parser *P, int64_t *v)
{
    npy_ws(P);
    if (P->p >= P->end || *P->p < '0' || *P->p > '9')
        return npy_bad(P, "shape entries must be non-negative integers");
    int64_t x = 0;
    for (; P->p < P->end && *P->p >= '0' && *P->p <= '9'; P->p++) {
        int d = *P->p - '0';
        if (x > (INT64_MAX - d) / 10)
            return npy_bad(P, "shape entry too large");
        x = x * 10 + d;
    }
    *v = x;
    return 0;
}

/* bool = 'True' | 'False' */
static int npy_bool(npy_parser *P, int *v)
{
    npy_ws(P);
    size_t left = (size_t)(P->end - P->p);
    if (left >= 4 && !memcmp(P->p, "True", 4))
        *v = 1, P->p += 4;
    else if (left >= 5 && !memcmp(P->p, "False", 5))
        *v = 0, P->p += 5;
    else
        return npy_bad(P, "fortran_order must be True or False");
    return 0;
}

/* tuple = '(' ')' | '(' int ',' ')' | '(' int (',' int)+ ','? ')' */
static int npy_tuple(npy_parser *P, rt_array *a)
{
    int n = 0, comma = 0;
    if (npy_eat(P, '('))
        return npy_bad(P, "shape must be a tuple");
    while (npy_eat(P, ')')) {
        int64_t x = 0;
        if (n && !comma)
            return npy_bad(P, "expected ',' or ')' in the shape");
        int rc = npy_int(P, &x);
        if (rc)
            return rc;
        if (n < RT_MAX_RANK)
            a->dims[n] = x;
        n++; /* header <= 1 MiB: no overflow */
        comma = !npy_eat(P, ',');
    }
    if (n == 1 && !comma)
        return npy_bad(P, "shape (N) is not a tuple, (N,) is");
    if (n > RT_MAX_RANK)
        return rt_errf(P->e, RT_EINVAL, "%s: shape has rank %d, kiln allows at most %d", P->path, n,
                       RT_MAX_RANK);
    a->rank = n;
    return 0;
}

enum { NPY_DESCR = 1, NPY_FORTRAN = 2, NPY_SHAPE = 4 };
static const char *const npy_keys[] = {"descr", "fortran_order", "shape"};

/* item = key ':' value */
static int npy_item(npy_parser *P, int *seen, char *descr, int *fortran, rt_array *a)
{
    char key[32];
    int rc = npy_str(P, key, sizeof key), bit = 0;
    if (rc)
        return rc;
    for (int i = 0; i < 3; i++)
        if (!strcmp(key, npy_keys[i]))
            bit = 1 << i;
    if (!bit)
        return rt_errf(P->e, RT_EINVAL, "%s: header: unknown key '%s'", P->path, key);
    if (*seen & bit)
        return rt_errf(P->e, RT_EINVAL, "%s: header: key '%s' given twice", P->path, key);
    *seen |= bit;
    if (npy_eat(P, ':'))
        return npy_bad(P, "expected ':'");
    return bit == NPY_DESCR     ? npy_str(P, descr, 16)
           : bit == NPY_FORTRAN ? npy_bool(P, fortran)
                                : npy_tuple(P, a);
}

/* What the keys say: dtype, C order, and an element count that fits. */
static int npy_meaning(npy_parser *P, const char *descr, int fortran, rt_array *a)
{
    char sh[160];
    if (fortran)
        return rt_errf(P->e, RT_EINVAL, "%s: fortran_order True is not supported; save in C order",
                       P->path);
    if (!strcmp(descr, "<f4") || !strcmp(descr, "<i4"))
        a->dtype = descr[1] == 'f' ? RT_F32 : RT_I32;
    else if (!strcmp(descr, ">f4") || !strcmp(descr, ">i4"))
        return rt_errf(P->e, RT_EINVAL, "%s: dtype '%s' is big-endian; kiln reads '<f4' and '<i4'",
                       P->path, descr);
    else
        return rt_errf(P->e, RT_EINVAL,
                       "%s: dtype '%s' is not supported; kiln reads '<f4' and '<i4'", P->path,
                       descr);
    a->count = 1;
    for (int i = 0; i < a->rank; i++) {
        if (a->dims[i] && a->count > INT64_MAX / 4 / a->dims[i])
            return rt_errf(P->e, RT_EINVAL, "%s: shape %s is too large", P->path,
                           rt_fmt_shape(sh, sizeof sh, a->rank, a->dims));
        a->count *= a->dims[i];
    }
    return 0;
}

static int npy_dict(npy_parser *P, rt_array *a)
{
    char descr[16] = "";
    int seen = 0, fortran = 0, comma = 1;
    if (npy_eat(P, '{'))
        return rt_errf(P->e, RT_EINVAL, "%s: header: not a dict literal", P->path);
    while (npy_eat(P, '}')) {
        if (!comma)
            return npy_bad(P, "expected ',' or '}'");
        int rc = npy_item(P, &seen, descr, &fortran, a);
        if (rc)
            return rc;
        comma = !npy_eat(P, ',');
    }
    npy_ws(P);
    if (P->p != P->end)
        return npy_bad(P, "unexpected text after the dict");
    for (int i = 0; i < 3; i++)
        if (!(seen & 1 << i))
            return rt_errf(P->e, RT_EINVAL, "%s: header: missing key '%s'", P->path, npy_keys[i]);
    return npy_meaning(P, descr, fortran, a);
}

/* ---- reading ----------------------------------------------------------- */

/* Reads until n bytes or end of file: the count read, or -1 (errno). */
static int64_t npy_read_full(int fd, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        size_t want = n - got > (1u << 30) ? (1u << 30) : n - got;
        ssize_t r = read(fd, (char *)buf + got, want);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (int64_t)got;
}

static int npy_open_file(const char *path, int *fd, rt_err *e)
{
    *fd = open(path, O_RDONLY | O_CLOEXEC);
    return *fd < 0 ? rt_errf(e, RT_EIO, "%s: cannot open: %s", path, strerror(errno)) : 0;
}

/* Magic, version and header length; then the dict. */
static int npy_head(int fd, const char *path, rt_array *a, rt_err *e)
{
    unsigned char pre[12];
    int64_t got = npy_read_full(fd, pre, 8);
    if (got < 0)
        return rt_errf(e, RT_EIO, "%s: cannot read: %s", path, strerror(errno));
    if (got < 8 || memcmp(pre, "\x93NUMPY", 6))
        return rt_errf(e, RT_EINVAL, "%s: not a .npy file (bad magic)", path);
    if (pre[6] < 1 || pre[6] > 3 || pre[7] != 0)
        return rt_errf(e, RT_EINVAL,
                       "%s: .npy version %d.%d is not supported (kiln reads 1.0, 2.0, 3.0)", path,
                       pre[6], pre[7]);
    size_t lbytes = pre[6] == 1 ? 2 : 4;
    if (npy_read_full(fd, pre + 8, lbytes) != (int64_t)lbytes)
        return rt_errf(e, RT_EINVAL, "%s: header: truncated", path);
    uint32_t hlen = pre[8] | (uint32_t)pre[9] << 8;
    if (lbytes == 4)
        hlen |= (uint32_t)pre[10] << 16 | (uint32_t)pre[11] << 24;
    if (hlen > NPY_MAX_HEADER)
        return rt_errf(e, RT_EINVAL, "%s: header: length %u exceeds the limit of %u bytes", path,
                       (unsigned)hlen, NPY_MAX_HEADER);
    char *h = malloc(hlen + 1);
    if (!h)
        return rt_errf(e, RT_EINTERNAL, "%s: out of memory", path);
    int rc = 0;
    got = npy_read_full(fd, h, hlen);
    if (got != (int64_t)hlen)
        rc = got < 0
                 ? rt_errf(e, RT_EIO, "%s: cannot read: %s", path, strerror(errno))
                 : rt_errf(e, RT_EINVAL, "%s: header: truncated (%u bytes declared, %lld present)",
                           path, (unsigned)hlen, (long long)got);
    npy_parser P = {h, h, h + hlen, path, e};
    if (!rc)
        rc = npy_dict(&P, a);
    free(h);
    return rc;
}

/* The message for got bytes of data where the shape needs another count. */
static int npy_bad_size(const char *path, const rt_array *a, uint64_t got, rt_err *e)
{
    char sh[160];
    size_t want = (size_t)a->count * 4;
    const char *dt = a->dtype == RT_F32 ? "<f4" : "<i4";
    rt_fmt_shape(sh, sizeof sh, a->rank, a->dims);
    if (got > want)
        return rt_errf(e, RT_EINVAL, "%s: data runs past the %zu bytes that shape %s of %s needs",
                       path, want, sh, dt);
    return rt_errf(e, RT_EINVAL, "%s: data is %llu bytes, shape %s of %s needs %zu", path,
                   (unsigned long long)got, sh, dt, want);
}

/* Exactly count x 4 bytes of data, then the end of the file. */
static int npy_data(int fd, const char *path, const rt_array *a, void *dst, rt_err *e)
{
    char extra;
    size_t want = (size_t)a->count * 4;
    int64_t got = npy_read_full(fd, dst, want);
    if (got >= 0 && (size_t)got == want)
        got = npy_read_full(fd, &extra, 1) == 0 ? (int64_t)want : -2;
    if (got == -1)
        return rt_errf(e, RT_EIO, "%s: cannot read: %s", path, strerror(errno));
    if (got == -2)
        return npy_bad_size(path, a, (uint64_t)want + 1, e);
    if ((size_t)got < want)
        return npy_bad_size(path, a, (uint64_t)got, e);
    return 0;
}

/* A regular file holds exactly the data its header declares: checked
 * before allocating, so that a small file cannot ask for a huge buffer.
 * Pipes are left to npy_data. */
static int npy_size_agrees(int fd, const char *path, const rt_array *a, rt_err *e)
{
    struct stat sb;
    off_t at = lseek(fd, 0, SEEK_CUR);
    if (at < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))
        return 0;
    uint64_t left = sb.st_size > at ? (uint64_t)(sb.st_size - at) : 0;
    return left == (uint64_t)a->count * 4 ? 0 : npy_bad_size(path, a, left, e);
}

/* The data of a pipe, whose size is known only at its end: read into a
 * buffer that doubles as data arrives (from 1 MiB), so that a header
 * declaring a huge shape costs memory only for the bytes really sent. */
static int npy_data_grow(int fd, const char *path, rt_array *a, rt_err *e)
{
    size_t want = (size_t)a->count * 4, have = 0, cap = 0;
    char *buf = NULL;
    for (;;) {
        if (have == cap) {
            size_t next = cap ? cap * 2 : (size_t)1 << 20;
            next = next > want + 1 ? want + 1 : next;  /* one byte more: data past the end */
            char *nb = realloc(buf, next);
            if (!nb) {
                free(buf);
                return rt_errf(e, RT_EINTERNAL, "%s: out of memory", path);
            }
            buf = nb, cap = next;
        }
        int64_t got = npy_read_full(fd, buf + have, cap - have);
        if (got < 0) {
            free(buf);
            return rt_errf(e, RT_EIO, "%s: cannot read: %s", path, strerror(errno));
        }
        have += (size_t)got;
        if (have < cap || have > want)
            break;                        /* the end, or past what the shape needs */
    }
    if (have != want) {
        free(buf);
        return npy_bad_size(path, a, have, e);
    }
    a->data = buf;
    return 0;
}

int rt_npy_load(const char *path, rt_array *out, rt_err *e)
{
    int fd, rc = npy_open_file(path, &fd, e);
    memset(out, 0, sizeof *out);
    if (rc)
        return rc;
    rc = npy_head(fd, path, out, e);
    struct stat sb;
    if (!rc && fstat(fd, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        rc = npy_data_grow(fd, path, out, e);
        close(fd);
        if (rc)
            memset(out, 0, sizeof *out);
        return rc;
    }
    if (!rc)
        rc = npy_size_agrees(fd, path, out, e);
    if (!rc && !(out->data = malloc(out->count ? (size_t)out->count * 4 : 1)))
        rc = rt_errf(e, RT_EINTERNAL, "%s: out of memory", path);
    if (!rc)
        rc = npy_data(fd, path, out, out->data, e);
    close(fd);
    if (rc) {
        free(out->data);
        memset(out, 0, sizeof *out);
    }
    return rc;
}

static int npy_agree(const char *path, const rt_array *a, const rt_tensor_info *t, rt_err *e)
{
    static const char *const dt[] = {"f32", "i32"};
    char x[160], y[160];
    if (a->dtype != t->dtype)
        return rt_errf(e, RT_EINVAL, "%s: input '%s' is %s, the file holds %s", path, t->name,
                       dt[t->dtype == RT_I32], dt[a->dtype]);
    int same = a->rank == t->rank;
    for (int i = 0; same && i < a->rank; i++)
        same = a->dims[i] == t->dims[i];
    if (!same)
        return rt_errf(e, RT_EINVAL, "%s: input '%s': shape %s in the file, the model declares %s",
                       path, t->name, rt_fmt_shape(x, sizeof x, a->rank, a->dims),
                       rt_fmt_shape(y, sizeof y, t->rank, t->dims));
    return 0;
}

int rt_npy_read(const char *path, const rt_tensor_info *t, void *dst, rt_err *e)
{
    rt_array a;
    memset(&a, 0, sizeof a);
    int fd, rc = npy_open_file(path, &fd, e);
    if (rc)
        return rc;
    rc = npy_head(fd, path, &a, e);
    if (!rc)
        rc = npy_agree(path, &a, t, e);
    if (!rc)
        rc = npy_data(fd, path, &a, dst, e);
    close(fd);
    return rc;
}

/* ---- writing ------------------------------------------------------------ */

/* Magic, version 1.0, length, and numpy's dict padded to 64 bytes in all:
 * the header's size in h (at least 320 bytes), or -1 for a bad shape. */
static int npy_header(int dtype, int rank, const int64_t *dims, char *h, int64_t *count)
{
    char d[256];
    if ((dtype != RT_F32 && dtype != RT_I32) || rank < 0 || rank > RT_MAX_RANK)
        return -1;
    int n = snprintf(d, sizeof d, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                     dtype == RT_F32 ? "<f4" : "<i4");
    *count = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0 || (dims[i] && *count > INT64_MAX / 4 / dims[i]))
            return -1;
        *count *= dims[i];
        n += snprintf(d + n, sizeof d - (size_t)n, "%s%lld", i ? ", " : "", (long long)dims[i]);
    }
    n += snprintf(d + n, sizeof d - (size_t)n, "%s), }", rank == 1 ? "," : "");
    int hlen = n + 1 + (64 - (10 + n + 1) % 64) % 64; /* dict, spaces, '\n' */
    memcpy(h, "\x93NUMPY\x01\x00", 8);
    h[8] = (char)(hlen & 0xff);
    h[9] = (char)(hlen >> 8);
    memcpy(h + 10, d, (size_t)n);
    memset(h + 10 + n, ' ', (size_t)(hlen - n - 1));
    h[10 + hlen - 1] = '\n';
    return 10 + hlen;
}

/* Writes all n bytes; 0, or -1 with errno. */
static int npy_write_full(int fd, const void *buf, size_t n)
{
    size_t done = 0;
    while (done < n) {
        size_t want = n - done > (1u << 30) ? (1u << 30) : n - done;
        ssize_t w = write(fd, (const char *)buf + done, want);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -1;
        done += (size_t)w;
    }
    return 0;
}

/* A new file PATH.tmpXXXXXXXX, created exclusively (never someone
 * else's file); the name is malloc'd into *tmp. */
static int npy_tmp(const char *path, char **tmp, int *fd, rt_err *e)
{
    size_t n = strlen(path) + 16;
    char *t = malloc(n);
    if (!t)
        return rt_errf(e, RT_EINTERNAL, "%s: out of memory", path);
    uint64_t s = (uint64_t)getpid() << 32 ^ (uint64_t)(rt_now() * 1e9) ^ (uint64_t)(uintptr_t)t;
    for (int i = 0; i < 100; i++) {
        snprintf(t, n, "%s.tmp%08llx", path, (unsigned long long)(rt_splitmix64(&s) >> 32));
        *fd = open(t, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (*fd >= 0) {
            *tmp = t;
            return 0;
        }
        if (errno != EEXIST)
            break;
    }
    int rc = rt_errf(e, RT_EIO, "%s: cannot write: %s", path, strerror(errno));
    free(t);
    return rc;
}

/* Where the bytes go: a new temporary (*tmp) when PATH is a plain file or
 * absent; otherwise PATH itself, so that a symlink, device or pipe
 * (--output y=/dev/stdout) is written through, never replaced. */
static int npy_target(const char *path, char **tmp, int *fd, rt_err *e)
{
    struct stat sb;
    *tmp = NULL;
    if (lstat(path, &sb) != 0 || S_ISREG(sb.st_mode))
        return npy_tmp(path, tmp, fd, e);
    *fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
    return *fd < 0 ? rt_errf(e, RT_EIO, "%s: cannot write: %s", path, strerror(errno)) : 0;
}

/* a, then b, to path: into a new temporary renamed over it, or written
 * through (npy_target); on failure the temporary is removed. */
static int npy_put(const char *path, const void *a, size_t na, const void *b, size_t nb,
                   rt_err *e)
{
    char *tmp = NULL;
    int fd = -1, rc = npy_target(path, &tmp, &fd, e);
    if (rc)
        return rc;
    if (npy_write_full(fd, a, na) || npy_write_full(fd, b, nb))
        rc = rt_errf(e, RT_EIO, "%s: cannot write: %s", path, strerror(errno));
    if (close(fd) != 0 && !rc)
        rc = rt_errf(e, RT_EIO, "%s: cannot write: %s", path, strerror(errno));
    if (!rc && tmp && rename(tmp, path) != 0)
        rc = rt_errf(e, RT_EIO, "%s: cannot write: %s", path, strerror(errno));
    if (rc && tmp)
        unlink(tmp);
    free(tmp);
    return rc;
}

int rt_npy_write(const char *path, int dtype, int rank, const int64_t *dims, const void *data,
                 rt_err *e)
{
    char h[320];
    int64_t count;
    int hlen = npy_header(dtype, rank, dims, h, &count);
    if (hlen < 0)
        return rt_errf(e, RT_EINTERNAL, "%s: cannot write: bad dtype or shape", path);
    return npy_put(path, h, (size_t)hlen, data, (size_t)count * 4, e);
}

int rt_write_file(const char *path, const void *data, size_t n, rt_err *e)
{
    return npy_put(path, data, n, NULL, 0, e);
}
