/* tests/unit/test_runtime_main.c: .npy reading and atomic writing
 * (rt_npy.c) and rt_main driven with a small hand-written model.
 *
 * .npy files are written byte by byte here, in a mkdtemp directory
 * removed at the end; rt_main's stdout and stderr are captured to files
 * there so that its one-line messages can be checked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "runtime/kiln_rt.h"
#include "tests/unit/testlib.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* Entries of dir other than . and .. */
static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *de; (de = readdir(d));)
        n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
    closedir(d);
    return n;
}

/* A .npy file: magic, version major.0, header length (u16 for 1, u32
 * otherwise), the header text as given, then dlen bytes of data. */
static const char *npy_file(const char *name, int major, const char *header, const void *data,
                            size_t dlen)
{
    size_t hl = strlen(header), pre = major == 1 ? 10 : 12;
    unsigned char *b = calloc(1, pre + hl + dlen);
    assert_non_null(b);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (unsigned char)major;
    for (size_t i = 8; i < pre; i++)
        b[i] = (unsigned char)(hl >> 8 * (i - 8));
    memcpy(b + pre, header, hl);
    if (data)
        memcpy(b + pre + hl, data, dlen);
    const char *p = tl_tmp_path(name);
    tl_put_file(p, b, pre + hl + dlen);
    free(b);
    return p;
}

#define HDR(descr, fortran, shape)                                                                 \
    "{'descr': '" descr "', 'fortran_order': " fortran ", 'shape': " shape ", }\n"

/* ---- .npy: round trips ---------------------------------------------------- */

static void roundtrip(int dtype, int rank)
{
    int64_t dims[6] = {2, 1, 3, 2, 1, 2}, count = 1;
    for (int i = 0; i < rank; i++)
        count *= dims[i];
    int32_t src[48];
    for (int i = 0; i < count; i++) {
        float f = (float)i * 0.5f - 3.0f;
        if (dtype == RT_F32)
            memcpy(&src[i], &f, 4);
        else
            src[i] = i * 1000 - 7;
    }
    const char *p = tl_tmp_path("rt.npy");
    rt_err e = {0};
    assert_int_equal(rt_npy_write(p, dtype, rank, dims, src, &e), 0);

    size_t n;
    unsigned char *raw = (unsigned char *)tl_get_file(p, &n);
    size_t hl = raw[8] | (size_t)raw[9] << 8;
    assert_memory_equal(raw, "\x93NUMPY\x01\x00", 8);
    assert_int_equal((10 + hl) % 64, 0);
    assert_int_equal(raw[10 + hl - 1], '\n');
    assert_int_equal(n, 10 + hl + (size_t)count * 4);
    free(raw);

    rt_array a;
    assert_int_equal(rt_npy_load(p, &a, &e), 0);
    assert_int_equal(a.dtype, dtype);
    assert_int_equal(a.rank, rank);
    assert_int_equal(a.count, count);
    assert_memory_equal(a.dims, dims, (size_t)rank * sizeof *dims);
    assert_memory_equal(a.data, src, (size_t)count * 4);
    free(a.data);
}

static void test_npy_roundtrip(void **state)
{
    (void)state;
    for (int rank = 0; rank <= 6; rank++) {
        roundtrip(RT_F32, rank);
        roundtrip(RT_I32, rank);
    }
}

/* Exactly the header numpy writes, so numpy reads ours and diffs are clean. */
static void test_npy_header_text(void **state)
{
    (void)state;
    static const struct {
        int rank;
        int64_t dims[2];
        const char *dict;
    } c[] = {
        {2, {3, 4}, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }"},
        {1, {5}, "{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }"},
        {0, {0}, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }"},
    };
    float zero[20] = {0};
    for (int i = 0; i < 3; i++) {
        rt_err e = {0};
        const char *p = tl_tmp_path("h.npy");
        assert_int_equal(rt_npy_write(p, RT_F32, c[i].rank, c[i].dims, zero, &e), 0);
        size_t n, dl = strlen(c[i].dict);
        char *raw = tl_get_file(p, &n);
        size_t end = 10 + ((unsigned char)raw[8] | (size_t)(unsigned char)raw[9] << 8);
        assert_int_equal(end % 64, 0);
        assert_true(end - 10 - dl - 1 < 64); /* the least padding that aligns */
        assert_memory_equal(raw + 10, c[i].dict, dl);
        for (size_t k = 10 + dl; k < end - 1; k++)
            assert_int_equal(raw[k], ' ');
        assert_int_equal(raw[end - 1], '\n');
        free(raw);
    }
}

