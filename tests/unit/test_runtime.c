/* tests/unit/test_runtime.c: the runtime's generator, parallel-for,
 * safetensors reader and weight loader (rt_random.c, rt_parallel.c,
 * rt_safetensors.c, rt_weights.c, rt_err.c, rt_mem.c).
 *
 * Pinned numbers were computed independently (python3, from the formulas
 * in kiln_rt.h). Files are written byte by byte here, in a mkdtemp
 * directory removed at the end. .npy and rt_main: test_runtime_main.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "runtime/kiln_rt.h"
#include "tests/unit/testlib.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A safetensors file: u64 header length, the header, dlen bytes of data
 * (copied from data, or zeros). */
static const char *st_file(const char *name, const char *header, const void *data, size_t dlen)
{
    size_t hl = strlen(header);
    unsigned char *b = calloc(1, 8 + hl + dlen);
    assert_non_null(b);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)hl >> 8 * i);
    memcpy(b + 8, header, hl);
    if (data)
        memcpy(b + 8 + hl, data, dlen);
    const char *p = tl_tmp_path(name);
    tl_put_file(p, b, 8 + hl + dlen);
    free(b);
    return p;
}

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* ---- errors and memory ------------------------------------------------ */

static void test_errf_first_wins(void **state)
{
    (void)state;
    rt_err e = {0};
    assert_int_equal(rt_errf(&e, RT_EIO, "first %d\nline", 1), RT_EIO);
    assert_int_equal(rt_errf(&e, RT_EINVAL, "second"), RT_EINVAL);
    assert_int_equal(e.code, RT_EIO);
    assert_string_equal(e.msg, "first 1?line");
    char sh[160];
    int64_t d[6] = {8960, 1536, 1, 2, 3, 4};
    assert_string_equal(rt_fmt_shape(sh, sizeof sh, 2, d), "[8960,1536]");
    assert_string_equal(rt_fmt_shape(sh, sizeof sh, 0, d), "[]");
    assert_string_equal(rt_fmt_shape(sh, 6, 2, d), "[8960");
}

static void test_alloc(void **state)
{
    (void)state;
    unsigned char *p = rt_alloc(100), *z = rt_alloc(0);
    assert_non_null(p);
    assert_non_null(z);
    assert_int_equal((uintptr_t)p % 64, 0);
    assert_int_equal((uintptr_t)z % 64, 0);
    for (int i = 0; i < 128; i++) /* rounded up to whole lines */
        assert_int_equal(p[i], 0);
    assert_null(rt_alloc(SIZE_MAX - 10));
    assert_null(rt_alloc(SIZE_MAX / 2));
    rt_free(p);
    rt_free(z);
    rt_free(NULL);
}

/* Resident bytes of this process (/proc/self/statm's second field). */
static double resident(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long size = 0, res = 0;
    assert_non_null(f);
    assert_int_equal(fscanf(f, "%lu %lu", &size, &res), 2);
    fclose(f);
    return (double)res * 4096;
}

/* Blocks of 2 MB or more, and every rt_alloc_lazy block, are zero
 * without being touched: resident only as they are written; aligned to 2
 * MB; rt_free unmaps them (and free()s the others, freed among them). */
static void test_alloc_mapped(void **state)
{
    (void)state;
    enum { MB = 1 << 20 };
    double r0 = resident();
    unsigned char *big = rt_alloc(64 * (size_t)MB + 1), *lazy = rt_alloc_lazy(64 * (size_t)MB);
    unsigned char *small = rt_alloc_lazy(10), *other = rt_alloc(1000);
    assert_non_null(big), assert_non_null(lazy), assert_non_null(small), assert_non_null(other);
    assert_int_equal((uintptr_t)big % (2 * MB), 0);
    assert_int_equal((uintptr_t)lazy % (2 * MB), 0);
    assert_true(resident() - r0 < 8.0 * MB);             /* 128 MB asked for */
    for (size_t i = 0; i < 64 * (size_t)MB + 64; i += 4096)
        assert_int_equal(big[i], 0);
    assert_int_equal(big[64 * (size_t)MB + 63], 0);       /* the rounded tail */
    for (size_t i = 0; i < 64 * (size_t)MB; i += 4096 * 97)
        assert_int_equal(lazy[i], 0);
    for (int i = 0; i < 4096; i++)
        assert_int_equal(small[i], 0);
    double r1 = resident();
    lazy[0] = 1;                                          /* one 4 KB page, not 2 MB */
    lazy[32 * (size_t)MB] = 1;
    assert_true(resident() - r1 < 1.0 * MB);
    memset(big, 7, 64 * (size_t)MB);
    rt_free(other);
    rt_free(big);
    rt_free(small);
    rt_free(lazy);
    assert_null(rt_alloc_lazy(SIZE_MAX - 10));
    big = rt_alloc(4 * (size_t)MB);                       /* the list still works */
    assert_non_null(big);
    assert_int_equal(big[4 * (size_t)MB - 1], 0);
    rt_free(big);
}