static void test_npy_versions_and_layout(void **state)
{
    (void)state;
    int32_t d[6] = {1, -2, 3, -4, 5, -6};
    rt_array a;
    rt_err e = {0};
    assert_int_equal(
        rt_npy_load(npy_file("v2.npy", 2, HDR("<i4", "False", "(2, 3)"), d, 24), &a, &e), 0);
    assert_true(a.dtype == RT_I32 && a.rank == 2 && a.dims[0] == 2 && a.dims[1] == 3);
    assert_memory_equal(a.data, d, 24);
    free(a.data);
    assert_int_equal(rt_npy_load(npy_file("v3.npy", 3, HDR("<f4", "False", "(6,)"), d, 24), &a, &e),
                     0);
    assert_true(a.dtype == RT_F32 && a.rank == 1 && a.dims[0] == 6);
    free(a.data);
    /* keys in any order, double quotes, no trailing comma, odd spacing */
    const char *h = "{ \"shape\" :(3 ,2 ,) ,'fortran_order':False,\t'descr':'<i4'}  \n";
    assert_int_equal(rt_npy_load(npy_file("odd.npy", 1, h, d, 24), &a, &e), 0);
    assert_true(a.rank == 2 && a.dims[0] == 3 && a.dims[1] == 2 && a.count == 6);
    free(a.data);
    assert_int_equal(
        rt_npy_load(npy_file("empty.npy", 1, HDR("<f4", "False", "(0, 5)"), NULL, 0), &a, &e), 0);
    assert_true(a.count == 0 && a.rank == 2 && a.data != NULL);
    free(a.data);
    assert_int_equal(e.code, 0);
}

/* ---- .npy: malformed files -------------------------------------------------- */

static void npy_refused(const char *p, int code, const char *want)
{
    rt_array a;
    rt_err e = {0};
    int rc = rt_npy_load(p, &a, &e);
    if (rc != code)
        fail_msg("%s: status %d, not %d (\"%s\")", p, rc, code, e.msg);
    if (!strstr(e.msg, want) || strncmp(e.msg, p, strlen(p)))
        fail_msg("message \"%s\" lacks \"%s\"", e.msg, want);
    assert_null(a.data);
}

static const struct {
    const char *header;
    size_t dlen;
    const char *want;
} npy_bad[] = {
    {"[1, 2]\n", 0, "header: not a dict literal"},
    {"{'descr': '<f4', 'fortran_order': False}\n", 0, "header: missing key 'shape'"},
    {"{'descr': '<f4', 'shape': (1,)}\n", 4, "missing key 'fortran_order'"},
    {HDR("<f4", "True", "(2, 2)"), 16, "fortran_order True is not supported"},
    {HDR(">f4", "False", "(2,)"), 8, "dtype '>f4' is big-endian"},
    {HDR("<f8", "False", "(2,)"), 16, "dtype '<f8' is not supported; kiln reads '<f4' and '<i4'"},
    {HDR("|u1", "False", "(2,)"), 2, "dtype '|u1' is not supported"},
    {HDR("<f4", "False", "(2, 3)"), 20, "data is 20 bytes, shape [2,3] of <f4 needs 24"},
    {HDR("<f4", "False", "(2, 3)"), 28,
     "data runs past the 24 bytes that shape [2,3] of <f4 needs"},
    {HDR("<i4", "False", "()"), 0, "data is 0 bytes, shape [] of <i4 needs 4"},
    {HDR("<f4", "False", "(5)"), 20, "shape (N) is not a tuple"},
    {HDR("<f4", "False", "[5]"), 20, "shape must be a tuple"},
    {HDR("<f4", "False", "(1, 1, 1, 1, 1, 1, 1)"), 4, "shape has rank 7, kiln allows at most 6"},
    {HDR("<f4", "False", "(-1,)"), 4, "shape entries must be non-negative integers"},
    {HDR("<f4", "False", "(99999999999999999999,)"), 4, "shape entry too large"},
    {HDR("<f4", "False", "(4294967296, 4294967296)"), 4,
     "shape [4294967296,4294967296] is too large"},
    {HDR("<f4", "Maybe", "(1,)"), 4, "fortran_order must be True or False"},
    {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", 4,
     "key 'descr' given twice"},
    {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", 4,
     "header: unknown key 'x'"},
    {"{'descr': '<f4' 'fortran_order': False, 'shape': (1,)}", 4,
     "header: expected ',' or '}' at byte 16"},
    {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,),,}", 4, "expected a string"},
    {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} x", 4,
     "unexpected text after the dict"},
    {"{'descr' '<f4'}", 4, "expected ':'"},
    {"{'descr': '<f4", 4, "unterminated string"},
    {"{'des\\x63r': '<f4'}", 4, "escape or newline in a string"},
};