/* ---- the documented generator ------------------------------------------ */

static void test_splitmix_pinned(void **state)
{
    (void)state;
    uint64_t s = 0;
    assert_true(rt_splitmix64(&s) == UINT64_C(0xe220a8397b1dcdaf));
    assert_true(rt_splitmix64(&s) == UINT64_C(0x6e789e6aa1b965f4));
    assert_true(rt_splitmix64(&s) == UINT64_C(0x06c45d188009454f));
    s = 1;
    assert_true(rt_splitmix64(&s) == UINT64_C(0x910a2dec89025cc1));
    assert_true(rt_splitmix64(&s) == UINT64_C(0xbeeb8da1658eec67));
    assert_true(s == 1 + 2 * UINT64_C(0x9E3779B97F4A7C15));
}

static void test_fill_random_pinned(void **state)
{
    (void)state;
    float v[4];
    rt_fill_random(v, 4, 42, 1.0);
    assert_int_equal(bits(v[0]), 0x3ef75cc8); /*  0.48312974 */
    assert_int_equal(bits(v[1]), 0xbf2e203a); /* -0.68017924 */
    assert_int_equal(bits(v[2]), 0xbee2b664);
    assert_int_equal(bits(v[3]), 0xbe9f8c7c);
    rt_fill_random(v, 4, 7, 0.02);
    assert_int_equal(bits(v[0]), 0xbb906705); /* -0.0044068121 */
    assert_int_equal(bits(v[1]), 0xbc9e56bd);
    assert_int_equal(bits(v[2]), 0x3c83523d);
    assert_int_equal(bits(v[3]), 0x3b59658f);
}

static void test_fill_random_range(void **state)
{
    (void)state;
    enum { N = 100000 };
    float *v = malloc(N * sizeof *v);
    assert_non_null(v);
    double scales[] = {1.0, 0.5, 3.0};
    for (int k = 0; k < 3; k++) {
        rt_fill_random(v, N, 9 + (uint64_t)k, scales[k]);
        double lo = 1e9, hi = -1e9, sum = 0;
        for (int i = 0; i < N; i++) {
            assert_true(v[i] >= -scales[k] && v[i] < scales[k]);
            lo = fmin(lo, v[i]), hi = fmax(hi, v[i]), sum += v[i];
        }
        /* uniform: the extremes are near the ends, the mean near 0 */
        assert_true(lo < -0.99 * scales[k] && hi > 0.99 * scales[k]);
        assert_true(fabs(sum / N) < 0.01 * scales[k]);
    }
    free(v);
}

static void test_seed_input(void **state)
{
    (void)state;
    rt_tensor_info f = {.name = "x", .dtype = RT_F32, .rank = 1, .dims = {3}, .count = 3};
    float v[3];
    rt_seed_input(&f, 0, 1, v); /* seed' = 1 + 1000003 */
    assert_int_equal(bits(v[0]), bits(-0.5344133377075195f));
    assert_int_equal(bits(v[1]), bits(-0.998879075050354f));
    assert_int_equal(bits(v[2]), bits(0.38082802295684814f));

    rt_tensor_info t = {
        .name = "ids", .dtype = RT_I32, .rank = 1, .dims = {6}, .count = 6, .hi = 1000};
    int32_t ids[6], want[6] = {94, 225, 990, 564, 378, 207};
    rt_seed_input(&t, 2, 5, ids); /* seed' = 5 + 3 * 1000003 */
    assert_memory_equal(ids, want, sizeof ids);

    int32_t big[4096];
    t.count = 4096, t.hi = 7;
    rt_seed_input(&t, 0, 3, big);
    int seen[7] = {0};
    for (int i = 0; i < 4096; i++) {
        assert_true(big[i] >= 0 && big[i] < 7);
        seen[big[i]] = 1;
    }
    for (int i = 0; i < 7; i++)
        assert_true(seen[i]);
    t.hi = 1;
    rt_seed_input(&t, 0, 3, big);
    for (int i = 0; i < 4096; i++)
        assert_int_equal(big[i], 0);
}

/* ---- parallel-for ------------------------------------------------------ */

typedef struct {
    atomic_int calls;
    atomic_int *hits;
    pthread_t caller;
    atomic_long by_caller;      /* iterations the calling thread ran */
    atomic_int late;            /* 1: another thread's first chunk sleeps */
    atomic_int empty;           /* calls with lo >= hi (cmocka asserts on one thread only) */
} par_rec;

static void par_fn(void *ctx, int64_t lo, int64_t hi)
{
    par_rec *r = ctx;
    atomic_fetch_add(&r->calls, 1);
    if (lo >= hi)
        atomic_fetch_add(&r->empty, 1);
    if (pthread_equal(pthread_self(), r->caller))
        atomic_fetch_add(&r->by_caller, (long)(hi - lo));
    else if (atomic_exchange(&r->late, 0)) {
        struct timespec ts = {0, 200000000};
        nanosleep(&ts, NULL);   /* a worker the system descheduled */
    }
    for (int64_t i = lo; i < hi; i++)
        atomic_fetch_add(&r->hits[i], 1);
}

/* rt_parallel_for(par_fn) over n: every iteration once, in n calls at
 * most; returns the iterations the caller ran. */
static long par_run(int64_t n, int late)
{
    par_rec r = {.hits = calloc((size_t)n + 1, sizeof(atomic_int)), .caller = pthread_self()};
    assert_non_null(r.hits);
    atomic_init(&r.calls, 0);
    atomic_init(&r.by_caller, 0);
    atomic_init(&r.late, late);
    atomic_init(&r.empty, 0);
    rt_parallel_for(par_fn, &r, n);
    assert_int_equal(atomic_load(&r.empty), 0);
    for (int64_t i = 0; i < n; i++)
        assert_int_equal(atomic_load(&r.hits[i]), 1);
    int calls = atomic_load(&r.calls);
    assert_true(n == 0 ? calls == 0 : calls >= 1 && calls <= n);
    free(r.hits);
    return atomic_load(&r.by_caller);
}

static void test_parallel_for(void **state)
{
    (void)state;
    int64_t ns[] = {0, 1, 2, 7, 1000, 100003};
    for (int nt = 1; nt <= 3; nt++) {
        rt_set_threads(nt);
        assert_int_equal(rt_get_threads(), nt);
        for (int k = 0; k < 6; k++) {
            long mine = par_run(ns[k], 0);
            if (nt == 1)
                assert_int_equal(mine, ns[k]);
        }
    }
    /* Loops back to back, as a decode step runs them, with teams of 1-3 on
     * 2 cores: threads come late, are descheduled holding chunks, find
     * shares of a loop half published; enough loops for the 16-bit tags
     * to wrap several times. */
    for (int i = 0; i < 300000; i++)
        par_run(1 + i % 5, 0);
    rt_set_threads(2);
    par_run(((int64_t)1 << 24) + 5, 0); /* more than a share holds: grouped */
}

typedef struct {
    _Alignas(64) atomic_long v;
} line_count;

static void count_fn(void *ctx, int64_t lo, int64_t hi)
{
    line_count *c = ctx;
    for (int64_t i = lo; i < hi; i++)
        atomic_fetch_add_explicit(&c[i].v, 1, memory_order_relaxed);
}

static atomic_int hog_on;

static void *hog(void *arg)
{
    (void)arg;
    while (atomic_load_explicit(&hog_on, memory_order_relaxed))
        ;
    return NULL;
}

/* Tiny loops back to back, more threads than cores (and a thread that
 * only spins): a thread whose share is not yet stored may steal from one
 * that is, threads are descheduled between reading a share and swapping
 * it, and the tags wrap. */
static void test_parallel_for_race(void **state)
{
    (void)state;
    pthread_t h;
    atomic_store(&hog_on, 1);
    assert_int_equal(pthread_create(&h, NULL, hog, NULL), 0);
    for (int nt = 2; nt <= 3; nt++) {
        rt_set_threads(nt);
        line_count c[4];
        long want[4] = {0};
        for (int k = 0; k < 4; k++)
            atomic_init(&c[k].v, 0);
        for (int i = 0; i < 200000; i++) {
            rt_parallel_for(count_fn, c, 2 + i % 3);
            for (int k = 0; k < 2 + i % 3; k++)
                want[k]++;
        }
        for (int k = 0; k < 4; k++)
            assert_int_equal(atomic_load(&c[k].v), want[k]);
    }
    atomic_store(&hog_on, 0);
    pthread_join(h, NULL);
}

/* A worker that sleeps in its first chunk holds the call up by that chunk
 * only: the caller takes the rest (3/4 of the loop at least; a static
 * split would give it half). */
static void test_parallel_for_late(void **state)
{
    (void)state;
    rt_set_threads(2);
    for (int i = 0; i < 3; i++)
        assert_true(par_run(1000, 1) >= 750);
}

static void inner_fn(void *ctx, int64_t lo, int64_t hi)
{
    atomic_int *hits = ctx;
    for (int64_t i = lo; i < hi; i++)
        atomic_fetch_add(&hits[i], 1);
}

static void outer_fn(void *ctx, int64_t lo, int64_t hi)
{
    atomic_int *hits = ctx;
    for (int64_t i = lo; i < hi; i++)
        rt_parallel_for(inner_fn, &hits[i * 16], 16);
}

/* A loop inside a loop's body runs on its thread, as it is. */
static void test_parallel_for_nested(void **state)
{
    (void)state;
    rt_set_threads(2);
    atomic_int hits[64 * 16];
    for (int i = 0; i < 64 * 16; i++)
        atomic_init(&hits[i], 0);
    rt_parallel_for(outer_fn, hits, 64);
    for (int i = 0; i < 64 * 16; i++)
        assert_int_equal(atomic_load(&hits[i]), 1);
}