static void test_npy_malformed(void **state)
{
    (void)state;
    static const unsigned char zeros[64];
    for (size_t i = 0; i < sizeof npy_bad / sizeof *npy_bad; i++) {
        char name[32];
        snprintf(name, sizeof name, "bad%zu.npy", i);
        npy_refused(npy_file(name, 1, npy_bad[i].header, zeros, npy_bad[i].dlen), RT_EINVAL,
                    npy_bad[i].want);
    }
}

static void test_npy_bad_prefix(void **state)
{
    (void)state;
    const char *p = tl_tmp_path("magic.npy");
    tl_put_file(p, "\x93NUMPZ\x01\x00\x10\x00", 10);
    npy_refused(p, RT_EINVAL, "not a .npy file (bad magic)");
    tl_put_file(p, "\x93NU", 3);
    npy_refused(p, RT_EINVAL, "not a .npy file");
    tl_put_file(p, "\x93NUMPY\x04\x00\x10\x00", 10);
    npy_refused(p, RT_EINVAL, ".npy version 4.0 is not supported");
    tl_put_file(p, "\x93NUMPY\x01\x00\x40", 9);
    npy_refused(p, RT_EINVAL, "header: truncated");
    tl_put_file(p, "\x93NUMPY\x01\x00\x40\x00{'descr'", 17);
    npy_refused(p, RT_EINVAL, "header: truncated (64 bytes declared, 7 present)");
    tl_put_file(p, "\x93NUMPY\x02\x00\x00\x00\x00\x01", 12);
    npy_refused(p, RT_EINVAL, "header: length 16777216 exceeds the limit");
    npy_refused(tl_tmp_path("nonexistent.npy"), RT_EIO, "cannot open: No such file or directory");
}

/* From a pipe the size is known only at its end: a header declaring
 * 160 GB of data followed by 100 bytes is refused by what arrived (not
 * "out of memory" from allocating what the header declares);
 * the right amount loads. */
static void pipe_load(const char *shape, size_t bytes, int code, const char *want)
{
    char head[128];
    int n = snprintf(head, sizeof head, "{'descr': '<f4', 'fortran_order': False, "
                                        "'shape': %s, }", shape);
    assert_true(n > 0 && n < 117);
    memset(head + n, ' ', (size_t)(117 - n));
    head[117] = '\n';                    /* 10 + 118 bytes: a multiple of 64 */
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    char pre[10] = "\x93NUMPY\x01\x00\x76\x00", zero[256] = {0};
    assert_int_equal(write(fd[1], pre, 10), 10);
    assert_int_equal(write(fd[1], head, 118), 118);
    assert_int_equal(write(fd[1], zero, bytes), (ssize_t)bytes);  /* < the pipe's buffer */
    close(fd[1]);
    char path[32];
    snprintf(path, sizeof path, "/dev/fd/%d", fd[0]);
    rt_array a;
    rt_err e = {0, ""};
    assert_int_equal(rt_npy_load(path, &a, &e), code);
    if (want)
        assert_non_null(strstr(e.msg, want));
    else
        assert_int_equal(a.count, bytes / 4);
    free(a.data);
    close(fd[0]);
}

static void test_npy_pipe(void **state)
{
    (void)state;
    pipe_load("(40000000000,)", 100, RT_EINVAL, "data is 100 bytes, shape [40000000000]");
    pipe_load("(4, 8)", 100, RT_EINVAL, "data is 100 bytes, shape [4,8] of <f4 needs 128");
    pipe_load("(4, 8)", 132, RT_EINVAL, "data runs past the 128 bytes");
    pipe_load("(4, 8)", 128, 0, NULL);
}