typedef struct {
    pthread_t caller;
    atomic_int worker_calls, open;  /* calls on workers; of those, SIGINT or SIGTERM not blocked */
} mask_rec;

static void mask_fn(void *ctx, int64_t lo, int64_t hi)
{
    mask_rec *r = ctx;
    sigset_t cur;
    struct timespec ts = {0, 1000000};
    for (int64_t i = lo; i < hi; i++)
        nanosleep(&ts, NULL);          /* long enough that the workers take part */
    if (pthread_equal(pthread_self(), r->caller))
        return;
    atomic_fetch_add(&r->worker_calls, 1);
    if (pthread_sigmask(SIG_BLOCK, NULL, &cur) || !sigismember(&cur, SIGINT) ||
        !sigismember(&cur, SIGTERM))
        atomic_fetch_add(&r->open, 1);
}

/* The pool's workers block Ctrl-C and SIGTERM, so that such a signal
 * reaches the thread waiting for it (chat's prompt), never a worker; the
 * caller's own mask is as it was. */
static void test_parallel_for_signals(void **state)
{
    (void)state;
    rt_set_threads(3);
    mask_rec r = {.caller = pthread_self()};
    atomic_init(&r.worker_calls, 0);
    atomic_init(&r.open, 0);
    rt_parallel_for(mask_fn, &r, 64);
    assert_true(atomic_load(&r.worker_calls) > 0);
    assert_int_equal(atomic_load(&r.open), 0);
    sigset_t cur;
    assert_int_equal(pthread_sigmask(SIG_BLOCK, NULL, &cur), 0);
    assert_false(sigismember(&cur, SIGINT));
    rt_set_threads(2);
}

static void test_now(void **state)
{
    (void)state;
    double a = rt_now();
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
    double b = rt_now();
    assert_true(b - a >= 0.0015 && b - a < 1.0);
}

/* ---- safetensors: a good file ------------------------------------------- */

/* Offsets out of header order; a metadata object; escapes in a name. */
static const char good_header[] =
    "{\"h\": {\"dtype\": \"F16\", \"shape\": [8], \"data_offsets\": [16, 32]},\n"
    " \"__metadata__\": {\"format\": \"pt\", \"k\\n\": \"v\\u00e9\"},\n"
    " \"a\" : {\"shape\":[2,2],\"data_offsets\":[0,16],\"dtype\":\"F32\"},"
    " \"b\": {\"dtype\": \"BF16\", \"shape\": [3], \"data_offsets\": [32, 38]},"
    " \"n\\u00e9\\\"\\ud83d\\ude00\": {\"dtype\": \"F16\", \"shape\": [1], \"data_offsets\": [38, "
    "40]},"
    " \"z\": {\"dtype\": \"F32\", \"shape\": [0, 3], \"data_offsets\": [40, 40]},"
    " \"s\": {\"dtype\": \"F32\", \"shape\": [], \"data_offsets\": [40, 44]}}   ";

static void good_data(unsigned char d[44])
{
    float a[4] = {1.5f, -2.25f, 0.0f, 3e38f}, s = 42.0f;
    uint16_t h[8] = {0x3C00, 0x0001, 0x03FF, 0x8000, 0x7C00, 0xFC00, 0x7BFF, 0xC000};
    uint16_t b[3] = {0x3F80, 0xC040, 0x7F80}, nan16 = 0x7E00;
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < 4; k++)
            d[4 * i + k] = (unsigned char)(bits(a[i]) >> 8 * k);
    for (int i = 0; i < 8; i++)
        d[16 + 2 * i] = (unsigned char)h[i], d[17 + 2 * i] = (unsigned char)(h[i] >> 8);
    for (int i = 0; i < 3; i++)
        d[32 + 2 * i] = (unsigned char)b[i], d[33 + 2 * i] = (unsigned char)(b[i] >> 8);
    d[38] = (unsigned char)nan16, d[39] = (unsigned char)(nan16 >> 8);
    for (int k = 0; k < 4; k++)
        d[40 + k] = (unsigned char)(bits(s) >> 8 * k);
}

static void test_st_good(void **state)
{
    (void)state;
    unsigned char d[44];
    good_data(d);
    const char *p = st_file("good.safetensors", good_header, d, sizeof d);
    rt_safetensors st;
    rt_err e = {0};
    assert_int_equal(rt_st_open(&st, p, &e), 0);
    assert_int_equal(e.code, 0);
    assert_int_equal(st.n, 6);
    assert_null(rt_st_find(&st, "__metadata__"));
    assert_null(rt_st_find(&st, "missing"));

    const rt_st_tensor *a = rt_st_find(&st, "a");
    assert_non_null(a);
    assert_true(a->dtype == RT_ST_F32 && a->rank == 2 && a->dims[0] == 2 && a->dims[1] == 2);
    assert_int_equal(a->count, 4);
    const rt_st_tensor *z = rt_st_find(&st, "z"), *s = rt_st_find(&st, "s");
    assert_true(z && z->count == 0 && z->nbytes == 0 && z->rank == 2);
    assert_true(s && s->count == 1 && s->rank == 0);

    /* widened exactly, as the loader widens every dtype */
    static const rt_tensor_info t[6] = {
        {.name = "a", .rank = 2, .dims = {2, 2}, .count = 4},
        {.name = "h", .rank = 1, .dims = {8}, .count = 8},
        {.name = "b", .rank = 1, .dims = {3}, .count = 3},
        {.name = "n\xc3\xa9\"\xf0\x9f\x98\x80", .rank = 1, .dims = {1}, .count = 1},
        {.name = "z", .rank = 2, .dims = {0, 3}, .count = 0},
        {.name = "s", .rank = 0, .count = 1},
    };
    float *w[6];
    assert_int_equal(rt_load_weights(p, t, 6, (void **)w, &e), 0);
    float *fa = w[0], *fh = w[1], *fb = w[2];
    assert_true(fa[0] == 1.5f && fa[1] == -2.25f && fa[2] == 0.0f && fa[3] == 3e38f);
    assert_true(fh[0] == 1.0f);
    assert_true(fh[1] == 0x1p-24f);            /* smallest subnormal */
    assert_true(fh[2] == 1023 * 0x1p-24f);     /* largest subnormal */
    assert_int_equal(bits(fh[3]), 0x80000000); /* -0 */
    assert_true(isinf(fh[4]) && fh[4] > 0);
    assert_true(isinf(fh[5]) && fh[5] < 0);
    assert_true(fh[6] == 65504.0f);
    assert_true(fh[7] == -2.0f);
    assert_true(fb[0] == 1.0f && fb[1] == -3.0f && isinf(fb[2]));
    assert_true(isnan(w[3][0]));
    assert_true(w[5][0] == 42.0f);
    for (int i = 0; i < 6; i++)
        rt_free(w[i]);
    rt_st_close(&st);
    assert_null(st.map);
    assert_int_equal(st.n, 0);
}

static void test_st_empty(void **state)
{
    (void)state;
    rt_safetensors st;
    rt_err e = {0};
    assert_int_equal(rt_st_open(&st, st_file("empty.st", "{}", NULL, 0), &e), 0);
    assert_int_equal(st.n, 0);
    assert_null(rt_st_find(&st, "a"));
    rt_st_close(&st);
}

/* ---- safetensors: every malformed case ------------------------------------ */

/* Opens a file expected to fail with code and a message holding want;
 * every message starts with the path. */
static void st_refused(const char *p, int code, const char *want)
{
    rt_safetensors st;
    rt_err e = {0};
    int rc = rt_st_open(&st, p, &e);
    if (rc != code)
        fail_msg("%s: status %d, not %d (\"%s\")", p, rc, code, e.msg);
    assert_int_equal(e.code, code);
    assert_true(strncmp(e.msg, p, strlen(p)) == 0);
    if (!strstr(e.msg, want))
        fail_msg("message \"%s\" lacks \"%s\"", e.msg, want);
    assert_null(strchr(e.msg, '\n'));
    assert_null(st.map);
    assert_null(st.t);
}

#define T(name, dt, shape, offs)                                                                   \
    "\"" name "\": {\"dtype\": \"" dt "\", \"shape\": " shape ", \"data_offsets\": " offs "}"