static void test_npy_read_agree(void **state)
{
    (void)state;
    float d[15] = {0};
    rt_tensor_info t = {.name = "x", .dtype = RT_F32, .rank = 2, .dims = {3, 4}, .count = 12};
    float dst[12];
    rt_err e = {0};
    const char *p = npy_file("x35.npy", 1, HDR("<f4", "False", "(3, 5)"), d, 60);
    char want[512];
    snprintf(want, sizeof want, "%s: input 'x': shape [3,5] in the file, the model declares [3,4]",
             p);
    assert_int_equal(rt_npy_read(p, &t, dst, &e), RT_EINVAL);
    assert_string_equal(e.msg, want);

    e.code = 0;
    p = npy_file("i34.npy", 1, HDR("<i4", "False", "(3, 4)"), d, 48);
    snprintf(want, sizeof want, "%s: input 'x' is f32, the file holds i32", p);
    assert_int_equal(rt_npy_read(p, &t, dst, &e), RT_EINVAL);
    assert_string_equal(e.msg, want);

    e.code = 0;
    for (int i = 0; i < 12; i++)
        d[i] = (float)i - 0.5f;
    p = npy_file("x34.npy", 1, HDR("<f4", "False", "(3, 4)"), d, 48);
    assert_int_equal(rt_npy_read(p, &t, dst, &e), 0);
    assert_memory_equal(dst, d, 48);
}

/* ---- .npy: atomic writes -------------------------------------------------- */

static void expect_intact(const char *p, const char *text)
{
    size_t n;
    char *b = tl_get_file(p, &n);
    assert_string_equal(b, text);
    free(b);
}

static void test_npy_write_failures(void **state)
{
    (void)state;
    mkdir(tl_tmp_path("w"), 0777);
    const char *dir = tl_tmp_path("w");
    char target[256], sub[256];
    snprintf(target, sizeof target, "%s/out.npy", dir);
    snprintf(sub, sizeof sub, "%s/sub.npy", dir);
    tl_put_file(target, "keep", 4);
    mkdir(sub, 0777);
    int64_t dims[1] = {4096};
    float *big = calloc(4096, sizeof *big);
    rt_err e = {0};

    /* the path is a directory: refused, nothing left behind */
    assert_int_equal(rt_npy_write(sub, RT_F32, 1, dims, big, &e), RT_EIO);
    assert_non_null(strstr(e.msg, "cannot write: Is a directory"));
    assert_int_equal(count_entries(dir), 2);

    /* a file-size limit makes write() fail midway (root too): the old
     * file stays, the temporary is removed */
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 1000;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    setrlimit(RLIMIT_FSIZE, &lim);
    e.code = 0;
    int rc = rt_npy_write(target, RT_F32, 1, dims, big, &e);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, prev);
    assert_int_equal(rc, RT_EIO);
    assert_non_null(strstr(e.msg, "cannot write: File too large"));
    expect_intact(target, "keep");
    assert_int_equal(count_entries(dir), 2);

    /* a missing directory */
    e.code = 0;
    const char *nodir = tl_tmp_path("no/such/dir.npy");
    assert_int_equal(rt_npy_write(nodir, RT_F32, 1, dims, big, &e), RT_EIO);
    assert_non_null(strstr(e.msg, "cannot write: No such file or directory"));

    /* an unwritable directory (only meaningful when not root) */
    if (geteuid() != 0) {
        chmod(dir, 0555);
        e.code = 0;
        assert_int_equal(rt_npy_write(target, RT_F32, 1, dims, big, &e), RT_EIO);
        assert_non_null(strstr(e.msg, "Permission denied"));
        chmod(dir, 0755);
        expect_intact(target, "keep");
    }

    /* a bad shape is the caller's bug */
    e.code = 0;
    int64_t neg[1] = {-1};
    assert_int_equal(rt_npy_write(target, RT_F32, 1, neg, big, &e), RT_EINTERNAL);
    expect_intact(target, "keep");

    /* a symlink is written through, not replaced; so is a device */
    char link[256];
    snprintf(link, sizeof link, "%s/link.npy", dir);
    assert_int_equal(symlink(target, link), 0);
    e.code = 0;
    int64_t two[1] = {2};
    assert_int_equal(rt_npy_write(link, RT_F32, 1, two, big, &e), 0);
    struct stat lsb;
    assert_int_equal(lstat(link, &lsb), 0);
    assert_true(S_ISLNK(lsb.st_mode));
    rt_array a;
    assert_int_equal(rt_npy_load(target, &a, &e), 0);
    assert_int_equal(a.count, 2);
    free(a.data);
    assert_int_equal(unlink(link), 0);
    assert_int_equal(rt_npy_write("/dev/null", RT_F32, 1, dims, big, &e), 0);

    /* and a good write replaces the file */
    e.code = 0;
    assert_int_equal(rt_npy_write(target, RT_F32, 1, dims, big, &e), 0);
    struct stat sb;
    assert_int_equal(stat(target, &sb), 0);
    assert_int_equal(sb.st_size, 128 + 4096 * 4); /* a 61-byte dict pads to 128 */
    assert_int_equal(count_entries(dir), 2);
    free(big);
}