static const struct {
    const char *header;
    size_t dlen;
    const char *want;
} st_bad[] = {
    {"{\"a\": {\"dtype\": \"F32\" \"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
     "header: invalid JSON at byte 22"},
    {"{" T("a", "F32", "[1]", "[0, 4]") ",}", 4, "invalid JSON"},
    {"{" T("a", "F32", "[1]", "[0, 4]"), 4, "invalid JSON"},
    {"{" T("a", "F32", "[01]", "[0, 4]") "}", 4, "invalid JSON"},
    {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1,], \"data_offsets\": [0, 4]}}", 4, "invalid JSON"},
    {"{" T("a", "F32", "[1]", "[0, 4]") "} x", 4, "unexpected text after the header object"},
    {"[1, 2]", 0, "header: not a JSON object"},
    {"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[", 0, "not a JSON object"},
    {"\"a\"", 0, "not a JSON object"},
    {"{\"a\": [1]}", 0, "'a': not an object"},
    {"{" T("a", "F32", "[1]", "[0, 4]") ", " T("a", "F32", "[1]", "[4, 8]") "}", 8,
     "'a': tensor name given twice"},
    {"{" T("a", "F64", "[1]", "[0, 8]") "}", 8, "'a': dtype 'F64' is not supported"},
    {"{" T("a", "I32", "[1]", "[0, 4]") "}", 4, "dtype 'I32' is not supported"},
    {"{" T("a", "F32", "[2]", "[0, 4]") "}", 4,
     "'a': shape [2] of F32 needs 8 bytes, data_offsets [0, 4] hold 4"},
    {"{" T("a", "F16", "[3]", "[0, 4]") "}", 4, "needs 6 bytes"},
    {"{" T("a", "F32", "[2]", "[0, 8]") "}", 4,
     "'a': data_offsets [0, 8] are not inside the data section of 4 bytes"},
    {"{" T("a", "F32", "[0]", "[8, 4]") "}", 8, "'a': data_offsets [8, 4] end before they begin"},
    {"{" T("a", "F32", "[2]", "[0, 8]") ", " T("b", "F32", "[2]", "[4, 12]") "}", 12,
     "'b': data_offsets [4, 12] overlap 'a'"},
    {"{" T("a", "F32", "[1]", "[0, 4]") ", " T("b", "F32", "[1]", "[8, 12]") "}", 12,
     "'b': bytes [4, 8) of the data section before it belong to no tensor"},
    {"{" T("a", "F32", "[1]", "[4, 8]") "}", 8, "'a': bytes [0, 4)"},
    {"{" T("a", "F32", "[1]", "[0, 4]") "}", 8, "header: 4 bytes after the last tensor"},
    {"{}", 3, "3 bytes after the last tensor"},
    {"{" T("a", "F32", "[1,1,1,1,1,1,1]", "[0, 4]") "}", 4,
     "'a': shape has rank 7, kiln allows at most 6"},
    {"{" T("a", "F32", "[-1]", "[0, 4]") "}", 4, "'a': shape: -1 is not a non-negative integer"},
    {"{" T("a", "F32", "[1.0]", "[0, 4]") "}", 4, "shape: 1.0 is not a non-negative integer"},
    {"{" T("a", "F32", "[1e2]", "[0, 4]") "}", 4, "shape: 1e2 is not"},
    {"{" T("a", "F32", "[99999999999999999999]", "[0, 4]") "}", 4, "is too large"},
    {"{" T("a", "F32", "[4294967296, 4294967296]", "[0, 4]") "}", 4,
     "'a': shape [4294967296,4294967296] is too large"},
    {"{" T("a", "F32", "[1]", "[0, 4, 8]") "}", 4, "data_offsets has 3 entries"},
    {"{" T("a", "F32", "[1]", "[0, -4]") "}", 4, "data_offsets: -4 is not"},
    {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1]}}", 4, "'a': missing 'data_offsets'"},
    {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
     "'a': key 'shape' given twice"},
    {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4], \"x\": 1}}", 4,
     "'a': unknown key 'x'"},
    {"{\"__metadata__\": {\"k\": 1}}", 0, "__metadata__: the value of 'k' is not a string"},
    {"{\"__metadata__\": [], \"x\": 1}", 0, "__metadata__ is not an object"},
    {"{\"__metadata__\": {}, \"__metadata__\": {}}", 0, "__metadata__ given twice"},
    {"{\"\\ud800x\": 1}", 0, "lone high surrogate"},
    {"{\"\\udc00\": 1}", 0, "lone low surrogate"},
    {"{\"\\u00\": 1}", 0, "four hex digits"},
    {"{\"a\\q\": 1}", 0, "invalid escape"},
    {"{\"a\\u0000\": 1}", 0, "\\u0000 is not allowed"},
    {"{\"a\tb\": 1}", 0, "control character in a string"},
    {"{\"a", 0, "unterminated string"},
    {"{\"\xc3\x28\": 1}", 0, "header: not valid UTF-8 at byte 2"},
    {"{\"\xed\xa0\x80\": 1}", 0, "not valid UTF-8"},
    {"{\"\xe0\x80\xaf\": 1}", 0, "not valid UTF-8"},
};

static void test_st_malformed(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof st_bad / sizeof *st_bad; i++) {
        char name[32];
        snprintf(name, sizeof name, "bad%zu.st", i);
        st_refused(st_file(name, st_bad[i].header, NULL, st_bad[i].dlen), RT_EINVAL,
                   st_bad[i].want);
    }
}

static void test_st_bad_lengths(void **state)
{
    (void)state;
    unsigned char b[40] = {0};
    const char *p = tl_tmp_path("short.st");
    tl_put_file(p, b, 5);
    st_refused(p, RT_EINVAL, "header: the file has 5 bytes, too few for the 8-byte header length");
    tl_put_file(p, b, 0);
    st_refused(p, RT_EINVAL, "the file has 0 bytes");

    b[0] = 100; /* 100 > 40 - 8 */
    tl_put_file(p, b, sizeof b);
    st_refused(p, RT_EINVAL, "header: length 100 runs past the end of the file (40 bytes)");
    b[0] = 33;
    tl_put_file(p, b, sizeof b);
    st_refused(p, RT_EINVAL, "length 33 runs past");

    memset(b, 0, 8);
    b[7] = 0x10; /* 2^60 */
    tl_put_file(p, b, sizeof b);
    st_refused(p, RT_EINVAL,
               "header: length 1152921504606846976 exceeds the limit of 100000000 bytes");
    b[7] = 0, b[3] = 0x06; /* 100663296 > 100000000 */
    tl_put_file(p, b, sizeof b);
    st_refused(p, RT_EINVAL, "exceeds the limit");

    memset(b, 0, 8); /* empty header: not an object */
    tl_put_file(p, b, 8);
    st_refused(p, RT_EINVAL, "not a JSON object");
}

static void test_st_io_errors(void **state)
{
    (void)state;
    st_refused(tl_tmp_path("nonexistent.st"), RT_EIO, "cannot open: No such file or directory");
    st_refused(tl_tmp_dir(), RT_EIO, "not a regular file");
}

/* ---- rt_load_weights ------------------------------------------------------ */

static const float w_data[3] = {0.25f, -1.0f, 8.0f};

/* w1 [2,2] (in the file; its init must lose), w2 [3] fill, w3 [5] random,
 * w4 [3] data; all with inits. */
static rt_tensor_info wi[] = {
    {.name = "w1", .rank = 2, .dims = {2, 2}, .count = 4, .init = RT_INIT_FILL, .fill = 7.0},
    {.name = "w2", .rank = 1, .dims = {3}, .count = 3, .init = RT_INIT_FILL, .fill = 0.5},
    {.name = "w3",
     .rank = 1,
     .dims = {5},
     .count = 5,
     .init = RT_INIT_RANDOM,
     .seed = 42,
     .scale = 0.1},
    {.name = "w4", .rank = 1, .dims = {3}, .count = 3, .init = RT_INIT_DATA, .data = w_data},
};

static const char *w1_file(const char *name, const char *extra)
{
    char h[512];
    snprintf(h, sizeof h, "{" T("w1", "F32", "[2,2]", "[0, 16]") "%s}", extra);
    float d[5] = {1, 2, 3, 4, 5};
    return st_file(name, h, d, extra[0] ? 20 : 16);
}

static void free_all(float **w, int n)
{
    for (int i = 0; i < n; i++)
        rt_free(w[i]);
}

static void test_weights_load(void **state)
{
    (void)state;
    float *w[4];
    rt_err e = {0};
    assert_int_equal(rt_load_weights(w1_file("w.st", ""), wi, 4, (void **)w, &e), 0);
    for (int i = 0; i < 4; i++)
        assert_int_equal((uintptr_t)w[i] % 64, 0);
    assert_true(w[0][0] == 1 && w[0][1] == 2 && w[0][2] == 3 && w[0][3] == 4); /* the file wins */
    assert_true(w[1][0] == 0.5f && w[1][1] == 0.5f && w[1][2] == 0.5f);
    float r[5];
    rt_fill_random(r, 5, 42, 0.1);
    assert_memory_equal(w[2], r, sizeof r);
    assert_memory_equal(w[3], w_data, sizeof w_data);
    free_all(w, 4);

    assert_int_equal(rt_load_weights(NULL, wi, 4, (void **)w, &e), 0); /* inits only */
    assert_true(w[0][0] == 7.0f && w[0][3] == 7.0f);
    free_all(w, 4);
}

/* Fails with want in the message, and leaves every dst[i] NULL. */
static void weights_refused(const char *path, rt_tensor_info *t, int n, const char *want)
{
    float *w[4] = {(float *)1, (float *)1, (float *)1, (float *)1};
    rt_err e = {0};
    assert_int_equal(rt_load_weights(path, t, n, (void **)w, &e), RT_EINVAL);
    if (!strstr(e.msg, want))
        fail_msg("message \"%s\" lacks \"%s\"", e.msg, want);
    for (int i = 0; i < n; i++)
        assert_null(w[i]);
}

static void test_weights_errors(void **state)
{
    (void)state;
    char want[512];
    const char *p = w1_file("w.st", "");
    rt_tensor_info t[4];
    memcpy(t, wi, sizeof t);
    t[3].init = RT_INIT_NONE;
    snprintf(want, sizeof want, "%s: weight 'w4' is not in the file and has no init", p);
    weights_refused(p, t, 4, want);
    weights_refused(NULL, t, 4, "weight 'w4' has no init; give --weights");

    memcpy(t, wi, sizeof t);
    t[0].rank = 2, t[0].dims[0] = 1, t[0].dims[1] = 4;
    snprintf(want, sizeof want, "%s: 'w1': shape [2,2] in the file, the model declares [1,4]", p);
    weights_refused(p, t, 4, want);

    p = w1_file("extra.st", ", " T("foo", "F32", "[1]", "[16, 20]"));
    snprintf(want, sizeof want, "%s: 'foo': not a weight of the model", p);
    weights_refused(p, wi, 4, want);

    p = st_file("bad.st", "{", NULL, 0); /* the file's own error */
    weights_refused(p, wi, 4, "invalid JSON");
    float *w[1];
    rt_err e = {0};
    assert_int_equal(rt_load_weights(tl_tmp_path("none.st"), wi, 1, (void **)w, &e), RT_EIO);
    assert_null(w[0]);
}