/* ---- rt_main with a hand-written model ------------------------------------- */

/* "add one": y = x + 1 for x f32[2,3]; s i32[2] = {6, -7}. Opening with a
 * weights path fails (the model has none); x[0] == 99 fails the run. */
typedef struct {
    int status;
    char msg[128];
} ao_handle;

static const rt_tensor_info ao_in[] = {
    {.name = "x", .dtype = RT_F32, .rank = 2, .dims = {2, 3}, .count = 6}};
static const rt_tensor_info ao_out[] = {
    {.name = "y", .dtype = RT_F32, .rank = 2, .dims = {2, 3}, .count = 6},
    {.name = "s", .dtype = RT_I32, .rank = 1, .dims = {2}, .count = 2},
};
static int ao_opened, ao_closed, ao_runs;

static void *ao_open(const char *w)
{
    ao_handle *h = calloc(1, sizeof *h);
    ao_opened++;
    if (h && w) {
        h->status = RT_EINVAL;
        snprintf(h->msg, sizeof h->msg, "%s: this model has no weights", w);
    }
    return h;
}

static int ao_status(const void *h)
{
    return ((const ao_handle *)h)->status;
}
static const char *ao_error(const void *h)
{
    return ((const ao_handle *)h)->status ? ((const ao_handle *)h)->msg : NULL;
}

static int ao_run(void *hv, const void *const *in, void *const *out)
{
    ao_handle *h = hv;
    const float *x = in[0];
    float *y = out[0];
    int32_t *s = out[1];
    ao_runs++;
    if (x[0] == 99.0f) {
        h->status = RT_EINVAL;
        snprintf(h->msg, sizeof h->msg, "id 99 is out of range [0, 10)");
        return RT_EINVAL;
    }
    for (int i = 0; i < 6; i++)
        y[i] = x[i] + 1.0f;
    s[0] = 6, s[1] = -7;
    return 0;
}

static void ao_close(void *h)
{
    ao_closed++;
    free(h);
}

static const rt_model ao_model = {
    .name = "add_one",
    .ninputs = 1,
    .noutputs = 2,
    .inputs = ao_in,
    .outputs = ao_out,
    .open = ao_open,
    .status = ao_status,
    .error = ao_error,
    .run = ao_run,
    .close = ao_close,
};

/* The same model with two inputs named so that NAME=FILE is ambiguous. */
static const rt_tensor_info eq_in[] = {
    {.name = "a", .dtype = RT_F32, .rank = 2, .dims = {2, 3}, .count = 6},
    {.name = "a=b", .dtype = RT_F32, .rank = 2, .dims = {2, 3}, .count = 6},
};
static const rt_model eq_model = {
    .name = "eq",
    .ninputs = 2,
    .noutputs = 2,
    .inputs = eq_in,
    .outputs = ao_out,
    .open = ao_open,
    .status = ao_status,
    .error = ao_error,
    .run = ao_run,
    .close = ao_close,
};
static const rt_model *cur_model = &ao_model;

typedef struct {
    int rc;
    size_t nout, nerr;
    char *out, *err;
} run_result;