static void test_weights_16bit(void **state)
{
    (void)state;
    unsigned char d[8] = {0x00, 0x3C, 0x01, 0x00,
                          0x80, 0x3F, 0x40, 0xC0}; /* F16 1, 2^-24; BF16 1, -3 */
    const char *p = st_file(
        "w16.st", "{" T("h", "F16", "[2]", "[0, 4]") ", " T("b", "BF16", "[1,2]", "[4, 8]") "}", d,
        8);
    rt_tensor_info t[2] = {{.name = "b", .rank = 2, .dims = {1, 2}, .count = 2},
                           {.name = "h", .rank = 1, .dims = {2}, .count = 2}};
    float *w[2];
    rt_err e = {0};
    assert_int_equal(rt_load_weights(p, t, 2, (void **)w, &e), 0);
    assert_true(w[0][0] == 1.0f && w[0][1] == -3.0f);
    assert_true(w[1][0] == 1.0f && w[1][1] == 0x1p-24f);
    free_all(w, 2);
}

/* A weight of one tensor per rank (rt_tensor_info.tensors): rank r
 * reads tensors[r] and nothing else; every rank checks every rank's
 * tensor (a missing one, a wrong shape: refused on rank 0 too); the
 * others' tensors are no extras; a rank past the names is refused. */
static void test_weights_per_rank(void **state)
{
    (void)state;
    static const char *const names[] = {"e.0", "e.1", NULL};
    float d[4] = {1, 2, 3, 4};
    const char *p = st_file("ranks.st", "{" T("e.0", "F32", "[2]", "[0, 8]") ", "
                                        T("e.1", "F32", "[2]", "[8, 16]") "}", d, 16);
    rt_tensor_info t = {.name = "e.0", .rank = 1, .dims = {2}, .count = 2, .tensors = names};
    float *w[1];
    rt_err e = {0};
    for (int r = 0; r < 2; r++) {
        rt_ranks_set(&(rt_ranks){r, 2, NULL, NULL});
        assert_int_equal(rt_load_weights(p, &t, 1, (void **)w, &e), 0);
        assert_true(w[0][0] == d[2 * r] && w[0][1] == d[2 * r + 1]);
        free_all(w, 1);
    }
    rt_ranks_set(&(rt_ranks){2, 3, NULL, NULL});
    weights_refused(p, &t, 1, "weight 'e.0' is one tensor of the file per rank, for another "
                              "number of ranks; this is rank 2 of 3");
    rt_ranks_set(&(rt_ranks){0, 2, NULL, NULL});
    char want[512];
    const char *q = st_file("rank0.st", "{" T("e.0", "F32", "[2]", "[0, 8]") "}", d, 8);
    snprintf(want, sizeof want, "%s: weight 'e.1' is not in the file and has no init", q);
    weights_refused(q, &t, 1, want);
    q = st_file("rank1.st", "{" T("e.0", "F32", "[2]", "[0, 8]") ", "
                            T("e.1", "F32", "[1]", "[8, 12]") "}", d, 12);
    snprintf(want, sizeof want, "%s: 'e.1': shape [1] in the file, the model declares [2]", q);
    weights_refused(q, &t, 1, want);
    assert_int_equal(rt_check_weights(q, &t, 1, &e), RT_EINVAL);
    rt_ranks_set(&(rt_ranks){0, 1, NULL, NULL});
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errf_first_wins),   cmocka_unit_test(test_alloc),
        cmocka_unit_test(test_alloc_mapped),
        cmocka_unit_test(test_splitmix_pinned),   cmocka_unit_test(test_fill_random_pinned),
        cmocka_unit_test(test_fill_random_range), cmocka_unit_test(test_seed_input),
        cmocka_unit_test(test_parallel_for),
        cmocka_unit_test(test_parallel_for_race),
        cmocka_unit_test(test_parallel_for_late), cmocka_unit_test(test_parallel_for_nested),
        cmocka_unit_test(test_parallel_for_signals),      cmocka_unit_test(test_now),
        cmocka_unit_test(test_st_good),           cmocka_unit_test(test_st_empty),
        cmocka_unit_test(test_st_malformed),      cmocka_unit_test(test_st_bad_lengths),
        cmocka_unit_test(test_st_io_errors),      cmocka_unit_test(test_weights_load),
        cmocka_unit_test(test_weights_errors),    cmocka_unit_test(test_weights_16bit),
        cmocka_unit_test(test_weights_per_rank),
    };
    return cmocka_run_group_tests(tests, tl_tmp_setup, tl_tmp_teardown);
}