/* Runs rt_main("prog", args..., NULL) with stdout and stderr in files. */
static run_result run_main(const char *arg, ...)
{
    char *argv[32] = {"prog"};
    int argc = 1;
    va_list ap;
    va_start(ap, arg);
    for (const char *a = arg; a && argc < 31; a = va_arg(ap, const char *))
        argv[argc++] = (char *)a;
    va_end(ap);
    fflush(stdout), fflush(stderr);
    int so = dup(1), se = dup(2);
    int fo = open(tl_tmp_path("stdout.txt"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int fe = open(tl_tmp_path("stderr.txt"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fo, 1), dup2(fe, 2);
    close(fo), close(fe);
    ao_opened = ao_closed = 0;
    run_result r = {.rc = rt_main(argc, argv, cur_model)};
    fflush(stdout), fflush(stderr);
    dup2(so, 1), dup2(se, 2);
    close(so), close(se);
    assert_int_equal(ao_opened, ao_closed); /* closed on every path */
    r.out = tl_get_file(tl_tmp_path("stdout.txt"), &r.nout);
    r.err = tl_get_file(tl_tmp_path("stderr.txt"), &r.nerr);
    return r;
}

static void run_free(run_result *r)
{
    free(r->out);
    free(r->err);
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* rt_main returned code with exactly one stderr line "prog: ...want...". */
static void expect_error(run_result r, int code, const char *want)
{
    if (r.rc != code || strncmp(r.err, "prog: ", 6) || !strstr(r.err, want) ||
        count_lines(r.err) != 1)
        fail_msg("status %d (want %d), stderr \"%s\" (want one line with \"%s\")", r.rc, code,
                 r.err, want);
    run_free(&r);
}

static const char *x_file(const char *name, float first)
{
    float x[6] = {first, 1, 2, 3, 4, 5};
    return npy_file(name, 1, HDR("<f4", "False", "(2, 3)"), x, sizeof x);
}

static void test_main_help(void **state)
{
    (void)state;
    run_result r = run_main("--help", NULL);
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "usage: prog "));
    assert_non_null(strstr(r.out, "model 'add_one'"));
    assert_non_null(strstr(r.out, "inputs:\n  x f32[2,3]\n"));
    assert_non_null(strstr(r.out, "outputs:\n  y f32[2,3]\n  s i32[2]\n"));
    assert_string_equal(r.err, "");
    assert_int_equal(ao_runs, 0);
    run_free(&r);
    r = run_main("-h", NULL);
    assert_int_equal(r.rc, 0);
    run_free(&r);
}

static void test_main_usage_errors(void **state)
{
    (void)state;
    const char *x = x_file("x.npy", 0);
    expect_error(run_main("--bogus", NULL), RT_EUSAGE, "unknown option '--bogus'");
    expect_error(run_main("stray", NULL), RT_EUSAGE, "unexpected argument 'stray'");
    expect_error(run_main("--input", NULL), RT_EUSAGE, "option '--input' needs a value");
    expect_error(run_main("--repeat", NULL), RT_EUSAGE, "option '--repeat' needs a value");
    expect_error(run_main("--input", "z=x.npy", NULL), RT_EUSAGE,
                 "--input: no input named 'z' (inputs: 'x')");
    expect_error(run_main("--output=q=o.npy", NULL), RT_EUSAGE,
                 "--output: no output named 'q' (outputs: 'y', 's')");
    expect_error(run_main("--input", "x.npy", NULL), RT_EUSAGE,
                 "--input: 'x.npy' is not NAME=FILE");
    expect_error(run_main("--input", "x=", NULL), RT_EUSAGE, "no file name after 'x='");
    expect_error(run_main("--input", "x=a.npy", "--input=x=b.npy", NULL), RT_EUSAGE,
                 "input 'x' given twice");
    expect_error(run_main("--repeat", "0", NULL), RT_EUSAGE,
                 "--repeat: '0' is not a whole number from 1 to");
    expect_error(run_main("--repeat=abc", NULL), RT_EUSAGE, "'abc' is not a whole number");
    expect_error(run_main("--threads", "-2", NULL), RT_EUSAGE, "--threads: '-2' is not");
    expect_error(run_main("--seed", "18446744073709551616", NULL), RT_EUSAGE,
                 "--seed: '18446744073709551616'");
    expect_error(run_main("--seed", "1", "--seed", "2", NULL), RT_EUSAGE,
                 "option '--seed' given twice");
    expect_error(run_main("--help=yes", NULL), RT_EUSAGE, "option '--help' takes no value");
    (void)x;
}

static void test_main_input_errors(void **state)
{
    (void)state;
    float d[12] = {0};
    char arg[300];
    snprintf(arg, sizeof arg, "x=%s",
             npy_file("x34.npy", 1, HDR("<f4", "False", "(3, 4)"), d, sizeof d));
    expect_error(run_main("--input", arg, NULL), RT_EINVAL,
                 "input 'x': shape [3,4] in the file, the model declares [2,3]");
    snprintf(arg, sizeof arg, "x=%s", tl_tmp_path("missing.npy"));
    expect_error(run_main("--input", arg, NULL), RT_EIO,
                 "missing.npy: cannot open: No such file or directory");
    expect_error(run_main("--weights", "w.safetensors", NULL), RT_EINVAL,
                 "prog: w.safetensors: this model has no weights");
    snprintf(arg, sizeof arg, "x=%s", x_file("x99.npy", 99));
    expect_error(run_main("--input", arg, NULL), RT_EINVAL, "prog: id 99 is out of range [0, 10)");
    /* x is seeded, but a failure is still one line: the notes come last */
    snprintf(arg, sizeof arg, "y=%s", tl_tmp_path("no/dir/y.npy"));
    expect_error(run_main("--output", arg, NULL), RT_EIO,
                 "no/dir/y.npy: cannot write: No such file or directory");
}

static void test_main_output(void **state)
{
    (void)state;
    char in[300], out[300];
    snprintf(in, sizeof in, "x=%s", x_file("x.npy", 0));
    snprintf(out, sizeof out, "--output=y=%s", tl_tmp_path("y.npy"));
    ao_runs = 0;
    run_result r = run_main("--input", in, out, "--repeat", "3", "--threads=1", NULL);
    assert_int_equal(r.rc, 0);
    assert_int_equal(ao_runs, 3);
    assert_non_null(strstr(r.err, "prog: 3 runs: median "));
    assert_non_null(strstr(r.err, " ms, min "));
    assert_int_equal(count_lines(r.err), 1);
    assert_string_equal(r.out, "s i32[2] min=-7 max=6 mean=-0.5 first=[6, -7]\n");
    run_free(&r);
    rt_array a;
    rt_err e = {0};
    assert_int_equal(rt_npy_load(tl_tmp_path("y.npy"), &a, &e), 0);
    float want[6] = {1, 2, 3, 4, 5, 6};
    assert_true(a.dtype == RT_F32 && a.rank == 2 && a.dims[0] == 2 && a.dims[1] == 3);
    assert_memory_equal(a.data, want, sizeof want);
    free(a.data);
}

static void test_main_seeded(void **state)
{
    (void)state;
    float x[6], y[6];
    rt_seed_input(&ao_in[0], 0, 5, x);
    double mn = 1e9, mx = -1e9, sum = 0;
    for (int i = 0; i < 6; i++) {
        y[i] = x[i] + 1.0f;
        mn = y[i] < mn ? y[i] : mn, mx = y[i] > mx ? y[i] : mx, sum += y[i];
    }
    char want[512];
    snprintf(want, sizeof want,
             "y f32[2,3] min=%.6g max=%.6g mean=%.6g first=[%.6g, %.6g, %.6g, %.6g]\n"
             "s i32[2] min=-7 max=6 mean=-0.5 first=[6, -7]\n",
             mn, mx, sum / 6, y[0], y[1], y[2], y[3]);
    run_result r = run_main("--seed", "5", NULL);
    assert_int_equal(r.rc, 0);
    assert_string_equal(r.err, "prog: input 'x' not given: seeded (seed 5)\n");
    assert_string_equal(r.out, want);
    run_free(&r);
    r = run_main(NULL);
    assert_string_equal(r.err, "prog: input 'x' not given: seeded (seed 1)\n");
    run_free(&r);
}

static void test_main_names_with_eq(void **state)
{
    (void)state;
    char arg[300];
    snprintf(arg, sizeof arg, "a=b=%s", x_file("x.npy", 0));
    cur_model = &eq_model;
    run_result r = run_main("--input", arg, NULL); /* the longest name wins */
    assert_int_equal(r.rc, 0);
    assert_string_equal(r.err, "prog: input 'a' not given: seeded (seed 1)\n");
    run_free(&r);
    snprintf(arg, sizeof arg, "a=%s", x_file("x.npy", 0));
    r = run_main("--input", arg, NULL);
    assert_int_equal(r.rc, 0);
    assert_string_equal(r.err, "prog: input 'a=b' not given: seeded (seed 1)\n");
    run_free(&r);
    expect_error(run_main("--input", "c=d=e", NULL), RT_EUSAGE,
                 "--input: no input named 'c' (inputs: 'a', 'a=b')");
    cur_model = &ao_model;
}

/* ---- --version and the weights a program remembers ---------------------- */

/* ao_model as generated from a model folder: ao_open's message names the
 * path it was handed. */
static char remembered[300];
static const rt_model folder_model = {
    .name = "add_one",
    .ninputs = 1,
    .noutputs = 2,
    .inputs = ao_in,
    .outputs = ao_out,
    .open = ao_open,
    .status = ao_status,
    .error = ao_error,
    .run = ao_run,
    .close = ao_close,
    .kiln_version = "9.8.7",
    .build = "cc -O1 -DTEST model.c",
    .weights_file = remembered,
    .tokenizer_file = "/nowhere/tokenizer.json",
};

static void test_main_version(void **state)
{
    (void)state;
    snprintf(remembered, sizeof remembered, "%s", tl_tmp_path("w.safetensors"));
    cur_model = &folder_model;
    run_result r = run_main("--version", "--bogus", NULL);   /* what follows is not read */
    assert_int_equal(r.rc, 0);
    char want[1024];
    snprintf(want, sizeof want, "model 'add_one', generated by kiln 9.8.7\n"
             "built with: cc -O1 -DTEST model.c\nweights: %s\n"
             "tokenizer: /nowhere/tokenizer.json\n", remembered);
    assert_string_equal(r.out, want);
    assert_string_equal(r.err, "");
    assert_int_equal(ao_opened, 0);
    run_free(&r);
    expect_error(run_main("--version=1", NULL), RT_EUSAGE, "option '--version' takes no value");
    cur_model = &ao_model;                  /* a model that says nothing of its build */
    r = run_main("--version", NULL);
    assert_int_equal(r.rc, 0);
    assert_string_equal(r.out, "model 'add_one', generated by kiln (version not known)\n"
                               "built with: (not known)\n");
    run_free(&r);
}

/* The remembered weights are opened unless --weights is given; gone, they
 * are one line naming them; --weights takes a folder as kiln does. */
static void test_main_remembered_weights(void **state)
{
    (void)state;
    char want[1024];
    const char *w = remembered;             /* tl_tmp_path's buffers are reused */
    snprintf(remembered, sizeof remembered, "%s", tl_tmp_path("w.safetensors"));
    tl_put_file(w, "x", 1);
    cur_model = &folder_model;
    snprintf(want, sizeof want, "prog: %s: this model has no weights", w);
    expect_error(run_main(NULL), RT_EINVAL, want);          /* open was handed them */
    expect_error(run_main("--weights", "other.st", NULL), RT_EINVAL,
                 "prog: other.st: this model has no weights");
    run_result r = run_main("--help", NULL);
    assert_non_null(strstr(r.out, "default: those it was built\n"));
    assert_non_null(strstr(r.out, w));
    run_free(&r);
    assert_int_equal(unlink(w), 0);                         /* the folder moved */
    snprintf(want, sizeof want, "prog: %s: cannot read the weights this program was built with "
             "(No such file or directory): was it moved or deleted? pass --weights "
             "FILE or DIR", w);
    expect_error(run_main(NULL), RT_EIO, want);
    assert_int_equal(ao_opened, 0);
    expect_error(run_main("--weights", "other.st", NULL), RT_EINVAL,
                 "prog: other.st: this model has no weights");

    /* a folder: its model.safetensors, or the index of its shards */
    char dir[300];
    snprintf(dir, sizeof dir, "%s", tl_tmp_path("folder"));
    assert_int_equal(mkdir(dir, 0777), 0);
    snprintf(want, sizeof want, "prog: %s/model.safetensors: this model has no weights", dir);
    expect_error(run_main("--weights", dir, NULL), RT_EINVAL, want);
    char index[400];
    snprintf(index, sizeof index, "%s/model.safetensors.index.json", dir);
    tl_put_file(index, "{}", 2);
    snprintf(want, sizeof want, "prog: %s: this model has no weights", index);
    expect_error(run_main("--weights", dir, NULL), RT_EINVAL, want);
    assert_int_equal(unlink(index), 0);
    assert_int_equal(rmdir(dir), 0);
    cur_model = &ao_model;
    r = run_main("--help", NULL);
    assert_non_null(strstr(r.out, "default: each weight's init\n"));
    run_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_npy_roundtrip),
        cmocka_unit_test(test_npy_header_text),
        cmocka_unit_test(test_npy_versions_and_layout),
        cmocka_unit_test(test_npy_malformed),
        cmocka_unit_test(test_npy_bad_prefix),
        cmocka_unit_test(test_npy_read_agree),
        cmocka_unit_test(test_npy_pipe),
        cmocka_unit_test(test_npy_write_failures),
        cmocka_unit_test(test_main_help),
        cmocka_unit_test(test_main_usage_errors),
        cmocka_unit_test(test_main_input_errors),
        cmocka_unit_test(test_main_output),
        cmocka_unit_test(test_main_seeded),
        cmocka_unit_test(test_main_names_with_eq),
        cmocka_unit_test(test_main_version),
        cmocka_unit_test(test_main_remembered_weights),
    };
    return cmocka_run_group_tests(tests, tl_tmp_setup, tl_tmp_teardown);
}
